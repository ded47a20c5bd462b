package groups

// OffsetFetch (key 9), versions 0 to 9.
//
// v0 to v7 ask for one group, v8 and up for a batch (KIP-709), each
// answered on its own; the runtime splits a batch across shards and merges
// the answers, handing each shard only its own groups.
//
//   - The empty group id is allowed, as in Kafka.
//   - Null topics (v2+) ask for every offset of the group, sorted by topic
//     and partition; a topic asked with no partitions is answered with none.
//   - A partition without an offset, of a group that does not exist or of a
//     topic that does not exist, gets offset -1, leader epoch -1, metadata ""
//     and no error, as Kafka answers.
//   - require_stable (v7+): Kafka answers UNSTABLE_OFFSET_COMMIT only for
//     partitions with a pending transactional commit; without transactions
//     there are none, so the flag changes nothing.
//   - v9's member id and epoch are checked by Kafka only for KIP-848 groups
//     (ConsumerGroup.validateOffsetFetch): no member id and a negative
//     epoch fetch freely (admin clients); otherwise the member must be
//     known (UNKNOWN_MEMBER_ID) and the epoch its own (STALE_MEMBER_EPOCH),
//     a group-level error. Classic groups ignore them.
//   - No group-level error arises here: Kafka's only one, INVALID_GROUP_ID,
//     is for a null group id, which the request cannot carry; the
//     coordinator errors (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS)
//     are the runtime's.
//
// The answer is a read: the effect rule (a response waits for every Write
// before it) makes it see every commit acknowledged before it.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type fetchedOffset struct {
	tp          topicPartition
	offset      int64
	leaderEpoch int32
	metadata    string
}

// fetchedTopic is one topic of an answer, its partitions in request order.
type fetchedTopic struct {
	topic      string
	partitions []fetchedOffset
}

func (s *Shard) offsetFetch(id RequestID, r *kmsg.OffsetFetchRequest) {
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	if r.Version >= 8 {
		for _, rg := range r.Groups {
			og := kmsg.NewOffsetFetchResponseGroup()
			og.Group = rg.Group
			if og.ErrorCode = s.validateConsumerFetch(rg); og.ErrorCode != 0 {
				resp.Groups = append(resp.Groups, og)
				continue
			}
			var topics []topicRequest
			for _, t := range rg.Topics {
				topics = append(topics, topicRequest{t.Topic, t.Partitions})
			}
			for _, t := range s.fetchOffsets(rg.Group, topics, rg.Topics == nil) {
				ot := kmsg.NewOffsetFetchResponseGroupTopic()
				ot.Topic = t.topic
				for _, f := range t.partitions {
					op := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					op.Partition, op.Offset, op.LeaderEpoch, op.Metadata = f.tp.partition, f.offset, f.leaderEpoch, kmsg.StringPtr(f.metadata)
					ot.Partitions = append(ot.Partitions, op)
				}
				og.Topics = append(og.Topics, ot)
			}
			resp.Groups = append(resp.Groups, og)
		}
		s.respond(id, resp)
		return
	}
	var topics []topicRequest
	for _, t := range r.Topics {
		topics = append(topics, topicRequest{t.Topic, t.Partitions})
	}
	for _, t := range s.fetchOffsets(r.Group, topics, r.Topics == nil && r.Version >= 2) {
		ot := kmsg.NewOffsetFetchResponseTopic()
		ot.Topic = t.topic
		for _, f := range t.partitions {
			op := kmsg.NewOffsetFetchResponseTopicPartition()
			op.Partition, op.Offset, op.LeaderEpoch, op.Metadata = f.tp.partition, f.offset, f.leaderEpoch, kmsg.StringPtr(f.metadata)
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	s.respond(id, resp)
}

type topicRequest struct {
	topic      string
	partitions []int32
}

// fetchOffsets answers the requested topics and partitions in request
// order, or every offset of the group, by topic and partition, when all is
// set.
func (s *Shard) fetchOffsets(groupID string, topics []topicRequest, all bool) []fetchedTopic {
	g := s.groups[groupID]
	var out []fetchedTopic
	if all {
		if g == nil {
			return nil
		}
		for _, tp := range g.sortedOffsets() {
			o := g.offsets[tp]
			if len(out) == 0 || out[len(out)-1].topic != tp.topic {
				out = append(out, fetchedTopic{topic: tp.topic})
			}
			last := &out[len(out)-1]
			last.partitions = append(last.partitions, fetchedOffset{tp, o.offset, o.leaderEpoch, o.metadata})
		}
		return out
	}
	for _, t := range topics {
		ft := fetchedTopic{topic: t.topic}
		for _, p := range t.partitions {
			tp := topicPartition{t.topic, p}
			f := fetchedOffset{tp: tp, offset: -1, leaderEpoch: -1}
			if g != nil {
				if o, ok := g.offsets[tp]; ok {
					f.offset, f.leaderEpoch, f.metadata = o.offset, o.leaderEpoch, o.metadata
				}
			}
			ft.partitions = append(ft.partitions, f)
		}
		out = append(out, ft)
	}
	return out
}

func (s *Shard) validateConsumerFetch(rg kmsg.OffsetFetchRequestGroup) int16 {
	g := s.groups[rg.Group]
	if g == nil || g.consumer == nil || rg.MemberID == nil && rg.MemberEpoch < 0 {
		return 0
	}
	var m *cmember
	if rg.MemberID != nil {
		m = g.consumer.members[*rg.MemberID]
	}
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case rg.MemberEpoch != m.epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}
