package simnet

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim/sched"
)

const ms = time.Millisecond

// fixedWorld is a world whose links between n1 and n2 take exactly 1ms.
func fixedWorld(t *testing.T) *world {
	w := newWorld(t, 1)
	w.n.SetLatency("n1", "n2", Fixed(ms))
	w.n.SetLatency("n2", "n1", Fixed(ms))
	w.host("n1")
	w.host("n2")
	return w
}

func TestHandshakeAndBytesTakeTheLinkLatency(t *testing.T) {
	w := fixedWorld(t)
	srv := w.listen("n2", ":9092")
	c := w.dial("n1", "n2:9092")
	w.runUntil("accepted", func() bool { return len(srv.conns) == 1 })
	if c.calls != 1 || c.err != nil || c.at != 2*ms || w.s.Now() != 3*ms {
		t.Fatalf("dial: %d calls, err %v, connected at %v, accepted at %v; want connected at 2ms (SYN, SYN-ACK) and accepted at 3ms (ACK)",
			c.calls, c.err, c.at, w.s.Now())
	}
	if c.conn.RemoteAddr() != "n2:9092" || srv.conns[0].LocalAddr() != "n2:9092" ||
		srv.conns[0].RemoteAddr() != c.conn.LocalAddr() || !strings.HasPrefix(c.conn.LocalAddr(), "n1:") {
		t.Fatalf("addresses: dialer %s->%s, acceptor %s->%s",
			c.conn.LocalAddr(), c.conn.RemoteAddr(), srv.conns[0].LocalAddr(), srv.conns[0].RemoteAddr())
	}
	mustWrite(t, c.conn, []byte("ping"))
	mustWrite(t, srv.conns[0], []byte("pong"))
	start := w.s.Now()
	w.runUntil("both received", func() bool { return len(srv.recs[0].data) == 4 && len(c.rec.data) == 4 })
	if string(srv.recs[0].data) != "ping" || string(c.rec.data) != "pong" {
		t.Fatalf("got %q and %q", srv.recs[0].data, c.rec.data)
	}
	if srv.recs[0].lastAt != start+ms || c.rec.lastAt != start+ms {
		t.Fatalf("bytes arrived at %v and %v, want %v", srv.recs[0].lastAt, c.rec.lastAt, start+ms)
	}
}

func TestListenAddresses(t *testing.T) {
	w := fixedWorld(t)
	n1 := w.host("n1")
	accept := func(env.Conn) env.ConnHandler { return &rec{w: w} }
	for _, tc := range []struct {
		addr, bound string
		err         error
	}{
		{":9092", "n1:9092", nil},
		{"0.0.0.0:9093", "n1:9093", nil},
		{"[::]:9094", "n1:9094", nil},
		{"n1:9095", "n1:9095", nil},
		{"n1:9092", "", ErrAddrInUse},
		{"n2:9096", "", ErrAddrNotAvail},
		{"n1", "", ErrBadAddress},
		{"n1:http", "", ErrBadAddress},
		{"n1:70000", "", ErrBadAddress},
		{"n1:-1", "", ErrBadAddress},
		{"a:b:1", "", ErrBadAddress},
	} {
		ln, err := n1.Listen(tc.addr, accept)
		switch {
		case tc.err != nil && !errors.Is(err, tc.err):
			t.Errorf("Listen(%q) = %v, want %v", tc.addr, err, tc.err)
		case tc.err == nil && (err != nil || ln.Addr() != tc.bound):
			t.Errorf("Listen(%q) = %v, %v; want bound to %s", tc.addr, ln, err, tc.bound)
		}
	}
	if _, err := n1.Listen(":1", nil); err == nil {
		t.Error("Listen with a nil accept func succeeded")
	}
}

func TestPortZeroPicksFreePortsDeterministically(t *testing.T) {
	ports := func() []string {
		w := fixedWorld(t)
		n1 := w.host("n1")
		accept := func(env.Conn) env.ConnHandler { return &rec{w: w} }
		if _, err := n1.Listen(":49153", accept); err != nil {
			t.Fatal(err)
		}
		var got []string
		for range 3 {
			ln, err := n1.Listen(":0", accept)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ln.Addr())
		}
		return got
	}
	a, b := ports(), ports()
	want := []string{"n1:49152", "n1:49154", "n1:49155"}
	for i := range want {
		if a[i] != want[i] || b[i] != want[i] {
			t.Fatalf("port 0 bound %v then %v, want %v (skipping the taken 49153)", a, b, want)
		}
	}
}

