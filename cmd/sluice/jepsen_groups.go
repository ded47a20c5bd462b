package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/jepsen"
)

// The group workload of sluice jepsen (--groups): real franz-go group
// consumers of the run's topic, recorded into a jepsen.GroupHistory and
// judged by jepsen.CheckGroups, as the simulator's group members are
// (jepsen/simrun/cluster_groups.go). Each member polls with
// kgo.BlockRebalanceOnPoll, so no assignment changes between a poll and
// the commit that follows it; it records the offsets it processed, then
// commits them (CommitOffsetsSync, autocommit off), then lets kgo
// rebalance. kgo's callbacks give what it owns: OnPartitionsAssigned
// (called once per classic generation, even when nothing is new) records
// the member's whole assignment with the generation or member epoch
// kgo.Client.GroupMetadata holds; OnPartitionsRevoked and
// OnPartitionsLost record what it gave up. The members are restarted now
// and then during the faults (a leave, then a new member under a new
// name), an observer fetches each group's committed offsets (kadm, an
// OffsetFetch) every second or two, and after the heal the members must
// become stable (each partition owned once, one generation per classic
// group, for a few seconds) before their assignments are recorded as the
// history's finals and the committed offsets fetched once more.
//
// What kgo does not expose, and how it is handled:
//   - KIP-848 heartbeats: kgo answers them inside its group loop and says
//     nothing of their sends or answers, so no GroupHeartbeat (the
//     checker's session lease) is recorded. A KIP-848 member owns a
//     partition from OnPartitionsAssigned to the callback giving it up,
//     uncut by a lease. That is sound only while no member goes a session
//     without reaching its coordinator while another member does: the
//     nodes keep the 45 s default group.consumer.session.timeout.ms, and
//     a fault lasts at most 4 s and strikes every client alike (they all
//     live at one end of the network).
//   - A classic generation's leader: not exposed, so GroupAssigned's
//     Leader is empty. The checker needs it only to tell a deleted and
//     re-made group's generations apart, and no group is deleted here.
//   - Commit attempts: kgo retries a commit inside CommitOffsetsSync, so
//     an error code after its retries says nothing definite (an earlier
//     attempt may have landed); as the runner does for produces, every
//     error is classified by jepsen.Classify, unknown but for a commit kgo
//     never sent (the PreCommitFnContext hook did not run: NotSent).

// groupSpec is one group of --groups.
type groupSpec struct {
	protocol jepsen.GroupProtocol
	members  int
	// balancer is the classic members' kgo balancer (cooperative-sticky,
	// or the eager range, sticky or roundrobin); "" for KIP-848, and for
	// classic until the seed chooses one.
	balancer string
}

// groupBalancers are the classic balancers a group may name, the first
// cooperative.
var groupBalancers = []string{"cooperative-sticky", "range", "sticky", "roundrobin"}

func (g groupSpec) String() string {
	s := fmt.Sprintf("%s:%d", g.protocol, g.members)
	if g.balancer != "" {
		s += "+" + g.balancer
	}
	return s
}

// parseGroups reads --groups: "none", or groups separated by commas,
// each protocol:members (classic or consumer, 1 to 8 members), a classic
// one optionally +balancer.
func parseGroups(s string) ([]groupSpec, error) {
	if s == "" || s == "none" {
		return nil, nil
	}
	var out []groupSpec
	for _, item := range strings.Split(s, ",") {
		spec, balancer, _ := strings.Cut(item, "+")
		proto, n, ok := strings.Cut(spec, ":")
		members, err := strconv.Atoi(n)
		if !ok || err != nil || members < 1 || members > 8 {
			return nil, fmt.Errorf("--groups %q: want protocol:members with 1 to 8 members, as classic:3,consumer:2", item)
		}
		g := groupSpec{protocol: jepsen.GroupProtocol(proto), members: members, balancer: balancer}
		switch {
		case g.protocol != jepsen.GroupClassic && g.protocol != jepsen.GroupConsumer:
			return nil, fmt.Errorf("--groups %q: protocol %q is not classic or consumer (KIP-848)", item, proto)
		case balancer != "" && g.protocol != jepsen.GroupClassic:
			return nil, fmt.Errorf("--groups %q: only a classic group names a balancer (KIP-848's is the coordinator's)", item)
		case balancer != "" && !slices.Contains(groupBalancers, balancer):
			return nil, fmt.Errorf("--groups %q: balancer %q is not one of %s", item, balancer, strings.Join(groupBalancers, ", "))
		}
		out = append(out, g)
	}
	if len(out) > 4 {
		return nil, fmt.Errorf("--groups %q: at most 4 groups", s)
	}
	return out, nil
}

