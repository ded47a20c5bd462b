package groups

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// expireOffsets removes the offsets whose retention has passed, with
// tombstones, as Kafka's offset expiry does every
// offsets.retention.check.interval.ms (ClassicGroup.offsetExpirationCondition):
//
//   - a group with no protocol type (a simple group): each offset once
//     offsets.retention.minutes have passed since its commit;
//   - an Empty group: every offset once the retention has passed since the
//     group became Empty (or since the commit, if that time is unknown);
//   - a Stable "consumer" group: offsets of topics no member subscribes to,
//     counted from their commit;
//   - a KIP-848 consumer group (Kafka's ConsumerGroup): offsets of topics no
//     member subscribes to (all of them when it is Empty), counted from
//     their commit; an Empty one left without offsets is deleted;
//   - any other group keeps its offsets.
//
// An offset committed with an expire time (OffsetCommit v2-v4 retention)
// expires at that time instead. A group left with no members and no offsets
// is then deleted (its metadata tombstoned).
func (s *Shard) expireOffsets(now time.Time) {
	nowMs := now.UnixMilli()
	retentionMs := s.cfg.OffsetsRetention.Milliseconds()
	for _, id := range s.sortedGroupIDs() {
		g := s.groups[id]
		base, ok := g.expiryBase()
		if !ok {
			continue
		}
		subscribed := g.subscribedTopics()
		var recs []Record
		for _, tp := range g.sortedOffsets() {
			o := g.offsets[tp]
			if g.state == stateStable && subscribed[tp.topic] || g.consumer != nil && g.consumer.subscribes(tp.topic) {
				continue
			}
			expired := nowMs-base(o) >= retentionMs
			if o.expireMs >= 0 {
				expired = nowMs >= o.expireMs
			}
			if expired {
				recs = append(recs, Record{Key: offsetKey(g.id, tp.topic, tp.partition)})
			}
		}
		if len(recs) == len(g.offsets) && len(recs) > 0 && len(g.members) == 0 && len(g.pending) == 0 && g.persisted != nil {
			recs = append(recs, Record{Key: groupKey(g.id)})
		}
		if len(recs) == len(g.offsets) && g.consumer != nil && len(g.consumer.members) == 0 {
			recs = append(recs, deleteConsumerRecords(g.id)...)
		}
		s.write(recs...)
	}
}

// expiryBase returns what an offset's retention counts from, or false if
// the group's offsets do not expire now.
func (g *group) expiryBase() (func(offsetValue) int64, bool) {
	commit := func(o offsetValue) int64 { return o.commitMs }
	switch {
	case g.consumer != nil:
		return commit, true
	case g.protocolType == "":
		return commit, true
	case g.state == stateEmpty:
		if g.stateMs >= 0 {
			return func(offsetValue) int64 { return g.stateMs }, true
		}
		return commit, true
	case g.protocolType == "consumer" && g.state == stateStable && g.subscribedTopics() != nil:
		return commit, true
	}
	return nil, false
}

// subscribedTopics is the union of the members' subscriptions of a
// "consumer" group with a selected protocol, or nil if it cannot be known
// (another protocol type, no protocol yet, or a subscription that does not
// decode as Kafka's ConsumerProtocol).
func (g *group) subscribedTopics() map[string]bool {
	if g.protocolType != "consumer" || g.protocol == "" {
		return nil
	}
	topics := make(map[string]bool)
	for _, m := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			return nil
		}
		for _, t := range meta.Topics {
			topics[t] = true
		}
	}
	return topics
}

// isSubscribed is Kafka's ClassicGroup.isSubscribedToTopic: when the
// subscriptions cannot be known, a "consumer" group counts as subscribed to
// everything and any other group to nothing.
func (g *group) isSubscribed(topic string) bool {
	if g.consumer != nil {
		return g.consumer.subscribes(topic)
	}
	if subs := g.subscribedTopics(); subs != nil {
		return subs[topic]
	}
	return g.protocolType == "consumer"
}

// TopicsDeleted removes every group's offsets of the named topics, with
// tombstones in one Write, as Kafka's coordinator does when topics are
// deleted (onPartitionsDeleted): a topic created again under the name
// starts with no committed offsets. The runtime calls it when its metadata
// image drops topics.
func (s *Shard) TopicsDeleted(topics []string) {
	if !s.loaded || len(topics) == 0 {
		return
	}
	gone := make(map[string]bool, len(topics))
	for _, t := range topics {
		gone[t] = true
	}
	var recs []Record
	for _, id := range s.sortedGroupIDs() {
		g := s.groups[id]
		for _, tp := range g.sortedOffsets() {
			if gone[tp.topic] {
				recs = append(recs, Record{Key: offsetKey(g.id, tp.topic, tp.partition)})
			}
		}
	}
	s.write(recs...)
}
