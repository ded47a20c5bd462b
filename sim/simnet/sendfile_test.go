package simnet

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/sched"
	"github.com/sluicemq/sluice/sim/simfs"
)

// sendFileSetup is a connection from a to b whose dialing end, on a, sends
// from a file on a's disk.
type sendFileSetup struct {
	w       *world
	disk    *simfs.Disk
	f       env.File
	content []byte
	c       *client        // a's end
	fs      env.FileSender // a's end, sending
	peer    *rec           // what b receives
	peerEnd env.Conn       // b's end
	srv     *server        // b's listener
}

func newSendFileSetup(t *testing.T, seed uint64, size int) *sendFileSetup {
	t.Helper()
	w := newWorld(t, seed)
	disk := simfs.New(rng.New(seed).Fork("disk"), sched.Direct(w.s, "a"))
	f, err := disk.Create("seg")
	if err != nil {
		t.Fatal(err)
	}
	content := pattern(seed+100, size)
	if _, err := f.Write(content); err != nil {
		t.Fatal(err)
	}
	srv := w.listen("b", "b:9092")
	c, peerEnd, peer := w.connect("a", srv)
	fs, ok := c.conn.(env.FileSender)
	if !ok {
		t.Fatalf("a simnet connection (%T) does not implement env.FileSender", c.conn)
	}
	return &sendFileSetup{w: w, disk: disk, f: f, content: content, c: c, fs: fs, peer: peer, peerEnd: peerEnd, srv: srv}
}

func (s *sendFileSetup) send(t *testing.T, off, n int64) {
	t.Helper()
	if err := s.fs.SendFile(s.f, off, n); err != nil {
		t.Fatalf("SendFile(%d, %d): %v", off, n, err)
	}
}

func TestSendFileInterleavesWithWritesAndOutlivesTheFile(t *testing.T) {
	for seed := range uint64(20) {
		s := newSendFileSetup(t, seed, 64<<10)
		mustWrite(t, s.c.conn, []byte("head"))
		s.send(t, 100, 30000)
		mustWrite(t, s.c.conn, []byte("mid"))
		s.send(t, 0, int64(len(s.content)))
		// Closing and removing the file does not stop what is queued.
		if err := s.f.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.disk.Remove("seg"); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, s.c.conn, []byte("tail"))
		if err := s.c.conn.Close(); err != nil {
			t.Fatal(err)
		}
		s.w.runUntil("the peer sees the close", func() bool { return s.peer.closed })
		s.peer.check(t, "peer")
		want := append(append(append([]byte("head"), s.content[100:30100]...), "mid"...), s.content...)
		want = append(want, "tail"...)
		if s.peer.err != nil || !bytes.Equal(s.peer.data, want) {
			t.Fatalf("seed %d: peer got %s; want %d bytes and a clean close", seed, describe(s.peer), len(want))
		}
	}
}

func TestSendFileRefusals(t *testing.T) {
	s := newSendFileSetup(t, 1, 100)
	if err := s.fs.SendFile(s.f, -1, 5); err == nil {
		t.Error("SendFile at a negative offset succeeded")
	}
	if err := s.fs.SendFile(s.f, 0, -5); err == nil {
		t.Error("SendFile of a negative length succeeded")
	}
	if err := s.fs.SendFile(notSimfs{}, 0, 5); err == nil || !strings.Contains(err.Error(), "not a simfs file") {
		t.Errorf("SendFile of a foreign file: err = %v", err)
	}
	s.f.Close()
	if err := s.fs.SendFile(s.f, 0, 5); !errors.Is(err, env.ErrClosed) {
		t.Errorf("SendFile of a closed file: err = %v, want env.ErrClosed", err)
	}
	if err := s.fs.SendFile(s.f, 0, 0); err != nil {
		t.Errorf("SendFile of nothing: err = %v, want nil as osenv", err)
	}
	s.c.conn.Close()
	if err := s.fs.SendFile(s.f, 0, 5); !errors.Is(err, env.ErrClosed) {
		t.Errorf("SendFile after Close: err = %v, want env.ErrClosed", err)
	}
}

type notSimfs struct{ env.File }

func (notSimfs) Name() string { return "foreign" }