// chooseBalancers gives each classic group that names none a balancer
// drawn from the seed, from a stream of its own (the nemesis's draws stay
// the seed's): cooperative-sticky in two seeds of three, else one of the
// eager ones.
func chooseBalancers(seed uint64, gs []groupSpec) []groupSpec {
	pick := rand.New(rand.NewPCG(seed, 0x67726f757073))
	out := slices.Clone(gs)
	for i := range out {
		if out[i].protocol != jepsen.GroupClassic || out[i].balancer != "" {
			continue
		}
		if x := pick.IntN(9); x < 6 {
			out[i].balancer = groupBalancers[0]
		} else {
			out[i].balancer = groupBalancers[x-5]
		}
	}
	return out
}

func groupsString(gs []groupSpec) string {
	if len(gs) == 0 {
		return "none"
	}
	var parts []string
	for _, g := range gs {
		parts = append(parts, g.String())
	}
	return strings.Join(parts, ",")
}

func balancerOf(name string) kgo.GroupBalancer {
	switch name {
	case "range":
		return kgo.RangeBalancer()
	case "sticky":
		return kgo.StickyBalancer()
	case "roundrobin":
		return kgo.RoundRobinBalancer()
	}
	return kgo.CooperativeStickyBalancer()
}

const (
	// groupSession is the classic members' session timeout (the nodes'
	// group.min.session.timeout.ms is 6 s); KIP-848's is the nodes'.
	groupSession = 10 * time.Second
	// groupCommitTimeout bounds one commit, retries included.
	groupCommitTimeout = 10 * time.Second
	// groupSettleLimit is how long the members may take to be stable
	// after the heal: a member whose leave was lost holds its partitions
	// until its session (45 s for KIP-848) runs out.
	groupSettleLimit = 90 * time.Second
	// groupStableFor is how long they must stay stable.
	groupStableFor = 3 * time.Second
)

// realGroups is the group workload of a run in progress.
type realGroups struct {
	r     *realRun
	topic string
	specs []groupSpec
	skip  bool // --sabotage-group-skip
	rand  *rand.Rand
	// bg is the observers and the nemesis, loops the members' poll
	// loops.
	bg, loops sync.WaitGroup
	mu        sync.Mutex // guards everything below
	h         *jepsen.GroupHistory
	slots     [][]*jepsenMember // by group, the current member of each slot
	points    map[string][]jepsen.Point
	// failures are the run's group failures that are no violation of the
	// history (a liveness failure, a KIP-848 group kgo ran as classic).
	failures []string
	stats    map[string]*groupStats
}

type groupStats struct {
	restarts, assignments, fetches, processed int
	commits                                   map[jepsen.GroupEventKind]int
}

// jepsenMember is one incarnation of a group member.
type jepsenMember struct {
	g     *realGroups
	gi    int // the group's index
	group string
	name  string
	// incarnation counts the slot's members, from 1.
	incarnation int
	cl          *kgo.Client
	stop        context.CancelFunc
	done        chan struct{}
	// owned is what kgo's callbacks say it owns.
	owned map[int32]bool
}

func groupName(gi int) string { return fmt.Sprintf("jepsen-g%d", gi+1) }

func newRealGroups(r *realRun, topic string, specs []groupSpec, skip bool) *realGroups {
	g := &realGroups{r: r, topic: topic, specs: specs, skip: skip, h: jepsen.NewGroupHistory(),
		rand: rand.New(rand.NewPCG(r.o.seed, 0x67726f75702d6e)), points: map[string][]jepsen.Point{}, stats: map[string]*groupStats{}}
	for gi := range specs {
		g.slots = append(g.slots, make([]*jepsenMember, specs[gi].members))
		g.stats[groupName(gi)] = &groupStats{commits: map[jepsen.GroupEventKind]int{}}
	}
	return g
}

// add records e at the run's time, under the lock.
func (g *realGroups) add(e jepsen.GroupEvent) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.addLocked(e)
}

func (g *realGroups) addLocked(e jepsen.GroupEvent) int64 {
	e.Virtual = int64(g.r.since())
	return g.h.Add(e)
}

