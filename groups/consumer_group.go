package groups

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/sluicemq/sluice/groups/assign"
)

// memberState is Kafka's MemberState, the state of a member's
// reconciliation (CurrentAssignmentBuilder), with Kafka's byte values as
// the records carry them.
type memberState int8

const (
	// memberStable: the member has its epoch's whole assignment.
	memberStable memberState = 0
	// memberUnrevoked: the member must give up the partitions pending
	// revocation (and say so in a heartbeat) before it gets a new epoch.
	memberUnrevoked memberState = 1
	// memberUnreleased: the member has the target epoch, but some of its
	// target partitions are still owned by others, who have not released
	// them yet.
	memberUnreleased memberState = 2
)

func (st memberState) String() string {
	switch st {
	case memberStable:
		return "STABLE"
	case memberUnrevoked:
		return "UNREVOKED_PARTITIONS"
	case memberUnreleased:
		return "UNRELEASED_PARTITIONS"
	}
	return fmt.Sprintf("UNKNOWN(%d)", int8(st))
}

// The member epochs a heartbeat carries besides real epochs.
const (
	epochJoin        = 0
	epochLeave       = -1
	epochStaticLeave = -2
)

// cmember is one member of a consumer group: its subscription
// (ConsumerGroupMemberMetadata) and its reconciliation state
// (ConsumerGroupCurrentMemberAssignment). Its target is in the group.
type cmember struct {
	id string
	memberSubscription
	memberAssignment
	// revokeEpoch is the epoch the rebalance timer was armed for: the timer
	// fences the member only if it is still at that epoch. Not in the log;
	// Loaded re-arms it.
	revokeEpoch int32
}

// consumerGroup is the KIP-848 state of a group (group.consumer != nil). It
// changes only by records (applyConsumer), whether written by a handler or
// replayed, so the live state and a replay cannot disagree.
type consumerGroup struct {
	epoch           int32
	assignmentEpoch int32
	// hasMetadata says a ConsumerGroupMetadata record stands: the group
	// exists as a consumer group.
	hasMetadata bool
	// topics is the subscription metadata, by name.
	topics  []topicMeta
	members map[string]*cmember
	// target is each member's target assignment (normalized).
	target map[string]assign.Assignment
	// owners maps each assigned or revoking partition to the member
	// holding it, Kafka's currentPartitionEpoch index.
	owners map[partitionRef]string
}

type partitionRef struct {
	topic     assign.TopicID
	partition int32
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{members: map[string]*cmember{}, target: map[string]assign.Assignment{}, owners: map[partitionRef]string{}}
}

