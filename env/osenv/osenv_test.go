package osenv

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/env/envtest"
)

// waitMax bounds every wait in these tests; it only matters when something
// is broken, so it is generous.
const waitMax = 30 * time.Second

func TestConformance(t *testing.T) { envtest.Run(t, newOSWorld) }

// osWorld runs all its nodes on one shared loop, so that RunUntil's
// condition can read every node's state from the loop goroutine.
type osWorld struct {
	t    testing.TB
	loop *Loop

	mu    sync.Mutex
	nodes map[string]*Node
	dirs  map[string]string // each node's data directory, kept across Kill
}

func newOSWorld(t testing.TB) envtest.World {
	goroutinesBefore := runtime.NumGoroutine()
	w := &osWorld{t: t, loop: NewLoop(), nodes: make(map[string]*Node), dirs: make(map[string]string)}
	go w.loop.Run()
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		for name, n := range w.nodes {
			if err := n.Close(); err != nil {
				t.Errorf("close node %s: %v", name, err)
			}
		}
		w.loop.Stop()
		<-w.loop.Done()
		checkNoLeaks(t, goroutinesBefore)
	})
	return w
}

func (w *osWorld) Node(name string) env.Env {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n, ok := w.nodes[name]; ok {
		return n.Env()
	}
	dir, ok := w.dirs[name]
	if !ok {
		dir = w.t.TempDir()
		w.dirs[name] = dir
	}
	n := newTestNodeIn(w.t, w.loop, dir)
	w.nodes[name] = n
	return n.Env()
}

// Kill implements envtest.Killer. Closing the node releases what the
// kernel releases when a process dies (its descriptors, and with them its
// locks) without flushing anything; the next Node call opens the same
// directory again.
func (w *osWorld) Kill(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n, ok := w.nodes[name]; ok {
		if err := n.Close(); err != nil {
			w.t.Errorf("close node %s: %v", name, err)
		}
		delete(w.nodes, name)
	}
}

func (w *osWorld) ListenAddr(string) string { return "127.0.0.1:0" }

func (w *osWorld) Do(_ string, f func()) {
	w.t.Helper()
	if !runOn(w.loop, f) {
		w.t.Fatalf("the loop did not run a posted function within %v", waitMax)
	}
}

