package quorum

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/raft/v3/confchange"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/simfs"
)

// A simulated quorum: Nodes on the machines of one sim.World, joined by a
// test transport that delivers each message as a world event after a seeded
// latency, or drops it, and an oracle that sees everything every node
// applies.

// simOracle collects what the nodes did and the properties they broke.
type simOracle struct {
	// log is every entry applied anywhere, by index: the first node to
	// apply an index fixes what every other must apply there.
	log map[uint64]string
	// hashAfter is the state machine's running hash after applying the
	// entry at an index (by the first node to do so).
	hashAfter map[uint64]uint64
	// leaders is who said it leads each term.
	leaders map[uint64]uint64
	// acked are the values whose proposals succeeded.
	acked      map[string]bool
	violations []string
	probes     map[string]int
}

func newSimOracle() *simOracle {
	return &simOracle{log: map[uint64]string{}, hashAfter: map[uint64]uint64{}, leaders: map[uint64]uint64{},
		acked: map[string]bool{}, probes: map[string]int{}}
}

func (o *simOracle) violate(format string, args ...any) {
	if len(o.violations) < 20 {
		o.violations = append(o.violations, fmt.Sprintf(format, args...))
	}
}

func (o *simOracle) applied(id, index uint64, what string, hash uint64) {
	if prev, ok := o.log[index]; ok && prev != what {
		o.violate("node %d applied %q at index %d, where another node applied %q", id, what, index, prev)
		return
	}
	o.log[index] = what
	if h, ok := o.hashAfter[index]; ok && h != hash {
		o.violate("node %d's state after index %d has hash %x, another node's %x", id, index, hash, h)
	}
	o.hashAfter[index] = hash
}

// testSM is the replicated state: the values applied, a running hash of
// every applied entry, and the last index applied.
type testSM struct {
	c        *simCluster
	id       uint64
	last     uint64
	hash     uint64
	values   map[string]bool
	opened   bool // Open returned: a Restore now comes from the leader
	leader   uint64
	activate uint64
}

func newTestSM(c *simCluster, id uint64) *testSM {
	return &testSM{c: c, id: id, values: map[string]bool{}, hash: 14695981039346656037}
}

func (s *testSM) Apply(a Applied) error {
	if s.c.failOn != "" && string(a.Data) == s.c.failOn {
		return errors.New("the state machine cannot apply " + s.c.failOn)
	}
	if a.Index != s.last+1 {
		// Every index once, a leader's empty entries too.
		s.c.o.violate("node %d applied index %d after %d", s.id, a.Index, s.last)
	}
	what := "d:" + string(a.Data)
	empty := a.Data == nil && a.ConfChange == nil
	if empty {
		what = "empty"
	}
	if a.ConfChange != nil {
		what = "cc:" + confchange.Describe(a.ConfChange.GetChanges()...) + "|" + string(a.ConfChange.GetContext())
		if a.ConfState == nil {
			s.c.o.violate("node %d applied a membership change at %d without its configuration", s.id, a.Index)
		}
	}
	h := fnv.New64a()
	var buf [24]byte
	binary.BigEndian.PutUint64(buf[0:], s.hash)
	binary.BigEndian.PutUint64(buf[8:], a.Index)
	binary.BigEndian.PutUint64(buf[16:], a.Term)
	h.Write(buf[:])
	h.Write([]byte(what))
	s.hash, s.last = h.Sum64(), a.Index
	if a.ConfChange == nil && !empty {
		s.values[string(a.Data)] = true
	}
	s.c.o.applied(s.id, a.Index, what, s.hash)
	return nil
}

func (s *testSM) Snapshot() ([]byte, error) {
	out := binary.BigEndian.AppendUint64(nil, s.last)
	out = binary.BigEndian.AppendUint64(out, s.hash)
	return append(out, strings.Join(slices.Sorted(maps.Keys(s.values)), "\n")...), nil
}