// start starts every member, then, until ctx ends, restarts one now and
// then and fetches the committed offsets.
func (g *realGroups) start(ctx context.Context) {
	for gi, spec := range g.specs {
		for slot := range spec.members {
			if err := g.startMember(gi, slot, 1); err != nil {
				fmt.Fprintf(g.r.stderr, "groups: %v\n", err)
			}
		}
		g.bg.Add(1)
		go func() {
			defer g.bg.Done()
			g.observe(ctx, gi)
		}()
	}
	if len(g.specs) > 0 {
		g.bg.Add(1)
		go func() {
			defer g.bg.Done()
			g.nemesis(ctx)
		}()
	}
}

func (g *realGroups) startMember(gi, slot, incarnation int) error {
	spec := g.specs[gi]
	m := &jepsenMember{g: g, gi: gi, group: groupName(gi), name: fmt.Sprintf("g%d-%d#%d", gi+1, slot+1, incarnation), incarnation: incarnation,
		done: make(chan struct{}), owned: map[int32]bool{}}
	opts := []kgo.Opt{kgo.ConsumerGroup(m.group), kgo.ConsumeTopics(g.topic), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond), kgo.ClientID(m.name),
		kgo.OnPartitionsAssigned(m.assigned), kgo.OnPartitionsRevoked(m.released("revoked")), kgo.OnPartitionsLost(m.released("lost"))}
	if spec.protocol == jepsen.GroupConsumer {
		opts = append(opts, kgo.ServerSideBalancer())
	} else {
		opts = append(opts, kgo.Balancers(balancerOf(spec.balancer)), kgo.SessionTimeout(groupSession),
			kgo.HeartbeatInterval(time.Second), kgo.RebalanceTimeout(3*groupCommitTimeout))
	}
	cl, err := g.r.client(opts...)
	if err != nil {
		return fmt.Errorf("start %s: %w", m.name, err)
	}
	ctx, stop := context.WithCancel(context.Background())
	m.cl, m.stop = cl, stop
	g.mu.Lock()
	g.slots[gi][slot] = m
	g.mu.Unlock()
	g.loops.Add(1)
	go func() {
		defer g.loops.Done()
		defer close(m.done)
		m.run(ctx)
	}()
	return nil
}

// close ends the member's poll loop, then leaves the group (waiting at
// most a commit's time: a leave lost to a fault leaves the member's
// partitions to its session's end) and closes the client.
func (m *jepsenMember) close() {
	m.stop()
	<-m.done
	ctx, cancel := context.WithTimeout(context.Background(), groupCommitTimeout)
	defer cancel()
	m.cl.LeaveGroupContext(ctx)
	m.cl.Close()
}

// assigned is OnPartitionsAssigned: the member owns its new partitions
// too; recorded as its whole assignment at its generation (classic) or
// member epoch (KIP-848).
func (m *jepsenMember) assigned(_ context.Context, cl *kgo.Client, ps map[string][]int32) {
	_, gen := cl.GroupMetadata()
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	for _, p := range ps[m.g.topic] {
		m.owned[p] = true
	}
	owned := slices.Sorted(maps.Keys(m.owned))
	m.g.addLocked(jepsen.GroupEvent{Kind: jepsen.GroupAssigned, Group: m.group, Protocol: m.g.specs[m.gi].protocol, Member: m.name,
		Generation: gen, Partitions: owned})
	m.g.stats[m.group].assignments++
	m.g.points[m.group] = append(m.g.points[m.group], jepsen.Point{At: m.g.r.since(), Class: "generation",
		Label: fmt.Sprintf("%s generation %d: %s owns %v", m.g.specs[m.gi].protocol, gen, m.name, owned)})
}

// released is OnPartitionsRevoked or OnPartitionsLost: the member no
// longer owns ps (kgo calls them only once the poll before has been
// committed and allowed the rebalance).
func (m *jepsenMember) released(how string) func(context.Context, *kgo.Client, map[string][]int32) {
	return func(_ context.Context, cl *kgo.Client, ps map[string][]int32) {
		_, gen := cl.GroupMetadata()
		m.g.mu.Lock()
		defer m.g.mu.Unlock()
		gone := slices.Sorted(slices.Values(ps[m.g.topic]))
		for _, p := range gone {
			delete(m.owned, p)
		}
		if len(gone) > 0 {
			m.g.addLocked(jepsen.GroupEvent{Kind: jepsen.GroupReleased, Group: m.group, Protocol: m.g.specs[m.gi].protocol, Member: m.name,
				Generation: gen, Partitions: gone})
			m.g.points[m.group] = append(m.g.points[m.group], jepsen.Point{At: m.g.r.since(), Class: "fault",
				Label: fmt.Sprintf("%s %s %v", m.name, how, gone)})
		}
	}
}

