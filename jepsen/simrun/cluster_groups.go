package simrun

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/jepsen"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/sluicemq/sluice/sim"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The group workload of a cluster run (ClusterOptions.Groups, in some
// seeds of the data workload): one or two consumer groups of 1 to 6
// deterministic members each, one protocol per group, classic or KIP-848,
// all subscribed to the data topic. Each member is a client node of its
// own that finds its coordinator (FindCoordinator, again after
// COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS
// or a lost connection) and joins:
//
//	classic   JoinGroup (KIP-394: the first answer, MEMBER_ID_REQUIRED,
//	          names the member id), the leader's range assignment of the
//	          topic's partitions in SyncGroup, Heartbeat every third of the
//	          session, a rejoin on REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION
//	          or UNKNOWN_MEMBER_ID
//	KIP-848   ConsumerGroupHeartbeat with its member epoch and what it
//	          owns; a revoked partition is given up (no more commits to it)
//	          before the heartbeat that acknowledges it
//
// A member "consumes" what it owns: it reads each newly owned
// partition's committed offset (OffsetFetch), advances its position
// towards the partition's high watermark (ListOffsets from the leader),
// and commits the position after "processing" (OffsetCommit v9 with its
// generation or member epoch). A group nemesis makes members leave
// (LeaveGroup, or a heartbeat with epoch -1), crash (their node
// crashes: no leave) and stall (their node paused past the session
// timeout); some members join late. What the members saw goes into a
// jepsen.GroupHistory, judged by jepsen.CheckGroups; once the faults
// have healed and every member is back and stable, what each owns is
// recorded as the history's finals.
//
// Some groups are static (group.instance.id, KIP-345; KIP-848's
// instance_id): a member that restarts rejoins under its instance id,
// replacing its earlier incarnation without a rebalance (classic) or
// after the old one's session (KIP-848, UNRELEASED_INSTANCE_ID
// meanwhile), and a KIP-848 member leaves with epoch -2, keeping its
// assignment for its return. Each rejoin then sends, as its old
// incarnation's zombie would, one commit with the old member id and
// generation: it must be refused (FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID,
// ...); an acknowledged one is a violation.
//
// An operator now and then resets a group's offsets (an OffsetCommit with
// no member, to an offset drawn per partition) or deletes the group
// (DeleteGroups): the group's members leave and hold off rejoining while
// it tries, which Kafka allows only once the group is empty
// (NON_EMPTY_GROUP, UNKNOWN_MEMBER_ID before). Members "process" the
// records between their position and the offset they commit, recorded in
// the history, so that the checker can tell no record below a committed
// offset went unprocessed.

// GroupOptions is one group of a seed's group workload.
type GroupOptions struct {
	Protocol jepsen.GroupProtocol
	Members  int
	// Session is the members' session timeout (classic: each JoinGroup's;
	// KIP-848: the cluster's group.consumer.session.timeout.ms).
	Session time.Duration
	// Static gives each member an instance id.
	Static bool
}

// chooseGroups draws a seed's group workload, after every other draw.
func chooseGroups(r *rng.Rand) []GroupOptions {
	if !r.Chance(0.5) {
		return nil
	}
	session := time.Duration(6+r.Intn(5)) * time.Second
	var protos []jepsen.GroupProtocol
	switch x := r.Float64(); {
	case x < 0.4:
		protos = []jepsen.GroupProtocol{jepsen.GroupClassic}
	case x < 0.8:
		protos = []jepsen.GroupProtocol{jepsen.GroupConsumer}
	default:
		protos = []jepsen.GroupProtocol{jepsen.GroupClassic, jepsen.GroupConsumer}
	}
	var gs []GroupOptions
	for _, p := range protos {
		gs = append(gs, GroupOptions{Protocol: p, Members: 1 + r.Intn(6), Session: session, Static: r.Chance(0.4)})
	}
	return gs
}

func groupsString(gs []GroupOptions) string {
	s := ""
	for i, g := range gs {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf("%s:%d", g.Protocol, g.Members)
		if g.Static {
			s += "+static"
		}
	}
	if len(gs) > 0 {
		s += fmt.Sprintf("/%s", gs[0].Session)
	}
	return s
}

// groupRebalanceDelay is every node's group.initial.rebalance.delay.ms in
// a run with groups.
const groupRebalanceDelay = 300 * time.Millisecond

// groupRun is the group workload in progress.
type groupRun struct {
	r       *clusterRun
	h       *jepsen.GroupHistory
	members []*groupMember
	rand    *rng.Rand
	// released is, by group and partition, who last gave it up and when,
	// for the revocation-racing-an-assignment probe.
	released map[string]map[int32]releasedAt
	// finals is set once the finals are recorded.
	finals bool
	// holdUntil is, by group, until when its members stay out of it while
	// an operator resets or deletes it.
	holdUntil map[string]time.Duration
	admin     *adminClient
}

type releasedAt struct {
	member string
	at     time.Duration
}

// groupMember is one member of a group; its state that a crash loses is
// reset when its node boots.
type groupMember struct {
	g        *groupRun
	group    string
	protocol jepsen.GroupProtocol
	session  time.Duration
	name     string
	node     *sim.Node
	rand     *rng.Rand
	startAt  time.Duration

	e        env.Env
	inc      int
	sessions []*session
	flying   bool
	seq      int // the request in flight
	// opCommit is the history op of a commit in flight (0 none).
	opCommit int64

	coordinator int32 // -1 unknown
	lastCoord   int32 // the last coordinator heard of, for the probe
	leaders     []int32
	// Membership: memberID and generation (classic) or epoch (KIP-848);
	// joined says the member has an assignment it may consume.
	memberID   string
	ids        int
	generation int32
	leader     string // the classic generation's leader
	joined     bool
	rejoin     bool // a classic member must JoinGroup again
	// rebalancing says a join, sync or reconciliation is in progress.
	rebalancing bool
	left        bool // it left and waits to come back
	wantLeave   bool // the nemesis asked it to leave
	owned       []int32
	// pos is the position of each owned partition whose committed offset
	// is known; fetching those still to be read.
	pos           map[int32]int64
	nextHeartbeat time.Duration
	// leaseFrom is when the last heartbeat answered was sent.
	leaseFrom time.Duration
	live      bool
	// instanceID is the static member's instance id, nil if dynamic.
	instanceID *string
	// zombie is the membership of the static member's earlier
	// incarnation, whose commit is sent once the member is back in.
	zombie *zombie
}

// zombie is an earlier incarnation's membership.
type zombie struct {
	memberID   string
	generation int32
}

const groupTopicPrefix = "sim-group-"

func (r *clusterRun) addGroups() {
	if r.cfg.MetaOnly || len(r.opts.Groups) == 0 {
		return
	}
	g := &groupRun{r: r, h: jepsen.NewGroupHistory(), rand: r.w.Rand("group-nemesis"), released: map[string]map[int32]releasedAt{},
		holdUntil: map[string]time.Duration{}}
	r.groups = g
	for gi, o := range r.opts.Groups {
		for i := range o.Members {
			m := &groupMember{g: g, group: fmt.Sprintf("%s%d", groupTopicPrefix, gi+1), protocol: o.Protocol, session: o.Session,
				name: fmt.Sprintf("g%d-%d", gi+1, i+1)}
			m.rand = r.w.Rand("group/" + m.name)
			if o.Static {
				m.instanceID = kmsg.StringPtr(m.name)
			}
			if i > 0 && m.rand.Chance(0.5) {
				m.startAt = time.Duration(2000+m.rand.Intn(13000)) * time.Millisecond
			}
			g.members = append(g.members, m)
			m.node = r.w.AddNode(m.name, m.boot)
		}
	}
	g.admin = newAdminClient(g)
	g.scheduleFault()
}

func (m *groupMember) now() time.Duration { return m.g.r.w.Now() }

func (m *groupMember) boot(e env.Env) {
	m.e, m.inc = e, m.node.Incarnation()
	if m.opCommit != 0 {
		m.g.h.Add(jepsen.GroupEvent{Kind: jepsen.GroupCommitInfo, Op: m.opCommit, Virtual: int64(m.now())})
		m.opCommit = 0
	}
	m.dropAll("the member's node restarted")
	m.noteZombie()
	m.flying, m.joined, m.rejoin, m.rebalancing, m.left = false, false, false, false, false
	m.memberID, m.generation, m.coordinator = "", 0, -1
	m.sessions = make([]*session, len(m.g.r.nodes))
	for i, n := range m.g.r.nodes {
		m.sessions[i] = &session{e: e, addr: n.name + ":9092", clientID: m.name, dialTimeout: dialTimeout, probes: &m.g.r.probes}
	}
	m.leaders = make([]int32, m.g.r.partitions)
	for i := range m.leaders {
		m.leaders[i] = -1
	}
	wait := time.Duration(m.rand.Intn(200)) * time.Millisecond
	if m.startAt > m.now() {
		wait = m.startAt - m.now()
		m.g.r.probes.add("group.late_join")
	}
	m.later(wait)
}

// noteZombie remembers a static member's membership as its zombie's,
// before it joins again.
func (m *groupMember) noteZombie() {
	if m.instanceID != nil && m.memberID != "" && m.generation > 0 {
		m.zombie = &zombie{memberID: m.memberID, generation: m.generation}
	}
}

// dropAll gives up everything the member owns (recorded as released).
func (m *groupMember) dropAll(why string) {
	if len(m.owned) > 0 {
		m.g.h.Add(jepsen.GroupEvent{Kind: jepsen.GroupReleased, Group: m.group, Protocol: m.protocol, Member: m.name,
			Generation: m.generation, Partitions: m.owned, Virtual: int64(m.now())})
		m.g.noteReleased(m, m.owned)
		m.g.r.logf("%s gives up %v: %s", m.name, m.owned, why)
	}
	m.owned, m.pos, m.joined = nil, map[int32]int64{}, false
}

func (g *groupRun) noteReleased(m *groupMember, ps []int32) {
	if g.released[m.group] == nil {
		g.released[m.group] = map[int32]releasedAt{}
	}
	for _, p := range ps {
		g.released[m.group][p] = releasedAt{m.name, m.now()}
	}
}

// noteAssigned fires the probe of a partition handed to m right after
// another member gave it up.
func (g *groupRun) noteAssigned(m *groupMember, added []int32) {
	for _, p := range added {
		if ra, ok := g.released[m.group][p]; ok && ra.member != m.name && m.now()-ra.at < 500*time.Millisecond {
			g.r.probes.add("group.revocation_racing_assignment")
		}
	}
}

func (m *groupMember) later(d time.Duration) {
	inc := m.inc
	m.e.Clock.AfterFunc(d, func() {
		if m.node.Incarnation() == inc {
			m.step()
		}
	})
}

func (m *groupMember) backoff() {
	m.later(backoffMin + time.Duration(m.rand.Uint64n(uint64(backoffMax-backoffMin))))
}

// step does the member's next thing, one request at a time.
func (m *groupMember) step() {
	if m.flying || m.left {
		return
	}
	if until := m.g.holdUntil[m.group]; m.now() < until {
		// An operator is resetting the group: out of it meanwhile.
		if m.joined && !m.wantLeave && m.leave() {
			return
		}
		if !m.joined && !m.left {
			m.later(min(until-m.now(), 500*time.Millisecond))
			return
		}
	}
	if m.wantLeave {
		m.wantLeave = false
		if m.leave() {
			return
		}
	}
	if m.joined && m.leaseFrom > 0 && m.now() > m.leaseFrom+m.session {
		// Silent past its session (a stall): the coordinator may have
		// fenced it, so what it owned is no longer its own.
		m.g.r.probes.add("group.lease_lost")
		m.dropAll("its session ran out")
		m.startOver()
	}
	switch {
	case m.coordinator < 1:
		m.findCoordinator()
	case m.protocol == jepsen.GroupClassic && (!m.joined || m.rejoin):
		m.joinGroup()
	case m.protocol == jepsen.GroupConsumer && (!m.joined || m.now() >= m.nextHeartbeat):
		m.consumerHeartbeat()
	case m.protocol == jepsen.GroupClassic && m.now() >= m.nextHeartbeat:
		m.heartbeat()
	case m.zombie != nil && m.joined && !m.rebalancing:
		m.zombieCommit()
	default:
		m.consume()
	}
}

// startOver makes the member join again as a new member.
func (m *groupMember) startOver() {
	m.noteZombie()
	m.joined, m.rejoin, m.generation, m.memberID, m.leaseFrom = false, false, 0, "", 0
	m.g.r.probes.add("group.rejoin")
}

// coordinatorLost forgets the coordinator after a coordinator error or a
// lost connection.
func (m *groupMember) coordinatorLost(err error) {
	if m.rebalancing {
		m.g.r.probes.add("group.failover_during_rebalance")
	}
	m.g.r.logf("%s loses its coordinator n%d: %v", m.name, m.coordinator, err)
	m.coordinator = -1
}

func coordinatorError(code int16) bool {
	switch code {
	case kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code:
		return true
	}
	return false
}

// send sends req to node id (1-based) and calls done if the member's
// incarnation is still the one that sent it.
func (m *groupMember) send(to int32, req kmsg.Request, timeout time.Duration, done func(kmsg.Response, error)) {
	inc := m.inc
	m.flying = true
	m.seq++
	seq := m.seq
	m.sessions[to-1].do(req, timeout, func(resp kmsg.Response, err error) {
		if m.node.Incarnation() != inc || !m.flying || m.seq != seq {
			return
		}
		m.flying = false
		done(resp, err)
	})
}

func (m *groupMember) findCoordinator() {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorKeys = 4, []string{m.group}
	to := int32(1 + m.rand.Intn(len(m.sessions)))
	m.send(to, req, metadataTimeout, func(resp kmsg.Response, err error) {
		if err == nil {
			cs := resp.(*kmsg.FindCoordinatorResponse).Coordinators
			if len(cs) == 1 && cs[0].ErrorCode == 0 && cs[0].NodeID >= 1 && int(cs[0].NodeID) <= len(m.sessions) {
				m.coordinator = cs[0].NodeID
				if m.lastCoord > 0 && m.lastCoord != m.coordinator {
					m.g.r.probes.add("group.coordinator_moved")
				}
				m.lastCoord = m.coordinator
				m.later(0)
				return
			}
		}
		m.backoff()
	})
}

// The classic protocol.

func (m *groupMember) joinGroup() {
	m.rebalancing = true
	if m.joined {
		m.dropAll("it rejoins") // eager: everything is revoked at a rejoin
	}
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{clusterTopic}
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 7
	req.Group, req.MemberID, req.ProtocolType, req.InstanceID = m.group, m.memberID, "consumer", m.instanceID
	req.SessionTimeoutMillis = int32(m.session / time.Millisecond)
	req.RebalanceTimeoutMillis = int32(m.session / time.Millisecond)
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", meta.AppendTo(nil)
	req.Protocols = append(req.Protocols, p)
	m.send(m.coordinator, req, m.session+5*time.Second, func(resp kmsg.Response, err error) {
		if err != nil {
			m.coordinatorLost(err)
			m.backoff()
			return
		}
		jr := resp.(*kmsg.JoinGroupResponse)
		m.g.r.logf("%s JoinGroup %s as %q: error %d, generation %d", m.name, m.group, m.memberID, jr.ErrorCode, jr.Generation)
		switch code := jr.ErrorCode; {
		case code == kerr.MemberIDRequired.Code:
			m.memberID = jr.MemberID
			m.later(0)
		case coordinatorError(code):
			m.coordinatorLost(kerr.ErrorForCode(code))
			m.backoff()
		case code == kerr.UnknownMemberID.Code || code == kerr.FencedInstanceID.Code:
			m.startOver()
			m.backoff()
		case code != 0:
			m.backoff()
		default:
			if m.instanceID != nil && m.zombie != nil && jr.MemberID != m.zombie.memberID {
				m.g.r.probes.add("group.static_rejoin")
			}
			m.memberID, m.generation, m.leader = jr.MemberID, jr.Generation, jr.LeaderID
			m.syncGroup(jr)
		}
	})
}

// rangeAssign is the leader's assignment: the topic's partitions in
// contiguous ranges over the members sorted by id.
func rangeAssign(members []string, partitions int) map[string][]int32 {
	members = slices.Sorted(slices.Values(members))
	out := map[string][]int32{}
	per, extra := partitions/len(members), partitions%len(members)
	next := int32(0)
	for i, id := range members {
		n := per
		if i < extra {
			n++
		}
		for range n {
			out[id] = append(out[id], next)
			next++
		}
	}
	return out
}

func (m *groupMember) syncGroup(jr *kmsg.JoinGroupResponse) {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.Generation, req.MemberID, req.InstanceID = m.group, m.generation, m.memberID, m.instanceID
	pt, pn := "consumer", "range"
	req.ProtocolType, req.Protocol = &pt, &pn
	if jr.LeaderID == m.memberID {
		var ids []string
		for _, mem := range jr.Members {
			ids = append(ids, mem.MemberID)
		}
		plan := rangeAssign(ids, m.g.r.partitions)
		for _, id := range slices.Sorted(slices.Values(ids)) {
			a := kmsg.NewConsumerMemberAssignment()
			if ps := plan[id]; len(ps) > 0 {
				t := kmsg.NewConsumerMemberAssignmentTopic()
				t.Topic, t.Partitions = clusterTopic, ps
				a.Topics = append(a.Topics, t)
			}
			ga := kmsg.NewSyncGroupRequestGroupAssignment()
			ga.MemberID, ga.MemberAssignment = id, a.AppendTo(nil)
			req.GroupAssignment = append(req.GroupAssignment, ga)
		}
	}
	m.send(m.coordinator, req, m.session+5*time.Second, func(resp kmsg.Response, err error) {
		if err != nil {
			m.coordinatorLost(err)
			m.backoff()
			return
		}
		sr := resp.(*kmsg.SyncGroupResponse)
		m.g.r.logf("%s SyncGroup %s generation %d: error %d", m.name, m.group, m.generation, sr.ErrorCode)
		switch code := sr.ErrorCode; {
		case coordinatorError(code):
			m.coordinatorLost(kerr.ErrorForCode(code))
			m.backoff()
		case code == kerr.UnknownMemberID.Code || code == kerr.FencedInstanceID.Code:
			m.startOver()
			m.backoff()
		case code != 0:
			m.rejoin = true
			m.g.r.probes.add("group.rejoin")
			m.backoff()
		default:
			var a kmsg.ConsumerMemberAssignment
			var ps []int32
			if len(sr.MemberAssignment) > 0 && a.ReadFrom(sr.MemberAssignment) == nil {
				for _, t := range a.Topics {
					if t.Topic == clusterTopic {
						ps = append(ps, t.Partitions...)
					}
				}
			}
			m.assigned(ps)
			m.rejoin, m.rebalancing = false, false
			m.leaseFrom = m.now()
			m.nextHeartbeat = m.now() + m.session/3
			m.later(0)
		}
	})
}

// assigned takes ps as the member's whole assignment, answered now.
func (m *groupMember) assigned(ps []int32) {
	slices.Sort(ps)
	ps = slices.Compact(ps)
	var added []int32
	for _, p := range ps {
		if !slices.Contains(m.owned, p) {
			added = append(added, p)
		}
	}
	kept := map[int32]int64{}
	for _, p := range ps {
		if v, ok := m.pos[p]; ok && !slices.Contains(added, p) {
			kept[p] = v
		}
	}
	var gone []int32
	for _, p := range m.owned {
		if !slices.Contains(ps, p) {
			gone = append(gone, p)
		}
	}
	m.g.noteReleased(m, gone)
	m.g.noteAssigned(m, added)
	m.owned, m.pos, m.joined = ps, kept, true
	m.g.h.Add(jepsen.GroupEvent{Kind: jepsen.GroupAssigned, Group: m.group, Protocol: m.protocol, Member: m.name,
		Generation: m.generation, Leader: m.leader, Partitions: ps, Virtual: int64(m.now())})
	m.g.r.logf("%s assigned %v in %s generation %d", m.name, ps, m.group, m.generation)
}

func (m *groupMember) heartbeat() {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.Generation, req.MemberID, req.InstanceID = m.group, m.generation, m.memberID, m.instanceID
	sent := m.now()
	m.send(m.coordinator, req, 5*time.Second, func(resp kmsg.Response, err error) {
		if err != nil {
			m.coordinatorLost(err)
			m.backoff()
			return
		}
		code := resp.(*kmsg.HeartbeatResponse).ErrorCode
		if code != 0 {
			m.g.r.logf("%s Heartbeat %s generation %d: error %d", m.name, m.group, m.generation, code)
		}
		switch {
		case code == 0:
			m.leaseFrom = sent
			m.nextHeartbeat = m.now() + m.session/3
			m.later(0)
		case coordinatorError(code):
			m.coordinatorLost(kerr.ErrorForCode(code))
			m.backoff()
		case code == kerr.RebalanceInProgress.Code || code == kerr.IllegalGeneration.Code:
			m.rejoin = true
			m.g.r.probes.add("group.rejoin")
			m.later(0)
		case code == kerr.UnknownMemberID.Code || code == kerr.FencedInstanceID.Code:
			m.dropAll("the coordinator forgot it")
			m.startOver()
			m.later(0)
		default:
			m.backoff()
		}
	})
}

// KIP-848.

func (m *groupMember) consumerHeartbeat() {
	if !m.joined && m.memberID == "" {
		m.ids++
		m.memberID = fmt.Sprintf("%s-%d-%d", m.name, m.inc, m.ids)
		m.generation = 0
		m.rebalancing = true
	}
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = m.group, m.memberID, m.generation, m.instanceID
	req.RebalanceTimeoutMillis = int32(m.session / time.Millisecond)
	req.SubscribedTopicNames = []string{clusterTopic}
	req.Topics = m.ownedTopics()
	sent := m.now()
	m.send(m.coordinator, req, 5*time.Second, func(resp kmsg.Response, err error) {
		if err != nil {
			m.coordinatorLost(err)
			m.backoff()
			return
		}
		hr := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
		m.g.r.logf("%s ConsumerGroupHeartbeat %s as %q epoch %d owning %v: error %d, epoch %d, assignment %v", m.name, m.group, m.memberID,
			req.MemberEpoch, m.owned, hr.ErrorCode, hr.MemberEpoch, hr.Assignment != nil)
		switch code := hr.ErrorCode; {
		case code == 0:
			m.consumerAnswer(hr, sent)
		case coordinatorError(code):
			m.coordinatorLost(kerr.ErrorForCode(code))
			m.backoff()
		case code == kerr.FencedMemberEpoch.Code || code == kerr.UnknownMemberID.Code || code == kerr.FencedInstanceID.Code:
			m.dropAll("fenced: " + kerr.ErrorForCode(code).Error())
			m.startOver()
			m.later(0)
		case code == kerr.UnreleasedInstanceID.Code:
			// The earlier incarnation has not left and its session has
			// not run out: try again later, as the same new member.
			m.g.r.probes.add("group.unreleased_instance")
			m.backoff()
		default:
			m.backoff()
		}
	})
}

func (m *groupMember) ownedTopics() []kmsg.ConsumerGroupHeartbeatRequestTopic {
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if len(m.owned) > 0 {
		t := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		t.TopicID, t.Partitions = m.g.r.topicID, slices.Clone(m.owned)
		out = append(out, t)
	}
	return out
}

func (m *groupMember) consumerAnswer(hr *kmsg.ConsumerGroupHeartbeatResponse, sent time.Duration) {
	if m.generation == 0 && m.zombie != nil && m.zombie.memberID != m.memberID {
		m.g.r.probes.add("group.static_rejoin")
	}
	m.generation = hr.MemberEpoch
	m.leaseFrom = sent
	m.g.h.Add(jepsen.GroupEvent{Kind: jepsen.GroupHeartbeat, Group: m.group, Protocol: m.protocol, Member: m.name,
		Generation: m.generation, Virtual: int64(sent), Lease: int64(m.session)})
	interval := min(time.Duration(hr.HeartbeatIntervalMillis)*time.Millisecond, m.session/3)
	if interval <= 0 {
		interval = m.session / 3
	}
	m.nextHeartbeat = m.now() + interval
	if hr.Assignment != nil {
		var ps []int32
		for _, t := range hr.Assignment.Topics {
			if t.TopicID == m.g.r.topicID {
				ps = append(ps, t.Partitions...)
			}
		}
		changed := !m.joined || !slices.Equal(slices.Sorted(slices.Values(ps)), m.owned)
		m.rebalancing = changed
		if changed {
			m.assigned(ps)
			// Acknowledge at once what was given up and taken.
			m.nextHeartbeat = m.now()
		}
	} else {
		m.rebalancing = false
		if !m.joined {
			m.joined = true
		}
	}
	m.later(0)
}

// Consuming and committing.

// consume reads the committed offset of an owned partition not yet read,
// or advances one owned partition's position and commits it.
func (m *groupMember) consume() {
	var unread []int32
	for _, p := range m.owned {
		if _, ok := m.pos[p]; !ok {
			unread = append(unread, p)
		}
	}
	switch {
	case len(unread) > 0:
		m.offsetFetch(unread)
	case len(m.owned) == 0:
		m.later(min(m.nextHeartbeat-m.now(), time.Second))
	default:
		p := m.owned[m.rand.Intn(len(m.owned))]
		if m.leaders[p] < 1 {
			m.refresh()
			return
		}
		m.advance(p)
	}
}

func (m *groupMember) offsetFetch(ps []int32) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = m.group
	t := kmsg.NewOffsetFetchRequestGroupTopic()
	t.Topic, t.Partitions = clusterTopic, ps
	rg.Topics = append(rg.Topics, t)
	req.Groups = append(req.Groups, rg)
	op := m.g.h.Add(jepsen.GroupEvent{Kind: jepsen.GroupFetchInvoke, Group: m.group, Protocol: m.protocol, Member: m.name,
		Generation: m.generation, Partitions: ps, Virtual: int64(m.now())})
	m.send(m.coordinator, req, 5*time.Second, func(resp kmsg.Response, err error) {
		if err != nil {
			m.coordinatorLost(err)
			m.backoff()
			return
		}
		fr := resp.(*kmsg.OffsetFetchResponse)
		if len(fr.Groups) != 1 || fr.Groups[0].ErrorCode != 0 {
			if len(fr.Groups) == 1 && coordinatorError(fr.Groups[0].ErrorCode) {
				m.coordinatorLost(kerr.ErrorForCode(fr.Groups[0].ErrorCode))
			}
			m.backoff()
			return
		}
		var got []jepsen.PartitionOffset
		for _, t := range fr.Groups[0].Topics {
			for _, p := range t.Partitions {
				if t.Topic == clusterTopic && p.ErrorCode == 0 && slices.Contains(ps, p.Partition) {
					got = append(got, jepsen.PartitionOffset{Partition: p.Partition, Offset: p.Offset})
				}
			}
		}
		m.g.h.Add(jepsen.GroupEvent{Kind: jepsen.GroupFetchOk, Op: op, Offsets: got, Virtual: int64(m.now())})
		m.g.r.probes.add("group.offset_fetch")
		for _, po := range got {
			if slices.Contains(m.owned, po.Partition) {
				m.pos[po.Partition] = max(po.Offset, 0)
			}
		}
		m.later(0)
	})
}

