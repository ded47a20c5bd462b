package simnet

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim/rng"
)

// seedCount is how many seeds a sweep runs: SLUICE_SEEDS, or 200.
func seedCount(t *testing.T) int {
	if s := os.Getenv("SLUICE_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("SLUICE_SEEDS=%q is not a positive count", s)
		}
		return n
	}
	return 200
}

// TestSweepStreamsSurviveFaults runs random streams between three hosts
// through random faults, seed after seed, and checks what every end saw:
// a prefix of what its peer wrote (never reordered, duplicated or changed),
// everything before a clean close, everything on a connection nothing broke,
// and a close on both sides once one side learned of it (unless a host
// crashed).
func TestSweepStreamsSurviveFaults(t *testing.T) {
	for seed := uint64(1); seed <= uint64(seedCount(t)); seed++ {
		if runSweep(t, seed); t.Failed() {
			t.Fatalf("seed %d failed", seed)
		}
	}
}

func TestDeterminismSameSeedSameTrace(t *testing.T) {
	seen := make(map[string]uint64)
	for seed := uint64(1); seed <= 5; seed++ {
		a, b := runSweep(t, seed), runSweep(t, seed)
		if a.trace != b.trace || a.summary != b.summary {
			t.Fatalf("seed %d ran twice: traces %s and %s, summaries %q and %q", seed, a.trace, b.trace, a.summary, b.summary)
		}
		if other, dup := seen[a.trace]; dup {
			t.Fatalf("seeds %d and %d gave the same trace %s", other, seed, a.trace)
		}
		seen[a.trace] = seed
	}
}

var sweepHosts = []string{"n1", "n2", "n3"}

// sweep is one seeded run.
type sweep struct {
	t   *testing.T
	w   *world
	r   *rng.Rand
	inc map[string]int // the test's count of each host's boots
	up  map[string]bool
	ln  map[string]env.Listener
	eps []*ep
	// byAddr finds an end by "local>remote", to pair the two ends.
	byAddr  map[string]*ep
	dials   []*client
	dialInc []int
	dialers []string

	trace, summary string
}

// ep is one end of a connection, as the workload drives it.
type ep struct {
	host   string
	inc    int
	conn   env.Conn
	rec    *rec
	sent   []byte
	closed bool
	peer   *ep
	// For a dialed end: the host dialed, and its boot when Dial was called.
	target    string
	targetInc int
}

func (e *ep) open(sw *sweep) bool {
	return !e.closed && !e.rec.closed && sw.up[e.host] && sw.inc[e.host] == e.inc
}

func runSweep(t *testing.T, seed uint64) *sweep {
	t.Helper()
	sw := &sweep{t: t, w: newWorld(t, seed), r: rng.New(seed).Fork("workload"),
		inc: make(map[string]int), up: make(map[string]bool), ln: make(map[string]env.Listener),
		byAddr: make(map[string]*ep)}
	sw.w.n.SetTimeouts(time.Duration(1+sw.r.Intn(5))*time.Second, time.Duration(1+sw.r.Intn(5))*time.Second)
	for _, from := range sweepHosts {
		for _, to := range sweepHosts {
			sw.w.n.SetLatency(from, to, sw.randomLatency())
		}
	}
	for _, h := range sweepHosts {
		sw.boot(h)
	}
	for at := time.Duration(0); at < 30*time.Second; at += time.Duration(1+sw.r.Intn(100)) * ms {
		sw.w.at(at, sw.act)
	}
	sw.w.run(30 * time.Second)
	sw.w.n.HealAll()
	for _, h := range sweepHosts {
		if !sw.up[h] {
			sw.restart(h)
		}
	}
	sw.w.run(time.Minute)
	sw.check()
	sw.closeAll()
	sw.w.run(time.Minute)
	if live := sw.w.n.liveConns(); len(live) != 0 {
		t.Errorf("seed %d: %d connections never retired after every end closed", seed, len(live))
	}
	for _, h := range sweepHosts {
		if ports := sw.w.n.hosts[h].dialing; len(ports) != 0 {
			t.Errorf("seed %d: %s still holds local ports %v", seed, h, ports)
		}
	}
	sw.trace = sw.w.s.Trace()
	sw.summary = sw.summarize()
	return sw
}

