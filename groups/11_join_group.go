package groups

// JoinGroup (key 11), versions 0 to 9.
//
//   - An empty group id: INVALID_GROUP_ID. A session timeout outside
//     group.min/max.session.timeout.ms: INVALID_SESSION_TIMEOUT. v0 has no
//     rebalance timeout: the session timeout serves as one, as in Kafka.
//   - A member id the group does not know (or any member id for a group
//     that does not exist): UNKNOWN_MEMBER_ID.
//   - A new member (empty member id) past group.max.size:
//     GROUP_MAX_SIZE_REACHED. A protocol type that differs from the
//     group's, or no protocol every member supports (an empty type or list
//     for the first member): INCONSISTENT_GROUP_PROTOCOL.
//   - From v4 (KIP-394), a new dynamic member gets a member id with
//     MEMBER_ID_REQUIRED and must join again with it within its session
//     timeout; before v4 it joins at once.
//   - Static members (group.instance.id, v5+, KIP-345): a known instance
//     with an unknown member id replaces the old member (whose parked
//     requests get FENCED_INSTANCE_ID): in a Stable group whose protocol
//     would not change, without a rebalance (the metadata is written, then
//     the join answered; from v9 a replaced leader gets SkipAssignment); in
//     CompletingRebalance by a new rebalance. A known member id with
//     another instance id: FENCED_INSTANCE_ID.
//   - A known member: in PreparingRebalance it is parked until the join
//     phase ends; in CompletingRebalance or Stable with unchanged protocols
//     (and, when Stable, not the leader) it gets the current generation
//     at once; otherwise a rebalance starts.
//   - A group created by JoinGroup is written at once as an Empty group of
//     generation 0, as Kafka does.
//   - Strings the records cannot carry (longer than 32767 bytes):
//     INVALID_REQUEST. Protocol metadata is passed through untouched.
//   - A KIP-848 consumer group: an Empty one is deleted (its records
//     tombstoned, its offsets kept) and a classic group takes its place
//     when a new member (no member id) joins, as Kafka converts an empty
//     group; a member id for it: UNKNOWN_MEMBER_ID; one with members:
//     INCONSISTENT_GROUP_PROTOCOL (Kafka would let a classic member into
//     the consumer group; Sluice serves no mixed groups). SyncGroup,
//     Heartbeat and LeaveGroup find no classic member in a consumer group:
//     UNKNOWN_MEMBER_ID, Kafka's answer for a member of the other protocol.

import (
	"time"

	"github.com/sluicemq/sluice/internal/invariants"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Shard) joinGroup(now time.Time, id RequestID, c Client, r *kmsg.JoinGroupRequest) {
	session := time.Duration(r.SessionTimeoutMillis) * time.Millisecond
	fail := func(code int16) { s.respond(id, joinResponse(r.Version, r.MemberID, code)) }
	switch {
	case r.Group == "" || len(r.Group) > maxString:
		fail(kerr.InvalidGroupID.Code)
		return
	case session < s.cfg.SessionTimeoutMin || session > s.cfg.SessionTimeoutMax:
		fail(kerr.InvalidSessionTimeout.Code)
		return
	case joinTooLong(r, c):
		fail(kerr.InvalidRequest.Code)
		return
	}
	if g := s.groups[r.Group]; g != nil && g.consumer != nil {
		switch {
		case len(g.consumer.members) > 0:
			fail(kerr.InconsistentGroupProtocol.Code)
			return
		case r.MemberID != "":
			fail(kerr.UnknownMemberID.Code)
			return
		}
		s.write(deleteConsumerRecords(g.id)...)
	}
	g := s.groups[r.Group]
	isNew := g == nil
	if isNew && r.MemberID != "" {
		fail(kerr.UnknownMemberID.Code)
		return
	}
	g = s.group(r.Group)
	mark := len(s.effects)
	switch {
	case !s.acceptJoining(g, r.MemberID):
		s.respond(id, joinResponse(r.Version, "", kerr.GroupMaxSizeReached.Code))
	case r.MemberID == "":
		s.joinNewMember(now, id, c, g, r)
	default:
		s.joinExistingMember(now, id, c, g, r)
	}
	if isNew {
		// Kafka writes the new group's record after the join's own effects
		// (so it carries the protocol type a first member gave), but its
		// answer waits for the record: it goes first among the effects. A
		// new group's join writes nothing of its own (its first generation
		// comes from a timer), which is what lets the record go first.
		for _, e := range s.effects[mark:] {
			if invariants.Enabled && e.Write != nil {
				invariants.Panicf("groups %d: a JoinGroup creating group %q wrote before its creation record", s.cfg.Partition, g.id)
			}
		}
		s.writeAt(mark, Record{Key: groupKey(g.id), Value: encodeGroupValue(emptyGroupValue(g, now))})
	}
}