// refresh learns the data topic's leaders from a random node.
func (m *groupMember) refresh() {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	t := kmsg.NewMetadataRequestTopic()
	name := clusterTopic
	t.Topic = &name
	req.Topics = append(req.Topics, t)
	m.send(int32(1+m.rand.Intn(len(m.sessions))), req, metadataTimeout, func(resp kmsg.Response, err error) {
		if err == nil {
			for _, t := range resp.(*kmsg.MetadataResponse).Topics {
				if t.Topic == nil || *t.Topic != clusterTopic || t.ErrorCode != 0 {
					continue
				}
				for _, p := range t.Partitions {
					if p.Partition >= 0 && int(p.Partition) < len(m.leaders) && p.Leader <= int32(len(m.sessions)) {
						m.leaders[p.Partition] = p.Leader
					}
				}
			}
		}
		m.backoff()
	})
}

// advance reads partition p's high watermark from its leader, moves the
// position some way towards it ("processing" the records between), and
// commits the new position.
func (m *groupMember) advance(p int32) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 7
	req.ReplicaID = -1
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = clusterTopic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.CurrentLeaderEpoch, lp.Timestamp = p, -1, -1
	t.Partitions = append(t.Partitions, lp)
	req.Topics = append(req.Topics, t)
	m.send(m.leaders[p], req, 5*time.Second, func(resp kmsg.Response, err error) {
		end := int64(-1)
		if err == nil {
			for _, t := range resp.(*kmsg.ListOffsetsResponse).Topics {
				for _, rp := range t.Partitions {
					if t.Topic == clusterTopic && rp.Partition == p && rp.ErrorCode == 0 {
						end = rp.Offset
					}
				}
			}
		}
		if end < 0 {
			m.leaders[p] = -1
			m.backoff()
			return
		}
		from, ok := m.pos[p]
		if !ok || !slices.Contains(m.owned, p) {
			m.later(0) // given up meanwhile
			return
		}
		to := min(end, from+1+int64(m.rand.Intn(20)))
		if to <= from {
			m.later(time.Duration(50+m.rand.Intn(200)) * time.Millisecond)
			return
		}
		m.g.h.Add(jepsen.GroupEvent{Kind: jepsen.GroupProcessed, Group: m.group, Protocol: m.protocol, Member: m.name,
			Generation: m.generation, Ranges: []jepsen.PartitionRange{{Partition: p, From: from, To: to}}, Virtual: int64(m.now())})
		m.commit(p, to)
	})
}