func (sw *sweep) randomLatency() Distribution {
	switch sw.r.Intn(3) {
	case 0:
		return Fixed(time.Duration(sw.r.Intn(2000)) * time.Microsecond)
	case 1:
		return Uniform(50*time.Microsecond, time.Duration(100+sw.r.Intn(5000))*time.Microsecond)
	}
	return LongTail(100*time.Microsecond, 200*ms)
}

// boot brings a host's incarnation up and listens on :9000.
func (sw *sweep) boot(h string) {
	sw.inc[h]++
	sw.up[h] = true
	sw.listen(h)
}

func (sw *sweep) listen(h string) {
	inc := sw.inc[h]
	ln, err := sw.w.host(h).Listen(":9000", func(c env.Conn) env.ConnHandler {
		return sw.add(h, inc, c).rec
	})
	if err != nil {
		sw.t.Fatalf("listen on %s: %v", h, err)
	}
	sw.ln[h] = ln
}

// bounce closes a host's listener for a while, so that dials are refused
// and handshakes in progress are reset.
func (sw *sweep) bounce(h string) {
	ln, inc := sw.ln[h], sw.inc[h]
	if !sw.up[h] || ln == nil {
		return
	}
	if err := ln.Close(); err != nil {
		sw.t.Errorf("close the listener of %s: %v", h, err)
	}
	sw.ln[h] = nil
	sw.w.at(time.Duration(sw.r.Intn(2000))*ms, func() {
		if sw.up[h] && sw.inc[h] == inc {
			sw.listen(h)
		}
	})
}

func (sw *sweep) restart(h string) {
	sw.w.n.Restart(h, nil)
	sw.boot(h)
}

func (sw *sweep) add(h string, inc int, c env.Conn) *ep {
	e := &ep{host: h, inc: inc, conn: c, rec: &rec{w: sw.w}}
	sw.eps = append(sw.eps, e)
	sw.byAddr[c.LocalAddr()+">"+c.RemoteAddr()] = e
	if peer := sw.byAddr[c.RemoteAddr()+">"+c.LocalAddr()]; peer != nil && peer.peer == nil {
		e.peer, peer.peer = peer, e
	}
	return e
}

// act does one random thing: mostly writes, sometimes dials and closes,
// sometimes a fault.
func (sw *sweep) act() {
	switch k := sw.r.Intn(100); {
	case k < 60:
		sw.write()
	case k < 70:
		sw.dial()
	case k < 73:
		if e := sw.pick(); e != nil {
			sw.closeEnd(e)
		}
	default:
		sw.fault()
	}
}

// pick returns a random open end, or nil.
func (sw *sweep) pick() *ep {
	var open []*ep
	for _, e := range sw.eps {
		if e.open(sw) {
			open = append(open, e)
		}
	}
	if len(open) == 0 {
		return nil
	}
	return open[sw.r.Intn(len(open))]
}

func (sw *sweep) write() {
	e := sw.pick()
	if e == nil {
		return
	}
	p := make([]byte, 1+sw.r.Intn(3000))
	sw.r.Read(p)
	if err := e.conn.Write(bytes.Clone(p)); err != nil {
		sw.t.Errorf("write to an open end %s: %v", e.conn.LocalAddr(), err)
		return
	}
	e.sent = append(e.sent, p...)
}

func (sw *sweep) dial() {
	from, to := sweepHosts[sw.r.Intn(3)], sweepHosts[sw.r.Intn(3)]
	if !sw.up[from] {
		return
	}
	inc, targetInc := sw.inc[from], sw.inc[to]
	c := &client{}
	sw.dials = append(sw.dials, c)
	sw.dialInc = append(sw.dialInc, inc)
	sw.dialers = append(sw.dialers, from)
	sw.w.host(from).Dial(to+":9000", func(conn env.Conn, err error) env.ConnHandler {
		c.calls++
		c.err = err
		if err != nil {
			return nil
		}
		e := sw.add(from, inc, conn)
		e.target, e.targetInc = to, targetInc
		return e.rec
	})
}

