package quorum

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/sluicemq/sluice/sim/rng"
)

// seededSimConfig is what a seed chooses for a cluster: its size (3 or 5
// machines; of 5, either all voters or 3 voters and 2 to be added), the
// snapshot and segment sizes (small, so that snapshots, compaction and
// catching up by snapshot happen in seconds), latencies and sync times.
func seededSimConfig(seed uint64) simClusterConfig {
	r := rng.New(seed).Fork("quorum-config")
	cfg := simClusterConfig{size: 3, voters: 3}
	switch r.Intn(3) {
	case 1:
		cfg.size, cfg.voters = 5, 5
	case 2:
		cfg.size = 5
	}
	cfg.node = Config{
		SnapshotEntries:  uint64(20 + r.Intn(200)),
		CompactionMargin: uint64(1 + r.Intn(40)),
		SegmentBytes:     int64(512 + r.Intn(8192)),
	}
	cfg.latMin = time.Duration(100+r.Intn(1000)) * time.Microsecond
	cfg.latMax = cfg.latMin + time.Duration(r.Intn(20000))*time.Microsecond
	cfg.syncMin = time.Duration(50+r.Intn(500)) * time.Microsecond
	cfg.syncMax = cfg.syncMin + time.Duration(r.Intn(8000))*time.Microsecond
	if r.Chance(0.3) {
		cfg.diskFaults = 0.0005 + r.Float64()*0.003
	}
	return cfg
}

type simRunOptions struct {
	safety time.Duration // how long faults run
	faults bool
}

// runSimCluster runs a cluster through its safety phase (proposals, faults,
// membership changes) and its liveness phase (every fault healed: the
// cluster must converge, every acknowledged value applied on every member,
// and take one more proposal).
func runSimCluster(t testing.TB, seed uint64, cfg simClusterConfig, opt simRunOptions) *simCluster {
	c := newSimCluster(t, seed, cfg)
	stopWork, stopFaults := false, false
	c.workload(15*time.Millisecond, &stopWork)
	if opt.faults {
		c.faults(&stopFaults)
		c.setDiskFaults(cfg.diskFaults)
	}
	c.membership(400*time.Millisecond, &stopWork)
	c.w.Run(opt.safety)
	stopFaults = true
	c.healAll()
	c.w.Run(3 * time.Second)
	stopWork = true
	if !c.w.RunUntil(c.converged, time.Minute) {
		c.o.violate("the cluster did not converge within a minute of healing:\n%s", c.missing())
		return c
	}
	if !c.finalProposal() {
		c.o.violate("a proposal after healing was not applied everywhere:\n%s", c.missing())
	}
	return c
}

// finalProposal proposes on the leader and waits until every member
// applied it.
func (c *simCluster) finalProposal() bool {
	acked := false
	for attempt := 0; attempt < 5 && !acked; attempt++ {
		l := c.leader()
		if l == nil {
			c.w.Run(time.Second)
			continue
		}
		qn := l.qn
		l.sn.Post(func() {
			qn.Propose([]byte("final"), func(err error) {
				if err == nil {
					acked = true
					c.o.acked["final"] = true
				}
			})
		})
		c.w.RunUntil(func() bool { return acked }, 5*time.Second)
	}
	return acked && c.w.RunUntil(c.converged, 30*time.Second)
}

func (c *simCluster) requireNoViolations(t testing.TB, seed uint64) {
	if len(c.o.violations) > 0 {
		t.Fatalf("seed %d (replay: go test -tags invariants -run 'TestQuorumSimSweep/seed=%d$' ./raftmeta/quorum): %d violations:\n%s",
			seed, seed, len(c.o.violations), strings.Join(c.o.violations, "\n"))
	}
}

