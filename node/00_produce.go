package node

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicemq/sluice/log"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Produce, versions 3-13.
//
// Versions 0-2 carry message formats v0 and v1, which Kafka 4 no longer
// accepts either; they are not offered. v13 names topics by id.
//
//   - acks must be 0, 1 or -1 (INVALID_REQUIRED_ACKS for every partition).
//   - Each partition's records must be exactly one magic-2 batch; package log
//     validates it (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_RECORD,
//     OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH...) and answers an
//     idempotent producer's retry with the original offsets.
//   - An unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION (an
//     unknown id UNKNOWN_TOPIC_ID), an illegal name INVALID_TOPIC_EXCEPTION.
//     So is __consumer_offsets, as Kafka refuses clients' appends to an
//     internal topic: only its coordinator shards write it.
//   - acks=1 answers once the batch is in the leader's log, as Kafka does;
//     acks=-1 once the high watermark passes it (every ISR member has it on
//     its disk, see replication.go), or REQUEST_TIMED_OUT after the
//     request's timeout (the write may still become durable: the outcome
//     is unknown to the client, as in Kafka).
//   - acks=-1 with fewer in-sync replicas than min.insync.replicas is
//     NOT_ENOUGH_REPLICAS before anything is appended, and
//     NOT_ENOUGH_REPLICAS_AFTER_APPEND as soon as the ISR shrinks below it
//     while the records wait (they are in the log and may be replicated:
//     the outcome is unknown). Kafka answers it only once the high
//     watermark passes them, which with KIP-966's rule (no high watermark
//     under min.insync.replicas) never comes: its producers time out. A
//     leadership that moves while they wait answers
//     NOT_LEADER_OR_FOLLOWER.
//   - acks=0 gets no response; if any partition failed, the connection is
//     closed instead, which is how Kafka tells such a producer.
//   - Every append asks the log for a flush: the leader's own position
//     toward the high watermark is its durable end, so consumers only ever
//     see records that survive a power loss (see ARCHITECTURE.md, "High
//     watermark").
func (b *Broker) handleProduce(r *request) {
	req := r.body.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	acksValid := req.Acks == 0 || req.Acks == 1 || req.Acks == -1
	failed := false
	var waits []*kmsg.ProduceResponseTopicPartition
	var waitParts []*partition
	var waitEnds []int64
	// appended are the partitions this request appended to, whose parked
	// follower fetches are woken once every partition has appended: a
	// fetch woken by the first would carry its batch alone, and the
	// followers would need a round per partition of the request.
	var appended []*partition
	for _, rt := range req.Topics {
		t, topicErr := b.produceTopic(req.Version, rt)
		respTopic := kmsg.NewProduceResponseTopic()
		respTopic.Topic, respTopic.TopicID = rt.Topic, rt.TopicID
		respTopic.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for i, rp := range rt.Partitions {
			out := &respTopic.Partitions[i]
			*out = kmsg.NewProduceResponseTopicPartition()
			out.Partition = rp.Partition
			// Kafka's answer for a partition that fails: no offsets.
			out.BaseOffset, out.LogAppendTime, out.LogStartOffset = -1, -1, -1
			switch {
			case !acksValid:
				out.ErrorCode = kerr.InvalidRequiredAcks.Code
			case topicErr != nil:
				out.ErrorCode = topicErr.Code
			default:
				key := partitionKey{t.ID, rp.Partition}
				p := b.partitions[key]
				if !p.serving() {
					out.ErrorCode = b.missingPartition(key).Code
					if out.ErrorCode == kerr.NotLeaderForPartition.Code && req.Version >= 10 {
						b.hintProduceLeader(resp, out, key)
					}
					break
				}
				if req.Acks == -1 && p.rep.UnderMinISR() {
					out.ErrorCode = kerr.NotEnoughReplicas.Code
					msg := fmt.Sprintf("the ISR has %d of the %d in-sync replicas min.insync.replicas asks for", p.rep.InSync(), p.rep.MinInSync())
					out.ErrorMessage = &msg
					break
				}
				end, ok := b.appendProduced(p, rp.Records, out)
				if ok && !slices.Contains(appended, p) {
					appended = append(appended, p)
				}
				if ok && req.Acks == -1 {
					waits, waitParts, waitEnds = append(waits, out), append(waitParts, p), append(waitEnds, end)
				}
			}
			failed = failed || out.ErrorCode != 0
		}
		resp.Topics = append(resp.Topics, respTopic)
	}
	for _, p := range appended {
		b.wakeReplicaFetches(p)
	}
	switch {
	case req.Acks == 0 && failed:
		r.closeInstead("acks=0 produce failed", kerr.ErrorForCode(firstProduceError(resp)))
	case req.Acks == 0:
		r.noResponse()
	case len(waits) == 0:
		r.respond(resp)
	default:
		// Appended: a Produce behind this one may append before these
		// records are durable, and share their flush (see conn).
		r.letNextStart()
		b.awaitReplicated(waitParts, waitEnds, waits, time.Duration(req.TimeoutMillis)*time.Millisecond, func() { r.respond(resp) })
	}
}

