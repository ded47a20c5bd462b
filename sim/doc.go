// Package sim is Sluice's simulated world: whole clusters of nodes, their
// disks, their clocks and the network between them, run by one goroutine in
// virtual time, all decided by one seed.
//
// # The world
//
// A World composes the kernel (sim/sched's event queue and trace, sim/rng's
// labelled streams) with a simulated disk per node (sim/simfs) and one
// simulated network (sim/simnet). Everything that happens is an event in one
// queue, ordered by (virtual time, sequence); the virtual clock jumps from
// event to event, so an idle hour costs nothing. Every delivered event folds
// into the trace hash (World.Trace), and so do the lifecycle faults below,
// a crash and a kill apart: two runs with the same trace did the same
// things at the same times.
//
// A node sees the world only through its env.Env:
//
//	Loop   Post runs f as a new event on the node, at the current instant.
//	Clock  the node's own clock (see below); AfterFunc timers are events.
//	Rand   a stream of the node's own, new for every incarnation.
//	FS     the node's simfs.Disk, the same one across restarts.
//	Net    the node's host on the simnet.Network; its name is the node's.
//	Log    text records stamped with the node's clock, never real time,
//	       written where World.SetLog says (discarded by default).
//
// # Clocks
//
// Each node has a hardware clock with a skew (up to ±1s from the world's
// epoch) and a drift (up to ±200 ppm) drawn from its stream, and Clock.Jump
// steps its wall time on demand. Timers count elapsed time on the drifting
// oscillator and ignore jumps, as CLOCK_MONOTONIC does; Now is the wall
// clock, which jumps and may go backwards. The epoch is 2026-01-01 UTC plus
// up to a year chosen by the seed.
//
// # Node lifecycle
//
// A node's process lives in incarnations. AddNode boots the first; boot runs
// as the node's first event. Crash, a machine crash, ends an incarnation:
// every event it had pending (posts, timers, disk completions, arriving
// bytes) is dropped, its disk loses what the POSIX durability contract
// allows (simfs.Disk.Crash), and its connections break (simnet's Crash).
// Kill ends an incarnation the same way but the machine stays up, as after
// kill -9: the disk keeps its page cache (simfs.Disk.CrashProcess), so the
// next incarnation reads what the dead one wrote and never synced, and a
// later Crash or PowerLoss (even while the node is down) may still take it.
// Restart, after either, boots a new incarnation over the same disk and
// clock, with a fresh Env and a new Rand stream (derived from the
// incarnation's number, not continued), and calls boot again. Pause freezes
// the process, as SIGSTOP would: events that come due are held, the clock
// runs on, and Resume delivers the held events first, in the order they came
// due, timers whose deadline passed among them. PowerLoss crashes every node
// at once.
//
// Disks and hosts reach their node through sched.NodeLoop, which Node
// implements: this is how a crash drops and a pause holds their completions.
//
// # What a seed decides
//
// Everything: the epoch, every node's skew and drift, every Rand draw, every
// disk and network latency and fault the components draw, the bytes
// crypto/rand.Reader yields during a run, and whatever a workload or fault
// schedule draws from World.Rand. Each stream is forked from the seed by a
// label, never by draw order, so a new draw in one component leaves every
// other unchanged: the root forks "epoch", "crypto", "net" and "node/<name>";
// a node's stream forks "clock", "disk" and "rand/<incarnation>".
//
// # crypto/rand and one world at a time
//
// etcd raft draws election timeouts from crypto/rand.Reader. Inside Step,
// Run and RunUntil that variable holds a reader over the world's "crypto"
// stream, and the previous reader is put back when they return. Because the
// variable is global, Worlds run one at a time per process: tests that use
// them are not parallel, and a sweep runs its seeds one after another.
package sim