// run polls, processes and commits until ctx ends.
func (m *jepsenMember) run(ctx context.Context) {
	for {
		fs := m.cl.PollRecords(ctx, 500)
		if ctx.Err() != nil || fs.IsClientClosed() {
			m.cl.AllowRebalance()
			return
		}
		if offsets := m.process(fs); len(offsets) > 0 {
			m.commit(ctx, offsets)
		}
		m.cl.AllowRebalance()
	}
}

// process records the records polled as processed, one range per run of
// consecutive offsets, and returns the offsets to commit after them.
func (m *jepsenMember) process(fs kgo.Fetches) map[int32]kgo.EpochOffset {
	var ranges []jepsen.PartitionRange
	offsets := map[int32]kgo.EpochOffset{}
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if p.Topic != m.g.topic || len(p.Records) == 0 {
			return
		}
		var run []jepsen.PartitionRange
		for _, rec := range p.Records {
			if n := len(run); n > 0 && run[n-1].To == rec.Offset {
				run[n-1].To++
			} else {
				run = append(run, jepsen.PartitionRange{Partition: p.Partition, From: rec.Offset, To: rec.Offset + 1})
			}
		}
		if m.g.skip {
			// Sabotage: the first record polled is left unprocessed, and
			// the commit after it still covers it.
			if run[0].From++; run[0].From == run[0].To {
				run = run[1:]
			}
		}
		ranges = append(ranges, run...)
		last := p.Records[len(p.Records)-1]
		offsets[p.Partition] = kgo.EpochOffset{Epoch: last.LeaderEpoch, Offset: last.Offset + 1}
	})
	if len(ranges) > 0 {
		m.g.mu.Lock()
		m.g.addLocked(jepsen.GroupEvent{Kind: jepsen.GroupProcessed, Group: m.group, Protocol: m.g.specs[m.gi].protocol, Member: m.name,
			Ranges: ranges})
		m.g.stats[m.group].processed++
		m.g.mu.Unlock()
	}
	return offsets
}

// commit commits offsets, one commit per partition in the history (the
// coordinator answers each partition of the request on its own).
func (m *jepsenMember) commit(ctx context.Context, offsets map[int32]kgo.EpochOffset) {
	_, gen := m.cl.GroupMetadata()
	ops := map[int32]int64{}
	m.g.mu.Lock()
	for _, p := range slices.Sorted(maps.Keys(offsets)) {
		ops[p] = m.g.addLocked(jepsen.GroupEvent{Kind: jepsen.GroupCommitInvoke, Group: m.group, Protocol: m.g.specs[m.gi].protocol,
			Member: m.name, Generation: gen, Offsets: []jepsen.PartitionOffset{{Partition: p, Offset: offsets[p].Offset}}})
	}
	m.g.mu.Unlock()
	sent := false
	commitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), groupCommitTimeout)
	defer cancel()
	commitCtx = kgo.PreCommitFnContext(commitCtx, func(*kmsg.OffsetCommitRequest) error { sent = true; return nil })
	m.cl.CommitOffsetsSync(commitCtx, map[string]map[int32]kgo.EpochOffset{m.g.topic: offsets},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if !sent {
				err = jepsen.NotSent(errors.Join(err, errors.New("kgo did not send the commit")))
			}
			codes := map[int32]int16{}
			if err == nil {
				for _, t := range resp.Topics {
					for _, p := range t.Partitions {
						if t.Topic == m.g.topic {
							codes[p.Partition] = p.ErrorCode
						}
					}
				}
			}
			m.g.mu.Lock()
			defer m.g.mu.Unlock()
			for _, p := range slices.Sorted(maps.Keys(ops)) {
				pErr := err
				if code, ok := codes[p]; pErr == nil && !ok {
					pErr = fmt.Errorf("the answer names no partition %d", p)
				} else if pErr == nil {
					pErr = kerr.ErrorForCode(code)
				}
				kind := map[jepsen.Outcome]jepsen.GroupEventKind{jepsen.Succeeded: jepsen.GroupCommitOk, jepsen.Failed: jepsen.GroupCommitFail,
					jepsen.Unknown: jepsen.GroupCommitInfo}[jepsen.Classify(pErr)]
				m.g.addLocked(jepsen.GroupEvent{Kind: kind, Op: ops[p]})
				m.g.stats[m.group].commits[kind]++
			}
		})
}