func joinTooLong(r *kmsg.JoinGroupRequest, c Client) bool {
	if len(r.ProtocolType) > maxString || len(c.ID) > maxString || len(c.Host) > maxString ||
		r.InstanceID != nil && len(*r.InstanceID) > maxString-37 {
		return true
	}
	for _, p := range r.Protocols {
		if len(p.Name) > maxString {
			return true
		}
	}
	return false
}

// emptyGroupValue is Kafka's record of a group just created: generation 0,
// no members.
func emptyGroupValue(g *group, now time.Time) *kmsg.GroupMetadataValue {
	v := kmsg.NewGroupMetadataValue()
	v.ProtocolType = g.protocolType
	v.CurrentStateTimestamp = now.UnixMilli()
	return &v
}

// acceptJoining is Kafka's group.max.size rule: while preparing, members
// already parked plus new ones up to the size; otherwise the members plus
// new ones up to the size.
func (s *Shard) acceptJoining(g *group, memberID string) bool {
	m := g.byID[memberID]
	switch g.state {
	case statePreparingRebalance:
		if m != nil && m.join != nil {
			return true
		}
		awaiting := 0
		for _, x := range g.members {
			if x.join != nil {
				awaiting++
			}
		}
		return awaiting < int(s.cfg.GroupMaxSize)
	case stateCompletingRebalance, stateStable:
		return m != nil || len(g.members) < int(s.cfg.GroupMaxSize)
	}
	return true
}

func (s *Shard) joinNewMember(now time.Time, id RequestID, c Client, g *group, r *kmsg.JoinGroupRequest) {
	if !g.supportsProtocols(r.ProtocolType, r.Protocols) {
		s.respond(id, joinResponse(r.Version, "", kerr.InconsistentGroupProtocol.Code))
		return
	}
	newID := s.newMemberID(g, c.ID, r.InstanceID)
	if r.InstanceID != nil {
		if old := g.byID[g.byInstance[*r.InstanceID]]; old != nil {
			s.replaceStaticMember(now, id, g, old, newID, r)
			return
		}
		s.addMember(now, id, c, g, newID, r)
		return
	}
	if r.Version >= 4 {
		g.pending[newID] = true
		s.timers.set(heartbeatKey(g, newID), now.Add(time.Duration(r.SessionTimeoutMillis)*time.Millisecond))
		s.respond(id, joinResponse(r.Version, newID, kerr.MemberIDRequired.Code))
		return
	}
	s.addMember(now, id, c, g, newID, r)
}

func (s *Shard) joinExistingMember(now time.Time, id RequestID, c Client, g *group, r *kmsg.JoinGroupRequest) {
	fail := func(code int16) { s.respond(id, joinResponse(r.Version, r.MemberID, code)) }
	if !g.supportsProtocols(r.ProtocolType, r.Protocols) {
		fail(kerr.InconsistentGroupProtocol.Code)
		return
	}
	if g.pending[r.MemberID] {
		if r.InstanceID != nil {
			// Kafka throws here (an id handed to a dynamic member, sent back
			// with an instance id) and so answers UNKNOWN_SERVER_ERROR.
			fail(kerr.UnknownServerError.Code)
			return
		}
		s.addMember(now, id, c, g, r.MemberID, r)
		return
	}
	if code := g.validateMember(r.MemberID, r.InstanceID); code != 0 {
		fail(code)
		return
	}
	m := g.byID[r.MemberID]
	switch g.state {
	case statePreparingRebalance:
		s.updateMember(now, id, g, m, r)
	case stateCompletingRebalance:
		if !m.matches(r.Protocols) {
			s.updateMember(now, id, g, m, r)
			return
		}
		m.join = &parked{id: id, version: r.Version}
		s.answerJoin(g, m, false)
	case stateStable:
		if m.id == g.leader || !m.matches(r.Protocols) {
			s.updateMember(now, id, g, m, r)
			return
		}
		resp := joinResponse(r.Version, m.id, 0)
		resp.Generation, resp.Protocol, resp.LeaderID = g.generation, kmsg.StringPtr(g.protocol), g.leader
		if r.Version >= 7 {
			resp.ProtocolType = kmsg.StringPtr(g.protocolType)
		}
		s.respond(id, resp)
	default:
		fail(kerr.UnknownMemberID.Code)
	}
}

