package simnet

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// stalledPair is n1 connected to n2:9093, the connection's id, and the
// acceptor's recorder.
func stalledPair(t *testing.T) (*world, *server, *client, *rec, uint64) {
	w := fixedWorld(t)
	srv := w.listen("n2", ":9093")
	c, _, sr := w.connect("n1", srv)
	ids := w.n.Conns("n1", "n2", 9093)
	if len(ids) != 1 {
		t.Fatalf("Conns(n1, n2, 9093) = %v, want one connection", ids)
	}
	return w, srv, c, sr, ids[0]
}

func TestConnStallHoldsARequestPastOneSentLaterOnANewConnection(t *testing.T) {
	w, srv, old, oldRec, id := stalledPair(t)
	start := w.s.Now()
	// Longer than the RTO: a connection stall never breaks the connection.
	if !w.n.StallConn(id, DialerToAcceptor, 20*time.Second) {
		t.Fatalf("StallConn(%d) found no connection", id)
	}
	mustWrite(t, old.conn, []byte("stale"))
	// The client gives up on the connection and sends on a new one.
	w.at(5*time.Second, func() {
		if err := old.conn.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	w.run(5 * time.Second)
	fresh, _, freshRec := w.connect("n1", srv)
	mustWrite(t, fresh.conn, []byte("fresh"))
	w.runUntil("the stale request", func() bool { return len(oldRec.data) > 0 })
	w.runUntil("the stale connection's close", func() bool { return oldRec.closed })
	oldRec.check(t, "stalled acceptor")
	freshRec.check(t, "fresh acceptor")
	if string(freshRec.data) != "fresh" || freshRec.lastAt >= oldRec.lastAt {
		t.Fatalf("the fresh connection got %q at %v, the stalled one at %v: want the fresh request first",
			freshRec.data, freshRec.lastAt, oldRec.lastAt)
	}
	if string(oldRec.data) != "stale" || oldRec.lastAt != start+20*time.Second || oldRec.err != nil {
		t.Fatalf("stalled connection: %s, bytes at %v; want \"stale\" at %v and then a clean close",
			describe(oldRec), oldRec.lastAt, start+20*time.Second)
	}
	if old.rec.closed || len(old.rec.breaches) > 0 {
		t.Fatalf("the dialer that closed got events: %s %v", describe(old.rec), old.rec.breaches)
	}
}

func TestConnStallHoldsOnlyTheWayAsked(t *testing.T) {
	w, srv, c, sr, id := stalledPair(t)
	w.n.StallConn(id, AcceptorToDialer, 10*time.Second)
	mustWrite(t, c.conn, []byte("request"))
	w.run(time.Second)
	if string(sr.data) != "request" {
		t.Fatalf("the way not stalled: acceptor %s", describe(sr))
	}
	mustWrite(t, srv.conns[0], []byte("answer"))
	w.run(time.Second)
	if len(c.rec.data) != 0 {
		t.Fatalf("the stalled way delivered %q early", c.rec.data)
	}
	w.run(10 * time.Second)
	if string(c.rec.data) != "answer" || c.rec.closed || sr.closed {
		t.Fatalf("after the stall: dialer %s, acceptor %s", describe(c.rec), describe(sr))
	}
}

func TestConnStallLosesItsBytesOnlyToAReset(t *testing.T) {
	w, _, c, sr, id := stalledPair(t)
	w.n.StallConn(id, BothWays, 10*time.Second)
	mustWrite(t, c.conn, []byte("lost"))
	w.run(time.Second)
	w.n.Reset("n1", "n2")
	w.run(time.Minute)
	if len(sr.data) != 0 || !errors.Is(sr.err, ErrConnReset) || !errors.Is(c.rec.err, ErrConnReset) {
		t.Fatalf("after a reset of a stalled connection: acceptor %s, dialer %s", describe(sr), describe(c.rec))
	}
	if live := w.n.liveConns(); len(live) != 0 {
		t.Fatalf("%d connections live after the reset", len(live))
	}
}

func TestConnStallOfACrashedSenderIsLost(t *testing.T) {
	w, _, c, sr, id := stalledPair(t)
	w.n.StallConn(id, DialerToAcceptor, 10*time.Second)
	mustWrite(t, c.conn, []byte("lost"))
	w.run(time.Second)
	w.n.Crash("n1")
	w.run(time.Minute)
	if len(sr.data) != 0 || sr.closed {
		t.Fatalf("a crashed dialer's stalled bytes: acceptor %s, want nothing (half-open)", describe(sr))
	}
}

func TestUnstallConnDeliversAtOnceInOrder(t *testing.T) {
	w, _, c, sr, id := stalledPair(t)
	w.n.StallConn(id, DialerToAcceptor, time.Hour)
	mustWrite(t, c.conn, []byte("one "))
	w.run(time.Second)
	mustWrite(t, c.conn, []byte("two"))
	w.run(time.Second)
	if len(sr.data) != 0 {
		t.Fatalf("stalled bytes arrived: %s", describe(sr))
	}
	at := w.s.Now()
	w.n.UnstallConn(id)
	w.run(time.Second)
	if string(sr.data) != "one two" || sr.lastAt != at+ms {
		t.Fatalf("after UnstallConn at %v: %s, last at %v; want \"one two\" a link latency later", at, describe(sr), sr.lastAt)
	}
	mustWrite(t, c.conn, []byte("!"))
	w.run(time.Second)
	if string(sr.data) != "one two!" {
		t.Fatalf("after the stall: %s", describe(sr))
	}
}

func TestConnsListsEstablishedConnectionsByDialerAndPort(t *testing.T) {
	w := fixedWorld(t)
	ctl := w.listen("n2", ":9093")
	data := w.listen("n2", ":9092")
	back := w.listen("n1", ":9093")
	a, _, _ := w.connect("n1", ctl)
	w.connect("n1", data)
	w.connect("n2", back)
	w.connect("n1", ctl)
	all := w.n.Conns("n1", "n2", 9093)
	if len(all) != 2 || all[0] >= all[1] || !slices.Equal(w.n.Conns("n1", "n2", 0)[:1], all[:1]) ||
		len(w.n.Conns("n1", "n2", 0)) != 3 || len(w.n.Conns("n2", "n1", 9093)) != 1 {
		t.Fatalf("Conns: n1->n2:9093 %v, n1->n2:* %v, n2->n1:9093 %v", all,
			w.n.Conns("n1", "n2", 0), w.n.Conns("n2", "n1", 9093))
	}
	if err := a.conn.Close(); err != nil {
		t.Fatal(err)
	}
	if got := w.n.Conns("n1", "n2", 9093); len(got) != 1 || got[0] != all[1] {
		t.Fatalf("after closing the first: %v, want [%d]", got, all[1])
	}
	if w.n.StallConn(1<<40, BothWays, time.Second) {
		t.Fatal("StallConn of an unknown id reported a connection")
	}
}