// The range is read after the call, at a seeded time up to its arrival: a
// truncation in the same turn always cuts it.
func TestSendFileOfATruncatedFileEndsTheStream(t *testing.T) {
	fins, rsts := 0, 0
	for seed := range uint64(30) {
		s := newSendFileSetup(t, seed, 10000)
		// Bytes waiting unread at a when the send fails make Linux reset
		// the connection (one time in two here): a's loop is held while
		// "first" is delivered, so "unread" waits behind it.
		loop := &heldLoop{s: s.w.s, paused: true}
		s.w.n.Host("a", loop)
		a := s.c.conn.(*end)
		mustWrite(t, s.peerEnd, []byte("first"))
		s.w.runUntil("first is taken", func() bool { return a.busy })
		mustWrite(t, s.peerEnd, []byte("unread"))
		s.w.runUntil("unread waits", func() bool { return a.rcvLen > 0 })
		mustWrite(t, s.c.conn, []byte("head"))
		s.send(t, 0, 10000)
		if err := s.f.Truncate(4000); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, s.c.conn, []byte("lost"))
		s.w.runUntil("the peer sees the close", func() bool { return s.peer.closed })
		loop.resume()
		s.w.runUntil("the sender sees the close", func() bool { return s.c.rec.closed })
		s.peer.check(t, "peer")
		s.c.rec.check(t, "sender")
		if err := s.c.rec.err; err == nil || !strings.Contains(err.Error(), "ended 6000 bytes early") {
			t.Fatalf("seed %d: the sender's OnClose says %v; want the file's early end", seed, err)
		}
		if got := string(s.c.rec.data); got == "" || !strings.HasPrefix("first", got) {
			t.Fatalf("seed %d: the sender got %q; want what was delivered before the failure, not what waited", seed, got)
		}
		switch {
		case s.peer.err == nil:
			fins++
			want := append([]byte("head"), s.content[:4000]...)
			if !bytes.Equal(s.peer.data, want) {
				t.Fatalf("seed %d: after a FIN the peer got %s; want the %d bytes before the file's end", seed, describe(s.peer), len(want))
			}
		case errors.Is(s.peer.err, ErrConnReset):
			rsts++
			if !bytes.HasPrefix(append([]byte("head"), s.content[:4000]...), s.peer.data) {
				t.Fatalf("seed %d: after an RST the peer got %s, no prefix of what was sent", seed, describe(s.peer))
			}
		default:
			t.Fatalf("seed %d: the peer's OnClose says %v", seed, s.peer.err)
		}
		if err := s.c.conn.Write([]byte("x")); !errors.Is(err, env.ErrClosed) {
			t.Fatalf("seed %d: Write after the reported break: %v", seed, err)
		}
	}
	if fins == 0 || rsts == 0 {
		t.Fatalf("over 30 seeds a failed send with unread bytes closed with %d FINs and %d RSTs; want both", fins, rsts)
	}
}

// heldLoop is a host's loop that holds its events while paused.
type heldLoop struct {
	s      *sched.Scheduler
	paused bool
	held   []func()
}

func (l *heldLoop) Schedule(d time.Duration, label sched.Label, f func()) {
	if l.paused {
		l.held = append(l.held, f)
		return
	}
	l.s.After(d, label, f)
}

func (l *heldLoop) resume() {
	l.paused = false
	for _, f := range l.held {
		l.s.After(0, sched.Label{Kind: "test.resume"}, f)
	}
	l.held = nil
}

// A change to the range after the call shows or not, as the seed draws
// the read time; the range is read whole at one time.
func TestSendFileReadsWhenTheRangeGoesOut(t *testing.T) {
	sawOld, sawNew := 0, 0
	for seed := range uint64(60) {
		s := newSendFileSetup(t, seed, 1000)
		s.send(t, 0, 1000)
		changed := bytes.Repeat([]byte{0xee}, 1000)
		s.w.at(300*time.Microsecond, func() {
			if _, err := s.f.WriteAt(changed, 0); err != nil {
				t.Error(err)
			}
		})
		s.w.runUntil("the range arrives", func() bool { return len(s.peer.data) == 1000 })
		switch {
		case bytes.Equal(s.peer.data, s.content):
			sawOld++
		case bytes.Equal(s.peer.data, changed):
			sawNew++
		default:
			t.Fatalf("seed %d: the peer got a mix of the range before and after the change", seed)
		}
	}
	if sawOld == 0 || sawNew == 0 {
		t.Fatalf("over 60 seeds the range was read before the change %d times and after it %d times; want both", sawOld, sawNew)
	}
}