func TestQuorumSimSweep(t *testing.T) {
	probes := map[string]int{}
	n := sweepSeeds(t, 24)
	ran := 0
	for seed := range uint64(n) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			cfg := seededSimConfig(seed)
			c := runSimCluster(t, seed, cfg, simRunOptions{safety: 8 * time.Second, faults: true})
			c.requireNoViolations(t, seed)
			require.NotEmpty(t, c.o.acked, "nothing was acknowledged")
			t.Logf("events %d, virtual %v, acknowledged %d, log %d", c.w.Events(), c.w.Now(), len(c.o.acked), len(c.o.log))
			ran++
			for k, v := range c.o.probes {
				probes[k] += v
			}
			probes[fmt.Sprintf("clusters of %d (%d voters)", cfg.size, cfg.voters)]++
		})
	}
	t.Logf("probes over %d seeds: %v", n, probeLine(probes))
	if t.Failed() || ran < 10 {
		return
	}
	for _, p := range []string{"snapshot sent", "snapshot received", "snapshot restored on open", "activated", "crash", "kill",
		"pause", "partition", "one-way partition", "power loss", "node stopped by a disk error",
		"membership change: ConfChangeAddLearnerNode(4)", "membership change: ConfChangeAddNode(4)",
		"membership change: ConfChangeRemoveNode(1)", "membership change: ConfChangeAddLearnerNode(5)",
		"membership change: ConfChangeAddNode(5) ConfChangeRemoveNode(2)"} {
		require.Positive(t, probes[p], "no seed reached %q", p)
	}
}

func probeLine(probes map[string]int) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(probes)) {
		out = append(out, fmt.Sprintf("%s=%d", k, probes[k]))
	}
	return strings.Join(out, " ")
}

func TestQuorumSimSameSeedSameTrace(t *testing.T) {
	for _, seed := range []uint64{3, 7} {
		var traces []string
		for range 2 {
			c := runSimCluster(t, seed, seededSimConfig(seed), simRunOptions{safety: 4 * time.Second, faults: true})
			c.requireNoViolations(t, seed)
			traces = append(traces, fmt.Sprintf("%s events=%d acked=%d log=%d", c.w.Trace(), c.w.Events(), len(c.o.acked), len(c.o.log)))
		}
		require.Equal(t, traces[0], traces[1], "seed %d replayed differently", seed)
	}
}

// quietSimConfig is a cluster without faults, with small snapshots.
func quietSimConfig(size, voters int) simClusterConfig {
	return simClusterConfig{size: size, voters: voters,
		node:   Config{SnapshotEntries: 50, CompactionMargin: 5, SegmentBytes: 1024},
		latMin: 200 * time.Microsecond, latMax: 2 * time.Millisecond,
		syncMin: 100 * time.Microsecond, syncMax: 2 * time.Millisecond}
}

// waitLeader runs until a leader is activated.
func (c *simCluster) waitLeader(t testing.TB) *simMember {
	t.Helper()
	var l *simMember
	require.True(t, c.w.RunUntil(func() bool {
		l = c.leader()
		return l != nil && l.qn.Status().Activated
	}, 10*time.Second), "no leader:\n%s", c.missing())
	return l
}

func TestQuorumSimLaggingNodeCatchesUpBySnapshot(t *testing.T) {
	c := newSimCluster(t, 1, quietSimConfig(3, 3))
	stop := false
	c.workload(5*time.Millisecond, &stop)
	l := c.waitLeader(t)
	var lagging *simMember
	for _, m := range c.members {
		if m != l {
			lagging = m
		}
	}
	lagging.sn.Crash()
	lagging.qn, lagging.down = nil, true
	before := c.o.probes["snapshot received"]
	c.w.Run(3 * time.Second)
	first := l.qn.Status().FirstIndex
	require.Greater(t, first, uint64(100), "the leader compacted its log")
	c.restart(lagging)
	c.w.Run(2 * time.Second)
	stop = true
	require.True(t, c.w.RunUntil(c.converged, 30*time.Second), c.missing())
	require.Greater(t, c.o.probes["snapshot received"], before, "the restarted node caught up by a snapshot")
	require.Positive(t, c.o.probes["snapshot sent"])
	c.requireNoViolations(t, 1)
}

func TestQuorumSimMembershipChanges(t *testing.T) {
	c := newSimCluster(t, 2, quietSimConfig(5, 3))
	stop := false
	c.workload(10*time.Millisecond, &stop)
	c.membership(200*time.Millisecond, &stop)
	c.waitLeader(t)
	require.True(t, c.w.RunUntil(func() bool {
		voters, learners := c.config()
		return slices.Equal(voters, []uint64{3, 4, 5}) && len(learners) == 0
	}, time.Minute), "the plan of membership changes did not finish: %v", probeLine(c.o.probes))
	// The removed voters can go: the new configuration carries on.
	for _, id := range []uint64{1, 2} {
		m := c.simMember(id)
		m.sn.Crash()
		m.qn, m.down = nil, true
	}
	c.w.Run(2 * time.Second)
	stop = true
	require.True(t, c.w.RunUntil(c.converged, 30*time.Second), c.missing())
	require.True(t, c.finalProposal(), c.missing())
	c.requireNoViolations(t, 2)
	for _, p := range []string{"ConfChangeAddLearnerNode(4)", "ConfChangeAddNode(4)", "ConfChangeRemoveNode(1)",
		"ConfChangeAddLearnerNode(5)", "ConfChangeAddNode(5) ConfChangeRemoveNode(2)"} {
		require.Equal(t, 1, c.o.probes["membership change: "+p], "change %s acknowledged once", p)
	}
}