func TestListenerCloseStopsAcceptingAndKeepsConnections(t *testing.T) {
	w := fixedWorld(t)
	srv := w.listen("n2", ":9092")
	c, sc, sr := w.connect("n1", srv)
	if err := srv.ln.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.ln.Close(); !errors.Is(err, env.ErrClosed) {
		t.Fatalf("second listener Close: %v, want env.ErrClosed", err)
	}
	mustWrite(t, c.conn, []byte("still"))
	mustWrite(t, sc, []byte("open"))
	late := w.dial("n1", "n2:9092")
	w.runUntil("late dial done", func() bool { return late.calls == 1 })
	w.run(10 * ms)
	if string(sr.data) != "still" || string(c.rec.data) != "open" {
		t.Fatalf("after the listener closed: %q and %q", sr.data, c.rec.data)
	}
	if !errors.Is(late.err, ErrConnRefused) {
		t.Fatalf("dial after the listener closed: %v, want ErrConnRefused", late.err)
	}
}

func TestDialNobodyListeningIsRefusedAfterARoundTrip(t *testing.T) {
	w := fixedWorld(t)
	c := w.dial("n1", "n2:9092")
	w.runUntil("dial done", func() bool { return c.calls == 1 })
	if c.conn != nil || !errors.Is(c.err, ErrConnRefused) || c.at != 2*ms {
		t.Fatalf("dial: conn %v err %v at %v; want ErrConnRefused at 2ms", c.conn, c.err, c.at)
	}
	w.run(time.Minute)
	if c.calls != 1 {
		t.Fatalf("connected called %d times", c.calls)
	}
}

func TestDialToADownHostTimesOut(t *testing.T) {
	w := fixedWorld(t)
	w.listen("n2", ":9092")
	w.n.Crash("n2")
	c := w.dial("n1", "n2:9092")
	w.runUntil("dial done", func() bool { return c.calls == 1 })
	if !errors.Is(c.err, ErrTimedOut) || c.at != DefaultConnectTimeout {
		t.Fatalf("dial to a down host: %v at %v, want ErrTimedOut at %v", c.err, c.at, DefaultConnectTimeout)
	}
}

func TestDialAcrossAPartitionTimesOut(t *testing.T) {
	for _, cut := range [][2]string{{"n1", "n2"}, {"n2", "n1"}} {
		w := fixedWorld(t)
		w.listen("n2", ":9092")
		w.n.Partition(cut[0], cut[1])
		c := w.dial("n1", "n2:9092")
		w.runUntil("dial done", func() bool { return c.calls == 1 })
		if !errors.Is(c.err, ErrTimedOut) || c.at != DefaultConnectTimeout {
			t.Fatalf("dial with %s->%s cut: %v at %v, want ErrTimedOut", cut[0], cut[1], c.err, c.at)
		}
	}
}

func TestDialCompletesWhenThePartitionHealsInTime(t *testing.T) {
	w := fixedWorld(t)
	srv := w.listen("n2", ":9092")
	w.n.Partition("n1", "n2")
	c := w.dial("n1", "n2:9092")
	w.at(5*time.Second, func() { w.n.Heal("n1", "n2") })
	w.runUntil("dial done", func() bool { return c.calls == 1 })
	w.runUntil("accepted", func() bool { return len(srv.conns) == 1 })
	if c.err != nil || c.at < 5*time.Second || c.at > 5*time.Second+MaxBackoff+2*ms {
		t.Fatalf("dial across a healed partition: %v at %v", c.err, c.at)
	}
}

func TestDialErrorsRunOnTheLoop(t *testing.T) {
	w := fixedWorld(t)
	for _, tc := range []struct {
		addr string
		err  error
	}{{"nowhere:1", ErrNoSuchHost}, {"n2", ErrBadAddress}, {"n2:99999", ErrBadAddress}} {
		c := w.dial("n1", tc.addr)
		w.runUntil("dial done", func() bool { return c.calls == 1 })
		if !errors.Is(c.err, tc.err) || c.conn != nil {
			t.Errorf("Dial(%q): %v, want %v", tc.addr, c.err, tc.err)
		}
	}
}

