package node

import (
	"github.com/sluicemq/sluice/log"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets, versions 0-10.
//
// The timestamp asks for:
//
//	-1 latest    the high watermark (the last stable offset under
//	             READ_COMMITTED, equal to it while transactions are not served)
//	-2 earliest  the log start offset
//	-3 max timestamp (v7+): the record with the largest timestamp (KIP-734),
//	             if it is below the high watermark (as Kafka filters every
//	             lookup but latest and earliest); else offset -1
//	-4 earliest local (v8+): the log start offset (no tiered storage)
//	-5 latest tiered (v9+): offset -1, nothing is tiered
//	t >= 0       the first record whose timestamp is at least t, below the
//	             high watermark; none is offset -1 and timestamp -1
//
// A leader whose high watermark has not yet reached the offset its epoch
// began at answers OFFSET_NOT_AVAILABLE (retriable) for every lookup but
// the earliest ones (KIP-207, as Kafka's Partition.fetchOffsetForTimestamp):
// a new leader's high watermark may lag the old one's until its followers
// fetch, and latest would otherwise go back.
//
// v0 answers in OldStyleOffsets (at most MaxNumOffsets of them, for
// earliest and latest only, as Kafka did). A partition named twice in one
// request is INVALID_REQUEST for every mention; CurrentLeaderEpoch (v4+) is checked like
// Fetch's.
func (b *Broker) handleListOffsets(r *request) {
	req := r.body.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		respTopic := kmsg.NewListOffsetsResponseTopic()
		respTopic.Topic = rt.Topic
		count := map[int32]int{}
		for _, rp := range rt.Partitions {
			count[rp.Partition]++
		}
		for _, rp := range rt.Partitions {
			out := kmsg.NewListOffsetsResponseTopicPartition()
			out.Partition = rp.Partition
			if count[rp.Partition] > 1 {
				out.ErrorCode = kerr.InvalidRequest.Code
				out.Timestamp, out.Offset, out.LeaderEpoch = -1, -1, -1
			} else {
				b.listOffset(req.Version, rt.Topic, rp, &out)
			}
			respTopic.Partitions = append(respTopic.Partitions, out)
		}
		resp.Topics = append(resp.Topics, respTopic)
	}
	r.respond(resp)
}

func (b *Broker) listOffset(version int16, topic string, rp kmsg.ListOffsetsRequestTopicPartition, out *kmsg.ListOffsetsResponseTopicPartition) {
	out.Timestamp, out.Offset, out.LeaderEpoch = -1, -1, -1
	p, code := b.leaderPartition(topic, rp.Partition, rp.CurrentLeaderEpoch)
	if code != nil {
		out.ErrorCode = code.Code
		return
	}
	hw := p.highWatermark()
	if earliest := rp.Timestamp == -2 || rp.Timestamp == -4; !earliest && hw < p.rep.EpochStart() {
		out.ErrorCode = kerr.OffsetNotAvailable.Code
		return
	}
	var found log.TimestampOffset
	var ok bool
	var err error
	switch ts := rp.Timestamp; {
	case ts == -1:
		found, ok = log.TimestampOffset{Timestamp: -1, Offset: hw, LeaderEpoch: p.leaderEpoch}, true
	case ts == -2 || (ts == -4 && version >= 8):
		found, ok = log.TimestampOffset{Timestamp: -1, Offset: p.log.LogStartOffset(), LeaderEpoch: p.leaderEpoch}, true
	case ts == -3 && version >= 7:
		found, ok, err = p.log.MaxTimestamp()
		ok = ok && found.Offset < hw
	case ts == -5 && version >= 9:
		ok = false
	case ts >= 0 && version >= 1:
		found, ok, err = p.log.OffsetForTimestamp(ts)
		ok = ok && found.Offset < hw
	default:
		out.ErrorCode = kerr.InvalidRequest.Code
		return
	}
	if err != nil {
		out.ErrorCode = log.ErrorCode(err).Code
		return
	}
	if version == 0 {
		out.OldStyleOffsets = []int64{}
		if ok && rp.MaxNumOffsets > 0 {
			out.OldStyleOffsets = append(out.OldStyleOffsets, found.Offset)
		}
		return
	}
	if ok {
		out.Timestamp, out.Offset, out.LeaderEpoch = found.Timestamp, found.Offset, found.LeaderEpoch
	}
}

// leaderPartition resolves a topic partition this broker leads and checks
// the client's leader epoch (-1 skips the check).
func (b *Broker) leaderPartition(topic string, index, leaderEpoch int32) (*partition, *kerr.Error) {
	t := b.image.TopicByName(topic)
	if t == nil {
		return nil, kerr.UnknownTopicOrPartition
	}
	return b.ledPartition(t, index, leaderEpoch)
}