// produceTopic resolves a produce request's topic by name or (v13+) id.
func (b *Broker) produceTopic(version int16, rt kmsg.ProduceRequestTopic) (*raftmeta.Topic, *kerr.Error) {
	var t *raftmeta.Topic
	if version >= 13 {
		if t = b.image.Topics[raftmeta.TopicID(rt.TopicID)]; t == nil {
			return nil, kerr.UnknownTopicID
		}
	} else {
		if err := validateTopicName(rt.Topic); err != nil {
			return nil, err
		}
		if t = b.image.TopicByName(rt.Topic); t == nil {
			return nil, kerr.UnknownTopicOrPartition
		}
	}
	if t.Name == offsetsTopic {
		return nil, kerr.InvalidTopicException
	}
	return t, nil
}

// appendProduced appends one partition's records as leader and fills out;
// the caller wakes the partition's parked follower fetches. It returns the offset the batch ends before, and whether it was appended
// (or found to be a retry already in the log).
func (b *Broker) appendProduced(p *partition, records []byte, out *kmsg.ProduceResponseTopicPartition) (int64, bool) {
	res, err := p.log.AppendLeader(records, p.leaderEpoch)
	if err != nil {
		code := log.ErrorCode(err)
		out.ErrorCode = code.Code
		msg := err.Error()
		out.ErrorMessage = &msg
		if code == kerr.KafkaStorageError || code == kerr.UnknownServerError {
			b.env.Log.Error("append failed", "topic", p.topic, "partition", p.index, "err", err)
		}
		return 0, false
	}
	out.BaseOffset = res.BaseOffset
	out.LogAppendTime = res.AppendTime
	out.LogStartOffset = res.LogStartOffset
	end := res.LastOffset + 1
	if res.Duplicate {
		b.countRetryDeduped(p, res.BaseOffset)
	} else {
		p.appended(end, res.LastOffset-res.BaseOffset+1)
	}
	return end, true
}

// countRetryDeduped counts a retry answered from the log's producer state,
// for ReplicationView.
func (b *Broker) countRetryDeduped(p *partition, base int64) {
	b.replStats.RetriesDeduped++
	if epoch, ok := p.log.EpochForOffset(base); ok && epoch < p.leaderEpoch {
		b.replStats.RetriesDedupedAcrossEpochs++
	}
}

// awaitReplicated calls done once every partition's high watermark has
// reached its end, or after timeout; each partition still short then gets
// REQUEST_TIMED_OUT in its response slot.
func (b *Broker) awaitReplicated(parts []*partition, ends []int64, outs []*kmsg.ProduceResponseTopicPartition, timeout time.Duration, done func()) {
	remaining := len(parts)
	finished := false
	var timer interface{ Stop() bool }
	finish := func() {
		if finished {
			return
		}
		finished = true
		if timer != nil {
			timer.Stop()
		}
		done()
	}
	reached := make([]bool, len(parts))
	for i, p := range parts {
		i, p := i, p
		p.whenReplicated(ends[i], func(err error) {
			if finished {
				return
			}
			reached[i] = true
			if err == nil && p.rep.UnderMinISR() {
				err = errUnderMinISR
			}
			if err != nil {
				code := replicationErrorCode(err)
				outs[i].ErrorCode = code.Code
				msg := err.Error()
				outs[i].ErrorMessage = &msg
			}
			remaining--
			if remaining == 0 {
				finish()
			}
		})
	}
	if timeout <= 0 {
		timeout = time.Millisecond
	}
	timer = b.env.Clock.AfterFunc(timeout, func() {
		for i := range parts {
			if !reached[i] {
				outs[i].ErrorCode = kerr.RequestTimedOut.Code
			}
		}
		finish()
	})
}

// errUnderMinISR is an acks=all produce whose records reached the high
// watermark after the ISR shrank below min.insync.replicas.
var errUnderMinISR = errors.New("node: the ISR shrank below min.insync.replicas while the records were replicated")

// replicationErrorCode is the code of a produce whose wait for its
// replicas failed.
func replicationErrorCode(err error) *kerr.Error {
	switch {
	case errors.Is(err, errNotLeader):
		return kerr.NotLeaderForPartition
	case errors.Is(err, errUnderMinISR):
		return kerr.NotEnoughReplicasAfterAppend
	}
	return log.ErrorCode(err)
}

func firstProduceError(resp *kmsg.ProduceResponse) int16 {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return p.ErrorCode
			}
		}
	}
	return 0
}

// hintProduceLeader tells a producer sent to the wrong broker where the
// partition's leader is (KIP-951, v10+), so it moves without a Metadata
// round trip.
func (b *Broker) hintProduceLeader(resp *kmsg.ProduceResponse, out *kmsg.ProduceResponseTopicPartition, key partitionKey) {
	leader, epoch := b.currentLeader(key)
	out.CurrentLeader.LeaderID, out.CurrentLeader.LeaderEpoch = leader, epoch
	br, ok := b.leaderEndpoint(leader)
	if !ok {
		return
	}
	for _, known := range resp.Brokers {
		if known.NodeID == leader {
			return
		}
	}
	ep := kmsg.NewProduceResponseBroker()
	ep.NodeID, ep.Host, ep.Port = br.ID, br.Host, br.Port
	if br.Rack != "" {
		rack := br.Rack
		ep.Rack = &rack
	}
	resp.Brokers = append(resp.Brokers, ep)
}