func (s *testSM) Restore(index uint64, data []byte) error {
	if len(data) < 16 {
		return fmt.Errorf("snapshot of %d bytes", len(data))
	}
	last, hash := binary.BigEndian.Uint64(data[0:8]), binary.BigEndian.Uint64(data[8:16])
	if last != index {
		s.c.o.violate("node %d restored a snapshot at %d holding entries up to %d", s.id, index, last)
	}
	if h, ok := s.c.o.hashAfter[last]; ok && h != hash && last > 0 {
		s.c.o.violate("node %d restored a snapshot whose hash after %d is %x, not %x", s.id, last, hash, h)
	}
	s.last, s.hash, s.values = last, hash, map[string]bool{}
	if rest := string(data[16:]); rest != "" {
		for _, v := range strings.Split(rest, "\n") {
			s.values[v] = true
		}
	}
	if s.opened {
		s.c.o.probes["snapshot received"]++
	} else {
		s.c.o.probes["snapshot restored on open"]++
	}
	return nil
}

func (s *testSM) LeaderChanged(leader, term uint64) {
	s.leader = leader
	if leader != s.id {
		return
	}
	if prev, ok := s.c.o.leaders[term]; ok && prev != s.id {
		s.c.o.violate("nodes %d and %d both led term %d", prev, s.id, term)
	}
	s.c.o.leaders[term] = s.id
}

func (s *testSM) Activated(term uint64) {
	if s.c.o.leaders[term] != s.id {
		s.c.o.violate("node %d activated in term %d, led by %d", s.id, term, s.c.o.leaders[term])
	}
	s.activate = term
	s.c.o.probes["activated"]++
}

// simMember is one machine of the cluster.
type simMember struct {
	id   uint64
	sn   *sim.Node
	qn   *Node // the running incarnation's node, nil while down
	sm   *testSM
	down bool // crashed or killed, waiting for a restart
}

// simClusterConfig is what a seed chose.
type simClusterConfig struct {
	size, voters int
	node         Config
	latMin       time.Duration
	latMax       time.Duration
	syncMin      time.Duration
	syncMax      time.Duration
	sabotage     sabotage
	// diskFaults is the rate of injected EIO and ENOSPC while faults run.
	diskFaults float64
}

type simCluster struct {
	t       testing.TB
	w       *sim.World
	cfg     simClusterConfig
	members []*simMember
	o       *simOracle
	r       *rng.Rand // the test's own choices
	net     *rng.Rand // latencies and drops

	cut      map[[2]uint64]bool // from -> to blocked
	dropRate float64
	values   int    // proposals made
	failOn   string // a value every state machine refuses to apply
}