func protocolsOf(r *kmsg.JoinGroupRequest) []protocol {
	ps := make([]protocol, 0, len(r.Protocols))
	for _, p := range r.Protocols {
		ps = append(ps, protocol{name: p.Name, metadata: append([]byte{}, p.Metadata...)})
	}
	return ps
}

func rebalanceTimeoutOf(r *kmsg.JoinGroupRequest) time.Duration {
	if r.Version == 0 || r.RebalanceTimeoutMillis < 0 {
		return time.Duration(r.SessionTimeoutMillis) * time.Millisecond
	}
	return time.Duration(r.RebalanceTimeoutMillis) * time.Millisecond
}

// addMember adds a member parked in JoinGroup and rebalances.
func (s *Shard) addMember(now time.Time, id RequestID, c Client, g *group, memberID string, r *kmsg.JoinGroupRequest) {
	m := &member{
		id: memberID, instanceID: r.InstanceID, clientID: c.ID, clientHost: c.Host,
		rebalanceTimeout: rebalanceTimeoutOf(r),
		sessionTimeout:   time.Duration(r.SessionTimeoutMillis) * time.Millisecond,
		protocolType:     r.ProtocolType,
		protocols:        protocolsOf(r),
		join:             &parked{id: id, version: r.Version},
		isNew:            true,
	}
	if g.state == statePreparingRebalance && g.initialRebalance {
		g.newMemberAdded = true
	}
	delete(g.pending, memberID)
	g.add(m)
	s.timers.set(heartbeatKey(g, m.id), now.Add(newMemberJoinTimeout))
	s.maybeRebalance(now, g)
}

// updateMember parks a known member's JoinGroup with its new protocols and
// timeouts, and rebalances.
func (s *Shard) updateMember(now time.Time, id RequestID, g *group, m *member, r *kmsg.JoinGroupRequest) {
	// A second JoinGroup from one member (a retry on another connection)
	// supersedes the first, which Kafka leaves unanswered.
	s.failJoin(m, kerr.RebalanceInProgress.Code)
	m.protocols = protocolsOf(r)
	m.rebalanceTimeout = rebalanceTimeoutOf(r)
	m.sessionTimeout = time.Duration(r.SessionTimeoutMillis) * time.Millisecond
	m.join = &parked{id: id, version: r.Version}
	s.maybeRebalance(now, g)
}

// replaceStaticMember gives a static member that rejoined with an unknown
// member id a new one, fencing the old.
func (s *Shard) replaceStaticMember(now time.Time, id RequestID, g *group, m *member, newID string, r *kmsg.JoinGroupRequest) {
	s.failJoin(m, kerr.FencedInstanceID.Code)
	s.failSync(m, kerr.FencedInstanceID.Code)
	s.timers.cancel(heartbeatKey(g, m.id))
	oldLeader := g.leader
	g.replaceStatic(m, newID)
	m.protocols = protocolsOf(r)
	m.rebalanceTimeout = rebalanceTimeoutOf(r)
	m.sessionTimeout = time.Duration(r.SessionTimeoutMillis) * time.Millisecond
	s.rescheduleHeartbeat(now, g, m)
	m.join = &parked{id: id, version: r.Version}
	switch g.state {
	case stateStable:
		if g.selectProtocol() != g.protocol {
			s.prepareRebalance(now, g)
			return
		}
		s.writeGroup(g)
		if r.Version >= 9 {
			s.answerJoin(g, m, true)
			return
		}
		m.join = nil
		resp := joinResponse(r.Version, newID, 0)
		resp.Generation, resp.Protocol, resp.LeaderID = g.generation, kmsg.StringPtr(g.protocol), oldLeader
		if r.Version >= 7 {
			resp.ProtocolType = kmsg.StringPtr(g.protocolType)
		}
		s.respond(id, resp)
	case stateCompletingRebalance:
		s.prepareRebalance(now, g)
	default:
		s.maybeCompleteJoinPhase(now, g)
	}
}