// commitRequest is an OffsetCommit v9 of one partition of the data topic.
func (m *groupMember) commitRequest(memberID string, generation int32, p int32, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group, req.Generation, req.MemberID, req.InstanceID = m.group, generation, memberID, m.instanceID
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = clusterTopic
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset, cp.LeaderEpoch = p, offset, -1
	t.Partitions = append(t.Partitions, cp)
	req.Topics = append(req.Topics, t)
	return req
}

// commitCode is the answer's code for partition p of the data topic (-1
// if it names none).
func commitCode(resp kmsg.Response, p int32) int16 {
	code := int16(-1)
	for _, t := range resp.(*kmsg.OffsetCommitResponse).Topics {
		for _, rp := range t.Partitions {
			if t.Topic == clusterTopic && rp.Partition == p {
				code = rp.ErrorCode
			}
		}
	}
	return code
}

func (m *groupMember) commit(p int32, offset int64) {
	req := m.commitRequest(m.memberID, m.generation, p, offset)
	op := m.g.h.Add(jepsen.GroupEvent{Kind: jepsen.GroupCommitInvoke, Group: m.group, Protocol: m.protocol, Member: m.name,
		Generation: m.generation, Offsets: []jepsen.PartitionOffset{{Partition: p, Offset: offset}}, Virtual: int64(m.now())})
	m.opCommit = op
	m.send(m.coordinator, req, 5*time.Second, func(resp kmsg.Response, err error) {
		m.opCommit = 0
		if err != nil {
			kind := jepsen.GroupCommitInfo
			if jepsen.Classify(err) == jepsen.Failed {
				kind = jepsen.GroupCommitFail
			}
			m.g.h.Add(jepsen.GroupEvent{Kind: kind, Op: op, Virtual: int64(m.now())})
			m.g.r.probes.add("group.commit_unknown")
			m.coordinatorLost(err)
			m.backoff()
			return
		}
		if code := commitCode(resp, p); code != 0 {
			// A coordinator error may come after the records were written
			// (COORDINATOR_NOT_AVAILABLE when offsets.commit.timeout.ms ran
			// out, NOT_COORDINATOR when the shard unloaded): the commit may
			// still land, so its end is unknown.
			kind := jepsen.GroupCommitFail
			if coordinatorError(code) {
				kind = jepsen.GroupCommitInfo
			}
			m.g.h.Add(jepsen.GroupEvent{Kind: kind, Op: op, Virtual: int64(m.now())})
			m.g.r.probes.add("group.commit_refused")
			m.commitRefused(code)
			return
		}
		m.g.h.Add(jepsen.GroupEvent{Kind: jepsen.GroupCommitOk, Op: op, Virtual: int64(m.now())})
		m.g.r.probes.add("group.commit_acknowledged")
		if _, ok := m.pos[p]; ok {
			m.pos[p] = max(m.pos[p], offset)
		}
		m.later(time.Duration(m.rand.Intn(200)) * time.Millisecond)
	})
}