// observe fetches group gi's committed offsets every second or two until
// ctx ends.
func (g *realGroups) observe(ctx context.Context, gi int) {
	cl, err := g.r.client()
	if err != nil {
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	pick := rand.New(rand.NewPCG(g.r.o.seed, uint64(0x6f6273+gi)))
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(1000+pick.IntN(1000)) * time.Millisecond):
		}
		g.fetchOffsets(ctx, adm, gi, fmt.Sprintf("g%d-observer", gi+1))
	}
}

// fetchOffsets fetches group gi's committed offsets of every partition
// (-1 where none is), recorded as who's; it says whether it was answered.
func (g *realGroups) fetchOffsets(ctx context.Context, adm *kadm.Client, gi int, who string) bool {
	group := groupName(gi)
	all := make([]int32, g.r.o.partitions)
	for p := range all {
		all[p] = int32(p)
	}
	op := g.add(jepsen.GroupEvent{Kind: jepsen.GroupFetchInvoke, Group: group, Protocol: g.specs[gi].protocol, Member: who, Partitions: all})
	fetchCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	resps, err := adm.FetchOffsets(fetchCtx, group)
	if err != nil {
		return false // the invocation stays open: an answer never came
	}
	var got []jepsen.PartitionOffset
	for _, p := range all {
		o, ok := resps.Lookup(g.topic, p)
		switch {
		case !ok:
			got = append(got, jepsen.PartitionOffset{Partition: p, Offset: -1})
		case o.Err == nil:
			got = append(got, jepsen.PartitionOffset{Partition: p, Offset: o.At})
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.addLocked(jepsen.GroupEvent{Kind: jepsen.GroupFetchOk, Op: op, Offsets: got})
	g.stats[group].fetches++
	return true
}

// nemesis restarts a member now and then until ctx ends, from a stream
// of its own: it leaves, and a new member (the slot's next incarnation)
// joins 0.2-2 s later.
func (g *realGroups) nemesis(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration((1 + g.rand.ExpFloat64()) * float64(4*time.Second))):
		}
		gi := g.rand.IntN(len(g.specs))
		slot := g.rand.IntN(g.specs[gi].members)
		pause := time.Duration(200+g.rand.IntN(1800)) * time.Millisecond
		g.mu.Lock()
		m := g.slots[gi][slot]
		g.stats[groupName(gi)].restarts++
		g.mu.Unlock()
		incarnation := 1
		if m != nil {
			g.mu.Lock()
			g.points[m.group] = append(g.points[m.group], jepsen.Point{At: g.r.since(), Class: "fault", Label: "restart " + m.name})
			g.mu.Unlock()
			m.close()
			incarnation = m.incarnation + 1
		}
		time.Sleep(pause)
		if err := g.startMember(gi, slot, incarnation); err != nil {
			fmt.Fprintf(g.r.stderr, "groups: %v\n", err)
		}
	}
}

// stable says whether group gi's members together own every partition
// once, and (classic) are of one generation; and what they own.
func (g *realGroups) stable(gi int) (bool, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	owners := make([]int, g.r.o.partitions)
	gens := map[int32]bool{}
	var parts []string
	for _, m := range g.slots[gi] {
		if m == nil {
			return false, "a member could not be started"
		}
		_, gen := m.cl.GroupMetadata()
		gens[gen] = true
		owned := slices.Sorted(maps.Keys(m.owned))
		for _, p := range owned {
			owners[p]++
		}
		parts = append(parts, fmt.Sprintf("%s generation %d owns %v", m.name, gen, owned))
	}
	ok := !slices.ContainsFunc(owners, func(n int) bool { return n != 1 })
	if g.specs[gi].protocol == jepsen.GroupClassic {
		ok = ok && len(gens) == 1
	}
	return ok, strings.Join(parts, "; ")
}

