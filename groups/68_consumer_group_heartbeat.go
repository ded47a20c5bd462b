package groups

// ConsumerGroupHeartbeat (key 68), versions 0 and 1: KIP-848's one request
// of a consumer group member, which joins (member epoch 0), heartbeats with
// its epoch and what it owns, and leaves (-1, or -2 for a static member
// that will come back).
//
// Validation (Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid), all
// INVALID_REQUEST: an empty group id, instance id or rack id; an empty
// member id, except on v0 when joining (the coordinator then makes one; from
// v1 the member makes its own, KIP-1082); on join, no rebalance timeout,
// owned partitions not empty, or neither topic names nor a regex; epoch -2
// without an instance id; an epoch below -2. Strings the records cannot
// carry (32767 bytes): INVALID_REQUEST. A regex RE2 cannot compile:
// INVALID_REGULAR_EXPRESSION. A server_assignor not in
// group.consumer.assignors: UNSUPPORTED_ASSIGNOR.
//
// The group (one protocol per group):
//   - none, or a classic group, with an epoch other than 0:
//     GROUP_ID_NOT_FOUND;
//   - an Empty classic group and epoch 0: the classic group is deleted (its
//     metadata tombstoned; its offsets stay) and a consumer group takes its
//     place, Kafka's upgrade of an empty group;
//   - a classic group with members: GROUP_ID_NOT_FOUND (Kafka's online
//     upgrade of a live classic group, and classic members inside a
//     consumer group, are not served);
//   - a new member past group.consumer.max.size: GROUP_MAX_SIZE_REACHED.
//
// The member:
//   - unknown, with an epoch other than 0: UNKNOWN_MEMBER_ID;
//   - an epoch above its own, or below it unless it is the previous epoch
//     and what it owns is within its assignment (the answer bumping its
//     epoch was lost): FENCED_MEMBER_EPOCH;
//   - static: an instance id held by a member that has not left with -2:
//     UNRELEASED_INSTANCE_ID on join; held by another member id otherwise:
//     FENCED_INSTANCE_ID; unknown: UNKNOWN_MEMBER_ID. A join of a released
//     instance replaces the old member, which hands over its assignment.
//
// Then, as Kafka's consumerGroupHeartbeat: a changed subscription (topic
// names or regex) or changed subscription metadata (the topics it
// resolves to, their ids and partition counts) bumps the group epoch; when
// the group epoch is past the assignment epoch, the target assignment is
// recomputed by the group's assignor (the one most members name, ties to
// the first in group.consumer.assignors, or the first if none names one);
// and the member reconciles towards its target (reconcile): strictly
// revoke before assign. Every change is a record, written before the
// answer. The answer carries the assignment on a full request (a join, or
// one with rebalance timeout, subscription and owned partitions) or when
// the member's assignment changed. A member that must revoke has its
// rebalance timeout to do so, and is fenced after it.

