package groups

// OffsetFetch (key 9), versions 0 to 9.
//
// v0 to v7 ask for one group, v8 and up for a batch (KIP-709), each
// answered on its own; the runtime splits a batch across shards and merges
// the answers, handing each shard only its own groups.
//
//   - The empty group id is allowed, as in Kafka.
//   - Null topics (v2+) ask for every offset of the group, sorted by topic
//     and partition.
//   - A partition without an offset, of a group that does not exist or of a
//     topic that does not exist, gets offset -1, leader epoch -1, metadata ""
//     and no error, as Kafka answers.
//   - require_stable (v7+): Kafka answers UNSTABLE_OFFSET_COMMIT only for
//     partitions with a pending transactional commit; without transactions
//     there are none, so the flag changes nothing.
//   - v9's member id and epoch are checked by Kafka only for KIP-848 groups;
//     classic groups ignore them.
//   - v0 and v1 have no group-level error code; v2 to v7 carry the group's
//     error at the top as well.
//
// The answer is a read: the effect rule (a response waits for every Write
// before it) makes it see every commit acknowledged before it.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

type fetchedOffset struct {
	tp          topicPartition
	offset      int64
	leaderEpoch int32
	metadata    string
}

func (s *Shard) offsetFetch(id RequestID, r *kmsg.OffsetFetchRequest) {
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	if r.Version >= 8 {
		for _, rg := range r.Groups {
			og := kmsg.NewOffsetFetchResponseGroup()
			og.Group = rg.Group
			var topics []topicRequest
			if rg.Topics != nil {
				topics = make([]topicRequest, 0, len(rg.Topics))
				for _, t := range rg.Topics {
					topics = append(topics, topicRequest{t.Topic, t.Partitions})
				}
			}
			for _, t := range groupByTopic(s.fetchOffsets(rg.Group, topics, rg.Topics == nil)) {
				ot := kmsg.NewOffsetFetchResponseGroupTopic()
				ot.Topic = t[0].tp.topic
				for _, f := range t {
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
	if r.Topics != nil {
		topics = make([]topicRequest, 0, len(r.Topics))
		for _, t := range r.Topics {
			topics = append(topics, topicRequest{t.Topic, t.Partitions})
		}
	}
	all := r.Topics == nil && r.Version >= 2
	for _, t := range groupByTopic(s.fetchOffsets(r.Group, topics, all)) {
		ot := kmsg.NewOffsetFetchResponseTopic()
		ot.Topic = t[0].tp.topic
		for _, f := range t {
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

// fetchOffsets answers the requested partitions in request order, or
// every offset of the group when all is set.
func (s *Shard) fetchOffsets(groupID string, topics []topicRequest, all bool) []fetchedOffset {
	g := s.groups[groupID]
	var out []fetchedOffset
	if all {
		if g == nil {
			return nil
		}
		for _, tp := range g.sortedOffsets() {
			o := g.offsets[tp]
			out = append(out, fetchedOffset{tp, o.offset, o.leaderEpoch, o.metadata})
		}
		return out
	}
	for _, t := range topics {
		for _, p := range t.partitions {
			tp := topicPartition{t.topic, p}
			f := fetchedOffset{tp: tp, offset: -1, leaderEpoch: -1}
			if g != nil {
				if o, ok := g.offsets[tp]; ok {
					f.offset, f.leaderEpoch, f.metadata = o.offset, o.leaderEpoch, o.metadata
				}
			}
			out = append(out, f)
		}
	}
	return out
}

// groupByTopic splits fetched offsets into runs of one topic, keeping
// their order; a topic asked twice is answered twice, as asked.
func groupByTopic(fs []fetchedOffset) [][]fetchedOffset {
	var runs [][]fetchedOffset
	for i, f := range fs {
		if i == 0 || fs[i-1].tp.topic != f.tp.topic {
			runs = append(runs, nil)
		}
		runs[len(runs)-1] = append(runs[len(runs)-1], f)
	}
	return runs
}
