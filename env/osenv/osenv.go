// Package osenv implements package env over the operating system: real time,
// real files, real TCP. It is the only code in Sluice's broker path allowed
// to use goroutines, locks, the os and net packages and the wall clock.
//
// # Threading
//
// A node's callbacks run on a Loop: one goroutine, the one calling Loop.Run,
// executes them one at a time in the order posted. Around it, osenv runs
// goroutines that do only blocking, stateless work and post the results back:
//
//	per listener    an accept goroutine
//	per connection  a reader (posts OnData and OnClose) and a writer (drains
//	                the queue that Conn.Write appends to)
//	per Dial        a goroutine that connects, then posts the result
//	per node        a sync worker while Syncs are pending (one fdatasync or
//	                syncfs covers every file's pending Syncs; sync.go)
//	per SyncDir     a goroutine that fsyncs the directory
//	per clock       a time.Timer armed for the earliest deadline
//
// A connection's reader stops reading the socket, leaving the peer to TCP
// flow control, while either side of it is too far behind: the loop, with
// more than 4 MiB posted and not yet handled, or the peer, with more than 4
// MiB queued by Write and SendFile and not yet taken by the kernel (the
// reader is then muted, as Kafka mutes a channel with a response pending,
// until the writer brings that down to 1 MiB). The loop never waits for the
// reader. The first wait ends when the loop catches up; the second when the
// writer does, or at once when the connection is closed locally, breaks, or
// is killed; both end when the node closes.
//
// Methods of the env interfaces must be called from the loop, as package env
// requires; Loop.Post and Node.Close may be called from any goroutine.
//
// # Lifecycle
//
// A program makes a Loop, builds a Node on it with New, runs the loop, and
// when done stops the loop and closes the node:
//
//	loop := osenv.NewLoop()
//	node, err := osenv.New(osenv.Config{Dir: dataDir, Loop: loop})
//	...
//	loop.Post(func() { start(node.Env()) })
//	go func() { <-signals; loop.Stop() }()
//	loop.Run()
//	node.Close()
//
// Several nodes may share one loop (tests do, so that a condition can look at
// every node's state without a race). Node.Close closes the node's listeners,
// connections (without flushing them) and files, waits for its goroutines to
// end, and drops any callback still on its way to the loop.
package osenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/env"
)

// Config configures a Node. Only Dir is required.
type Config struct {
	// Dir is the node's data directory, the root of its env.FS. It must exist.
	Dir string
	// MetadataDir, if set, is the root of env.MetadataFS: a directory of
	// the metadata log's own (metadata.log.dir). It must exist.
	MetadataDir string
	// Loop runs the node's callbacks. Default: a new loop, which the caller
	// must run (Node.Loop returns it).
	Loop *Loop
	// Log receives the node's structured logs. Default: text to stderr at
	// level Info.
	Log *slog.Logger
	// DialTimeout bounds how long Net.Dial tries to connect. Default 10s.
	DialTimeout time.Duration
	// LocalAddr, if valid, is the local IP address every connection Net.Dial
	// opens is bound to (node config sluice.outbound.local.address): on a
	// host with several addresses, the one peers see this node's
	// connections come from. Default: the kernel picks, by route.
	LocalAddr netip.Addr
	// CloseTimeout bounds how long a locally closed connection may spend
	// flushing its queued bytes and waiting for the peer to close its side,
	// before the socket is torn down. Default 10s.
	CloseTimeout time.Duration
}

// Defaults of Config.
const (
	DefaultDialTimeout  = 10 * time.Second
	DefaultCloseTimeout = 10 * time.Second
)

// Node is one node's environment over the operating system.
type Node struct {
	loop         *Loop
	log          *slog.Logger
	rand         env.Rand
	clock        *clock
	fs           *fileSystem
	metaFS       *fileSystem // nil without Config.MetadataDir
	frames       framePool   // buffers of large frames, shared by connections
	net          *network
	closeTimeout time.Duration

	// ctx is cancelled by Close, aborting dials in progress.
	ctx    context.Context
	cancel context.CancelFunc
	quit   chan struct{} // closed by Close

	closed atomic.Bool
	wg     sync.WaitGroup // goroutines started by spawn

	mu        sync.Mutex // guards the registries and spawning
	listeners map[*listener]struct{}
	conns     map[*conn]struct{}
	files     map[*file]struct{}
	locks     map[*fileLock]struct{}
}