import (
	"encoding/base64"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/groups/assign"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// heartbeatError is a heartbeat's failure: Kafka's code and message.
type heartbeatError struct {
	err *kerr.Error
	msg string
}

func fail(err *kerr.Error, msg string) *heartbeatError { return &heartbeatError{err, msg} }

func (s *Shard) consumerGroupHeartbeat(now time.Time, id RequestID, c Client, r *kmsg.ConsumerGroupHeartbeatRequest) {
	resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	var herr *heartbeatError
	if herr = s.validateConsumerHeartbeat(r, c); herr == nil {
		if r.MemberEpoch == epochLeave || r.MemberEpoch == epochStaticLeave {
			herr = s.consumerLeave(r, resp)
		} else {
			herr = s.consumerHeartbeat(now, c, r, resp)
		}
	}
	if herr != nil {
		*resp = *r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode, resp.ErrorMessage = herr.err.Code, kmsg.StringPtr(herr.msg)
	}
	s.respond(id, resp)
}

func (s *Shard) validateConsumerHeartbeat(r *kmsg.ConsumerGroupHeartbeatRequest, c Client) *heartbeatError {
	invalid := func(msg string) *heartbeatError { return fail(kerr.InvalidRequest, msg) }
	switch {
	case r.Group == "":
		return invalid("GroupId can't be empty.")
	case r.InstanceID != nil && *r.InstanceID == "":
		return invalid("InstanceId can't be empty.")
	case r.RackID != nil && *r.RackID == "":
		return invalid("RackId can't be empty.")
	case r.MemberID == "" && (r.Version >= 1 || r.MemberEpoch != epochJoin):
		return invalid("MemberId can't be empty.")
	case heartbeatTooLong(r, c):
		return invalid("A string is longer than 32767 bytes.")
	case r.MemberEpoch < epochStaticLeave:
		return invalid("MemberEpoch is invalid.")
	case r.MemberEpoch == epochStaticLeave && r.InstanceID == nil:
		return invalid("InstanceId can't be null.")
	case r.MemberEpoch == epochJoin && r.RebalanceTimeoutMillis == -1:
		return invalid("RebalanceTimeoutMs must be provided in first request.")
	case r.MemberEpoch == epochJoin && (r.Topics == nil || len(r.Topics) > 0):
		return invalid("TopicPartitions must be empty when (re-)joining.")
	case r.MemberEpoch == epochJoin && len(r.SubscribedTopicNames) == 0 && (r.SubscribedTopicRegex == nil || *r.SubscribedTopicRegex == ""):
		return invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
	}
	if r.SubscribedTopicRegex != nil && *r.SubscribedTopicRegex != "" {
		if _, err := assign.CompileSubscription(*r.SubscribedTopicRegex); err != nil {
			return fail(kerr.InvalidRegularExpression, err.Error())
		}
	}
	if r.ServerAssignor != nil && !slices.Contains(s.cfg.ConsumerAssignors, *r.ServerAssignor) {
		return fail(kerr.UnsupportedAssignor, "ServerAssignor "+*r.ServerAssignor+" is not supported.")
	}
	return nil
}

func heartbeatTooLong(r *kmsg.ConsumerGroupHeartbeatRequest, c Client) bool {
	long := func(s *string) bool { return s != nil && len(*s) > maxString }
	if len(r.Group) > maxString || len(r.MemberID) > maxString || long(r.InstanceID) || long(r.RackID) ||
		long(r.SubscribedTopicRegex) || long(r.ServerAssignor) || len(c.ID) > maxString || len(c.Host) > maxString {
		return true
	}
	for _, t := range r.SubscribedTopicNames {
		if len(t) > maxString {
			return true
		}
	}
	return false
}

// consumerGroupFor returns the consumer group a heartbeat goes to. A join
// may create it, replacing an Empty classic group; the replacement is
// written at once (every check after it passes for a group that new).
func (s *Shard) consumerGroupFor(gid string, join bool) (*consumerGroup, *heartbeatError) {
	g := s.groups[gid]
	switch {
	case g == nil && !join:
		return nil, fail(kerr.GroupIDNotFound, "Consumer group "+gid+" not found.")
	case g == nil:
		return newConsumerGroup(), nil
	case g.consumer != nil:
		return g.consumer, nil
	case !join || g.state != stateEmpty || len(g.members) > 0:
		return nil, fail(kerr.GroupIDNotFound, "Group "+gid+" is not a consumer group.")
	}
	s.dropEmptyClassic(g)
	return newConsumerGroup(), nil
}

// dropEmptyClassic deletes an Empty classic group's membership (its
// metadata record, member ids handed out and not used, their timers); the
// offsets stay, as Kafka keeps them for the group that takes its place.
func (s *Shard) dropEmptyClassic(g *group) {
	for _, id := range sortedSet(g.pending) {
		s.timers.cancel(heartbeatKey(g, id))
	}
	s.cancelGroupTimers(g)
	g.pending = map[string]bool{}
	if g.persisted != nil {
		s.write(Record{Key: groupKey(g.id)})
	}
	g.protocolType, g.protocol, g.generation, g.leader = "", "", 0, ""
}

// heartbeatMember resolves the member a heartbeat is from (Kafka's
// getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember). replaced is the
// static member a join takes over, or nil.
func (s *Shard) heartbeatMember(cg *consumerGroup, memberID string, r *kmsg.ConsumerGroupHeartbeatRequest) (m, replaced *cmember, herr *heartbeatError) {
	join := r.MemberEpoch == epochJoin
	fresh := func() *cmember {
		return &cmember{id: memberID, memberAssignment: memberAssignment{state: memberStable}}
	}
	if r.InstanceID == nil {
		m = cg.members[memberID]
		switch {
		case m == nil && !join:
			return nil, nil, fail(kerr.UnknownMemberID, "Member "+memberID+" is not a member of group "+r.Group+".")
		case m == nil:
			return fresh(), nil, nil
		}
		return m, nil, checkMemberEpoch(m, r)
	}
	existing := cg.staticMember(*r.InstanceID)
	switch {
	case join && existing == nil:
		if m = cg.members[memberID]; m != nil {
			return m, nil, nil
		}
		return fresh(), nil, nil
	case join && existing.epoch != epochStaticLeave:
		return nil, nil, fail(kerr.UnreleasedInstanceID, "Static member "+memberID+" with instance id "+*r.InstanceID+
			" cannot join the group because the instance id is owned by member "+existing.id+".")
	case join:
		m = &cmember{id: memberID, memberSubscription: existing.memberSubscription}
		m.memberAssignment = memberAssignment{state: memberStable, assigned: existing.assigned}
		return m, existing, nil
	case existing == nil:
		return nil, nil, fail(kerr.UnknownMemberID, "Instance id "+*r.InstanceID+" is unknown.")
	case existing.id != memberID:
		return nil, nil, fail(kerr.FencedInstanceID, "Static member "+memberID+" with instance id "+*r.InstanceID+
			" was fenced by member "+existing.id+".")
	}
	return existing, nil, checkMemberEpoch(existing, r)
}

// checkMemberEpoch is Kafka's throwIfConsumerGroupMemberEpochIsInvalid.
func checkMemberEpoch(m *cmember, r *kmsg.ConsumerGroupHeartbeatRequest) *heartbeatError {
	switch {
	case r.MemberEpoch > m.epoch:
		return fail(kerr.FencedMemberEpoch, "The consumer group member has a greater member epoch than the one known by the group coordinator.")
	case r.MemberEpoch < m.epoch && (r.MemberEpoch != m.previousEpoch || !ownedWithin(r.Topics, m.assigned)):
		return fail(kerr.FencedMemberEpoch, "The consumer group member has a smaller member epoch than the one known by the group coordinator.")
	}
	return nil
}

func ownedWithin(owned []kmsg.ConsumerGroupHeartbeatRequestTopic, a assign.Assignment) bool {
	if owned == nil {
		return false
	}
	set := toSet(a)
	for _, t := range owned {
		for _, p := range t.Partitions {
			if !set[partitionRef{t.TopicID, p}] {
				return false
			}
		}
	}
	return true
}

func ownedSet(owned []kmsg.ConsumerGroupHeartbeatRequestTopic) assignmentSet {
	if owned == nil {
		return nil
	}
	set := assignmentSet{}
	for _, t := range owned {
		for _, p := range t.Partitions {
			set[partitionRef{t.TopicID, p}] = true
		}
	}
	return set
}

// updatedSubscription is the member's subscription with the request's
// changes: a null field is unchanged.
func updatedSubscription(old memberSubscription, r *kmsg.ConsumerGroupHeartbeatRequest, c Client) memberSubscription {
	sub := old
	if r.InstanceID != nil {
		sub.instanceID = r.InstanceID
	}
	if r.RackID != nil {
		sub.rackID = r.RackID
	}
	if r.RebalanceTimeoutMillis != -1 {
		sub.rebalanceTimeoutMs = r.RebalanceTimeoutMillis
	}
	if r.ServerAssignor != nil {
		sub.assignor = r.ServerAssignor
	}
	if r.SubscribedTopicNames != nil {
		sub.topicNames = slices.Clone(r.SubscribedTopicNames)
		sort.Strings(sub.topicNames)
		sub.topicNames = slices.Compact(sub.topicNames)
	}
	if r.SubscribedTopicRegex != nil {
		sub.regex = r.SubscribedTopicRegex
		if *r.SubscribedTopicRegex == "" {
			sub.regex = nil
		}
	}
	sub.clientID, sub.clientHost = c.ID, c.Host
	return sub
}

func (s *Shard) consumerHeartbeat(now time.Time, c Client, r *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) *heartbeatError {
	cg, herr := s.consumerGroupFor(r.Group, r.MemberEpoch == epochJoin)
	if herr != nil {
		return herr
	}
	memberID := r.MemberID
	if memberID == "" {
		memberID = s.newConsumerMemberID(cg)
	}
	if int64(len(cg.members)) >= int64(s.cfg.ConsumerGroupMaxSize) && (r.MemberID == "" || cg.members[r.MemberID] == nil) {
		return fail(kerr.GroupMaxSizeReached, "The consumer group has reached its maximum capacity.")
	}
	m, replaced, herr := s.heartbeatMember(cg, memberID, r)
	if herr != nil {
		return herr
	}
	before := m.memberAssignment
	s.writeMemberChanges(r.Group, cg, m, replaced, updatedSubscription(m.memberSubscription, r, c))
	cg = s.groups[r.Group].consumer
	m = cg.members[memberID]
	s.maybeAssign(r.Group, cg)
	s.reconcileMember(now, r.Group, cg, m, ownedSet(r.Topics))
	s.timers.set(consumerSessionKey(r.Group, memberID), now.Add(s.cfg.ConsumerSessionTimeout))

	resp.MemberID, resp.MemberEpoch = kmsg.StringPtr(memberID), m.epoch
	resp.HeartbeatIntervalMillis = int32(s.cfg.ConsumerHeartbeatInterval.Milliseconds())
	full := r.MemberEpoch == epochJoin || r.RebalanceTimeoutMillis != -1 &&
		(r.SubscribedTopicNames != nil || r.SubscribedTopicRegex != nil) && r.Topics != nil
	if full || !sameAssignment(before.assigned, m.assigned) || replaced != nil {
		resp.Assignment = responseAssignment(m.assigned)
	}
	return nil
}

// writeMemberChanges writes a joining or changed member's records: the
// replaced static member's removal and its replacement, the member's
// subscription, the subscription metadata and the group epoch when they
// change.
func (s *Shard) writeMemberChanges(gid string, cg *consumerGroup, m, replaced *cmember, sub memberSubscription) {
	var recs []Record
	_, known := cg.members[m.id]
	if replaced != nil {
		recs = append(recs, removeMemberRecords(gid, replaced.id)...)
		recs = append(recs,
			Record{Key: cgKey(keyCGMember, gid, m.id), Value: encodeMemberSubscription(sub)},
			Record{Key: cgKey(keyCGTargetMember, gid, m.id), Value: encodeTargetMember(cg.target[replaced.id])},
			Record{Key: cgKey(keyCGCurrent, gid, m.id), Value: encodeMemberAssignment(m.memberAssignment)})
	} else if !known || !sameSubscription(m.memberSubscription, sub) {
		recs = append(recs, Record{Key: cgKey(keyCGMember, gid, m.id), Value: encodeMemberSubscription(sub)})
	}
	bump := !known && replaced == nil || !slices.Equal(m.topicNames, sub.topicNames) || !sameString(m.regex, sub.regex)
	members := map[string]memberSubscription{m.id: sub}
	for id, x := range cg.members {
		if x != replaced && id != m.id {
			members[id] = x.memberSubscription
		}
	}
	topics := s.subscriptionMetadata(members)
	if !slices.Equal(topics, cg.topics) || !cg.hasMetadata {
		recs = append(recs, Record{Key: cgKey(keyCGPartitions, gid, ""), Value: encodePartitionMetadata(topics)})
		bump = true
	}
	if bump {
		recs = append(recs, Record{Key: cgKey(keyCGMetadata, gid, ""), Value: encodeEpochValue(cg.epoch + 1)})
	}
	if replaced != nil {
		s.cancelConsumerTimers(gid, replaced.id)
	}
	s.write(recs...)
}

func sameString(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func sameSubscription(a, b memberSubscription) bool {
	return sameString(a.instanceID, b.instanceID) && sameString(a.rackID, b.rackID) && a.clientID == b.clientID &&
		a.clientHost == b.clientHost && slices.Equal(a.topicNames, b.topicNames) && sameString(a.regex, b.regex) &&
		a.rebalanceTimeoutMs == b.rebalanceTimeoutMs && sameString(a.assignor, b.assignor)
}

// subscriptionMetadata resolves the members' subscriptions (names and
// regexes, each distinct regex matched once) against the cluster's topics:
// the existing topics subscribed, by name.
func (s *Shard) subscriptionMetadata(members map[string]memberSubscription) []topicMeta {
	names, regexes := map[string]bool{}, map[string]bool{}
	for _, sub := range members {
		for _, t := range sub.topicNames {
			names[t] = true
		}
		if sub.regex != nil {
			regexes[*sub.regex] = true
		}
	}
	all := s.topics()
	for _, pattern := range sortedSet(regexes) {
		re := s.regex(pattern)
		if re == nil {
			continue // replayed from a log Kafka wrote: Java's regexes are not all RE2's
		}
		for _, t := range all {
			if re.MatchString(t.Name) {
				names[t.Name] = true
			}
		}
	}
	var out []topicMeta
	for _, t := range all {
		if names[t.Name] {
			out = append(out, topicMeta{id: t.ID, name: t.Name, partitions: t.Partitions})
		}
	}
	slices.SortFunc(out, func(a, b topicMeta) int { return compareStrings(a.name, b.name) })
	return out
}

// regex compiles a subscription regex once (nil: it does not compile).
// The cache is dropped whole when it grows past regexCacheMax patterns.
func (s *Shard) regex(pattern string) *regexp.Regexp {
	if re, ok := s.regexes[pattern]; ok {
		return re
	}
	if s.regexes == nil || len(s.regexes) >= regexCacheMax {
		s.regexes = map[string]*regexp.Regexp{}
	}
	re, err := assign.CompileSubscription(pattern)
	if err != nil {
		re = nil
	}
	s.regexes[pattern] = re
	return re
}

const regexCacheMax = 1024

func (s *Shard) topics() []TopicInfo {
	if s.cfg.Topics == nil {
		return nil
	}
	return s.cfg.Topics()
}

// memberTopics is the member's subscription as topic ids, resolved within
// the group's subscription metadata.
func (s *Shard) memberTopics(cg *consumerGroup, sub memberSubscription) []assign.TopicID {
	var re *regexp.Regexp
	if sub.regex != nil {
		re = s.regex(*sub.regex)
	}
	var ids []assign.TopicID
	for _, t := range cg.topics {
		if _, ok := slices.BinarySearch(sub.topicNames, t.name); ok || re != nil && re.MatchString(t.name) {
			ids = append(ids, t.id)
		}
	}
	return ids
}

// maybeAssign recomputes the target assignment when the group epoch has
// passed it (Kafka's TargetAssignmentBuilder): a record for each member
// whose target changed, then the assignment epoch.
func (s *Shard) maybeAssign(gid string, cg *consumerGroup) {
	if cg.epoch <= cg.assignmentEpoch {
		return
	}
	spec := assign.GroupSpec{}
	counts := assign.TopicCounts{}
	for _, t := range cg.topics {
		counts[t.id] = t.partitions
	}
	for _, id := range cg.sortedMemberIDs() {
		m := cg.members[id]
		am := assign.Member{ID: id, Topics: s.memberTopics(cg, m.memberSubscription), Current: cg.target[id]}
		if m.instanceID != nil {
			am.InstanceID = *m.instanceID
		}
		if m.rackID != nil {
			am.Rack = *m.rackID
		}
		spec.Members = append(spec.Members, am)
	}
	a, _ := assign.ByName(s.preferredAssignor(cg))
	result, err := a.Assign(spec, counts)
	if err != nil {
		// The spec holds only topics of the metadata: the assignors cannot
		// fail on it.
		panic("groups: assignor " + a.Name() + " failed on group " + gid + ": " + err.Error())
	}
	var recs []Record
	for _, ma := range result.Members {
		if old, ok := cg.target[ma.MemberID]; !ok || !sameAssignment(old, ma.Partitions) {
			recs = append(recs, Record{Key: cgKey(keyCGTargetMember, gid, ma.MemberID), Value: encodeTargetMember(ma.Partitions)})
		}
	}
	recs = append(recs, Record{Key: cgKey(keyCGTargetMetadata, gid, ""), Value: encodeEpochValue(cg.epoch)})
	s.write(recs...)
}

// preferredAssignor is the assignor most members ask for, ties to the
// first in group.consumer.assignors (Kafka leaves them to hash order); the
// default when none asks.
func (s *Shard) preferredAssignor(cg *consumerGroup) string {
	votes := map[string]int{}
	for _, m := range cg.members {
		if m.assignor != nil {
			votes[*m.assignor]++
		}
	}
	best := s.cfg.ConsumerAssignors[0]
	for _, name := range s.cfg.ConsumerAssignors {
		if votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

// reconcileMember moves the member towards its target (Kafka's
// maybeReconcile), writing its new assignment if it changed, and arms or
// disarms its rebalance timer.
func (s *Shard) reconcileMember(now time.Time, gid string, cg *consumerGroup, m *cmember, owned assignmentSet) {
	if m.state == memberStable && m.epoch == cg.assignmentEpoch {
		return
	}
	held := func(r partitionRef) bool { _, ok := cg.owners[r]; return ok }
	next := reconcile(m.memberAssignment, cg.assignmentEpoch, cg.target[m.id], owned, held)
	if next.epoch == m.epoch && next.previousEpoch == m.previousEpoch && next.state == m.state &&
		sameAssignment(next.assigned, m.assigned) && sameAssignment(next.revoking, m.revoking) {
		return
	}
	s.write(Record{Key: cgKey(keyCGCurrent, gid, m.id), Value: encodeMemberAssignment(next)})
	key := consumerRebalanceKey(gid, m.id)
	if m.state == memberUnrevoked {
		m.revokeEpoch = m.epoch
		s.timers.set(key, now.Add(time.Duration(m.rebalanceTimeoutMs)*time.Millisecond))
	} else {
		s.timers.cancel(key)
	}
}

func responseAssignment(a assign.Assignment) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	ra := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	ra.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	for _, tp := range a {
		t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		t.TopicID, t.Partitions = tp.Topic, slices.Clone(tp.Partitions)
		ra.Topics = append(ra.Topics, t)
	}
	return &ra
}

// consumerLeave is Kafka's consumerGroupLeave: -1 fences the member (its
// records removed, the group epoch bumped), -2 keeps a static member's
// assignment at epoch -2 until it rejoins or its session times out.
func (s *Shard) consumerLeave(r *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) *heartbeatError {
	g := s.groups[r.Group]
	if g == nil || g.consumer == nil {
		return fail(kerr.GroupIDNotFound, "Consumer group "+r.Group+" not found.")
	}
	cg := g.consumer
	resp.MemberID, resp.MemberEpoch = kmsg.StringPtr(r.MemberID), r.MemberEpoch
	if r.InstanceID == nil {
		if cg.members[r.MemberID] == nil {
			return fail(kerr.UnknownMemberID, "Member "+r.MemberID+" is not a member of group "+r.Group+".")
		}
		s.fenceConsumerMember(g, r.MemberID)
		return nil
	}
	m := cg.staticMember(*r.InstanceID)
	switch {
	case m == nil:
		return fail(kerr.UnknownMemberID, "Instance id "+*r.InstanceID+" is unknown.")
	case m.id != r.MemberID:
		return fail(kerr.FencedInstanceID, "Static member "+r.MemberID+" with instance id "+*r.InstanceID+" was fenced by member "+m.id+".")
	case r.MemberEpoch == epochStaticLeave:
		left := m.memberAssignment
		left.epoch, left.revoking = epochStaticLeave, nil
		s.timers.cancel(consumerRebalanceKey(g.id, m.id))
		s.write(Record{Key: cgKey(keyCGCurrent, g.id, m.id), Value: encodeMemberAssignment(left)})
	default:
		s.fenceConsumerMember(g, m.id)
	}
	return nil
}

// fenceConsumerMember removes a member (Kafka's consumerGroupFenceMember):
// its records tombstoned, the subscription metadata rewritten if it
// changes, the group epoch bumped.
func (s *Shard) fenceConsumerMember(g *group, id string) {
	cg := g.consumer
	recs := removeMemberRecords(g.id, id)
	members := map[string]memberSubscription{}
	for mid, m := range cg.members {
		if mid != id {
			members[mid] = m.memberSubscription
		}
	}
	if topics := s.subscriptionMetadata(members); !slices.Equal(topics, cg.topics) {
		recs = append(recs, Record{Key: cgKey(keyCGPartitions, g.id, ""), Value: encodePartitionMetadata(topics)})
	}
	recs = append(recs, Record{Key: cgKey(keyCGMetadata, g.id, ""), Value: encodeEpochValue(cg.epoch + 1)})
	s.cancelConsumerTimers(g.id, id)
	s.write(recs...)
}

func consumerSessionKey(gid, member string) timerKey {
	return timerKey{kind: timerConsumerSession, group: gid, member: member}
}

func consumerRebalanceKey(gid, member string) timerKey {
	return timerKey{kind: timerConsumerRebalance, group: gid, member: member}
}

func (s *Shard) cancelConsumerTimers(gid, member string) {
	s.timers.cancel(consumerSessionKey(gid, member))
	s.timers.cancel(consumerRebalanceKey(gid, member))
}

func (s *Shard) consumerSessionExpired(g *group, member string) {
	if g.consumer != nil && g.consumer.members[member] != nil {
		s.fenceConsumerMember(g, member)
	}
}

func (s *Shard) consumerRebalanceExpired(g *group, member string) {
	if g.consumer == nil {
		return
	}
	if m := g.consumer.members[member]; m != nil && m.state == memberUnrevoked && m.epoch == m.revokeEpoch {
		s.fenceConsumerMember(g, member)
	}
}

// loadConsumerTimers gives every member loaded from the log a full session
// timeout, and one that must revoke its rebalance timeout, as Kafka's
// coordinator schedules them on load.
func (s *Shard) loadConsumerTimers(now time.Time, g *group) {
	if g.consumer == nil {
		return
	}
	for _, id := range g.consumer.sortedMemberIDs() {
		m := g.consumer.members[id]
		s.timers.set(consumerSessionKey(g.id, id), now.Add(s.cfg.ConsumerSessionTimeout))
		if m.state == memberUnrevoked {
			m.revokeEpoch = m.epoch
			s.timers.set(consumerRebalanceKey(g.id, id), now.Add(time.Duration(m.rebalanceTimeoutMs)*time.Millisecond))
		}
	}
}

// newConsumerMemberID is Kafka's Uuid.randomUuid().toString(): 16 random
// bytes in URL-safe base64, drawn from Config.Rand.
func (s *Shard) newConsumerMemberID(cg *consumerGroup) string {
	for {
		var b [16]byte
		env.Fill(s.rand, b[:])
		id := base64.RawURLEncoding.EncodeToString(b[:])
		if cg.members[id] == nil {
			return id
		}
	}
}
