package sim

import (
	"fmt"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/sched"
	"github.com/sluicemq/sluice/sim/simfs"
)

// Node is one simulated machine: a process that can crash, restart, pause
// and resume, over a disk and a clock that outlive the process.
//
// Node implements sched.NodeLoop for its disk and its network host: work
// they schedule belongs to the incarnation that was running when it was
// scheduled, is dropped if that incarnation crashes first, and is held back
// while the node is paused.
type Node struct {
	w    *World
	name string
	boot func(env.Env)
	rand *rng.Rand // the node's own stream; its children are labelled
	// clock and disk belong to the machine: they survive crashes.
	clock *Clock
	disk  *simfs.Disk
	net   env.Net

	// cur is the running incarnation; nil while the node is down, when last
	// is the one that died.
	cur, last *incarnation
	// boots counts incarnations, the first being 1.
	boots  int
	paused bool
	// killed says the process was killed while the machine stayed up: the
	// disk's page cache still holds what it had not synced, which a Crash or
	// a PowerLoss of the down node may still take.
	killed bool
	// held are the events that came due while the node was paused, in the
	// order they came due; they run, in that order, after Resume. While any
	// are held, newly due events queue behind them so the order holds.
	held    []heldEvent
	release *sched.Event // the pending delivery of held[0], if any
}

type heldEvent struct {
	label sched.Label
	f     func()
}

// incarnation is one life of a node's process, from boot to crash. Its env
// (loop, timers, randomness) dies with it: anything it scheduled that has not
// run by the crash never runs.
type incarnation struct {
	node *Node
	env  env.Env
	// timers are the pending AfterFuncs, by (deadline, seq).
	timers   timerHeap
	timerSeq uint64
	// fire is fireTimer as a func value, made once: every timer's event
	// runs it.
	fire func()
}

// Name returns the node's name, which is also its host name on the network.
func (n *Node) Name() string { return n.name }

// Clock returns the node's clock, for skew, drift and jumps.
func (n *Node) Clock() *Clock { return n.clock }

// Disk returns the node's disk, for fault injection and inspection.
func (n *Node) Disk() *simfs.Disk { return n.disk }

// Up reports whether the node's process is running (paused counts as up).
func (n *Node) Up() bool { return n.cur != nil }

// Paused reports whether the node is paused.
func (n *Node) Paused() bool { return n.paused }

// Incarnation returns how many times the node has booted; it numbers the
// current process, or the last one if the node is down.
func (n *Node) Incarnation() int { return n.boots }

// Env returns the environment of the running incarnation. After a crash it
// is the dead one's: its Loop and Clock schedule nothing, while its FS and
// Net are the machine's, which the next incarnation shares.
func (n *Node) Env() env.Env {
	if n.cur == nil {
		return n.last.env
	}
	return n.cur.env
}

// Schedule implements sched.NodeLoop for the node's disk and network: f runs
// on the loop of the incarnation running now, d from now, unless that
// incarnation crashes first. While the node is down it is dropped.
func (n *Node) Schedule(d time.Duration, label sched.Label, f func()) {
	if n.cur != nil {
		n.cur.schedule(d, label, f)
	}
}

// Post runs f on the node's loop as soon as possible, from outside the node
// (a test, a workload); it is dropped if the node is down.
func (n *Node) Post(f func()) {
	n.Schedule(0, sched.Label{Kind: "loop.post"}, f)
}

// schedule queues f for this incarnation. It returns nil, scheduling
// nothing, if the incarnation is already dead.
func (inc *incarnation) schedule(d time.Duration, label sched.Label, f func()) *sched.Event {
	n := inc.node
	if n.cur != inc {
		return nil
	}
	label.Node = n.name
	return n.w.sched.AfterFor(d, label, inc, f)
}

// Run implements sched.Owner: the incarnation's events arrive at its node.
func (inc *incarnation) Run(label sched.Label, f func()) { inc.node.arrive(inc, label, f) }

// arrive runs an event that has come due, unless its incarnation has died;
// it holds the event back if the node is paused or already has events held.
func (n *Node) arrive(inc *incarnation, label sched.Label, f func()) {
	if n.cur != inc {
		return
	}
	if n.paused || len(n.held) > 0 {
		n.held = append(n.held, heldEvent{label: label, f: f})
		return
	}
	f()
}