// zombieCommit sends the commit of the static member's earlier
// incarnation, now that the member is back in its group under a new
// member id: the coordinator must refuse it.
func (m *groupMember) zombieCommit() {
	z := m.zombie
	m.zombie = nil
	req := m.commitRequest(z.memberID, z.generation, 0, 0)
	who := m.name + "'s zombie"
	op := m.g.h.Add(jepsen.GroupEvent{Kind: jepsen.GroupCommitInvoke, Group: m.group, Protocol: m.protocol, Member: who,
		Generation: z.generation, Offsets: []jepsen.PartitionOffset{{Partition: 0, Offset: 0}}, Virtual: int64(m.now())})
	m.opCommit = op
	m.send(m.coordinator, req, 5*time.Second, func(resp kmsg.Response, err error) {
		m.opCommit = 0
		if err != nil {
			m.g.h.Add(jepsen.GroupEvent{Kind: jepsen.GroupCommitInfo, Op: op, Virtual: int64(m.now())})
			m.coordinatorLost(err)
			m.backoff()
			return
		}
		code := commitCode(resp, 0)
		m.g.r.logf("%s: commit as member %q generation %d: error %d", who, z.memberID, z.generation, code)
		switch {
		case code == 0:
			m.g.h.Add(jepsen.GroupEvent{Kind: jepsen.GroupCommitOk, Op: op, Virtual: int64(m.now())})
			m.g.r.fail("violation: groups: %s: %s's commit as its earlier incarnation (member %q, generation %d) was acknowledged after it rejoined as %q",
				m.group, m.name, z.memberID, z.generation, m.memberID)
		case coordinatorError(code):
			m.g.h.Add(jepsen.GroupEvent{Kind: jepsen.GroupCommitInfo, Op: op, Virtual: int64(m.now())})
			m.zombie = z // again, at the coordinator
			m.coordinatorLost(kerr.ErrorForCode(code))
		default:
			m.g.h.Add(jepsen.GroupEvent{Kind: jepsen.GroupCommitFail, Op: op, Virtual: int64(m.now())})
			if code == kerr.FencedInstanceID.Code {
				m.g.r.probes.add("group.fenced_static_member")
			} else {
				m.g.r.probes.add("group.zombie_refused")
			}
		}
		m.later(0)
	})
}