// powerLossRun is the schedule the sabotage test runs: proposals as fast as
// a client makes them, a power loss of the whole cluster at a seeded
// moment, and the leader of before kept apart for a while after the
// restart, so that the others elect a leader from their own disks.
func powerLossRun(t testing.TB, seed uint64, sab sabotage) *simCluster {
	r := rng.New(seed).Fork("power-loss")
	cfg := quietSimConfig(3, 3)
	cfg.node.SnapshotEntries = 1000
	cfg.syncMin, cfg.syncMax = 2*time.Millisecond, 20*time.Millisecond
	cfg.latMin, cfg.latMax = 100*time.Microsecond, time.Millisecond
	cfg.sabotage = sab
	c := newSimCluster(t, seed, cfg)
	stop := false
	c.workload(2*time.Millisecond, &stop)
	c.w.Run(time.Second + time.Duration(r.Uint64n(uint64(2*time.Second))))
	old := c.leader()
	c.w.PowerLoss()
	for _, m := range c.members {
		m.qn, m.down = nil, true
		c.restart(m)
	}
	if old != nil {
		for _, m := range c.members {
			if m != old {
				c.cut[[2]uint64{old.id, m.id}], c.cut[[2]uint64{m.id, old.id}] = true, true
			}
		}
	}
	c.w.Run(3 * time.Second)
	c.healAll()
	c.w.Run(time.Second)
	stop = true
	if !c.w.RunUntil(c.converged, time.Minute) {
		c.o.violate("no convergence after healing:\n%s", c.missing())
	}
	return c
}

// TestQuorumSimCatchesMessagesSentBeforeTheSync runs a sabotaged driver,
// one that sends a Ready's messages before its entries are durable: a
// follower then acknowledges entries a power loss can take, and the
// checks must see an acknowledged entry lost on some seed. The same
// schedule with the real driver must break nothing.
func TestQuorumSimCatchesMessagesSentBeforeTheSync(t *testing.T) {
	caught := -1
	for seed := uint64(0); seed < 40 && caught < 0; seed++ {
		if c := powerLossRun(t, seed, sabotageSendBeforeSync); len(c.o.violations) > 0 {
			caught = int(seed)
			t.Logf("seed %d caught the sabotage: %s", seed, c.o.violations[0])
		}
	}
	require.GreaterOrEqual(t, caught, 0, "no seed caught a driver that sends before its sync")
	for seed := range uint64(sweepSeeds(t, 10)) {
		c := powerLossRun(t, seed, sabotageNone)
		c.requireNoViolations(t, seed)
	}
	c := powerLossRun(t, uint64(caught), sabotageNone)
	c.requireNoViolations(t, uint64(caught))
}

// A learner added after the leader's latest snapshot is sent a snapshot of
// the state as applied now: raft's own choice, the snapshot in storage,
// predates the learner's addition, and the learner would refuse it, for
// as long as no new snapshot came (none does while nothing is proposed).
func TestQuorumSimLearnerAddedAfterTheLatestSnapshotCatchesUp(t *testing.T) {
	c := newSimCluster(t, 9, quietSimConfig(4, 3))
	stop := false
	c.workload(3*time.Millisecond, &stop)
	l := c.waitLeader(t)
	c.w.Run(2 * time.Second)
	stop = true
	c.w.Run(time.Second)
	require.Greater(t, l.qn.Status().FirstIndex, uint64(1), "the leader compacted")
	err := c.call(t, l, func(qn *Node, done func(error)) {
		qn.ChangeMembership(confChangeOf(pb.ConfChangeAddLearnerNode, 4), done)
	})
	require.NoError(t, err)
	require.True(t, c.w.RunUntil(c.converged, 30*time.Second), c.missing())
	require.Positive(t, c.o.probes["snapshot received"])
	c.requireNoViolations(t, 9)
}