func (sw *sweep) closeEnd(e *ep) {
	e.closed = true
	if err := e.conn.Close(); err != nil {
		sw.t.Errorf("close of an open end %s: %v", e.conn.LocalAddr(), err)
	}
}

func (sw *sweep) fault() {
	n := sw.w.n
	a, b := sweepHosts[sw.r.Intn(3)], sweepHosts[sw.r.Intn(3)]
	switch sw.r.Intn(10) {
	case 0, 1:
		n.Partition(a, b)
	case 2, 3:
		n.Heal(a, b)
	case 4:
		n.Stall(a, b, time.Duration(sw.r.Intn(3000))*ms)
	case 5:
		n.Reset(a, b)
	case 6:
		n.SetLatency(a, b, sw.randomLatency())
	case 7:
		if sw.up[a] {
			n.Crash(a)
			sw.up[a] = false
			sw.w.at(time.Duration(sw.r.Intn(5000))*ms, func() {
				if !sw.up[a] {
					sw.restart(a)
				}
			})
		}
	case 8:
		sw.bounce(a)
	case 9:
		// One connection held, one way or both, while others flow.
		if ids := n.Conns(a, b, 0); len(ids) > 0 {
			n.StallConn(ids[sw.r.Intn(len(ids))], Way(1+sw.r.Intn(3)), time.Duration(sw.r.Intn(8000))*ms)
		}
	}
}

// closeAll closes every end still open, so that every connection can retire.
func (sw *sweep) closeAll() {
	for _, e := range sw.eps {
		if e.open(sw) {
			sw.closeEnd(e)
		}
	}
}

// alive reports that e's host has not crashed since e was made.
func (sw *sweep) alive(e *ep) bool { return sw.inc[e.host] == e.inc }

// check runs after the faults healed and the network went quiet.
func (sw *sweep) check() {
	t := sw.t
	for i, c := range sw.dials {
		if c.calls > 1 || (c.calls == 0 && sw.inc[sw.dialers[i]] == sw.dialInc[i]) {
			t.Errorf("dial %d from %s: connected ran %d times", i, sw.dialers[i], c.calls)
		}
	}
	for _, e := range sw.eps {
		who := fmt.Sprintf("%s (%s)", e.conn.LocalAddr(), e.conn.RemoteAddr())
		if len(e.rec.breaches) > 0 {
			t.Errorf("%s: %v", who, e.rec.breaches)
		}
		p := e.peer
		if p == nil {
			// Never accepted: the acceptor refused or gave up on the
			// handshake, so the dialer must have broken (reset, or timed
			// out first) once the faults healed.
			if e.target != "" && sw.alive(e) && sw.inc[e.target] == e.targetInc && !e.closed &&
				(!e.rec.closed || e.rec.err == nil) {
				t.Errorf("%s: dialed, never accepted, and not broken: %s", who, describe(e.rec))
			}
			continue
		}
		if !bytes.HasPrefix(p.sent, e.rec.data) {
			t.Errorf("%s received %d bytes that are not a prefix of the %d its peer sent", who, len(e.rec.data), len(p.sent))
		}
		if e.rec.closed && e.rec.err == nil && (!p.closed || !bytes.Equal(e.rec.data, p.sent)) {
			t.Errorf("%s saw a clean close after %d of %d bytes; peer closed=%v", who, len(e.rec.data), len(p.sent), p.closed)
		}
		if !sw.alive(e) || !sw.alive(p) || e.closed {
			continue
		}
		switch {
		case p.closed || p.rec.closed:
			if !e.rec.closed {
				t.Errorf("%s never learned that its peer closed or broke (%s)", who, describe(p.rec))
			}
		case !e.rec.closed && !bytes.Equal(e.rec.data, p.sent):
			t.Errorf("%s got %d of %d bytes on a connection nothing broke", who, len(e.rec.data), len(p.sent))
		}
	}
}

func (sw *sweep) summarize() string {
	var b bytes.Buffer
	for _, e := range sw.eps {
		fmt.Fprintf(&b, "%s>%s:%d/%d/%v;", e.conn.LocalAddr(), e.conn.RemoteAddr(), len(e.rec.data), e.rec.chunks, e.rec.err)
	}
	return b.String()
}