// settle waits, after the heal, for every group to be stable for a few
// seconds; records what each member owns as the history's finals; fetches
// the committed offsets once more; checks that a KIP-848 group is one;
// and stops the members.
func (g *realGroups) settle(ctx context.Context) {
	defer g.stopAll()
	if len(g.specs) == 0 {
		return
	}
	deadline := time.Now().Add(groupSettleLimit)
	var since time.Time
	for {
		ok, where := true, ""
		for gi := range g.specs {
			if s, w := g.stable(gi); !s {
				ok, where = false, fmt.Sprintf("%s: %s", groupName(gi), w)
				break
			}
		}
		switch {
		case ok && since.IsZero():
			since = time.Now()
		case !ok:
			since = time.Time{}
		}
		if ok && time.Since(since) >= groupStableFor {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			g.fail("liveness: groups: the members were not stable %s after healing: %s", groupSettleLimit, where)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	g.mu.Lock()
	for gi, members := range g.slots {
		g.addLocked(jepsen.GroupEvent{Kind: jepsen.GroupFinal, Group: groupName(gi), Protocol: g.specs[gi].protocol, Total: int32(g.r.o.partitions)})
		for _, m := range members { // none is nil: they were stable
			g.addLocked(jepsen.GroupEvent{Kind: jepsen.GroupFinal, Group: m.group, Protocol: g.specs[gi].protocol, Member: m.name,
				Partitions: slices.Sorted(maps.Keys(m.owned))})
		}
	}
	g.mu.Unlock()
	cl, err := g.r.client()
	if err != nil {
		g.fail("liveness: groups: %v", err)
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for gi := range g.specs {
		for !g.fetchOffsets(ctx, adm, gi, "final") {
			if time.Now().After(deadline) || ctx.Err() != nil {
				g.fail("liveness: groups: %s's committed offsets could not be fetched after healing", groupName(gi))
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if g.specs[gi].protocol == jepsen.GroupConsumer {
			g.checkConsumerGroup(ctx, adm, gi)
		}
	}
}

// checkConsumerGroup fails the run if group gi, meant to be KIP-848, is
// not one: kgo falls back to the classic protocol on its own where it
// thinks the broker lacks ConsumerGroupHeartbeat v1.
func (g *realGroups) checkConsumerGroup(ctx context.Context, adm *kadm.Client, gi int) {
	group := groupName(gi)
	described, err := adm.DescribeConsumerGroups(ctx, group)
	if err == nil {
		err = described.Error()
	}
	if err != nil || len(described[group].Members) != g.specs[gi].members {
		g.fail("groups: %s was to be a KIP-848 group of %d members, and DescribeConsumerGroups says %v (%d members): did kgo speak the classic protocol?",
			group, g.specs[gi].members, err, len(described[group].Members))
	}
}

func (g *realGroups) fail(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.failures = append(g.failures, fmt.Sprintf(format, args...))
}

// stopAll stops every member still running.
func (g *realGroups) stopAll() {
	g.mu.Lock()
	var members []*jepsenMember
	for _, slots := range g.slots {
		for _, m := range slots {
			if m != nil {
				members = append(members, m)
			}
		}
	}
	g.slots = make([][]*jepsenMember, len(g.slots))
	g.mu.Unlock()
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.close()
		}()
	}
	wg.Wait()
	g.loops.Wait()
}

// wait waits for the observers and the nemesis, once the safety phase
// is over.
func (g *realGroups) wait() { g.bg.Wait() }

// check judges the group history: jepsen.CheckGroups's violations, then
// the workload's own failures.
func (g *realGroups) check() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append(jepsen.CheckGroups(g.h.Events()), g.failures...)
}

// events is the group history so far.
func (g *realGroups) events() []jepsen.GroupEvent {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.h.Events())
}

// summary says what each group did, one line for stderr and the notes.
func (g *realGroups) summary() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var parts []string
	for gi, spec := range g.specs {
		s := g.stats[groupName(gi)]
		parts = append(parts, fmt.Sprintf("%s %s: %d restarts, %d assignments, %d polls processed, commits %d ok %d failed %d unknown, %d offset fetches",
			groupName(gi), spec, s.restarts, s.assignments, s.processed, s.commits[jepsen.GroupCommitOk], s.commits[jepsen.GroupCommitFail],
			s.commits[jepsen.GroupCommitInfo], s.fetches))
	}
	return "groups: " + strings.Join(parts, "; ")
}

// addTimeline adds a lane per group: the assignments, releases and
// restarts.
func (g *realGroups) addTimeline(t *jepsen.Timeline) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for gi := range g.specs {
		lane := t.Lane("groups", groupName(gi))
		lane.Points = append(lane.Points, g.points[groupName(gi)]...)
	}
}
