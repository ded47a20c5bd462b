// Package envtest is the conformance suite for implementations of package
// env. The same test bodies run against osenv (real files, real sockets, real
// time) and against the simulator, so that code tested in the simulator
// behaves the same way in production.
//
// An implementation provides a World and calls Run from its own tests:
//
//	func TestConformance(t *testing.T) { envtest.Run(t, newWorld) }
package envtest

import (
	"testing"

	"github.com/sluicemq/sluice/node/env"
)

// World is a small set of nodes of one implementation that can reach each
// other over its network.
type World interface {
	// Node returns the environment of the named node, creating it (with an
	// empty disk) on first use.
	Node(name string) env.Env
	// ListenAddr returns an address the named node can pass to Net.Listen.
	// The address actually bound is Listener.Addr.
	ListenAddr(name string) string
	// Do runs f on the named node's loop and returns once f has run.
	Do(node string, f func())
	// RunUntil lets the world run until cond holds, evaluating cond on the
	// loop(s) between events. It fails the test if cond does not hold within
	// a generous bound (real time for osenv, virtual time for the simulator).
	RunUntil(cond func() bool)
}

// NewWorld makes a fresh World for one test; it registers its own cleanup
// with t.Cleanup.
type NewWorld func(t testing.TB) World
