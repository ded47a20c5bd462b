package node

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetForLeaderEpoch, versions 0-4 (v1 answers the epoch with the offset,
// v2 adds CurrentLeaderEpoch, v3 ReplicaID, v4 is flexible).
//
// A follower asks it, with its latest epoch, where its log diverges from the
// leader's; a consumer (KIP-320) asks it, with the epoch of the last record
// it read, whether the log was truncated under it. Each partition gets, as
// Kafka's ReplicaManager.lastOffsetForLeaderEpoch answers it:
//
//	UNKNOWN_TOPIC_OR_PARTITION  the topic or the partition does not exist
//	KAFKA_STORAGE_ERROR         its log here is offline
//	NOT_LEADER_OR_FOLLOWER      this broker does not lead it
//	FENCED_LEADER_EPOCH         CurrentLeaderEpoch is older than the leader's
//	UNKNOWN_LEADER_EPOCH        CurrentLeaderEpoch is newer (-1 skips the check)
//
// and otherwise the end offset of the asked LeaderEpoch with the epoch it
// belongs to (see leaderEpochEnd): the log end for the leader's own epoch;
// for an older one the start of the next newer epoch, paired with the
// newest epoch not above the asked one, or the asked one itself when the
// log holds nothing older; UNDEFINED (-1, -1) for -1 and for an epoch newer
// than the leader's. v0 carries only the offset.
//
// Only the leader answers, whatever ReplicaID says: Kafka asks
// Partition.lastOffsetForLeaderEpoch with fetchOnlyFromLeader always true
// (since KIP-320), and replica id -2, the debugging consumer, gets
// NOT_LEADER_OR_FOLLOWER from a follower like anyone else. The checks are
// Fetch's (ledPartition), so a follower answers NOT_LEADER_OR_FOLLOWER even
// to a fenced CurrentLeaderEpoch, where Kafka's follower checks the epoch
// first; both send the client back to its metadata. A partition named
// twice is answered twice, as Kafka does (no INVALID_REQUEST, unlike
// ListOffsets). Topic authorization does not exist yet.
func (b *Broker) handleOffsetForLeaderEpoch(r *request) {
	req := r.body.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		respTopic := kmsg.NewOffsetForLeaderEpochResponseTopic()
		respTopic.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			respTopic.Partitions = append(respTopic.Partitions, b.offsetForLeaderEpoch(rt.Topic, rp))
		}
		resp.Topics = append(resp.Topics, respTopic)
	}
	r.respond(resp)
}

// offsetForLeaderEpoch answers one partition of the request.
func (b *Broker) offsetForLeaderEpoch(topic string, rp kmsg.OffsetForLeaderEpochRequestTopicPartition) kmsg.OffsetForLeaderEpochResponseTopicPartition {
	out := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
	out.Partition = rp.Partition
	p, code := b.leaderPartition(topic, rp.Partition, rp.CurrentLeaderEpoch)
	if code != nil {
		out.ErrorCode = code.Code
		return out
	}
	out.LeaderEpoch, out.EndOffset = leaderEpochEnd(p.log, p.leaderEpoch, rp.LeaderEpoch)
	return out
}

// epochLog is what leaderEpochEnd reads of a partition's log.
type epochLog interface {
	LatestEpoch() (int32, bool)
	EndOffsetForEpoch(epoch int32) (endEpoch int32, endOffset int64, ok bool)
	LogEndOffset() int64
}

// leaderEpochEnd is the leader's answer for epoch: the epoch the answer
// belongs to and its end offset, or -1, -1 (UNDEFINED_EPOCH,
// UNDEFINED_EPOCH_OFFSET).
//
// Kafka's leader writes its epoch into the epoch cache, starting at its log
// end, when it takes leadership (Partition.makeLeader), so that a follower
// holding an epoch the new leader never saw (one between the leader's last
// batch and its election) is answered with where to truncate, not UNDEFINED.
// Sluice's log learns an epoch from the epoch's first batch; until that
// batch, the leader answers as if the entry were there, which is Kafka's
// answer exactly: the leader's epoch ends at the log end, and so does an
// epoch between the log's latest and the leader's, paired with the log's
// latest (or with itself when the log has no epoch at all). Everything else
// is the log's own answer (log.Log.EndOffsetForEpoch).
func leaderEpochEnd(l epochLog, leaderEpoch, epoch int32) (int32, int64) {
	latest, known := l.LatestEpoch()
	unwritten := leaderEpoch >= 0 && (!known || latest < leaderEpoch)
	if unwritten && epoch >= 0 && epoch <= leaderEpoch && (!known || epoch > latest) {
		switch {
		case epoch == leaderEpoch || !known:
			return epoch, l.LogEndOffset()
		default:
			return latest, l.LogEndOffset()
		}
	}
	if endEpoch, endOffset, ok := l.EndOffsetForEpoch(epoch); ok {
		return endEpoch, endOffset
	}
	return -1, -1
}