func TestSendFileReadFaults(t *testing.T) {
	t.Run("EIO", func(t *testing.T) {
		s := newSendFileSetup(t, 3, 5000)
		if err := s.disk.FailNext(simfs.OpRead, env.ErrIO); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, s.c.conn, []byte("head"))
		s.send(t, 0, 5000)
		mustWrite(t, s.c.conn, []byte("lost"))
		s.w.runUntil("both ends closed", func() bool { return s.peer.closed && s.c.rec.closed })
		if !errors.Is(s.c.rec.err, env.ErrIO) {
			t.Fatalf("the sender's OnClose says %v; want env.ErrIO", s.c.rec.err)
		}
		if s.peer.err != nil || string(s.peer.data) != "head" {
			t.Fatalf("the peer got %s; want \"head\" and a FIN", describe(s.peer))
		}
		if st := s.disk.Stats(); st.InjectedIO != 1 {
			t.Fatalf("the disk injected %d EIOs, want 1", st.InjectedIO)
		}
		if st := s.w.n.Stats(); st != (Stats{SendFiles: 1, SendFilesFailed: 1}) {
			t.Fatalf("network stats %+v; want one range sent and failed", st)
		}
	})
	t.Run("BitFlip", func(t *testing.T) {
		s := newSendFileSetup(t, 4, 5000)
		s.disk.FlipNextRead()
		s.send(t, 0, 5000)
		s.w.runUntil("the range arrives", func() bool { return len(s.peer.data) == 5000 })
		diff := 0
		for i := range s.content {
			diff += bitCount(s.content[i] ^ s.peer.data[i])
		}
		if diff != 1 || s.peer.closed || s.c.rec.closed {
			t.Fatalf("a flipped read sent %d flipped bits (want 1); closed: peer %v, sender %v", diff, s.peer.closed, s.c.rec.closed)
		}
		if st := s.w.n.Stats(); st != (Stats{SendFiles: 1, SendFileBytes: 5000}) {
			t.Fatalf("network stats %+v; want one range of 5000 bytes", st)
		}
	})
}

func bitCount(b byte) int {
	n := 0
	for ; b != 0; b &= b - 1 {
		n++
	}
	return n
}

// A crash or a kill with ranges still unread leaves nothing behind.
func TestSendFilePendingAtACrash(t *testing.T) {
	for _, kill := range []bool{false, true} {
		s := newSendFileSetup(t, 5, 5000)
		s.send(t, 0, 5000)
		s.send(t, 10, 100)
		if kill {
			s.w.n.Kill("a")
		} else {
			s.w.n.Crash("a")
		}
		s.w.run(time.Minute)
		if len(s.peer.data) != 0 {
			t.Fatalf("kill=%v: the peer got %d bytes from a crashed sender", kill, len(s.peer.data))
		}
		if p := s.c.conn.(*end).out; len(p.reads) != 0 || p.read != nil {
			t.Fatalf("kill=%v: %d reads and event %v left after the sender's end broke", kill, len(p.reads), p.read)
		}
	}
}

// Without SendFile (Network.SetSendFile(false)), ends are plain env.Conns.
func TestSetSendFileOff(t *testing.T) {
	w := newWorld(t, 1)
	w.n.SetSendFile(false)
	srv := w.listen("b", "b:9092")
	c, peerEnd, _ := w.connect("a", srv)
	if _, ok := c.conn.(env.FileSender); ok {
		t.Error("the dialing end implements env.FileSender with SendFile off")
	}
	if _, ok := peerEnd.(env.FileSender); ok {
		t.Error("the accepting end implements env.FileSender with SendFile off")
	}
	mustWrite(t, c.conn, []byte("ping"))
	w.runUntil("ping arrives", func() bool { return len(srv.recs[0].data) == 4 })
	w.n.SetSendFile(true)
	c2, _, _ := w.connect("a", srv)
	if _, ok := c2.conn.(env.FileSender); !ok {
		t.Error("SetSendFile(true) did not apply to a new connection")
	}
}

// The same seed gives the same trace with ranges read at seeded times.
func TestSendFileDeterminism(t *testing.T) {
	run := func(seed uint64) string {
		s := newSendFileSetup(t, seed, 20000)
		for i := range 20 {
			mustWrite(t, s.c.conn, []byte(fmt.Sprint(i)))
			s.send(t, int64(i*500), 1000)
		}
		s.w.at(200*time.Microsecond, func() { s.f.Truncate(12000) })
		s.w.run(time.Second)
		return fmt.Sprintf("%s %d %v", s.w.s.Trace(), len(s.peer.data), s.c.rec.err)
	}
	for seed := range uint64(5) {
		if a, b := run(seed), run(seed); a != b {
			t.Fatalf("seed %d: two runs differ:\n%s\n%s", seed, a, b)
		}
	}
}

// TestRecycleOverwritesTheFrame: a recycled frame turns to junk at once.
func TestRecycleOverwritesTheFrame(t *testing.T) {
	frame := []byte("records")
	(&end{}).Recycle(frame)
	for i, b := range frame {
		if b != recycledJunk {
			t.Fatalf("byte %d is %#x after Recycle, want %#x", i, b, recycledJunk)
		}
	}
}
