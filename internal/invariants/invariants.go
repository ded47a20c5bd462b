// Package invariants holds the switch for Sluice's expensive internal checks
// and the one way they fail.
//
// DESIGN.md section 9: invariants are asserted where they are relied on,
// and the expensive ones sit behind the invariants build tag, which every
// test run, CI and the simulator turn on (make test, make sim) and
// production builds (make build, make run, make bench) leave off. A check
// is written so that the production build compiles it away, arguments and
// all:
//
//	if invariants.Enabled && !(hw <= durable) {
//		invariants.Panicf("partition %s: high watermark %d is above the durable end %d", name, hw, durable)
//	}
//
// Enabled is a constant, so the whole statement is dead code without the
// tag and costs nothing; with it, the values that broke the rule are in the
// message, as etcd raft's Panicf puts them.
package invariants

import "fmt"

// Panicf reports a broken invariant: it panics with the message, prefixed
// so that a simulator run or a test log says what kind of failure it is.
// It is for states the code must never reach, not for bad input, which
// always gets an error.
func Panicf(format string, args ...any) {
	panic(fmt.Sprintf("invariant violated: "+format, args...))
}