func (m *groupMember) commitRefused(code int16) {
	switch {
	case coordinatorError(code):
		m.coordinatorLost(kerr.ErrorForCode(code))
	case code == kerr.RebalanceInProgress.Code || code == kerr.IllegalGeneration.Code:
		if m.protocol == jepsen.GroupClassic {
			m.rejoin = true
			m.g.r.probes.add("group.rejoin")
		}
	case code == kerr.UnknownMemberID.Code || code == kerr.FencedMemberEpoch.Code || code == kerr.FencedInstanceID.Code:
		m.dropAll("its commit was fenced")
		m.startOver()
	case code == kerr.StaleMemberEpoch.Code:
		m.nextHeartbeat = m.now()
	}
	m.backoff()
}

// leave makes the member leave its group, and come back a while later;
// false if it is in no state to.
func (m *groupMember) leave() bool {
	if m.flying || !m.joined || m.left || m.coordinator < 1 || m.g.r.stopping {
		return false
	}
	m.g.r.probes.add("group.leave")
	var req kmsg.Request
	if m.protocol == jepsen.GroupClassic {
		lr := kmsg.NewPtrLeaveGroupRequest()
		lr.Version = 3
		lr.Group = m.group
		mem := kmsg.NewLeaveGroupRequestMember()
		mem.MemberID, mem.InstanceID = m.memberID, m.instanceID
		lr.Members = append(lr.Members, mem)
		req = lr
	} else {
		hr := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hr.Version = 1
		hr.Group, hr.MemberID, hr.MemberEpoch, hr.InstanceID = m.group, m.memberID, -1, m.instanceID
		if m.instanceID != nil && m.rand.Chance(0.7) {
			// A static member's temporary leave: its assignment waits
			// for its return for a session.
			hr.MemberEpoch = -2
		}
		hr.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		req = hr
	}
	m.dropAll("it leaves")
	m.left = true
	m.send(m.coordinator, req, 5*time.Second, func(kmsg.Response, error) {})
	inc := m.inc
	m.e.Clock.AfterFunc(time.Duration(500+m.rand.Intn(5000))*time.Millisecond, func() {
		if m.node.Incarnation() == inc {
			m.comeBack()
		}
	})
	return true
}

