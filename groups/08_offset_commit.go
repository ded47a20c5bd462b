package groups

// OffsetCommit (key 8), versions 0 to 9.
//
// Each partition is checked in Kafka's order: a topic partition that does
// not exist (Config.TopicExists) gets UNKNOWN_TOPIC_OR_PARTITION whatever
// else is wrong; then the group's check applies to all the rest; then
// metadata longer than offset.metadata.max.bytes gets
// OFFSET_METADATA_TOO_LARGE. The committed partitions become one Write (an
// OffsetCommitKey/OffsetCommitValue record each) and the response follows
// it, so a commit is acknowledged only once it is replicated.
//
// The group's check (ClassicGroup.validateOffsetCommit):
//   - the empty group id is allowed, as in Kafka (for old clients); one
//     longer than the records' int16 length can carry (32767 bytes, only
//     flexible versions can send one) gets INVALID_GROUP_ID, and such a
//     topic UNKNOWN_TOPIC_OR_PARTITION;
//   - a group that does not exist: generation < 0 (v0, simple and admin
//     commits) creates a simple group; otherwise GROUP_ID_NOT_FOUND from v9,
//     ILLEGAL_GENERATION before;
//   - generation < 0 on an Empty group: accepted (simple commit);
//   - generation >= 0, a member id or an instance id: the member must be
//     known (UNKNOWN_MEMBER_ID), its instance id must map to it
//     (FENCED_INSTANCE_ID) and the generation must be current
//     (ILLEGAL_GENERATION);
//   - generation < 0 and no member on a non-Empty group: UNKNOWN_MEMBER_ID;
//   - a group in CompletingRebalance: REBALANCE_IN_PROGRESS (the member has
//     not synced yet). PreparingRebalance accepts commits, as Kafka does.
//   - a KIP-848 consumer group: see validateConsumerCommit.
//
// Null metadata is stored as "". The leader epoch (v6+, -1 before) is kept.
// RetentionTimeMillis (v2-v4) other than -1 sets an expire time of now plus
// it (written as OffsetCommitValue v1, as Kafka does); v1's per-partition
// commit timestamp is ignored: the commit time is the coordinator's now.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Shard) offsetCommit(now time.Time, id RequestID, r *kmsg.OffsetCommitRequest) {
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	g, code := s.commitGroup(r)
	expireMs := int64(-1)
	if r.Version >= 2 && r.Version <= 4 && r.RetentionTimeMillis != -1 {
		expireMs = now.UnixMilli() + r.RetentionTimeMillis
	}
	var recs []Record
	for _, t := range r.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = code
			switch {
			case len(t.Topic) > maxString || !s.topicExists(t.Topic, p.Partition):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case code != 0:
			case p.Metadata != nil && len(*p.Metadata) > int(s.cfg.OffsetMetadataMaxBytes):
				rp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			default:
				o := offsetValue{offset: p.Offset, leaderEpoch: p.LeaderEpoch, commitMs: now.UnixMilli(), expireMs: expireMs}
				if p.Metadata != nil {
					o.metadata = *p.Metadata
				}
				recs = append(recs, Record{Key: offsetKey(g.id, t.Topic, p.Partition), Value: encodeOffsetValue(o)})
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	s.write(recs...)
	if g != nil {
		s.maybeForget(g)
	}
	s.respond(id, resp)
}

// commitGroup returns the group a commit goes to, creating a simple group
// if the commit may, or the error code every partition gets.
func (s *Shard) commitGroup(r *kmsg.OffsetCommitRequest) (*group, int16) {
	if len(r.Group) > maxString {
		return nil, kerr.InvalidGroupID.Code
	}
	g := s.groups[r.Group]
	if g == nil {
		switch {
		case r.Generation < 0:
			return s.group(r.Group), 0
		case r.Version >= 9:
			return nil, kerr.GroupIDNotFound.Code
		default:
			return nil, kerr.IllegalGeneration.Code
		}
	}
	if g.consumer != nil {
		return g, g.validateConsumerCommit(r)
	}
	if r.Generation < 0 && g.state == stateEmpty {
		return g, 0
	}
	if r.Generation >= 0 || r.MemberID != "" || r.InstanceID != nil {
		if code := g.validateMember(r.MemberID, r.InstanceID); code != 0 {
			return nil, code
		}
		if r.Generation != g.generation {
			return nil, kerr.IllegalGeneration.Code
		}
	} else if g.state != stateEmpty {
		return nil, kerr.UnknownMemberID.Code
	}
	if g.state == stateCompletingRebalance {
		return nil, kerr.RebalanceInProgress.Code
	}
	return g, 0
}

// validateConsumerCommit is Kafka's ConsumerGroup.validateOffsetCommit: the
// generation is the member epoch; -1 commits to an Empty group; a member
// must be known (UNKNOWN_MEMBER_ID), commit with v9 or later
// (UNSUPPORTED_VERSION) and with its current epoch (STALE_MEMBER_EPOCH).
func (g *group) validateConsumerCommit(r *kmsg.OffsetCommitRequest) int16 {
	cg := g.consumer
	if r.Generation < 0 && len(cg.members) == 0 {
		return 0
	}
	m := cg.members[r.MemberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case r.Version < 9:
		return kerr.UnsupportedVersion.Code
	case r.Generation != m.epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// validateMember is Kafka's ClassicGroup.validateMember: an instance id must
// map to the member id (UNKNOWN_MEMBER_ID if it maps to none,
// FENCED_INSTANCE_ID if to another), and the member must exist.
func (g *group) validateMember(memberID string, instanceID *string) int16 {
	if instanceID != nil {
		existing, ok := g.byInstance[*instanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if existing != memberID {
			return kerr.FencedInstanceID.Code
		}
	}
	if g.byID[memberID] == nil {
		return kerr.UnknownMemberID.Code
	}
	return 0
}

func (s *Shard) topicExists(topic string, partition int32) bool {
	return s.cfg.TopicExists == nil || s.cfg.TopicExists(topic, partition)
}
