package groups

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newMemberJoinTimeout bounds how long a member that joined during this
// rebalance (and so has no member id it could heartbeat with) may wait in
// JoinGroup: Kafka's 5 minutes.
const newMemberJoinTimeout = 5 * time.Minute

func heartbeatKey(g *group, memberID string) timerKey {
	return timerKey{kind: timerHeartbeat, group: g.id, member: memberID}
}

func joinKey(g *group) timerKey { return timerKey{kind: timerJoin, group: g.id} }
func syncKey(g *group) timerKey { return timerKey{kind: timerSync, group: g.id} }

func (s *Shard) rescheduleHeartbeat(now time.Time, g *group, m *member) {
	s.timers.set(heartbeatKey(g, m.id), now.Add(m.sessionTimeout))
}

// maybeRebalance starts a rebalance if the group may start one (Empty,
// CompletingRebalance, Stable), or else sees whether the join phase under
// way can end.
func (s *Shard) maybeRebalance(now time.Time, g *group) {
	switch g.state {
	case stateEmpty, stateCompletingRebalance, stateStable:
		s.prepareRebalance(now, g)
	default:
		s.maybeCompleteJoinPhase(now, g)
	}
}

// prepareRebalance starts a join phase. Members parked in SyncGroup are
// woken with REBALANCE_IN_PROGRESS. A group that was Empty waits the
// initial rebalance delay, extended while members keep arriving; any other
// waits for the rebalance timeout, or less if every member rejoins.
func (s *Shard) prepareRebalance(now time.Time, g *group) {
	if g.state == stateCompletingRebalance {
		s.resetAssignments(now, g, kerr.RebalanceInProgress.Code)
	}
	s.timers.cancel(syncKey(g))
	clear(g.pendingSync)
	initial := g.state == stateEmpty
	g.transition(statePreparingRebalance, now)
	g.initialRebalance = initial
	if initial {
		g.newMemberAdded = false
		g.initialDelay = s.cfg.InitialRebalanceDelay
		g.initialRemaining = max(g.rebalanceTimeout()-g.initialDelay, 0)
		s.timers.set(joinKey(g), now.Add(g.initialDelay))
		return
	}
	if g.allJoined() {
		s.completeJoin(now, g)
		return
	}
	s.timers.set(joinKey(g), now.Add(g.rebalanceTimeout()))
}

// maybeCompleteJoinPhase ends the join phase early once every member has
// rejoined, except during the initial delay, which only its timer ends.
func (s *Shard) maybeCompleteJoinPhase(now time.Time, g *group) {
	if g.state == statePreparingRebalance && !g.initialRebalance && g.allJoined() {
		s.completeJoin(now, g)
	}
}

func (s *Shard) joinTimerFired(now time.Time, g *group) {
	if g.state != statePreparingRebalance {
		return
	}
	if g.initialRebalance && g.newMemberAdded && g.initialRemaining != 0 {
		g.newMemberAdded = false
		delay := min(s.cfg.InitialRebalanceDelay, g.initialRemaining)
		g.initialRemaining = max(g.initialRemaining-g.initialDelay, 0)
		g.initialDelay = delay
		s.timers.set(joinKey(g), now.Add(delay))
		return
	}
	s.completeJoin(now, g)
}

// completeJoin ends the join phase: dynamic members that did not rejoin
// are dropped, a leader is chosen among those that did, and the next
// generation begins (CompletingRebalance, every member answered, the
// leader with the members' metadata), or the group is Empty and says so in
// the log.
func (s *Shard) completeJoin(now time.Time, g *group) {
	s.timers.cancel(joinKey(g))
	for _, m := range append([]*member(nil), g.members...) {
		if m.join == nil && m.instanceID == nil {
			s.timers.cancel(heartbeatKey(g, m.id))
			g.remove(m.id)
		}
	}
	if len(g.members) > 0 && !g.electJoinedLeader() {
		// Only static members that have not rejoined are left: wait for them.
		s.timers.set(joinKey(g), now.Add(g.rebalanceTimeout()))
		return
	}
	g.generation++
	g.initialRebalance = false
	if len(g.members) == 0 {
		g.protocol, g.leader = "", ""
		g.transition(stateEmpty, now)
		s.writeGroup(g)
		return
	}
	g.protocol = g.selectProtocol()
	g.transition(stateCompletingRebalance, now)
	for _, m := range g.members {
		s.answerJoin(g, m, false)
		s.rescheduleHeartbeat(now, g, m)
		m.isNew = false
		g.pendingSync[m.id] = true
	}
	s.timers.set(syncKey(g), now.Add(g.rebalanceTimeout()))
}

// electJoinedLeader keeps the leader if it rejoined, or else makes the
// first member that rejoined the leader; false if none did.
func (g *group) electJoinedLeader() bool {
	if l := g.byID[g.leader]; l != nil && l.join != nil {
		return true
	}
	for _, m := range g.members {
		if m.join != nil {
			g.leader = m.id
			return true
		}
	}
	return false
}

