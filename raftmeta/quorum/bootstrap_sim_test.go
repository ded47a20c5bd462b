package quorum

import (
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim"
	"github.com/sluicemq/sluice/sim/simfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

type dropSender struct{}

func (dropSender) Send([]*pb.Message) {}

// countingSM counts what it applies and remembers whether it was activated.
type countingSM struct {
	applied   int
	activated bool
}

func (c *countingSM) Apply(Applied) error          { c.applied++; return nil }
func (c *countingSM) Snapshot() ([]byte, error)    { return nil, nil }
func (c *countingSM) Restore(uint64, []byte) error { return nil }
func (c *countingSM) LeaderChanged(uint64, uint64) {}
func (c *countingSM) Activated(uint64)             { c.activated = true }

// singleVoter boots a one-voter quorum on n1 of a new world.
func singleVoter(t *testing.T, seed uint64) (*sim.World, func() *countingSM) {
	w := sim.New(seed)
	if os.Getenv("SLUICE_LOG") != "" {
		w.SetLog(os.Stderr, slog.LevelDebug)
	}
	var sm *countingSM
	w.AddNode("n1", func(e env.Env) {
		sm = &countingSM{}
		n, err := Open(e, Config{ID: 1, Dir: "q", Voters: []uint64{1}, Logger: e.Log}, sm, dropSender{})
		if err != nil {
			t.Errorf("seed %d: open: %v", seed, err)
			return
		}
		n.Start()
	})
	return w, func() *countingSM { return sm }
}

// A crash anywhere inside the bootstrap's first save (its segment and hard
// state are synced side by side, so either may survive, or part of the
// segment) leaves a directory the next start bootstraps again: the voter
// elects itself.
func TestTornBootstrapIsBootstrappedAgain(t *testing.T) {
	struckRuns := 0
	for seed := uint64(1); seed <= 40; seed++ {
		if os.Getenv("SEED") != "" && os.Getenv("SEED") != fmt.Sprint(seed) {
			continue
		}
		w, sm := singleVoter(t, seed)
		// Crash at the k-th sync completion of the first boot, while others
		// may still be in flight: the moment that keeps one of the
		// bootstrap's files and not the other.
		disk := w.Node("n1").Disk()
		k, seen, struck := int(seed%4)+1, 0, false
		disk.SetObserver(func(ev simfs.Event) {
			if !ev.Done || struck {
				return
			}
			if seen++; seen == k {
				struck = true
				w.After(0, "test crash", func() {
					w.Node("n1").Crash()
					w.Node("n1").Restart()
				})
			}
		})
		w.RunUntil(func() bool { return struck }, 10*time.Second)
		disk.SetObserver(nil)
		if !struck {
			continue // fewer syncs than k in this run
		}
		struckRuns++
		if !w.RunUntil(func() bool { return sm() != nil && sm().activated && w.Node("n1").Incarnation() == 2 }, time.Minute) {
			t.Fatalf("seed %d: the voter never elected itself after a crash at sync completion %d of its bootstrap", seed, k)
		}
	}
	if struckRuns < 20 {
		t.Fatalf("only %d of 40 runs crashed inside the bootstrap", struckRuns)
	}
}

// A voter whose syncs take longer than its election timeout still elects
// itself: raft's ticks stand still while a Ready is being made durable.
func TestSlowDiskVoterElectsItself(t *testing.T) {
	w, sm := singleVoter(t, 7)
	if err := w.Node("n1").Disk().SetSyncLatency(2*time.Second, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if !w.RunUntil(func() bool { return sm() != nil && sm().activated }, time.Minute) {
		t.Fatal("a voter with 2 s syncs never elected itself")
	}
}

// A quorum of one leads at once, on its first start and on every restart,
// without waiting out an election timeout (0.5 to 1 s).
func TestSoleVoterLeadsWithoutAnElectionTimeout(t *testing.T) {
	w, sm := singleVoter(t, 11)
	if !w.RunUntil(func() bool { return sm() != nil && sm().activated }, time.Minute) {
		t.Fatal("never led")
	}
	if w.Now() > 100*time.Millisecond {
		t.Fatalf("led after %v", w.Now())
	}
	w.Node("n1").Crash()
	restarted := w.Now()
	w.Node("n1").Restart()
	if !w.RunUntil(func() bool { return sm().activated }, time.Minute) {
		t.Fatal("never led after a restart")
	}
	if d := w.Now() - restarted; d > 100*time.Millisecond {
		t.Fatalf("led %v after a restart", d)
	}
}