func (cg *consumerGroup) sortedMemberIDs() []string {
	ids := make([]string, 0, len(cg.members))
	for id := range cg.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (cg *consumerGroup) staticMember(instance string) *cmember {
	for _, id := range cg.sortedMemberIDs() {
		if m := cg.members[id]; m.instanceID != nil && *m.instanceID == instance {
			return m
		}
	}
	return nil
}

// state is Kafka's ConsumerGroup state: Empty without members, Assigning
// while the target lags the group epoch, Reconciling while a member lags
// the target, else Stable.
func (cg *consumerGroup) state() string {
	if len(cg.members) == 0 {
		return "Empty"
	}
	if cg.epoch > cg.assignmentEpoch {
		return "Assigning"
	}
	for _, id := range cg.sortedMemberIDs() {
		if m := cg.members[id]; m.epoch != cg.assignmentEpoch || m.state != memberStable {
			return "Reconciling"
		}
	}
	return "Stable"
}

// setAssignment replaces a member's reconciliation state, keeping owners.
// A partition claimed while another member holds it is a broken invariant
// (Kafka throws IllegalStateException); it is reported, not applied over.
func (cg *consumerGroup) setAssignment(m *cmember, a memberAssignment) error {
	cg.release(m)
	for _, as := range []assign.Assignment{a.assigned, a.revoking} {
		for _, tp := range as {
			for _, p := range tp.Partitions {
				ref := partitionRef{tp.Topic, p}
				if other, ok := cg.owners[ref]; ok && other != m.id {
					return fmt.Errorf("member %q claims partition %s/%d held by %q", m.id, tp.Topic, p, other)
				}
			}
		}
	}
	m.memberAssignment = a
	for _, as := range []assign.Assignment{a.assigned, a.revoking} {
		for _, tp := range as {
			for _, p := range tp.Partitions {
				cg.owners[partitionRef{tp.Topic, p}] = m.id
			}
		}
	}
	return nil
}

func (cg *consumerGroup) release(m *cmember) {
	for _, as := range []assign.Assignment{m.assigned, m.revoking} {
		for _, tp := range as {
			for _, p := range tp.Partitions {
				if cg.owners[partitionRef{tp.Topic, p}] == m.id {
					delete(cg.owners, partitionRef{tp.Topic, p})
				}
			}
		}
	}
}

// applyConsumer sets the state one KIP-848 record describes.
func (s *Shard) applyConsumer(k recordKey, value []byte) error {
	g := s.group(k.group)
	if g.consumer == nil {
		if value == nil {
			s.maybeForget(g)
			return nil
		}
		g.consumer = newConsumerGroup()
	}
	cg := g.consumer
	var err error
	switch k.version {
	case keyCGMetadata:
		err = s.applyGroupEpoch(g, value)
	case keyCGPartitions:
		cg.topics = nil
		if value != nil {
			cg.topics, err = decodePartitionMetadata(value)
		}
	case keyCGMember:
		err = s.applyMemberSubscription(cg, k.member, value)
	case keyCGTargetMetadata:
		cg.assignmentEpoch = 0
		if value != nil {
			cg.assignmentEpoch, err = decodeEpochValue("target assignment metadata", value)
		}
	case keyCGTargetMember:
		delete(cg.target, k.member)
		if value != nil {
			var a assign.Assignment
			if a, err = decodeTargetMember(value); err == nil {
				cg.target[k.member] = a
			}
		}
	case keyCGCurrent:
		err = s.applyMemberAssignment(cg, k.member, value)
	}
	if err == nil {
		s.maybeForget(g)
	}
	return err
}

func (s *Shard) applyGroupEpoch(g *group, value []byte) error {
	cg := g.consumer
	if value == nil {
		if len(cg.members) > 0 {
			return fmt.Errorf("consumer group %q tombstoned with %d members", g.id, len(cg.members))
		}
		if cg.hasMetadata {
			s.liveConsumer -= 3
		}
		cg.hasMetadata, cg.epoch = false, 0
		return nil
	}
	epoch, err := decodeEpochValue("consumer group metadata", value)
	if err != nil {
		return err
	}
	if !cg.hasMetadata {
		s.liveConsumer += 3
	}
	cg.hasMetadata, cg.epoch = true, epoch
	return nil
}

func (s *Shard) applyMemberSubscription(cg *consumerGroup, id string, value []byte) error {
	m := cg.members[id]
	if value == nil {
		if m == nil {
			return nil
		}
		if len(m.assigned) > 0 || len(m.revoking) > 0 {
			return fmt.Errorf("member %q removed while it holds partitions", id)
		}
		delete(cg.members, id)
		s.liveConsumer -= 3
		return nil
	}
	sub, err := decodeMemberSubscription(value)
	if err != nil {
		return err
	}
	if m == nil {
		m = &cmember{id: id}
		cg.members[id] = m
		s.liveConsumer += 3
	}
	m.memberSubscription = sub
	return nil
}

func (s *Shard) applyMemberAssignment(cg *consumerGroup, id string, value []byte) error {
	m := cg.members[id]
	if m == nil {
		if value == nil {
			return nil
		}
		// Kafka writes a member's metadata before its assignment; an
		// assignment alone creates the member, as Kafka's replay does.
		m = &cmember{id: id}
		cg.members[id] = m
		s.liveConsumer += 3
	}
	if value == nil {
		cg.release(m)
		m.memberAssignment = memberAssignment{epoch: epochLeave, previousEpoch: -1}
		return nil
	}
	a, err := decodeMemberAssignment(value)
	if err != nil {
		return err
	}
	return cg.setAssignment(m, a)
}

// liveRecords counts the records a snapshot restates for the group:
// metadata, subscription metadata and target metadata, and three per
// member (Shard.liveConsumer sums them).
func (cg *consumerGroup) liveRecords() int {
	if cg == nil {
		return 0
	}
	n := 3 * len(cg.members)
	if cg.hasMetadata {
		n += 3
	}
	return n
}

// snapshotRecords restates the consumer group in the order Kafka writes a
// new group: members' subscriptions, the subscription metadata, the group
// epoch, members' targets, the target epoch, members' assignments.
func (cg *consumerGroup) snapshotRecords(gid string) []Record {
	if cg == nil {
		return nil
	}
	ids := cg.sortedMemberIDs()
	var recs []Record
	for _, id := range ids {
		recs = append(recs, Record{Key: cgKey(keyCGMember, gid, id), Value: encodeMemberSubscription(cg.members[id].memberSubscription)})
	}
	recs = append(recs, Record{Key: cgKey(keyCGPartitions, gid, ""), Value: encodePartitionMetadata(cg.topics)})
	recs = append(recs, Record{Key: cgKey(keyCGMetadata, gid, ""), Value: encodeEpochValue(cg.epoch)})
	for _, id := range ids {
		recs = append(recs, Record{Key: cgKey(keyCGTargetMember, gid, id), Value: encodeTargetMember(cg.target[id])})
	}
	recs = append(recs, Record{Key: cgKey(keyCGTargetMetadata, gid, ""), Value: encodeEpochValue(cg.assignmentEpoch)})
	for _, id := range ids {
		recs = append(recs, Record{Key: cgKey(keyCGCurrent, gid, id), Value: encodeMemberAssignment(cg.members[id].memberAssignment)})
	}
	return recs
}

// removeMemberRecords are Kafka's removeMember: the member's assignment,
// target and subscription tombstoned, in that order.
func removeMemberRecords(gid, id string) []Record {
	return []Record{{Key: cgKey(keyCGCurrent, gid, id)}, {Key: cgKey(keyCGTargetMember, gid, id)}, {Key: cgKey(keyCGMember, gid, id)}}
}

// deleteConsumerRecords tombstones an empty consumer group's own records
// (Kafka's ConsumerGroup.createGroupTombstoneRecords).
func deleteConsumerRecords(gid string) []Record {
	return []Record{{Key: cgKey(keyCGTargetMetadata, gid, "")}, {Key: cgKey(keyCGPartitions, gid, "")}, {Key: cgKey(keyCGMetadata, gid, "")}}
}

// normalize sorts an assignment by topic id and partition, merging topics
// and dropping duplicates and empty entries.
func normalize(a assign.Assignment) assign.Assignment {
	if len(a) == 0 {
		return nil
	}
	byTopic := map[assign.TopicID][]int32{}
	var ids []assign.TopicID
	for _, tp := range a {
		if _, ok := byTopic[tp.Topic]; !ok {
			ids = append(ids, tp.Topic)
		}
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partitions...)
	}
	slices.SortFunc(ids, assign.TopicID.Compare)
	var out assign.Assignment
	for _, id := range ids {
		ps := slices.Clone(byTopic[id])
		slices.Sort(ps)
		ps = slices.Compact(ps)
		if len(ps) > 0 {
			out = append(out, assign.TopicPartitions{Topic: id, Partitions: ps})
		}
	}
	return out
}

