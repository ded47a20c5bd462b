package simnet

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/sched"
)

// world is a network of hosts with Direct loops, driven from the test.
type world struct {
	t testing.TB
	s *sched.Scheduler
	n *Network
}

func newWorld(t testing.TB, seed uint64) *world {
	s := sched.New()
	return &world{t: t, s: s, n: New(s, rng.New(seed).Fork("net"))}
}

func (w *world) host(name string) env.Net { return w.n.Host(name, sched.Direct(w.s, name)) }

// at runs f at virtual time d from now, as if on a loop.
func (w *world) at(d time.Duration, f func()) {
	w.s.After(d, sched.Label{Kind: "test"}, f)
}

// run runs every event of the next d.
func (w *world) run(d time.Duration) { w.s.RunUntil(w.s.Now() + d) }

// runUntil runs events until cond holds; it fails the test if cond does not
// hold within an hour of virtual time.
func (w *world) runUntil(what string, cond func() bool) {
	w.t.Helper()
	deadline := w.s.Now() + time.Hour
	for !cond() {
		if next, ok := w.s.NextAt(); !ok || next > deadline {
			w.t.Fatalf("at %v: never %s", w.s.Now(), what)
		}
		w.s.Step()
	}
}

// rec is a ConnHandler that records what it sees and the contract breaches.
type rec struct {
	w        *world
	data     []byte
	chunks   int
	ends     []int // where each chunk ended in data
	closed   bool
	err      error
	closedAt time.Duration
	lastAt   time.Duration
	breaches []string
	onData   func(p []byte)
}

func (r *rec) OnData(p []byte) {
	if r.closed {
		r.breaches = append(r.breaches, "OnData after OnClose")
	}
	if len(p) == 0 {
		r.breaches = append(r.breaches, "empty OnData")
	}
	r.data = append(r.data, p...)
	r.chunks++
	r.ends = append(r.ends, len(r.data))
	r.lastAt = r.w.s.Now()
	if r.onData != nil {
		r.onData(p)
	}
}

func (r *rec) OnClose(err error) {
	if r.closed {
		r.breaches = append(r.breaches, "OnClose twice")
	}
	r.closed, r.err, r.closedAt = true, err, r.w.s.Now()
}

func (r *rec) check(t *testing.T, who string) {
	t.Helper()
	if len(r.breaches) > 0 {
		t.Fatalf("%s: %v", who, r.breaches)
	}
}

// server accepts on a host and records each connection.
type server struct {
	ln    env.Listener
	conns []env.Conn
	recs  []*rec
}

func (w *world) listen(host, addr string) *server {
	w.t.Helper()
	srv := &server{}
	ln, err := w.host(host).Listen(addr, func(c env.Conn) env.ConnHandler {
		r := &rec{w: w}
		srv.conns = append(srv.conns, c)
		srv.recs = append(srv.recs, r)
		return r
	})
	if err != nil {
		w.t.Fatalf("listen %s on %s: %v", addr, host, err)
	}
	srv.ln = ln
	return srv
}

// client is the dialing side of one connection.
type client struct {
	conn  env.Conn
	err   error
	calls int
	at    time.Duration
	rec   *rec
}

func (w *world) dial(host, addr string) *client {
	c := &client{rec: &rec{w: w}}
	inside := true
	w.host(host).Dial(addr, func(conn env.Conn, err error) env.ConnHandler {
		if inside {
			w.t.Errorf("dial %s from %s: callback ran inside Dial", addr, host)
		}
		c.conn, c.err, c.at = conn, err, w.s.Now()
		c.calls++
		return c.rec
	})
	inside = false
	return c
}

// connect dials srv from host and runs until both ends are up.
func (w *world) connect(host string, srv *server) (*client, env.Conn, *rec) {
	w.t.Helper()
	want := len(srv.conns) + 1
	c := w.dial(host, srv.ln.Addr())
	w.runUntil("connected", func() bool { return c.calls > 0 && len(srv.conns) >= want })
	if c.err != nil {
		w.t.Fatalf("dial %s: %v", srv.ln.Addr(), c.err)
	}
	return c, srv.conns[want-1], srv.recs[want-1]
}

// pattern returns n bytes that differ with seed and position.
func pattern(seed uint64, n int) []byte {
	p := make([]byte, n)
	r := rng.New(seed)
	for i := range p {
		p[i] = byte(r.Uint64())
	}
	return p
}

func mustWrite(t *testing.T, c env.Conn, p []byte) {
	t.Helper()
	if err := c.Write(bytes.Clone(p)); err != nil {
		t.Fatalf("write %d bytes to %s: %v", len(p), c.RemoteAddr(), err)
	}
}

func describe(r *rec) string {
	return fmt.Sprintf("%d bytes in %d chunks, closed=%v err=%v at %v", len(r.data), r.chunks, r.closed, r.err, r.closedAt)
}