func (w *osWorld) RunUntil(cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(waitMax)
	for {
		var ok bool
		w.Do("", func() { ok = cond() })
		if ok {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("condition did not hold within %v", waitMax)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func newTestNode(t testing.TB, loop *Loop) *Node {
	return newTestNodeIn(t, loop, t.TempDir())
}

func newTestNodeIn(t testing.TB, loop *Loop, dir string) *Node {
	n, err := New(Config{
		Dir:  dir,
		Loop: loop,
		Log:  slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// runOn runs f on loop and waits for it, reporting false on timeout.
func runOn(loop *Loop, f func()) bool {
	done := make(chan struct{})
	loop.Post(func() {
		defer close(done)
		f()
	})
	select {
	case <-done:
		return true
	case <-time.After(waitMax):
		return false
	}
}

// checkNoLeaks waits for the goroutine count to fall back to what it was.
// Transient goroutines (a time.AfterFunc posting to a stopped loop) are
// given a moment to end.
func checkNoLeaks(t testing.TB, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Errorf("%d goroutines leaked:\n%s", runtime.NumGoroutine()-before, buf)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// startNode makes a node on its own running loop, torn down at cleanup.
func startNode(t *testing.T) *Node {
	t.Helper()
	before := runtime.NumGoroutine()
	loop := NewLoop()
	go loop.Run()
	n := newTestNode(t, loop)
	t.Cleanup(func() {
		n.Close()
		loop.Stop()
		<-loop.Done()
		checkNoLeaks(t, before)
	})
	return n
}

// do runs f on n's loop and fails the test with its error.
func do(t *testing.T, n *Node, f func(e env.Env) error) {
	t.Helper()
	var err error
	if !runOn(n.Loop(), func() { err = f(n.Env()) }) {
		t.Fatal("loop stuck")
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestPathsOutsideTheRootAreRejected(t *testing.T) {
	n := startNode(t)
	bad := []string{"", "/etc/passwd", "..", "../x", "a/../../x", "a//b", "./a", "a/", "a/./b"}
	do(t, n, func(e env.Env) error {
		for _, name := range bad {
			_, errCreate := e.FS.Create(name)
			_, errOpen := e.FS.Open(name)
			_, errStat := e.FS.Stat(name)
			_, errList := e.FS.List(name)
			errs := map[string]error{
				"Create":   errCreate,
				"Open":     errOpen,
				"Stat":     errStat,
				"List":     errList,
				"Remove":   e.FS.Remove(name),
				"MkdirAll": e.FS.MkdirAll(name),
				"Rename":   e.FS.Rename("x", name),
			}
			for op, err := range errs {
				if !errors.Is(err, fs.ErrInvalid) {
					return fmt.Errorf("%s(%q): err = %v, want fs.ErrInvalid", op, name, err)
				}
			}
		}
		return nil
	})
	var syncErr error
	do(t, n, func(e env.Env) error {
		e.FS.SyncDir("../..", func(err error) { syncErr = err })
		return nil
	})
	do(t, n, func(env.Env) error { // the callback was posted before this
		if !errors.Is(syncErr, fs.ErrInvalid) {
			return fmt.Errorf("SyncDir(../..): err = %v, want fs.ErrInvalid", syncErr)
		}
		return nil
	})
}

func TestSymlinkOutOfTheRootIsRejected(t *testing.T) {
	n := startNode(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(n.fs.root.Name(), "link")); err != nil {
		t.Fatal(err)
	}
	do(t, n, func(e env.Env) error {
		if f, err := e.FS.Open("link/secret"); err == nil {
			f.Close()
			return errors.New("opened a file through a symbolic link out of the root")
		}
		return nil
	})
}

func TestErrorsAreClassified(t *testing.T) {
	cases := []struct {
		errno syscall.Errno
		class error
	}{
		{unix.EIO, env.ErrIO},
		{unix.ENOSPC, env.ErrNoSpace},
		{unix.EDQUOT, env.ErrNoSpace},
	}
	for _, c := range cases {
		err := mapErr(&fs.PathError{Op: "write", Path: "f", Err: c.errno})
		if !errors.Is(err, c.class) || !errors.Is(err, c.errno) {
			t.Errorf("mapErr(%v) = %v: want both %v and the errno", c.errno, err, c.class)
		}
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Path != "f" {
			t.Errorf("mapErr(%v) lost the *fs.PathError", c.errno)
		}
	}
	notExist := mapErr(&fs.PathError{Op: "open", Path: "f", Err: unix.ENOENT})
	if !errors.Is(notExist, fs.ErrNotExist) || errors.Is(notExist, env.ErrIO) {
		t.Errorf("mapErr(ENOENT) = %v, want fs.ErrNotExist only", notExist)
	}
	if mapErr(nil) != nil {
		t.Error("mapErr(nil) != nil")
	}
}

// TestNoSpaceFromADevice writes to a /dev/full node made inside the root, the
// one way to get a real ENOSPC from the kernel without a full disk.
func TestNoSpaceFromADevice(t *testing.T) {
	n := startNode(t)
	devFull := int(unix.Mkdev(1, 7))
	if err := unix.Mknod(filepath.Join(n.fs.root.Name(), "full"), unix.S_IFCHR|0o666, devFull); err != nil {
		t.Skipf("cannot make a /dev/full node here: %v", err)
	}
	do(t, n, func(e env.Env) error {
		f, err := e.FS.Open("full")
		if err != nil {
			if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
				return nil // a nodev mount
			}
			return err
		}
		defer f.Close()
		_, err = f.Write([]byte("x"))
		if !errors.Is(err, env.ErrNoSpace) || !errors.Is(err, unix.ENOSPC) {
			return fmt.Errorf("write to /dev/full: err = %v, want env.ErrNoSpace wrapping ENOSPC", err)
		}
		return nil
	})
}

func TestConcurrentPostsKeepEachPostersOrder(t *testing.T) {
	loop := NewLoop()
	go loop.Run()
	defer func() { loop.Stop(); <-loop.Done() }()
	const posters, each = 8, 2000
	last := make([]int, posters) // loop-owned
	var bad []string             // loop-owned
	var wg sync.WaitGroup
	for p := range posters {
		wg.Go(func() {
			for i := 1; i <= each; i++ {
				loop.Post(func() {
					if last[p] != i-1 {
						bad = append(bad, fmt.Sprintf("poster %d: %d after %d", p, i, last[p]))
					}
					last[p] = i
				})
			}
		})
	}
	wg.Wait()
	var total int
	runOn(loop, func() {
		for _, v := range last {
			total += v
		}
	})
	if total != posters*each || len(bad) > 0 {
		t.Fatalf("ran %d of %d posts; order breaches: %v", total, posters*each, bad)
	}
}

func TestStopDropsQueuedWork(t *testing.T) {
	loop := NewLoop()
	ran := 0
	loop.Post(func() { ran++ })
	loop.Post(func() { ran++; loop.Stop() })
	loop.Post(func() { ran++ })
	loop.Run() // returns because the second function stops it
	loop.Post(func() { ran++ })
	if ran != 2 {
		t.Fatalf("ran %d functions, want 2: Stop must drop the rest of the queue", ran)
	}
	select {
	case <-loop.Done():
	default:
		t.Fatal("Done not closed after Run returned")
	}
}

func TestStopBeforeRun(t *testing.T) {
	loop := NewLoop()
	loop.Post(func() { t.Error("a function ran on a loop stopped before Run") })
	loop.Stop()
	loop.Run()
}

// TestTimerStopBeatsAPostedFire stops a timer whose wake-up has already been
// posted to the loop: the function must not run.
func TestTimerStopBeatsAPostedFire(t *testing.T) {
	n := startNode(t)
	fired := false
	var stopped bool
	do(t, n, func(e env.Env) error {
		tm := e.Clock.AfterFunc(time.Millisecond, func() { fired = true })
		time.Sleep(20 * time.Millisecond) // the wake-up posts while the loop is busy
		stopped = tm.Stop()
		return nil
	})
	// A timer set later fires after any wake-up the first one posted.
	done := false
	do(t, n, func(e env.Env) error {
		e.Clock.AfterFunc(2*time.Millisecond, func() { done = true })
		return nil
	})
	waitFor(t, n, func() bool { return done })
	do(t, n, func(env.Env) error {
		if !stopped || fired {
			return fmt.Errorf("Stop returned %v and the function ran: %v", stopped, fired)
		}
		return nil
	})
}

func waitFor(t *testing.T, n *Node, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitMax)
	for {
		var ok bool
		runOn(n.Loop(), func() { ok = cond() })
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("condition did not hold in time")
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func TestRandIsSeededPerNode(t *testing.T) {
	a, b := startNode(t), startNode(t)
	if a.Env().Rand.Uint64() == b.Env().Rand.Uint64() {
		t.Fatal("two nodes drew the same first value: the seed is not random")
	}
}

// TestCloseWithWorkInFlight closes a node with syncs pending, connections
// open in both directions and a timer armed; checkNoLeaks in the cleanup
// verifies that every goroutine ended.
func TestCloseWithWorkInFlight(t *testing.T) {
	n := startNode(t)
	do(t, n, func(e env.Env) error {
		f, err := e.FS.Create("f")
		if err != nil {
			return err
		}
		for range 3 {
			f.Write(make([]byte, 1<<20))
			f.Sync(func(error) {})
		}
		e.FS.SyncDir(".", func(error) {})
		e.Clock.AfterFunc(time.Hour, func() { t.Error("timer fired after Close") })
		ln, err := e.Net.Listen("127.0.0.1:0", func(c env.Conn) env.ConnHandler {
			c.Write(make([]byte, 1<<20))
			return nopHandler{}
		})
		if err != nil {
			return err
		}
		for range 3 {
			e.Net.Dial(ln.Addr(), func(c env.Conn, err error) env.ConnHandler {
				if err == nil {
					c.Write(make([]byte, 1<<20))
				}
				return nopHandler{}
			})
		}
		return nil
	})
	time.Sleep(10 * time.Millisecond) // let some of it get under way
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); !errors.Is(err, env.ErrClosed) {
		t.Fatalf("second Close: err = %v, want env.ErrClosed", err)
	}
}

type nopHandler struct{}

func (nopHandler) OnData([]byte) {}
func (nopHandler) OnClose(error) {}

// TestAbruptPeerCloseReportsAnError resets a connection from the peer and
// expects OnClose with an error.
func TestAbruptPeerCloseReportsAnError(t *testing.T) {
	n := startNode(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var closeErr error
	closed := false
	do(t, n, func(e env.Env) error {
		e.Net.Dial(ln.Addr().String(), func(c env.Conn, err error) env.ConnHandler {
			if err != nil {
				closed, closeErr = true, err
				return nil
			}
			return &closeRecorder{closed: &closed, err: &closeErr}
		})
		return nil
	})
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	peer.(*net.TCPConn).SetLinger(0) // close sends RST
	peer.Close()
	waitFor(t, n, func() bool { return closed })
	do(t, n, func(env.Env) error {
		if closeErr == nil {
			return errors.New("a reset connection reported a clean close")
		}
		return nil
	})
}

type closeRecorder struct {
	closed *bool
	err    *error
}

func (r *closeRecorder) OnData([]byte) {}
func (r *closeRecorder) OnClose(err error) {
	*r.closed, *r.err = true, err
}

// TestReadAheadIsBounded blocks the loop while a peer floods the connection:
// the reader must stop posting at readAheadMax (plus one read), and every
// byte must still arrive, in order, once the loop runs again.
func TestReadAheadIsBounded(t *testing.T) {
	n := startNode(t)
	const total = 4 * readAheadMax
	var got int64
	ordered := true
	c, peer := dialPeer(t, n, dataFunc(func(p []byte) {
		for i, b := range p {
			ordered = ordered && b == byte((got+int64(i))%251)
		}
		got += int64(len(p))
	}))
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		p := make([]byte, total)
		for i := range p {
			p[i] = byte(i % 251)
		}
		if _, err := peer.Write(p); err != nil {
			t.Error(err)
		}
	})

	release := make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	n.Loop().Post(func() { <-release }) // the loop is stuck from here
	waitForValue(t, func() bool { return c.readAhead.Load() >= readAheadMax })
	time.Sleep(50 * time.Millisecond) // were the bound broken, the reader would run on
	if ahead := c.readAhead.Load(); ahead > readAheadMax+frameReadMax {
		t.Errorf("reader ran %d bytes ahead of the loop, bound is %d", ahead, readAheadMax+frameReadMax)
	}
	close(release)
	waitFor(t, n, func() bool { return got == total })
	do(t, n, func(env.Env) error {
		if !ordered {
			return errors.New("bytes arrived out of order")
		}
		return nil
	})
}

// dialPeer dials, from n, a listener of the test's own and returns the
// node's end (once connected, with h as its handler) and the peer's; the
// peer is closed when the test ends.
func dialPeer(t *testing.T, n *Node, h env.ConnHandler) (*conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var c *conn
	do(t, n, func(e env.Env) error {
		e.Net.Dial(ln.Addr().String(), func(ec env.Conn, err error) env.ConnHandler {
			if err != nil {
				t.Error(err)
				return nil
			}
			c = ec.(*conn)
			return h
		})
		return nil
	})
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	waitFor(t, n, func() bool { return c != nil })
	return c, peer
}

// TestDialBindsTheLocalAddress: with Config.LocalAddr, the connections a
// node opens come from that address (the jepsen runner's proxy tells the
// nodes apart by it, all of them on 127.0.0.1's loopback).
func TestDialBindsTheLocalAddress(t *testing.T) {
	before := runtime.NumGoroutine()
	loop := NewLoop()
	go loop.Run()
	n, err := New(Config{Dir: t.TempDir(), Loop: loop, LocalAddr: netip.MustParseAddr("127.0.0.7"),
		Log: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.Close()
		loop.Stop()
		<-loop.Done()
		checkNoLeaks(t, before)
	})
	c, peer := dialPeer(t, n, nopHandler{})
	if got := peer.RemoteAddr().(*net.TCPAddr).IP.String(); got != "127.0.0.7" {
		t.Errorf("the peer sees the connection come from %s, want 127.0.0.7", got)
	}
	var local string
	do(t, n, func(env.Env) error {
		local = c.LocalAddr()
		return nil
	})
	if host, _, _ := net.SplitHostPort(local); host != "127.0.0.7" {
		t.Errorf("the node's end says it is %s, want 127.0.0.7", local)
	}
}

type dataFunc func([]byte)

func (f dataFunc) OnData(p []byte) { f(p) }
func (dataFunc) OnClose(error)     {}

// waitForValue polls cond from the test goroutine; cond must read only
// values safe to read off the loop.
func waitForValue(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitMax)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition did not hold in time")
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// BenchmarkPostFromAnotherGoroutine measures the cost of handing work to the
// loop from off it, as every socket read and sync completion does.
func BenchmarkPostFromAnotherGoroutine(b *testing.B) {
	loop := NewLoop()
	go loop.Run()
	defer func() { loop.Stop(); <-loop.Done() }()
	ran := 0
	for b.Loop() {
		loop.Post(func() { ran++ })
	}
	runOn(loop, func() {})
}

// BenchmarkStream measures one direction of a loopback connection through
// osenv: 64 KiB writes on the loop, OnData on the same loop at the other end.
// The receiver clocks the sender, keeping 4 MiB in flight, so the figure is
// end to end. BenchmarkRawTCP is the same transfer with plain net.Conns, the
// machine's own limit to compare with.
func BenchmarkStream(b *testing.B) {
	const chunk, inFlight = 64 << 10, 4 << 20
	loop := NewLoop()
	go loop.Run()
	defer func() { loop.Stop(); <-loop.Done() }()
	n := newTestNode(b, loop)
	defer n.Close()
	data := make([]byte, chunk)
	var sender env.Conn
	var got, sent, total int64 // loop-owned
	finished := make(chan struct{})
	pump := func() {
		for sent < total && sent-got < inFlight {
			sender.Write(data) // the same bytes each time; nobody changes them
			sent += chunk
		}
	}
	runOn(loop, func() {
		e := n.Env()
		ln, err := e.Net.Listen("127.0.0.1:0", func(env.Conn) env.ConnHandler {
			return dataFunc(func(p []byte) {
				got += int64(len(p))
				if got == total {
					close(finished)
				}
				pump()
			})
		})
		if err != nil {
			b.Error(err)
			return
		}
		e.Net.Dial(ln.Addr(), func(c env.Conn, err error) env.ConnHandler {
			sender = c
			return nopHandler{}
		})
	})
	for ready := false; !ready; {
		runOn(loop, func() { ready = sender != nil })
	}
	b.SetBytes(chunk)
	b.ResetTimer()
	runOn(loop, func() {
		total = int64(b.N) * chunk
		pump()
	})
	<-finished
}

func BenchmarkRawTCP(b *testing.B) {
	const chunk = 64 << 10
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, readBufferSize)
		want := int64(b.N) * chunk
		for got := int64(0); got < want; {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			got += int64(n)
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	data := make([]byte, chunk)
	b.SetBytes(chunk)
	b.ResetTimer()
	for range b.N {
		if _, err := c.Write(data); err != nil {
			b.Fatal(err)
		}
	}
	<-finished
}

func TestSendFileInterleavesWithWrites(t *testing.T) {
	loop, e := runningNode(t)

	content := make([]byte, 3<<20)
	for i := range content {
		content[i] = byte(i * 13)
	}
	want := append(append(append([]byte("head"), content[100:100+2<<20]...), "mid"...), content[5:1005]...)
	want = append(want, "tail"...)

	addr, got := collectingListener(t, loop, e)
	dialWithSegment(t, loop, e, addr, content, func(c env.Conn, fsend env.FileSender, f env.File) {
		c.Write([]byte("head"))
		if err := fsend.SendFile(f, 100, 2<<20); err != nil {
			t.Error(err)
		}
		f.Close() // the queued range still goes out
		c.Write([]byte("mid"))
		if err := fsend.SendFile(f, 5, 1000); err == nil {
			t.Error("SendFile of a closed file succeeded")
		}
		c.Write(content[5:1005])
		c.Write([]byte("tail"))
		c.Close()
	})
	select {
	case buf := <-got:
		if !bytes.Equal(buf, want) {
			t.Fatalf("received %d bytes, want %d (first difference matters)", len(buf), len(want))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no close after the sends")
	}
}

// runningNode makes a node over a fresh directory and runs its loop, both
// stopped when the test ends.
func runningNode(t *testing.T) (*Loop, env.Env) {
	loop := NewLoop()
	n, err := New(Config{Dir: t.TempDir(), Loop: loop})
	if err != nil {
		t.Fatal(err)
	}
	go loop.Run()
	t.Cleanup(func() {
		loop.Stop()
		n.Close()
	})
	return loop, n.Env()
}

// collectingListener listens on the loop and returns its address and a
// channel that gets all the bytes its first connection received once it
// closes.
func collectingListener(t *testing.T, loop *Loop, e env.Env) (string, <-chan []byte) {
	got := make(chan []byte, 1)
	ready := make(chan string, 1)
	loop.Post(func() {
		var buf []byte
		ln, err := e.Net.Listen("127.0.0.1:0", func(env.Conn) env.ConnHandler {
			return handlerFunc{data: func(p []byte) { buf = append(buf, p...) }, closed: func(error) { got <- buf }}
		})
		if err != nil {
			t.Error(err)
			ready <- ""
			return
		}
		ready <- ln.Addr()
	})
	return <-ready, got
}

// dialWithSegment writes content to a new file "seg" and dials addr, on
// the loop; send gets the connection and the file in the dial's callback.
func dialWithSegment(t *testing.T, loop *Loop, e env.Env, addr string, content []byte, send func(c env.Conn, fsend env.FileSender, f env.File)) {
	loop.Post(func() {
		f, err := e.FS.Create("seg")
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := f.WriteAt(content, 0); err != nil {
			t.Error(err)
			return
		}
		e.Net.Dial(addr, func(c env.Conn, err error) env.ConnHandler {
			if err != nil {
				t.Error(err)
				return nil
			}
			send(c, c.(env.FileSender), f)
			return handlerFunc{data: func([]byte) {}, closed: func(error) {}}
		})
	})
}

type handlerFunc struct {
	data   func([]byte)
	closed func(error)
}

func (h handlerFunc) OnData(p []byte)   { h.data(p) }
func (h handlerFunc) OnClose(err error) { h.closed(err) }

// TestSendsKeepOrderAcrossAFullSocket sends from many loop turns, each
// queuing small writes, file ranges larger than a socket buffer and, in
// some, a write larger than one too, while the writer still holds the
// rest of an earlier turn's: the peer must receive every byte in order.
func TestSendsKeepOrderAcrossAFullSocket(t *testing.T) {
	loop, e := runningNode(t)

	content := make([]byte, 4<<20)
	for i := range content {
		content[i] = byte(i*7 + i>>9)
	}
	addr, got := collectingListener(t, loop, e)
	var want []byte
	const turns = 40
	dialWithSegment(t, loop, e, addr, content, func(c env.Conn, fsend env.FileSender, f env.File) {
		var turn func(i int)
		turn = func(i int) {
			if i == turns {
				f.Close()
				c.Close()
				return
			}
			head := []byte(fmt.Sprintf("turn %d;", i))
			c.Write(head)
			want = append(want, head...)
			if i%3 == 1 {
				// Larger than a socket buffer: a short writev.
				big := bytes.Repeat([]byte{byte(i), 1, 2}, 500_000)
				c.Write(big)
				want = append(want, big...)
			}
			off, size := int64(i*9973), int64(100+i*i*2000) // up to 3 MB
			if err := fsend.SendFile(f, off, size); err != nil {
				t.Error(err)
			}
			want = append(want, content[off:off+size]...)
			tail := bytes.Repeat([]byte{byte(i), byte(i >> 3)}, i*i*300) // up to 0.9 MB
			c.Write(tail)
			want = append(want, tail...)
			loop.Post(func() { turn(i + 1) }) // the next turn
		}
		turn(0)
	})
	select {
	case buf := <-got:
		if !bytes.Equal(buf, want) {
			i := 0
			for i < min(len(buf), len(want)) && buf[i] == want[i] {
				i++
			}
			t.Fatalf("received %d bytes, want %d; first difference at %d", len(buf), len(want), i)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no close after the sends")
	}
}