// New builds a node over cfg.Dir. It does not start the loop.
func New(cfg Config) (*Node, error) {
	if cfg.Dir == "" {
		return nil, errors.New("osenv: Config.Dir is required")
	}
	rnd, err := newRand()
	if err != nil {
		return nil, err
	}
	n := &Node{
		loop:         cfg.Loop,
		log:          cfg.Log,
		rand:         rnd,
		closeTimeout: cfg.CloseTimeout,
		quit:         make(chan struct{}),
		listeners:    make(map[*listener]struct{}),
		conns:        make(map[*conn]struct{}),
		files:        make(map[*file]struct{}),
		locks:        make(map[*fileLock]struct{}),
	}
	if n.loop == nil {
		n.loop = NewLoop()
	}
	if n.log == nil {
		n.log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if n.closeTimeout <= 0 {
		n.closeTimeout = DefaultCloseTimeout
	}
	dialTimeout := cfg.DialTimeout
	if dialTimeout <= 0 {
		dialTimeout = DefaultDialTimeout
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.clock = newClock(n.loop, n)
	fsys, err := n.openFS(cfg.Dir, "data directory")
	if err != nil {
		n.cancel()
		return nil, err
	}
	n.fs = fsys
	if cfg.MetadataDir != "" {
		if n.metaFS, err = n.openFS(cfg.MetadataDir, "metadata directory"); err != nil {
			n.fs.close()
			n.cancel()
			return nil, err
		}
	}
	n.net = &network{node: n, dialer: net.Dialer{Timeout: dialTimeout}}
	if cfg.LocalAddr.IsValid() {
		n.net.dialer.LocalAddr = &net.TCPAddr{IP: cfg.LocalAddr.AsSlice(), Zone: cfg.LocalAddr.Zone()}
	}
	return n, nil
}

// openFS opens the file system rooted at dir (what names it in errors).
func (n *Node) openFS(dir, what string) (*fileSystem, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("osenv: open %s: %w", what, err)
	}
	// The syncer's syncfs goes through a descriptor opened now, so that
	// every writeback failure from here on is reported to it (sync.go).
	d, err := root.Open(".")
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("osenv: open %s: %w", what, err)
	}
	dev, err := deviceOf(d)
	if err != nil {
		d.Close()
		root.Close()
		return nil, fmt.Errorf("osenv: stat %s: %w", what, err)
	}
	return &fileSystem{node: n, root: root, syncer: groupSyncer{node: n, dir: d, dev: dev, perFile: !syncfsReportsErrors(), othersDirty: cachedOthersDirty(othersDirty)}}, nil
}

// close releases the file system's directory descriptors.
func (s *fileSystem) close() error {
	return errors.Join(s.syncer.dir.Close(), s.root.Close())
}

// Env returns the node's environment.
func (n *Node) Env() env.Env {
	e := env.Env{
		Loop:  n.loop,
		Clock: n.clock,
		Rand:  n.rand,
		FS:    n.fs,
		Net:   n.net,
		Log:   n.log,
	}
	if n.metaFS != nil {
		e.MetadataFS = n.metaFS
	}
	return e
}

// Loop returns the loop the node's callbacks run on.
func (n *Node) Loop() *Loop { return n.loop }

// Close releases everything the node holds: listeners and connections are
// closed at once (queued bytes are not flushed), open files are closed once
// their syncs finish, dials in progress are abandoned, locks are released
// once the node's goroutines have ended. It waits for the
// node's goroutines to end, so that no callback of this node reaches the loop
// afterwards, and it may be called from any goroutine, before or after the
// loop stops. A second Close returns env.ErrClosed.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed.Load() {
		n.mu.Unlock()
		return env.ErrClosed
	}
	n.closed.Store(true)
	listeners := keys(n.listeners)
	conns := keys(n.conns)
	files := keys(n.files)
	locks := keys(n.locks)
	n.mu.Unlock()

	n.cancel()
	close(n.quit)
	n.clock.close()
	for _, l := range listeners {
		l.ln.Close()
	}
	for _, c := range conns {
		c.kill()
	}
	var errs []error
	for _, f := range files {
		if err := f.closeForNode(); err != nil {
			errs = append(errs, err)
		}
	}
	n.wg.Wait()
	for _, l := range locks {
		if err := l.closeForNode(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := n.fs.close(); err != nil {
		errs = append(errs, err)
	}
	if n.metaFS != nil {
		if err := n.metaFS.close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// spawn runs f on a new goroutine that Close waits for. It reports false,
// without running f, once the node is closed.
func (n *Node) spawn(f func()) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed.Load() {
		return false
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
	return true
}

// post queues f on the loop, to run only if the node is still open then.
func (n *Node) post(f func()) {
	n.loop.Post(func() {
		if n.closed.Load() {
			return
		}
		f()
	})
}

// register adds x to one of the node's registries, under the node's lock. It
// reports false once the node is closed: the caller must release x itself.
func register[T comparable](n *Node, m map[T]struct{}, x T) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed.Load() {
		return false
	}
	m[x] = struct{}{}
	return true
}

func unregister[T comparable](n *Node, m map[T]struct{}, x T) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(m, x)
}

func keys[T comparable](m map[T]struct{}) []T {
	out := make([]T, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