func TestDialToOwnHost(t *testing.T) {
	w := fixedWorld(t)
	srv := w.listen("n1", ":9092")
	for i, addr := range []string{"n1:9092", "localhost:9092", ":9092"} {
		c := w.dial("n1", addr)
		w.runUntil("connected", func() bool { return c.calls == 1 && len(srv.conns) == i+1 })
		if c.err != nil {
			t.Fatalf("dial %s from n1: %v", addr, c.err)
		}
		mustWrite(t, c.conn, []byte("self"))
		w.runUntil("data", func() bool { return len(srv.recs[i].data) == 4 })
		if sc := srv.conns[i]; sc.RemoteAddr() != c.conn.LocalAddr() || c.conn.RemoteAddr() != "n1:9092" {
			t.Fatalf("loopback addresses %s->%s and %s->%s",
				c.conn.LocalAddr(), c.conn.RemoteAddr(), sc.LocalAddr(), sc.RemoteAddr())
		}
	}
}

func TestCloseDeliversQueuedBytesThenFin(t *testing.T) {
	w := fixedWorld(t)
	srv := w.listen("n2", ":9092")
	c, sc, sr := w.connect("n1", srv)
	data := pattern(1, 100<<10)
	for p := data; len(p) > 0; p = p[min(len(p), 1000):] {
		mustWrite(t, c.conn, p[:min(len(p), 1000)])
	}
	if err := c.conn.Close(); err != nil {
		t.Fatal(err)
	}
	w.runUntil("peer sees the close", func() bool { return sr.closed })
	sr.check(t, "acceptor")
	if sr.err != nil || !bytes.Equal(sr.data, data) {
		t.Fatalf("acceptor: %s; want all %d bytes then a clean close", describe(sr), len(data))
	}
	if err := sc.Write([]byte("x")); !errors.Is(err, env.ErrClosed) {
		t.Fatalf("Write after OnClose: %v, want env.ErrClosed", err)
	}
	if err := sc.Close(); !errors.Is(err, env.ErrClosed) {
		t.Fatalf("Close after OnClose: %v, want env.ErrClosed", err)
	}
	w.run(time.Minute)
	if c.rec.closed || c.rec.chunks != 0 {
		t.Fatalf("the closing end got events: %s", describe(c.rec))
	}
	if live := w.n.liveConns(); len(live) != 0 {
		t.Fatalf("%d connections still live after both ends closed", len(live))
	}
}

func TestNoEventsAfterLocalClose(t *testing.T) {
	w := fixedWorld(t)
	srv := w.listen("n2", ":9092")
	c, sc, sr := w.connect("n1", srv)
	sr.onData = func([]byte) {
		if sr.chunks == 1 {
			sc.Close()
		}
	}
	for i := range 50 {
		w.at(time.Duration(i)*ms/2, func() {
			if !c.rec.closed {
				mustWrite(t, c.conn, []byte("data"))
			}
		})
	}
	w.runUntil("dialer sees the close", func() bool { return c.rec.closed })
	w.run(time.Minute)
	if sr.chunks != 1 || sr.closed || c.rec.err != nil {
		t.Fatalf("acceptor after local Close: %s; dialer: %s", describe(sr), describe(c.rec))
	}
}