// Post implements env.Loop for the incarnation.
func (inc *incarnation) Post(f func()) {
	if f == nil {
		panic("sim: Post of a nil func")
	}
	inc.schedule(0, sched.Label{Kind: "loop.post"}, f)
}

// Crash is a machine crash: the process's memory is gone, every event it
// had pending is dropped, its timers are dead, its disk loses what the
// durability contract allows (simfs.Disk.Crash) and every lock the process
// held on it, and its connections break (the network's Crash). Crashing a node that is down does nothing, unless
// its process was killed: then the crash takes the page cache it left.
func (n *Node) Crash() {
	if n.cur == nil && !n.killed {
		return
	}
	n.w.sched.Fold("node.crash/"+n.name, uint64(n.boots))
	n.stop()
	n.killed = false
	n.disk.Crash()
	n.w.net.Crash(n.name)
}

// Kill kills the node's process while the machine stays up, as kill -9 or
// an OOM kill does: its memory, pending events and timers are gone as in a
// Crash, but its disk keeps the page cache (simfs.Disk.CrashProcess), so the
// next incarnation reads what the dead one wrote and never synced, which a
// later Crash or PowerLoss may still take. The kernel closes its
// connections (peers see a reset) and dials to it are refused until it
// listens again (simnet.Network.Kill). The locks it held on its disk
// (simfs.Disk.Lock) die with it, as the kernel drops a dead process's
// flocks, so the next incarnation can take them. Killing a node that is
// down does nothing.
func (n *Node) Kill() {
	if n.cur == nil {
		return
	}
	n.w.sched.Fold("node.kill/"+n.name, uint64(n.boots))
	n.stop()
	n.killed = true
	n.disk.CrashProcess()
	n.w.net.Kill(n.name)
}

// stop ends the running incarnation, dropping what it had pending or held.
func (n *Node) stop() {
	if n.cur == nil {
		return
	}
	n.last = n.cur
	n.cur = nil
	n.paused = false
	n.held = nil
	if n.release != nil {
		n.release.Cancel()
		n.release = nil
	}
}

// Restart boots a new incarnation over the same disk and clock: boot runs
// again, on the loop, with a fresh Env. It works after a Crash or a Kill;
// restarting a running node crashes it first.
func (n *Node) Restart() {
	if n.cur != nil {
		n.Crash()
	}
	n.w.net.Restart(n.name, n)
	n.start()
}

// start makes a new incarnation current and schedules its boot.
func (n *Node) start() {
	n.boots++
	n.killed = false
	inc := &incarnation{node: n}
	inc.fire = inc.fireTimer
	inc.env = env.Env{
		Loop:  inc,
		Clock: nodeClock{inc: inc},
		Rand:  n.rand.Fork(fmt.Sprintf("rand/%d", n.boots)),
		FS:    n.disk,
		Net:   n.net,
		Log:   n.w.logger(n),
	}
	n.cur = inc
	if n.boot != nil {
		inc.schedule(0, sched.Label{Kind: "node.boot"}, func() { n.boot(inc.env) })
	}
}

// Pause stops the node's process without killing it, as SIGSTOP or a long
// garbage-collection pause would: nothing runs on its loop until Resume, and
// events that come due meanwhile (bytes arriving, syncs completing, timers
// firing) wait. Its clock keeps running. Pausing a paused or down node does
// nothing.
func (n *Node) Pause() {
	if n.cur == nil || n.paused {
		return
	}
	n.w.sched.Fold("node.pause/"+n.name, uint64(n.boots))
	n.paused = true
}

// Resume lets a paused node run again: the events held back run first, in
// the order they came due, then the node goes on as before. Resuming a node
// that is not paused does nothing.
func (n *Node) Resume() {
	if !n.paused {
		return
	}
	n.w.sched.Fold("node.resume/"+n.name, uint64(n.boots))
	n.paused = false
	n.scheduleRelease()
}

// scheduleRelease schedules the delivery of the oldest held event, at once,
// traced under that event's own label.
func (n *Node) scheduleRelease() {
	if len(n.held) == 0 || n.release != nil {
		return
	}
	inc := n.cur
	n.release = n.w.sched.After(0, n.held[0].label, func() {
		n.release = nil
		if n.cur != inc || n.paused {
			return // crashed or paused again; Resume schedules anew
		}
		h := n.held[0]
		n.held[0] = heldEvent{}
		n.held = n.held[1:]
		if len(n.held) == 0 {
			n.held = nil
		}
		n.scheduleRelease()
		h.f()
	})
}
