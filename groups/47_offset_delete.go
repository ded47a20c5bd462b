package groups

// OffsetDelete (key 47), versions 0 and 1.
//
//   - An empty group id: INVALID_GROUP_ID. A group that does not exist:
//     GROUP_ID_NOT_FOUND.
//   - A group with members (PreparingRebalance, CompletingRebalance,
//     Stable) whose protocol type is not "consumer": NON_EMPTY_GROUP, since
//     its subscriptions cannot be read.
//   - A partition of a topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION
//     (Kafka checks it before the coordinator).
//   - A partition of a topic the group's members subscribe to:
//     GROUP_SUBSCRIBED_TO_TOPIC. A consumer group's (KIP-848) members
//     subscribe by topic name or regex.
//   - Every other partition: its offset, if any, is tombstoned, and no
//     error (deleting an offset that is not there is not an error).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Shard) offsetDelete(id RequestID, r *kmsg.OffsetDeleteRequest) {
	resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
	g := s.groups[r.Group]
	switch {
	case r.Group == "":
		resp.ErrorCode = kerr.InvalidGroupID.Code
	case g == nil:
		resp.ErrorCode = kerr.GroupIDNotFound.Code
	case g.state != stateEmpty && g.protocolType != "consumer":
		resp.ErrorCode = kerr.NonEmptyGroup.Code
	}
	if resp.ErrorCode != 0 {
		s.respond(id, resp)
		return
	}
	var recs []Record
	for _, t := range r.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		subscribed := (g.state != stateEmpty || g.consumer != nil) && g.isSubscribed(t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			tp := topicPartition{t.Topic, p.Partition}
			switch _, has := g.offsets[tp]; {
			case !s.topicExists(t.Topic, p.Partition):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case subscribed:
				rp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			case has:
				recs = append(recs, Record{Key: offsetKey(g.id, t.Topic, p.Partition)})
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	s.write(recs...)
	s.respond(id, resp)
}