func newSimCluster(t testing.TB, seed uint64, cfg simClusterConfig) *simCluster {
	w := sim.New(seed)
	c := &simCluster{t: t, w: w, cfg: cfg, o: newSimOracle(), r: w.Rand("test"), net: w.Rand("transport"), cut: map[[2]uint64]bool{}}
	var voters []uint64
	for i := 1; i <= cfg.voters; i++ {
		voters = append(voters, uint64(i))
	}
	for i := 1; i <= cfg.size; i++ {
		m := &simMember{id: uint64(i)}
		c.members = append(c.members, m)
		m.sn = w.AddNode(fmt.Sprintf("n%d", i), func(e env.Env) { c.boot(m, e, voters) })
		if err := m.sn.Disk().SetSyncLatency(cfg.syncMin, cfg.syncMax); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func (c *simCluster) boot(m *simMember, e env.Env, voters []uint64) {
	m.sm = newTestSM(c, m.id)
	cfg := c.cfg.node
	cfg.ID, cfg.Dir, cfg.Voters, cfg.Logger = m.id, testDir, voters, e.Log
	var qn *Node
	if cfg.OnFailure == nil {
		cfg.OnFailure = func(err error) { c.supervise(m, qn, err) }
	}
	qn, err := Open(e, cfg, m.sm, &simTransport{c: c, from: m.id})
	if err != nil {
		c.supervise(m, nil, err)
		return
	}
	qn.sabotage = c.cfg.sabotage
	m.sm.opened = true
	if rec := qn.st.Recovered(); rec.TornFile != "" {
		c.o.probes["torn tail cut"]++
	}
	m.qn, m.down = qn, false
	qn.Start()
}

// isDiskError says err comes from a fault the disk injected.
func isDiskError(err error) bool { return errors.Is(err, env.ErrIO) || errors.Is(err, env.ErrNoSpace) }

// supervise restarts, as a supervisor would, a node that failed to open or
// stopped because its disk failed; any other failure is a violation.
func (c *simCluster) supervise(m *simMember, qn *Node, err error) {
	var ce *CorruptError
	if errors.As(err, &ce) || !isDiskError(err) {
		c.o.violate("node %d stopped: %v", m.id, err)
		return
	}
	c.o.probes["node stopped by a disk error"]++
	c.w.After(100*time.Millisecond, "supervisor", func() {
		if m.qn == qn && !m.down {
			m.sn.Kill()
			m.qn = nil
			m.sn.Restart()
		}
	})
}

func (c *simCluster) simMember(id uint64) *simMember {
	if id == 0 || id > uint64(len(c.members)) {
		return nil
	}
	return c.members[id-1]
}

// simTransport is one node's test Sender.
type simTransport struct {
	c    *simCluster
	from uint64
}

func (tr *simTransport) Send(msgs []*pb.Message) {
	c := tr.c
	sender := c.simMember(tr.from)
	senderNode := sender.qn
	for _, m := range msgs {
		to := m.GetTo()
		target := c.simMember(to)
		wire, err := proto.Marshal(m)
		if err != nil {
			c.o.violate("node %d: message does not marshal: %v", tr.from, err)
			continue
		}
		isSnap := m.GetType() == pb.MsgSnap
		if isSnap {
			c.o.probes["snapshot sent"]++
		}
		if target == nil || c.cut[[2]uint64{tr.from, to}] || c.net.Chance(c.dropRate) {
			if isSnap || c.net.Chance(0.3) {
				c.report(sender, senderNode, func(n *Node) {
					if isSnap {
						n.ReportSnapshot(to, true)
					} else {
						n.ReportUnreachable(to)
					}
				})
			}
			continue
		}
		latency := c.cfg.latMin + time.Duration(c.net.Uint64n(uint64(c.cfg.latMax-c.cfg.latMin)+1))
		c.w.After(latency, "raft.msg", func() {
			target.sn.Post(func() {
				if target.qn == nil {
					return
				}
				msg := &pb.Message{}
				if err := proto.Unmarshal(wire, msg); err != nil {
					c.o.violate("message to %d does not unmarshal: %v", to, err)
					return
				}
				target.qn.Step(msg)
			})
			if isSnap {
				c.report(sender, senderNode, func(n *Node) { n.ReportSnapshot(to, false) })
			}
		})
	}
}

// report runs f on the sender's loop if the incarnation that sent is still
// the one running.
func (c *simCluster) report(sender *simMember, n *Node, f func(*Node)) {
	sender.sn.Post(func() {
		if sender.qn == n {
			f(n)
		}
	})
}

// ---- workload and faults ----

// propose makes one proposal on a node that believes it leads (or, now and
// then, on one that does not, which must fail at once).
func (c *simCluster) propose() {
	up := c.upMembers()
	if len(up) == 0 {
		return
	}
	m := up[c.r.Intn(len(up))]
	if l := c.leader(); l != nil && c.r.Chance(0.9) {
		m = l
	}
	c.values++
	value := fmt.Sprintf("v%d", c.values)
	anyway := c.r.Chance(0.1)
	m.sn.Post(func() {
		qn := m.qn
		if qn == nil {
			return
		}
		lead, _ := qn.Leader()
		if lead != m.id && !anyway {
			return
		}
		isLeader := lead == m.id
		qn.Propose([]byte(value), func(err error) {
			switch {
			case err == nil:
				c.o.acked[value] = true
			case !isLeader && !errors.Is(err, ErrNotLeader) && !isDiskError(err):
				c.o.violate("a proposal on non-leader %d failed with %v, not ErrNotLeader", m.id, err)
			}
		})
	})
}

func (c *simCluster) upMembers() []*simMember {
	var out []*simMember
	for _, m := range c.members {
		if m.qn != nil && !m.down {
			out = append(out, m)
		}
	}
	return out
}

// workload proposes every interval until stop.
func (c *simCluster) workload(interval time.Duration, stop *bool) {
	var tick func()
	tick = func() {
		if *stop {
			return
		}
		c.propose()
		c.w.After(interval/2+time.Duration(c.r.Uint64n(uint64(interval))), "client", tick)
	}
	c.w.After(interval, "client", tick)
}

// faults injects a seeded mix of faults until stop: partitions (two-way
// and one-way), drops, crashes and kills with restarts from disk, pauses,
// clock jumps, and now and then a power loss of every node.
func (c *simCluster) faults(stop *bool) {
	weights := []float64{c.r.Float64(), c.r.Float64(), c.r.Float64(), c.r.Float64(), c.r.Float64(), c.r.Float64(), c.r.Float64() / 5}
	var next func()
	next = func() {
		if *stop {
			return
		}
		c.fault(pickWeighted(c.r, weights))
		c.w.After(100*time.Millisecond+time.Duration(c.r.Uint64n(uint64(700*time.Millisecond))), "fault", next)
	}
	c.w.After(time.Second, "fault", next)
}

func pickWeighted(r *rng.Rand, weights []float64) int {
	var total float64
	for _, w := range weights {
		total += w
	}
	x := r.Float64() * total
	for i, w := range weights {
		if x < w {
			return i
		}
		x -= w
	}
	return len(weights) - 1
}

func (c *simCluster) fault(kind int) {
	m := c.members[c.r.Intn(len(c.members))]
	heal := time.Duration(200+c.r.Intn(2500)) * time.Millisecond
	switch kind {
	case 0: // two-way partition of one node
		for _, o := range c.members {
			if o != m {
				c.cut[[2]uint64{m.id, o.id}], c.cut[[2]uint64{o.id, m.id}] = true, true
			}
		}
		c.o.probes["partition"]++
		c.w.After(heal, "heal", func() { c.healNode(m) })
	case 1: // one-way
		o := c.members[c.r.Intn(len(c.members))]
		if o != m {
			c.cut[[2]uint64{m.id, o.id}] = true
			c.o.probes["one-way partition"]++
			c.w.After(heal, "heal", func() { delete(c.cut, [2]uint64{m.id, o.id}) })
		}
	case 2: // lossy network for a while
		c.dropRate = c.r.Float64() * 0.3
		c.w.After(heal, "heal", func() { c.dropRate = 0 })
	case 3: // crash or kill, restart from disk later
		if m.down {
			return
		}
		if c.r.Chance(0.5) {
			m.sn.Crash()
			c.o.probes["crash"]++
		} else {
			m.sn.Kill()
			c.o.probes["kill"]++
		}
		m.qn, m.down = nil, true
		c.w.After(heal, "restart", func() { c.restart(m) })
	case 4: // pause
		if !m.sn.Paused() && !m.down {
			m.sn.Pause()
			c.o.probes["pause"]++
			c.w.After(heal, "resume", m.sn.Resume)
		}
	case 5: // clock jump
		m.sn.Clock().Jump(time.Duration(c.r.Intn(7200)-3600) * time.Second)
	case 6: // power loss of every node
		c.w.PowerLoss()
		c.o.probes["power loss"]++
		for _, o := range c.members {
			o.qn, o.down = nil, true
			c.w.After(time.Duration(c.r.Intn(1000))*time.Millisecond, "restart", func() { c.restart(o) })
		}
	}
}

func (c *simCluster) restart(m *simMember) {
	if m.down {
		m.sn.Restart()
	}
}

func (c *simCluster) healNode(m *simMember) {
	for _, o := range c.members {
		delete(c.cut, [2]uint64{m.id, o.id})
		delete(c.cut, [2]uint64{o.id, m.id})
	}
}

// setDiskFaults sets every disk's rate of injected errors.
func (c *simCluster) setDiskFaults(rate float64) {
	for _, m := range c.members {
		if err := m.sn.Disk().SetFaults(simfs.Faults{EIORate: rate, NoSpaceRate: rate}); err != nil {
			c.t.Fatal(err)
		}
	}
}

// healAll ends every fault: the liveness phase begins.
func (c *simCluster) healAll() {
	clear(c.cut)
	c.dropRate = 0
	c.setDiskFaults(0)
	for _, m := range c.members {
		if m.sn.Paused() {
			m.sn.Resume()
		}
		c.restart(m)
	}
}

// leader returns the up member leading the highest term, or nil.
func (c *simCluster) leader() *simMember {
	var best *simMember
	var bestTerm uint64
	for _, m := range c.upMembers() {
		if id, term := m.qn.Leader(); id == m.id && term > bestTerm {
			best, bestTerm = m, term
		}
	}
	return best
}

// config returns the ids in the configuration the leader applied.
func (c *simCluster) config() (voters, learners []uint64) {
	l := c.leader()
	if l == nil {
		return nil, nil
	}
	cs := l.qn.Status().Config
	return slices.Concat(cs.GetVoters(), cs.GetVotersOutgoing()), cs.GetLearners()
}

// converged says every member of the configuration is up, holds every
// acknowledged value, and has applied as far as the leader.
func (c *simCluster) converged() bool {
	l := c.leader()
	if l == nil {
		return false
	}
	voters, learners := c.config()
	for _, id := range slices.Concat(voters, learners) {
		m := c.simMember(id)
		if m.qn == nil || m.qn.applied != l.qn.applied || m.qn.Status().Commit != l.qn.Status().Commit {
			return false
		}
		for v := range c.o.acked {
			if !m.sm.values[v] {
				return false
			}
		}
	}
	return true
}

// missing lists, for a failure report, what each member lacks.
func (c *simCluster) missing() string {
	var out []string
	voters, learners := c.config()
	for _, m := range c.members {
		var lack []string
		for _, v := range slices.Sorted(maps.Keys(c.o.acked)) {
			if m.sm != nil && !m.sm.values[v] {
				lack = append(lack, v)
			}
		}
		st := "down"
		if m.qn != nil {
			s := m.qn.Status()
			st = fmt.Sprintf("%s term %d lead %d commit %d applied %d first %d last %d err %v", s.Role, s.Term, s.Leader, s.Commit, s.Applied, s.FirstIndex, s.LastIndex, m.qn.Err())
		}
		out = append(out, fmt.Sprintf("node %d (%s): lacks %d acked values %v", m.id, st, len(lack), lack[:min(len(lack), 5)]))
	}
	return fmt.Sprintf("voters %v learners %v\n%s", voters, learners, strings.Join(out, "\n"))
}

// ---- membership ----

// membershipStep proposes the next change of a fixed plan on the leader:
// add node size-1 as a learner, promote it, remove voter 1, then add the
// last node as a learner and promote it together with removing voter 2 in
// one joint change. Each step is derived from the configuration the leader
// applied, so a change whose outcome was unknown is never made twice.
func (c *simCluster) membershipStep() {
	l := c.leader()
	if l == nil || c.cfg.size <= c.cfg.voters {
		return
	}
	cs := l.qn.Status().Config
	isVoter := func(id uint64) bool { return slices.Contains(cs.GetVoters(), id) }
	isLearner := func(id uint64) bool { return slices.Contains(cs.GetLearners(), id) }
	a, b := uint64(c.cfg.voters+1), uint64(c.cfg.size)
	var cc *pb.ConfChangeV2
	switch {
	case len(cs.GetVotersOutgoing()) > 0:
		return // raft leaves the joint configuration by itself
	case !isVoter(a) && !isLearner(a):
		cc = confChangeOf(pb.ConfChangeAddLearnerNode, a)
	case isLearner(a):
		cc = confChangeOf(pb.ConfChangeAddNode, a)
	case isVoter(1):
		cc = confChangeOf(pb.ConfChangeRemoveNode, 1)
	case b != a && !isVoter(b) && !isLearner(b):
		cc = confChangeOf(pb.ConfChangeAddLearnerNode, b)
	case b != a && isLearner(b) && isVoter(2):
		cc = confChangeOf(pb.ConfChangeAddNode, b)
		cc.Changes = append(cc.Changes, confChangeOf(pb.ConfChangeRemoveNode, 2).Changes...)
		cc.Transition = pb.ConfChangeTransitionJointImplicit.Enum()
	default:
		return
	}
	desc := confchange.Describe(cc.GetChanges()...)
	qn := l.qn
	l.sn.Post(func() {
		if l.qn != qn {
			return
		}
		qn.ChangeMembership(cc, func(err error) {
			if err == nil {
				c.o.probes["membership change: "+desc]++
			}
		})
	})
}

func confChangeOf(typ pb.ConfChangeType, id uint64) *pb.ConfChangeV2 {
	return &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: typ.Enum(), NodeId: new(id)}}}
}

func (c *simCluster) membership(interval time.Duration, stop *bool) {
	var tick func()
	tick = func() {
		if *stop {
			return
		}
		c.membershipStep()
		c.w.After(interval, "membership", tick)
	}
	c.w.After(interval, "membership", tick)
}