func (m *groupMember) comeBack() {
	if !m.left {
		return
	}
	m.left = false
	m.flying = false // the leave's answer no longer matters
	m.startOver()
	m.later(0)
}

// The group nemesis: now and then a member leaves, crashes or stalls.

func (g *groupRun) scheduleFault() {
	g.r.w.After(time.Duration(1000+g.rand.Intn(6000))*time.Millisecond, "group.fault", func() {
		if g.r.stopping {
			return
		}
		g.fault()
		g.scheduleFault()
	})
}

func (g *groupRun) fault() {
	m := g.members[g.rand.Intn(len(g.members))]
	n := m.node
	switch x := g.rand.Float64(); {
	case x < 0.1:
		g.resetGroup(m.group)
	case x < 0.4:
		m.wantLeave = true
	case x < 0.7:
		if !n.Up() || n.Paused() {
			return
		}
		g.r.probes.add("group.crash")
		m.dropAll("its node crashed")
		n.Crash()
		g.r.w.After(time.Duration(500+g.rand.Intn(5000))*time.Millisecond, "group.restart", func() {
			if !n.Up() {
				n.Restart()
			}
		})
	default:
		if !n.Up() || n.Paused() {
			return
		}
		g.r.probes.add("group.stall")
		n.Pause()
		g.r.w.After(m.session+time.Duration(500+g.rand.Intn(4000))*time.Millisecond, "group.resume", n.Resume)
	}
}