func sameAssignment(a, b assign.Assignment) bool {
	return slices.EqualFunc(a, b, func(x, y assign.TopicPartitions) bool {
		return x.Topic == y.Topic && slices.Equal(x.Partitions, y.Partitions)
	})
}

// assignmentSet is an assignment as a set of partitions.
type assignmentSet map[partitionRef]bool

func toSet(a assign.Assignment) assignmentSet {
	s := assignmentSet{}
	for _, tp := range a {
		for _, p := range tp.Partitions {
			s[partitionRef{tp.Topic, p}] = true
		}
	}
	return s
}

// fromRefs builds a normalized assignment from partitions.
func fromRefs(refs []partitionRef) assign.Assignment {
	slices.SortFunc(refs, compareRefs)
	var out assign.Assignment
	for _, r := range refs {
		if n := len(out); n == 0 || out[n-1].Topic != r.topic {
			out = append(out, assign.TopicPartitions{Topic: r.topic})
		}
		last := &out[len(out)-1]
		if k := len(last.Partitions); k == 0 || last.Partitions[k-1] != r.partition {
			last.Partitions = append(last.Partitions, r.partition)
		}
	}
	return out
}

func compareRefs(a, b partitionRef) int {
	if c := a.topic.Compare(b.topic); c != 0 {
		return c
	}
	return cmp.Compare(a.partition, b.partition)
}