// answerJoin answers a member's parked JoinGroup with the current
// generation; the leader gets every member's metadata unless skip (a
// static leader's replacement, v9+, told to keep its assignment).
func (s *Shard) answerJoin(g *group, m *member, skip bool) {
	if m.join == nil {
		return
	}
	p := *m.join
	m.join = nil
	resp := joinResponse(p.version, m.id, 0)
	resp.Generation = g.generation
	resp.Protocol = kmsg.StringPtr(g.protocol)
	if p.version >= 7 {
		resp.ProtocolType = kmsg.StringPtr(g.protocolType)
	}
	resp.LeaderID = g.leader
	if m.id == g.leader {
		resp.SkipAssignment = skip
		for _, x := range g.members {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID, rm.InstanceID = x.id, x.instanceID
			rm.ProtocolMetadata = nonNil(x.metadataFor(g.protocol))
			resp.Members = append(resp.Members, rm)
		}
	}
	s.respond(p.id, resp)
}

func joinResponse(version int16, memberID string, code int16) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version, resp.MemberID, resp.ErrorCode = version, memberID, code
	return resp
}

func syncResponse(version int16, code int16) *kmsg.SyncGroupResponse {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.Version, resp.ErrorCode = version, code
	return resp
}

// resetAssignments clears every assignment and answers parked SyncGroups
// with code. A member woken so gets a new session: while parked its
// heartbeat deadline may have passed, ignored, and left it with none.
func (s *Shard) resetAssignments(now time.Time, g *group, code int16) {
	for _, m := range g.members {
		m.assignment = nil
		if m.sync != nil {
			s.failSync(m, code)
			s.rescheduleHeartbeat(now, g, m)
		}
	}
}

func (s *Shard) failJoin(m *member, code int16) {
	if m.join != nil {
		s.respond(m.join.id, joinResponse(m.join.version, "", code))
		m.join = nil
	}
}

func (s *Shard) failSync(m *member, code int16) {
	if m.sync != nil {
		s.respond(m.sync.id, syncResponse(m.sync.version, code))
		m.sync = nil
	}
}

// expireMember is a session timeout: a pending member id is forgotten; a
// member is removed unless it is parked in JoinGroup or SyncGroup (which
// count as heartbeats), except a member new to this rebalance, whose
// JoinGroup is bounded by the new-member join timeout.
func (s *Shard) expireMember(now time.Time, g *group, id string) {
	if g.pending[id] {
		delete(g.pending, id)
		if g.state == statePreparingRebalance && g.allJoined() {
			s.completeJoin(now, g)
		}
		s.maybeForget(g)
		return
	}
	m := g.byID[id]
	if m == nil || (!m.isNew && (m.join != nil || m.sync != nil)) {
		return
	}
	s.removeMember(now, g, m)
}

// removeMember removes a member (expired or leaving), answering what it
// has parked with UNKNOWN_MEMBER_ID, and rebalances the rest.
func (s *Shard) removeMember(now time.Time, g *group, m *member) {
	s.failJoin(m, kerr.UnknownMemberID.Code)
	s.failSync(m, kerr.UnknownMemberID.Code)
	s.timers.cancel(heartbeatKey(g, m.id))
	g.remove(m.id)
	s.afterRemoval(now, g)
}

func (s *Shard) afterRemoval(now time.Time, g *group) {
	switch g.state {
	case stateStable, stateCompletingRebalance:
		s.prepareRebalance(now, g)
	case statePreparingRebalance:
		if g.allJoined() {
			s.completeJoin(now, g)
		}
	}
}

// expirePendingSync removes the members that did not send SyncGroup
// within the rebalance timeout of the join's end, and rebalances.
func (s *Shard) expirePendingSync(now time.Time, g *group) {
	if g.state != stateCompletingRebalance && g.state != stateStable || len(g.pendingSync) == 0 {
		return
	}
	for _, m := range append([]*member(nil), g.members...) {
		if g.pendingSync[m.id] {
			s.failJoin(m, kerr.UnknownMemberID.Code)
			s.timers.cancel(heartbeatKey(g, m.id))
			g.remove(m.id)
		}
	}
	s.prepareRebalance(now, g)
}

// writeGroup writes the group's metadata as it stands.
func (s *Shard) writeGroup(g *group) {
	s.write(Record{Key: groupKey(g.id), Value: encodeGroupValue(g.metadataValue())})
}

// newMemberID is Kafka's member id: the instance id (static members) or
// the client id, "-", and a random UUID; unique in the group.
func (s *Shard) newMemberID(g *group, clientID string, instanceID *string) string {
	prefix := clientID
	if instanceID != nil {
		prefix = *instanceID
	}
	if len(prefix) > maxString-37 {
		prefix = prefix[:maxString-37]
	}
	for {
		var b [16]byte
		env.Fill(s.rand, b[:])
		b[6] = b[6]&0x0f | 0x40
		b[8] = b[8]&0x3f | 0x80
		id := fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
		if g.byID[id] == nil && !g.pending[id] {
			return id
		}
	}
}

// maxString is the longest string the records' int16 lengths can carry.
const maxString = math.MaxInt16