// startLiveness brings back every member that left; heal has restarted
// and resumed their nodes.
func (g *groupRun) startLiveness() {
	clear(g.holdUntil)
	for _, m := range g.members {
		m.live = true
		inc := m.inc
		m.node.Post(func() {
			if m.node.Incarnation() == inc && m.left {
				m.comeBack()
			}
		})
	}
}

// stable says every member is back and owns its share: the members of
// each group together own every partition once.
func (g *groupRun) stable() bool {
	for gi := range g.r.opts.Groups {
		group := fmt.Sprintf("%s%d", groupTopicPrefix, gi+1)
		owners := make([]int, g.r.partitions)
		var gen int32 = -1
		for _, m := range g.members {
			if m.group != group {
				continue
			}
			if !m.node.Up() || m.node.Paused() || !m.joined || m.left || m.rebalancing || m.rejoin {
				return false
			}
			if m.protocol == jepsen.GroupClassic {
				if gen >= 0 && gen != m.generation {
					return false
				}
				gen = m.generation
			}
			for _, p := range m.owned {
				owners[p]++
			}
		}
		for _, n := range owners {
			if n != 1 {
				return false
			}
		}
	}
	return true
}

// settle waits for the members to be stable after the heal, then records
// what each owns as the history's finals.
func (g *groupRun) settle() {
	settled := g.r.w.RunUntil(g.stable, livenessLimit)
	if settled {
		g.r.w.Run(2 * time.Second) // stable for a while, not for a moment
		settled = g.r.w.RunUntil(g.stable, livenessLimit)
	}
	if !settled {
		g.r.fail("liveness: groups: the members were not stable %s after healing: %s", livenessLimit, g.describe())
	}
	for gi := range g.r.opts.Groups {
		group := fmt.Sprintf("%s%d", groupTopicPrefix, gi+1)
		g.h.Add(jepsen.GroupEvent{Kind: jepsen.GroupFinal, Group: group, Total: int32(g.r.partitions), Virtual: int64(g.r.w.Now())})
		for _, m := range g.members {
			if m.group == group {
				g.h.Add(jepsen.GroupEvent{Kind: jepsen.GroupFinal, Group: group, Member: m.name, Partitions: m.owned, Virtual: int64(g.r.w.Now())})
			}
		}
	}
	g.finals = true
}

// describe says where each member stands, for a liveness failure.
func (g *groupRun) describe() string {
	var parts []string
	for _, m := range g.members {
		parts = append(parts, fmt.Sprintf("%s up=%v paused=%v joined=%v left=%v rebalancing=%v rejoin=%v coordinator=%d generation=%d owns=%v",
			m.name, m.node.Up(), m.node.Paused(), m.joined, m.left, m.rebalancing, m.rejoin, m.coordinator, m.generation, m.owned))
	}
	return strings.Join(parts, "; ")
}

// noteOffsetsTopic notes __consumer_offsets in the metadata history as
// existing, once the nodes have converged: the coordinator made it (the
// first FindCoordinator), not a metadata client, and nothing but the
// final describes of the images names it.
func (r *clusterRun) noteOffsetsTopic() {
	if t := r.nodes[0].broker().MetadataImage().TopicByName(offsetsTopic); t != nil {
		r.mh.Existing(offsetsTopic, raftmeta.TopicID(t.ID), int32(len(t.Partitions)))
	}
}

const offsetsTopic = "__consumer_offsets"

// judge checks the group history into the run's failures.
func (g *groupRun) judge() {
	for _, v := range jepsen.CheckGroups(g.h.Events()) {
		g.r.fail("violation: %s", v)
	}
}

// The operator: resets and deletions of a group's offsets.