func refsOf(a assign.Assignment) []partitionRef {
	var refs []partitionRef
	for _, tp := range a {
		for _, p := range tp.Partitions {
			refs = append(refs, partitionRef{tp.Topic, p})
		}
	}
	return refs
}

// reconcile is Kafka's CurrentAssignmentBuilder: the member's next
// reconciliation state towards target (at targetEpoch), given what the
// member says it owns (nil: not said) and who holds each partition. Strict
// revoke-before-assign: a partition is assigned only when no other member
// holds it, and a member that must revoke keeps its epoch until its
// heartbeat no longer lists the partitions.
func reconcile(m memberAssignment, targetEpoch int32, target assign.Assignment, owned assignmentSet,
	heldByOther func(partitionRef) bool) memberAssignment {
	switch m.state {
	case memberStable:
		if m.epoch == targetEpoch {
			return m
		}
		return nextAssignment(m, m.epoch, targetEpoch, target, owned, heldByOther)
	case memberUnrevoked:
		if ownsAny(owned, m.revoking) {
			return m
		}
		return nextAssignment(m, m.epoch+1, targetEpoch, target, owned, heldByOther)
	default: // memberUnreleased
		return nextAssignment(m, m.epoch, targetEpoch, target, owned, heldByOther)
	}
}

// ownsAny is Kafka's ownsRevokedPartitions: a member that did not say what
// it owns still owns everything.
func ownsAny(owned assignmentSet, a assign.Assignment) bool {
	if owned == nil {
		return true
	}
	for _, r := range refsOf(a) {
		if owned[r] {
			return true
		}
	}
	return false
}

func nextAssignment(m memberAssignment, epoch, targetEpoch int32, target assign.Assignment, owned assignmentSet,
	heldByOther func(partitionRef) bool) memberAssignment {
	targetSet, currentSet := toSet(target), toSet(m.assigned)
	var kept, revoking, adding []partitionRef
	unreleased := false
	for _, r := range refsOf(m.assigned) {
		if targetSet[r] {
			kept = append(kept, r)
		} else {
			revoking = append(revoking, r)
		}
	}
	for _, r := range refsOf(target) {
		switch {
		case currentSet[r]:
		case heldByOther(r):
			unreleased = true
		default:
			adding = append(adding, r)
		}
	}
	next := func(epoch int32, st memberState, assigned []partitionRef, revoke []partitionRef) memberAssignment {
		// Kafka's updateMemberEpoch: the previous epoch is the one the
		// member had, even when the epoch stays.
		return memberAssignment{epoch: epoch, previousEpoch: m.epoch, state: st, assigned: fromRefs(assigned), revoking: fromRefs(revoke)}
	}
	if len(revoking) > 0 && ownsAny(owned, fromRefs(slices.Clone(revoking))) {
		return next(epoch, memberUnrevoked, kept, revoking)
	}
	st := memberStable
	if unreleased {
		st = memberUnreleased
	}
	return next(targetEpoch, st, append(kept, adding...), nil)
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// subscribes is Kafka's ConsumerGroup.isSubscribedToTopic: some member
// subscribes to the topic by name or by regex.
func (cg *consumerGroup) subscribes(topic string) bool {
	for _, id := range cg.sortedMemberIDs() {
		m := cg.members[id]
		if slices.Contains(m.topicNames, topic) {
			return true
		}
		if m.regex != nil {
			if re, err := assign.CompileSubscription(*m.regex); err == nil && re.MatchString(topic) {
				return true
			}
		}
	}
	return false
}
