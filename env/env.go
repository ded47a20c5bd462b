// Package env is the injected world of a Sluice node: its clock, its source of
// randomness, its disk, its network and its event loop.
//
// Every core package reaches the outside only through these interfaces, so the
// same broker code runs on the operating system (package osenv) and inside the
// deterministic simulator (package sim). The interfaces are deliberately small:
// they are implemented twice, and every method added here is a method both
// implementations must get exactly right.
//
// # The loop
//
// A node is a single-threaded event loop. Every callback this package hands
// back (a timer firing, a sync completing, bytes arriving, a connection
// closing) runs on that loop, one at a time, never concurrently with another
// callback of the same node. Methods of these interfaces are called only from
// the loop, except Loop.Post, which osenv also allows from other goroutines.
//
// Nothing here blocks for long. File reads and writes go to the page cache and
// return at once; the slow parts (Sync, SyncDir, connecting, sending bytes)
// complete later as loop events.
package env

import (
	"errors"
	"log/slog"
	"time"
)

// Env bundles what a node is given. The zero value is not usable; osenv.New
// and the simulator build one.
type Env struct {
	Loop  Loop
	Clock Clock
	Rand  Rand
	FS    FS
	// MetadataFS, if set, is a directory of its own for the metadata log
	// (Kafka's metadata.log.dir where it is not log.dirs); nil keeps the
	// metadata log in FS.
	MetadataFS FS
	Net        Net
	// Log receives the node's structured logs. In the simulator its records
	// carry virtual time.
	Log *slog.Logger
}

// Loop runs a node's work one function at a time, in the order posted.
type Loop interface {
	// Post queues f to run on the loop after everything already queued. It
	// never runs f before Post returns. In osenv Post may be called from any
	// goroutine; in the simulator only from the simulation itself.
	Post(f func())
}

// Clock is a node's view of time. Record timestamps, retention, session
// timeouts and raft ticks all come from here. The simulator gives each node a
// clock with its own skew and drift and can make it jump, so Now may move
// backwards: code that measures elapsed time must tolerate that, or use
// Elapsed.
type Clock interface {
	Now() time.Time
	// Elapsed is the time elapsed on a clock that never jumps (the
	// oscillator, CLOCK_MONOTONIC) since some fixed origin: what session
	// timeouts and leases count, so that a step of the wall clock neither
	// expires them early nor keeps them alive. It never decreases.
	Elapsed() time.Duration
	// AfterFunc runs f on the loop once d has elapsed on this clock. A
	// non-positive d fires on a later loop turn, never inside AfterFunc.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop prevents the timer's function from running. It reports whether it
	// did so: false means the function has already run (or been stopped).
	Stop() bool
}

// Rand is a node's source of randomness: topic IDs, producer IDs, member IDs,
// jitter and nonces all draw from it. In the simulator it is seeded.
type Rand interface {
	Uint64() uint64
}

// Errors that both implementations report in the same way, so that callers
// (and the simulator's fault injection) can test for them with errors.Is.
// A missing file is reported as io/fs.ErrNotExist, an existing one where none
// may be as io/fs.ErrExist.
var (
	// ErrIO is an input/output error from the device (EIO).
	ErrIO = errors.New("input/output error")
	// ErrNoSpace means the device is full (ENOSPC).
	ErrNoSpace = errors.New("no space left on device")
	// ErrClosed is returned by operations on a closed file, listener or
	// connection.
	ErrClosed = errors.New("use of closed file or connection")
)