// adminClient is the operator's client node.
type adminClient struct {
	g        *groupRun
	node     *sim.Node
	rand     *rng.Rand
	e        env.Env
	inc      int
	sessions []*session
	busy     bool
}

// adminHold is how long an operator's reset keeps a group's members out.
const adminHold = 14 * time.Second

func newAdminClient(g *groupRun) *adminClient {
	a := &adminClient{g: g, rand: g.r.w.Rand("group-operator")}
	a.node = g.r.w.AddNode("g-operator", a.boot)
	return a
}

func (a *adminClient) boot(e env.Env) {
	a.e, a.inc, a.busy = e, a.node.Incarnation(), false
	a.sessions = make([]*session, len(a.g.r.nodes))
	for i, n := range a.g.r.nodes {
		a.sessions[i] = &session{e: e, addr: n.name + ":9092", clientID: "g-operator", dialTimeout: dialTimeout, probes: &a.g.r.probes}
	}
}

// resetGroup has the operator reset group's offsets (or delete the
// group): its members leave and stay out until it is done or the hold
// runs out.
func (g *groupRun) resetGroup(group string) {
	a := g.admin
	if a.busy || !a.node.Up() || g.holdUntil[group] > g.r.w.Now() {
		return
	}
	a.busy = true
	until := g.r.w.Now() + adminHold
	g.holdUntil[group] = until
	deletion := g.rand.Chance(0.3)
	offsets := make([]int64, g.r.partitions)
	for i := range offsets {
		offsets[i] = int64(g.rand.Intn(40))
	}
	inc := a.node.Incarnation()
	a.node.Post(func() {
		if a.node.Incarnation() == inc {
			a.e.Clock.AfterFunc(time.Second, func() { a.try(inc, group, deletion, offsets, until) })
		}
	})
}

// try finds group's coordinator and sends the reset, again while the
// group is not yet empty and the hold lasts.
func (a *adminClient) try(inc int, group string, deletion bool, offsets []int64, until time.Duration) {
	g := a.g
	if a.node.Incarnation() != inc {
		return
	}
	now := g.r.w.Now()
	if now > until-time.Second || g.holdUntil[group] != until || g.r.stopping {
		a.busy = false
		return
	}
	again := func() {
		a.e.Clock.AfterFunc(time.Duration(1000+a.rand.Intn(1000))*time.Millisecond, func() { a.try(inc, group, deletion, offsets, until) })
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKeys = 4, []string{group}
	a.sessions[a.rand.Intn(len(a.sessions))].do(fc, metadataTimeout, func(resp kmsg.Response, err error) {
		if a.node.Incarnation() != inc {
			return
		}
		var to int32 = -1
		if err == nil {
			if cs := resp.(*kmsg.FindCoordinatorResponse).Coordinators; len(cs) == 1 && cs[0].ErrorCode == 0 &&
				cs[0].NodeID >= 1 && int(cs[0].NodeID) <= len(a.sessions) {
				to = cs[0].NodeID
			}
		}
		if to < 0 {
			again()
			return
		}
		a.send(inc, to, group, deletion, offsets, until, again)
	})
}

func (a *adminClient) send(inc int, to int32, group string, deletion bool, offsets []int64, until time.Duration, again func()) {
	g := a.g
	reset := jepsen.GroupEvent{Kind: jepsen.GroupReset, Group: group, Member: "operator", Virtual: int64(g.r.w.Now())}
	var req kmsg.Request
	if deletion {
		dr := kmsg.NewPtrDeleteGroupsRequest()
		dr.Version, dr.Groups = 2, []string{group}
		req = dr
	} else {
		cr := kmsg.NewPtrOffsetCommitRequest()
		cr.Version = 9
		cr.Group, cr.Generation = group, -1
		t := kmsg.NewOffsetCommitRequestTopic()
		t.Topic = clusterTopic
		for p, o := range offsets {
			cp := kmsg.NewOffsetCommitRequestTopicPartition()
			cp.Partition, cp.Offset, cp.LeaderEpoch = int32(p), o, -1
			t.Partitions = append(t.Partitions, cp)
			reset.Offsets = append(reset.Offsets, jepsen.PartitionOffset{Partition: int32(p), Offset: o})
		}
		cr.Topics = append(cr.Topics, t)
		req = cr
	}
	reset.Partitions = allPartitions(len(offsets))
	op := g.h.Add(reset)
	end := func(kind jepsen.GroupEventKind) {
		g.h.Add(jepsen.GroupEvent{Kind: kind, Op: op, Virtual: int64(g.r.w.Now())})
	}
	a.sessions[to-1].do(req, 5*time.Second, func(resp kmsg.Response, err error) {
		if a.node.Incarnation() != inc {
			end(jepsen.GroupResetInfo)
			return
		}
		if err != nil {
			end(jepsen.GroupResetInfo)
			again()
			return
		}
		code := int16(0)
		switch r := resp.(type) {
		case *kmsg.DeleteGroupsResponse:
			code = -1
			for _, rg := range r.Groups {
				if rg.Group == group {
					code = rg.ErrorCode
				}
			}
		case *kmsg.OffsetCommitResponse:
			seen := 0
			for _, t := range r.Topics {
				for _, rp := range t.Partitions {
					if t.Topic == clusterTopic {
						seen++
						if rp.ErrorCode != 0 {
							code = rp.ErrorCode
						}
					}
				}
			}
			if seen != len(offsets) {
				code = -1
			}
		}
		g.r.logf("operator: %s of %s (deletion %v): error %d", reset.Kind, group, deletion, code)
		switch {
		case code == 0:
			end(jepsen.GroupResetOk)
			if deletion {
				g.r.probes.add("group.deleted")
			} else {
				g.r.probes.add("group.reset")
			}
			a.busy = false
			if g.holdUntil[group] == until {
				g.holdUntil[group] = g.r.w.Now()
			}
		case coordinatorError(code) || code == kerr.RequestTimedOut.Code || code < 0:
			end(jepsen.GroupResetInfo)
			again()
		default:
			end(jepsen.GroupResetFail)
			g.r.probes.add("group.reset_refused")
			again()
		}
	})
}