func TestWriteAndCloseAfterCloseFail(t *testing.T) {
	w := fixedWorld(t)
	srv := w.listen("n2", ":9092")
	c, _, sr := w.connect("n1", srv)
	if err := c.conn.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.conn.Write([]byte("x")); !errors.Is(err, env.ErrClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
	if err := c.conn.Close(); !errors.Is(err, env.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	w.runUntil("peer sees the close", func() bool { return sr.closed })
	if sr.err != nil || len(sr.data) != 0 {
		t.Fatalf("acceptor: %s", describe(sr))
	}
}

func TestNilHandlerClosesTheConnection(t *testing.T) {
	w := fixedWorld(t)
	if _, err := w.host("n2").Listen(":9092", func(env.Conn) env.ConnHandler { return nil }); err != nil {
		t.Fatal(err)
	}
	c := w.dial("n1", "n2:9092")
	w.runUntil("dialer sees the close", func() bool { return c.rec.closed })
	if c.err != nil || c.rec.err != nil {
		t.Fatalf("dial %v, close %v; want a clean close", c.err, c.rec.err)
	}
}

func TestStallDelaysBytesThenDeliversThemInOrder(t *testing.T) {
	w := fixedWorld(t)
	srv := w.listen("n2", ":9092")
	c, _, sr := w.connect("n1", srv)
	start := w.s.Now()
	// A stall longer than the RTO: it delays, it never breaks.
	w.n.Stall("n1", "n2", 20*time.Second)
	data := pattern(2, 10000)
	for i := range 10 {
		w.at(time.Duration(i)*time.Second, func() { mustWrite(t, c.conn, data[i*1000:(i+1)*1000]) })
	}
	w.runUntil("all bytes", func() bool { return len(sr.data) == len(data) })
	sr.check(t, "acceptor")
	if !bytes.Equal(sr.data, data) || sr.lastAt != start+20*time.Second || sr.closed || c.rec.closed {
		t.Fatalf("after a stall: %s, last at %v; want all bytes at %v and no close",
			describe(sr), sr.lastAt, start+20*time.Second)
	}
}

func TestOneWayPartitionShorterThanTheRTOOnlyDelays(t *testing.T) {
	w := fixedWorld(t)
	srv := w.listen("n2", ":9092")
	c, sc, sr := w.connect("n1", srv)
	w.n.Partition("n1", "n2")
	mustWrite(t, c.conn, []byte("held"))
	mustWrite(t, sc, []byte("flows"))
	w.run(10 * time.Second)
	if len(sr.data) != 0 || string(c.rec.data) != "flows" {
		t.Fatalf("during n1->n2 cut: acceptor %s, dialer %s", describe(sr), describe(c.rec))
	}
	w.n.Heal("n1", "n2")
	w.run(time.Minute)
	if string(sr.data) != "held" || sr.closed || c.rec.closed {
		t.Fatalf("after healing: acceptor %s, dialer %s", describe(sr), describe(c.rec))
	}
}

func TestOneWayPartitionBreaksTheWriterAfterTheRTO(t *testing.T) {
	w := fixedWorld(t)
	srv := w.listen("n2", ":9092")
	c, _, sr := w.connect("n1", srv)
	w.n.Partition("n1", "n2")
	start := w.s.Now()
	mustWrite(t, c.conn, []byte("lost"))
	w.runUntil("writer breaks", func() bool { return c.rec.closed })
	if !errors.Is(c.rec.err, ErrTimedOut) || c.rec.closedAt != start+ms+DefaultRetransmitTimeout {
		t.Fatalf("writer: %s; want ErrTimedOut at %v", describe(c.rec), start+ms+DefaultRetransmitTimeout)
	}
	// The idle reader learns when the writer's RST gets through.
	w.run(time.Minute)
	if sr.closed {
		t.Fatalf("reader learned through a cut link: %s", describe(sr))
	}
	w.n.HealAll()
	w.runUntil("reader learns", func() bool { return sr.closed })
	if !errors.Is(sr.err, ErrConnReset) || len(sr.data) != 0 {
		t.Fatalf("reader: %s; want ErrConnReset", describe(sr))
	}
	if err := c.conn.Write([]byte("x")); !errors.Is(err, env.ErrClosed) {
		t.Fatalf("Write after a timeout: %v", err)
	}
}

func TestLostAcknowledgementsBreakTheWriter(t *testing.T) {
	w := fixedWorld(t)
	srv := w.listen("n2", ":9092")
	c, _, sr := w.connect("n1", srv)
	// n1's bytes reach n2, but n2's acknowledgements never come back.
	w.n.Partition("n2", "n1")
	mustWrite(t, c.conn, []byte("unacked"))
	w.runUntil("writer breaks", func() bool { return c.rec.closed })
	if string(sr.data) != "unacked" || !errors.Is(c.rec.err, ErrTimedOut) {
		t.Fatalf("writer %s, reader %s", describe(c.rec), describe(sr))
	}
	// n1's RST travels the open direction: the reader learns at once.
	w.runUntil("reader learns", func() bool { return sr.closed })
	if !errors.Is(sr.err, ErrConnReset) || sr.closedAt != c.rec.closedAt+ms {
		t.Fatalf("reader: %s; want ErrConnReset one latency after %v", describe(sr), c.rec.closedAt)
	}
}

func TestTwoWayPartitionBreaksBothWriters(t *testing.T) {
	w := fixedWorld(t)
	srv := w.listen("n2", ":9092")
	c, sc, sr := w.connect("n1", srv)
	w.n.Partition("n1", "n2")
	w.n.Partition("n2", "n1")
	mustWrite(t, c.conn, []byte("a"))
	w.at(time.Second, func() { mustWrite(t, sc, []byte("b")) })
	w.runUntil("both break", func() bool { return c.rec.closed && sr.closed })
	if !errors.Is(c.rec.err, ErrTimedOut) || !errors.Is(sr.err, ErrTimedOut) || len(c.rec.data)+len(sr.data) != 0 {
		t.Fatalf("dialer %s, acceptor %s; want both timed out", describe(c.rec), describe(sr))
	}
}

func TestIdleConnectionsSurviveAPartition(t *testing.T) {
	w := fixedWorld(t)
	srv := w.listen("n2", ":9092")
	c, sc, sr := w.connect("n1", srv)
	w.n.Partition("n1", "n2")
	w.n.Partition("n2", "n1")
	w.run(time.Hour)
	w.n.HealAll()
	mustWrite(t, c.conn, []byte("hello"))
	mustWrite(t, sc, []byte("again"))
	w.run(time.Second)
	if string(sr.data) != "hello" || string(c.rec.data) != "again" || sr.closed || c.rec.closed {
		t.Fatalf("after an idle hour apart: dialer %s, acceptor %s", describe(c.rec), describe(sr))
	}
}

func TestResetReportsAnErrorToBothEnds(t *testing.T) {
	w := fixedWorld(t)
	srv := w.listen("n2", ":9092")
	c, sc, sr := w.connect("n1", srv)
	other := w.listen("n1", ":9000")
	_, _, bystander := w.connect("n2", other)
	mustWrite(t, c.conn, []byte("in flight"))
	w.n.Reset("n2", "n1")
	w.run(time.Second)
	if !errors.Is(c.rec.err, ErrConnReset) || !errors.Is(sr.err, ErrConnReset) || len(sr.data) != 0 {
		t.Fatalf("after Reset: dialer %s, acceptor %s", describe(c.rec), describe(sr))
	}
	if !errors.Is(bystander.err, ErrConnReset) {
		t.Fatalf("Reset spared a connection dialed the other way: %s", describe(bystander))
	}
	if err := sc.Write([]byte("x")); !errors.Is(err, env.ErrClosed) {
		t.Fatalf("Write after a reset was reported: %v", err)
	}
}

func TestResetFailsADialInProgress(t *testing.T) {
	w := fixedWorld(t)
	w.listen("n2", ":9092")
	c := w.dial("n1", "n2:9092")
	w.n.Reset("n1", "n2")
	w.runUntil("dial done", func() bool { return c.calls == 1 })
	if !errors.Is(c.err, ErrConnReset) {
		t.Fatalf("dial during a reset: %v", c.err)
	}
}

func TestCrashLeavesAnIdlePeerHalfOpen(t *testing.T) {
	w := fixedWorld(t)
	srv := w.listen("n2", ":9092")
	c, _, sr := w.connect("n1", srv)
	w.n.Crash("n2")
	w.run(time.Hour)
	if c.rec.closed || sr.closed {
		t.Fatalf("a crash was reported: dialer %s, acceptor %s", describe(c.rec), describe(sr))
	}
	// Writing to the dead host: the bytes vanish until the RTO.
	start := w.s.Now()
	mustWrite(t, c.conn, []byte("anyone?"))
	w.runUntil("writer breaks", func() bool { return c.rec.closed })
	if !errors.Is(c.rec.err, ErrTimedOut) || c.rec.closedAt != start+ms+DefaultRetransmitTimeout || sr.chunks != 0 {
		t.Fatalf("half-open writer: %s; want ErrTimedOut at %v", describe(c.rec), start+ms+DefaultRetransmitTimeout)
	}
}

func TestRestartedHostResetsHalfOpenConnections(t *testing.T) {
	w := fixedWorld(t)
	srv := w.listen("n2", ":9092")
	c, _, sr := w.connect("n1", srv)
	w.n.Crash("n2")
	w.n.Restart("n2", nil)
	w.run(time.Minute)
	if c.rec.closed {
		t.Fatalf("restart was reported without a write: %s", describe(c.rec))
	}
	start := w.s.Now()
	mustWrite(t, c.conn, []byte("hello?"))
	w.runUntil("writer resets", func() bool { return c.rec.closed })
	if !errors.Is(c.rec.err, ErrConnReset) || c.rec.closedAt != start+2*ms || sr.chunks != 0 || sr.closed {
		t.Fatalf("writer to a rebooted host: %s; want ErrConnReset after a round trip", describe(c.rec))
	}
	// The old listener is gone; a new one serves new connections.
	old := w.dial("n1", "n2:9092")
	w.runUntil("dial done", func() bool { return old.calls == 1 })
	if !errors.Is(old.err, ErrConnRefused) {
		t.Fatalf("dial to the crashed listener's port: %v", old.err)
	}
	srv2 := w.listen("n2", ":9092")
	c2, _, r2 := w.connect("n1", srv2)
	mustWrite(t, c2.conn, []byte("fresh"))
	w.runUntil("data", func() bool { return len(r2.data) == 5 })
}

func TestHeldBytesToARestartedHostAreReset(t *testing.T) {
	w := fixedWorld(t)
	srv := w.listen("n2", ":9092")
	c, _, _ := w.connect("n1", srv)
	w.n.Crash("n2")
	mustWrite(t, c.conn, []byte("held"))
	w.run(5 * time.Second)
	w.n.Restart("n2", nil)
	w.runUntil("writer resets", func() bool { return c.rec.closed })
	if !errors.Is(c.rec.err, ErrConnReset) || c.rec.closedAt > 5*time.Second+MaxBackoff+10*ms {
		t.Fatalf("writer whose bytes were held for a down host: %s", describe(c.rec))
	}
}

func TestCrashedHostGetsNoMoreEvents(t *testing.T) {
	w := fixedWorld(t)
	srv := w.listen("n2", ":9092")
	c, sc, sr := w.connect("n1", srv)
	mustWrite(t, c.conn, []byte("too late"))
	dialed := w.dial("n2", "n1:1")
	w.n.Crash("n2")
	w.n.Restart("n2", nil)
	w.run(time.Minute)
	if sr.chunks != 0 || sr.closed || dialed.calls != 0 {
		t.Fatalf("a crashed incarnation got events: %s, dial callbacks %d", describe(sr), dialed.calls)
	}
	if err := sc.Write([]byte("x")); !errors.Is(err, env.ErrClosed) {
		t.Fatalf("Write on a crashed incarnation's conn: %v", err)
	}
	if _, err := w.host("n2").Listen(":9092", func(env.Conn) env.ConnHandler { return nil }); err != nil {
		t.Fatalf("the restarted host cannot reuse its port: %v", err)
	}
}

func TestChunkingSplitsAndCoalesces(t *testing.T) {
	var split, coalesced bool
	for seed := uint64(1); seed <= 20 && !(split && coalesced); seed++ {
		w := newWorld(t, seed)
		srv := w.listen("n2", ":9092")
		c, _, sr := w.connect("n1", srv)
		data := pattern(seed, 20000)
		for i := range 20 {
			mustWrite(t, c.conn, data[i*1000:(i+1)*1000])
		}
		w.runUntil("all bytes", func() bool { return len(sr.data) == len(data) })
		sr.check(t, "acceptor")
		if !bytes.Equal(sr.data, data) {
			t.Fatalf("seed %d: bytes differ", seed)
		}
		prev := 0
		for _, end := range sr.ends {
			split = split || end%1000 != 0
			coalesced = coalesced || end-prev > 1000
			prev = end
		}
	}
	if !split || !coalesced {
		t.Fatalf("over 20 seeds: split=%v coalesced=%v; want both", split, coalesced)
	}
}

func TestLatencyDistributions(t *testing.T) {
	w := newWorld(t, 7)
	r := w.n.r.Fork("test")
	for _, tc := range []struct {
		d        Distribution
		lo, hi   time.Duration
		medianLo time.Duration
		medianHi time.Duration
	}{
		{Fixed(3 * ms), 3 * ms, 3 * ms, 3 * ms, 3 * ms},
		{Uniform(ms, 3*ms), ms, 3 * ms, 1800 * time.Microsecond, 2200 * time.Microsecond},
		{LongTail(ms, 100*ms), ms, 100 * ms, ms, 2 * ms},
	} {
		var samples []time.Duration
		for range 10000 {
			samples = append(samples, tc.d.Sample(r))
		}
		below := 0
		for _, s := range samples {
			if s < tc.lo || s > tc.hi {
				t.Fatalf("%v drew %v", tc.d, s)
			}
			if s <= tc.medianHi {
				below++
			}
		}
		if below < 5000 {
			t.Errorf("%v: only %d of 10000 draws at most %v", tc.d, below, tc.medianHi)
		}
	}
	// The long tail is long: some draws reach ten times the base.
	far := 0
	d := LongTail(ms, time.Second)
	for range 10000 {
		if d.Sample(r) >= 10*ms {
			far++
		}
	}
	if far < 20 || far > 300 {
		t.Errorf("LongTail(1ms): %d of 10000 draws at least 10ms, want about 1%%", far)
	}
}

// slowLoop runs a host's events a fixed delay late, like a busy node.
type slowLoop struct {
	s    *sched.Scheduler
	node string
	d    time.Duration
}

func (l slowLoop) Schedule(d time.Duration, label sched.Label, f func()) {
	label.Node = l.node
	l.s.After(d+l.d, label, f)
}

func TestListenerClosedBeforeAcceptResetsTheConnection(t *testing.T) {
	w := fixedWorld(t)
	srv := w.listen("n2", ":9092")
	w.n.Host("n2", slowLoop{w.s, "n2", ms})
	c := w.dial("n1", "n2:9092")
	// The ACK arrives at 3ms; the slow loop would accept at 4ms.
	w.at(3*ms+ms/2, func() { srv.ln.Close() })
	w.runUntil("dialer sees the reset", func() bool { return c.rec.closed })
	if c.err != nil || !errors.Is(c.rec.err, ErrConnReset) || len(srv.conns) != 0 {
		t.Fatalf("dial %v, then %s; %d accepted; want a connection reset, never accepted", c.err, describe(c.rec), len(srv.conns))
	}
}

func TestListenerClosedBeforeTheAckArrivesResetsTheConnection(t *testing.T) {
	w := fixedWorld(t)
	srv := w.listen("n2", ":9092")
	c := w.dial("n1", "n2:9092")
	w.at(3*ms, func() { srv.ln.Close() }) // runs before the ACK's arrival at 3ms
	w.runUntil("dialer sees the reset", func() bool { return c.rec.closed })
	if c.err != nil || !errors.Is(c.rec.err, ErrConnReset) || c.rec.closedAt != 4*ms || len(srv.conns) != 0 {
		t.Fatalf("dial %v, then %s; %d accepted", c.err, describe(c.rec), len(srv.conns))
	}
}

func TestCloseInsideAcceptIsACleanClose(t *testing.T) {
	w := fixedWorld(t)
	_, err := w.host("n2").Listen(":9092", func(c env.Conn) env.ConnHandler {
		c.Write([]byte("bye"))
		c.Close()
		return &rec{w: w}
	})
	if err != nil {
		t.Fatal(err)
	}
	c := w.dial("n1", "n2:9092")
	w.runUntil("dialer sees the close", func() bool { return c.rec.closed })
	if c.rec.err != nil || string(c.rec.data) != "bye" {
		t.Fatalf("dialer: %s", describe(c.rec))
	}
}

func TestADialThatGaveUpResetsTheLateHandshake(t *testing.T) {
	w := fixedWorld(t)
	w.n.SetTimeouts(0, ms) // the dial gives up before the SYN-ACK can return
	srv := w.listen("n2", ":9092")
	c := w.dial("n1", "n2:9092")
	w.run(time.Minute)
	if c.calls != 1 || !errors.Is(c.err, ErrTimedOut) || len(srv.conns) != 0 {
		t.Fatalf("dial: %d calls, %v; %d accepted", c.calls, c.err, len(srv.conns))
	}
	if live := w.n.liveConns(); len(live) != 0 {
		t.Fatalf("%d connections live after the handshake was reset", len(live))
	}
}

func TestAnAcceptorWhoseDialerVanishedGivesUp(t *testing.T) {
	w := fixedWorld(t)
	srv := w.listen("n2", ":9092")
	w.dial("n1", "n2:9092")
	w.at(2*ms, func() { w.n.Crash("n1") }) // after the SYN-ACK arrived, before the ACK left
	w.run(time.Minute)
	if len(srv.conns) != 0 {
		t.Fatal("accepted a connection whose ACK never came")
	}
	if live := w.n.liveConns(); len(live) != 0 {
		t.Fatalf("%d connections live after the acceptor gave up", len(live))
	}
}

func TestALocalPortIsNotReusedWhileItsConnectionLives(t *testing.T) {
	w := fixedWorld(t)
	srv := w.listen("n2", ":9092")
	c, _, _ := w.connect("n1", srv)
	h := w.n.hosts["n1"]
	h.nextPort = firstEphemeralPort // as if the counter wrapped
	c2, _, _ := w.connect("n1", srv)
	if c2.conn.LocalAddr() == c.conn.LocalAddr() {
		t.Fatalf("two live connections from %s", c.conn.LocalAddr())
	}
	c.conn.Close()
	w.run(time.Minute)
	if srv.recs[0].closed {
		srv.conns[0].Close()
	}
	w.run(time.Minute)
	h.nextPort = firstEphemeralPort
	c3, _, _ := w.connect("n1", srv)
	if c3.conn.LocalAddr() != c.conn.LocalAddr() {
		t.Fatalf("the port of a retired connection was not reused: %s then %s", c.conn.LocalAddr(), c3.conn.LocalAddr())
	}
}

func TestAHandshakeTheAcceptorGaveUpIsResetWhenTheDialerWrites(t *testing.T) {
	w := fixedWorld(t)
	// The acceptor gives up on the ACK well before the dialer's RTO could
	// break the connection over its held ACK.
	w.n.SetTimeouts(time.Minute, 5*time.Second)
	srv := w.listen("n2", ":9092")
	c := w.dial("n1", "n2:9092")
	// The SYN arrives at 1ms; the final ACK leaves at 2ms into the cut.
	w.at(ms+ms/2, func() { w.n.Partition("n1", "n2") })
	w.run(10 * time.Second)
	if c.calls != 1 || c.err != nil || c.rec.closed || len(srv.conns) != 0 {
		t.Fatalf("behind the cut: dial %d calls, %v, %s; %d accepted; want connected, not accepted",
			c.calls, c.err, describe(c.rec), len(srv.conns))
	}
	w.n.Heal("n1", "n2")
	mustWrite(t, c.conn, []byte("anyone?"))
	w.runUntil("dialer sees the reset", func() bool { return c.rec.closed })
	if !errors.Is(c.rec.err, ErrConnReset) || len(c.rec.data) != 0 || len(srv.conns) != 0 {
		t.Fatalf("dialer of a forgotten handshake: %s, %d accepted; want ErrConnReset", describe(c.rec), len(srv.conns))
	}
	w.run(time.Minute)
	if live := w.n.liveConns(); len(live) != 0 {
		t.Fatalf("%d connections live after the reset", len(live))
	}
}

func TestPortPartitionCutsOnlyThatPortsConnections(t *testing.T) {
	w := fixedWorld(t)
	data := w.listen("n2", ":9092")
	ctl := w.listen("n2", ":9093")
	dc, _, dr := w.connect("n1", data)
	cc, _, cr := w.connect("n1", ctl)
	w.n.PartitionPort("n1", "n2", 9093)
	w.n.PartitionPort("n2", "n1", 9093)
	mustWrite(t, dc.conn, []byte("data"))
	mustWrite(t, cc.conn, []byte("held"))
	w.run(5 * time.Second)
	if string(dr.data) != "data" || len(cr.data) != 0 {
		t.Fatalf("during the 9093 cut: data port %s, controller port %s", describe(dr), describe(cr))
	}
	w.n.HealPort("n1", "n2", 9093)
	w.n.HealPort("n2", "n1", 9093)
	w.run(time.Minute)
	if string(cr.data) != "held" || cr.closed || cc.rec.closed {
		t.Fatalf("after healing: controller port %s, dialer %s", describe(cr), describe(cc.rec))
	}
	w.n.PartitionPort("n2", "n1", 9093)
	late := w.dial("n1", "n2:9093")
	w.runUntil("dial done", func() bool { return late.calls == 1 })
	if !errors.Is(late.err, ErrTimedOut) {
		t.Fatalf("dial to a port cut one way: %v, want ErrTimedOut", late.err)
	}
}
