package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// The runner's network through a proxy (--network proxy, no root needed):
// the nodes listen on 127.0.0.1 ports nobody is told about and advertise
// (advertised.listeners, controller.quorum.voters) the proxy's listeners
// instead, one per node and listener, so that every connection between
// nodes, and from the runner's clients to them, is accepted by the proxy
// and relayed by it. Each end binds its connections to an address of its
// own (node j's sluice.outbound.local.address is 127.0.0.(10+j), the
// clients' 127.0.0.2): the proxy knows a connection's source by the peer
// address it accepted, its destination by the listener, and so what each
// of its two directions carries, a link from one end to the other.
//
// A link is cut (partitions, one way or both), slowed (latency) or lossy:
//   - cut: the link's bytes are held, not dropped, until it heals, as a
//     blackhole route in netns mode leaves a connection open and silent
//     (the kernel's retransmissions then deliver what was sent); its
//     sender's writes back up through TCP flow control. A connection
//     accepted while either way of its pair is cut is not relayed (its
//     target does not see it) until both ways are open: a handshake needs
//     both, and a SYN into a blackhole is retried until the dialer's
//     timeout, as here the dialer waits for an answer that does not come.
//   - latency: every chunk the link carries is held this long from when
//     the proxy read it, order kept.
//   - loss: a TCP proxy cannot drop a packet (both its connections are
//     reliable); what an application sees of loss on TCP is a stall while
//     the sender's retransmission timer runs, and every byte behind the
//     lost one waiting with it. So a lossy link holds a chunk, with the
//     link's probability, for a retransmission-like 200 ms to 1 s, and
//     everything behind it waits. Nothing is lost, reordered or
//     duplicated; fast retransmits and the congestion window are not
//     modelled.
//
// All of it is on 127.0.0.0/8; close ends every listener, connection and
// goroutine of the proxy.

// clientsEnd is the runner's clients as one end of a link; nodes are
// their index, 0 to nodes-1.
const clientsEnd = -1

// clientsAddr is the address the clients' connections come from.
var clientsAddr = netip.MustParseAddr("127.0.0.2")

// nodeSourceAddr is node index i's sluice.outbound.local.address: node
// id j = i+1 gets 127.0.0.(10+j).
func nodeSourceAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 0, byte(11 + i)}) }

// A link is one direction between two ends: from's bytes to to.
type link struct{ from, to int }

func endName(e int) string {
	if e == clientsEnd {
		return "clients"
	}
	return fmt.Sprintf("n%d", e+1)
}

func (l link) String() string { return endName(l.from) + "->" + endName(l.to) }

// linkFault is what a link does to its bytes; the zero value relays them
// as they come.
type linkFault struct {
	cut   bool
	delay time.Duration // added to every chunk
	loss  float64       // the probability a chunk waits a retransmission
}

// Retransmission-like holds of a lossy link's chunks: Linux's minimum
// RTO is 200 ms, and a second one doubles it.
const (
	lossHoldMin = 200 * time.Millisecond
	lossHoldMax = time.Second
)

// chunkMax is the most one read relays as one chunk.
const chunkMax = 32 << 10

// chunksAhead is how many chunks a direction may hold read and not yet
// written: past it the proxy stops reading, and the sender waits in TCP
// flow control.
const chunksAhead = 16

// proxyNet is the run's proxy: a listener per node and listener kind.
type proxyNet struct {
	nodes int
	// lns[i] are node i's broker and controller listeners.
	lns    [][2]net.Listener
	ctx    context.Context // ended by close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex // guards what follows
	faults map[link]linkFault
	// changed is closed and replaced whenever faults change: a held
	// chunk waits on it.
	changed chan struct{}
	rand    *rand.Rand // loss draws
	conns   map[*proxyConn]struct{}
	// strangerCount counts connections from no end of the run's (closed
	// at once), firstStranger is the first one's address: a node not
	// bound to its source address would show here.
	strangerCount int
	firstStranger string
	// What the faults did, for the run's notes: a fault that never held
	// a byte shows as a zero.
	stats proxyStats
}

// proxyStats counts what the proxy relayed and what its faults held.
type proxyStats struct {
	conns      int // connections relayed
	refused    int // connections whose node was down
	heldOpen   int // connections that waited for their pair to heal
	heldCut    int // chunks that waited for their link to heal
	delayed    int // chunks a latency held
	retransmit int // chunks a loss held
}

func (s proxyStats) String() string {
	return fmt.Sprintf("proxy: %d connections relayed, %d refused (node down), %d held until a partition healed; chunks held by a partition %d, by latency %d, by loss %d",
		s.conns, s.refused, s.heldOpen, s.heldCut, s.delayed, s.retransmit)
}

// count adds to the stats.
func (p *proxyNet) count(f func(*proxyStats)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.stats)
}

// statsNow is what the proxy did so far.
func (p *proxyNet) statsNow() proxyStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// newProxyNet listens for each node's broker and controller listeners on
// 127.0.0.1; start relays them once the nodes' own addresses are known.
func newProxyNet(nodes int, seed uint64) (*proxyNet, error) {
	ctx, cancel := context.WithCancel(context.Background())
	p := &proxyNet{nodes: nodes, ctx: ctx, cancel: cancel, faults: map[link]linkFault{},
		changed: make(chan struct{}), rand: rand.New(rand.NewPCG(seed, 0x70726f7879)), conns: map[*proxyConn]struct{}{}}
	for range nodes {
		var pair [2]net.Listener
		for k := range pair {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				p.close()
				return nil, fmt.Errorf("proxy: %w", err)
			}
			pair[k] = ln
		}
		p.lns = append(p.lns, pair)
	}
	return p, nil
}

// addr is the address the proxy relays node i's listener kind (0 broker,
// 1 controller) on: what the node advertises.
func (p *proxyNet) addr(i, kind int) string { return p.lns[i][kind].Addr().String() }

// start relays each listener to its node's own address: targets[i][kind].
func (p *proxyNet) start(targets [][2]string) {
	for i, pair := range p.lns {
		for k, ln := range pair {
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.acceptLoop(ln, i, targets[i][k])
			}()
		}
	}
}

func (p *proxyNet) acceptLoop(ln net.Listener, to int, target string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if p.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // out of descriptors, say
			continue
		}
		from, ok := p.source(c.RemoteAddr())
		if !ok {
			p.stranger(c.RemoteAddr().String())
			c.Close()
			continue
		}
		pc := &proxyConn{p: p, a: c.(*net.TCPConn), up: link{from, to}, done: make(chan struct{})}
		if !p.track(pc) {
			c.Close()
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			pc.relay(target)
		}()
	}
}

// source names the end a connection came from by its address.
func (p *proxyNet) source(addr net.Addr) (int, bool) {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return 0, false
	}
	if ap.Addr() == clientsAddr {
		return clientsEnd, true
	}
	for i := range p.nodes {
		if ap.Addr() == nodeSourceAddr(i) {
			return i, true
		}
	}
	return 0, false
}

func (p *proxyNet) stranger(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.strangerCount == 0 {
		p.firstStranger = addr
	}
	p.strangerCount++
}

// strangers says how many connections came from no end of the run's, and
// the first one's address.
func (p *proxyNet) strangers() (int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.strangerCount, p.firstStranger
}

func (p *proxyNet) track(pc *proxyConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		return false
	}
	p.conns[pc] = struct{}{}
	return true
}

func (p *proxyNet) untrack(pc *proxyConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, pc)
}

// set gives each of links the fault f (the zero linkFault heals them).
func (p *proxyNet) set(links []link, f linkFault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range links {
		if f == (linkFault{}) {
			delete(p.faults, l)
		} else {
			p.faults[l] = f
		}
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// healAll heals every link.
func (p *proxyNet) healAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.faults)
	close(p.changed)
	p.changed = make(chan struct{})
}

// fault is l's fault now, and the channel closed at its next change.
func (p *proxyNet) fault(l link) (linkFault, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faults[l], p.changed
}

// due is when a chunk l read now may be written: its latency, and a
// retransmission's wait if the link loses it, after the chunk before it
// (last).
func (p *proxyNet) due(l link, last time.Time) time.Time {
	p.mu.Lock()
	f := p.faults[l]
	extra := f.delay
	if f.delay > 0 {
		p.stats.delayed++
	}
	if f.loss > 0 && p.rand.Float64() < f.loss {
		extra += lossHoldMin + time.Duration(p.rand.Int64N(int64(lossHoldMax-lossHoldMin)))
		p.stats.retransmit++
	}
	p.mu.Unlock()
	at := time.Now().Add(extra)
	if at.Before(last) {
		return last
	}
	return at
}

// close stops the proxy: its listeners and connections closed, every
// goroutine of it ended when it returns.
func (p *proxyNet) close() {
	p.cancel()
	for _, pair := range p.lns {
		for _, ln := range pair {
			if ln != nil {
				ln.Close()
			}
		}
	}
	p.mu.Lock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for pc := range p.conns {
		conns = append(conns, pc)
	}
	p.mu.Unlock()
	for _, pc := range conns {
		pc.abort()
	}
	p.wg.Wait()
}

// proxyConn is one relayed connection: a, accepted from up.from, and b,
// dialed to up.to's own address.
type proxyConn struct {
	p    *proxyNet
	a, b *net.TCPConn
	up   link
	once sync.Once
	done chan struct{} // closed by abort
	mu   sync.Mutex    // guards b against abort while it is dialed
}

func (pc *proxyConn) down() link { return link{pc.up.to, pc.up.from} }

// abort closes both ends at once (a read or write failed, or the proxy
// closes).
func (pc *proxyConn) abort() {
	pc.once.Do(func() {
		close(pc.done)
		pc.a.Close()
		pc.mu.Lock()
		if pc.b != nil {
			pc.b.Close()
		}
		pc.mu.Unlock()
	})
}

// relay waits until both ways of the pair are open, dials the target and
// carries both directions until each has ended.
func (pc *proxyConn) relay(target string) {
	defer pc.p.untrack(pc)
	defer pc.abort()
	if !pc.waitOpen() {
		return
	}
	dialCtx, cancel := context.WithTimeout(pc.p.ctx, 5*time.Second)
	b, err := (&net.Dialer{}).DialContext(dialCtx, "tcp", target)
	cancel()
	if err != nil {
		// The node is down: as it would refuse the connection, the
		// client's end is reset.
		pc.a.SetLinger(0)
		pc.p.count(func(s *proxyStats) { s.refused++ })
		return
	}
	pc.p.count(func(s *proxyStats) { s.conns++ })
	pc.mu.Lock()
	pc.b = b.(*net.TCPConn)
	pc.mu.Unlock()
	select {
	case <-pc.done: // aborted while dialing: abort missed b
		b.Close()
		return
	default:
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		pc.pipe(pc.up, pc.a, pc.b)
	}()
	go func() {
		defer wg.Done()
		pc.pipe(pc.down(), pc.b, pc.a)
	}()
	wg.Wait()
}

// waitOpen waits until neither way of the connection's pair is cut.
func (pc *proxyConn) waitOpen() bool {
	for held := false; ; held = true {
		upFault, changed := pc.p.fault(pc.up)
		downFault, _ := pc.p.fault(pc.down())
		if !upFault.cut && !downFault.cut {
			if held {
				pc.p.count(func(s *proxyStats) { s.heldOpen++ })
			}
			return true
		}
		select {
		case <-changed:
		case <-pc.done:
			return false
		}
	}
}

type chunk struct {
	data []byte
	due  time.Time
}

// pipe carries src's bytes to dst as link l does: each chunk at its due
// time, none while l is cut. src's end (EOF) is passed on as dst's write
// side closed, once everything before it is written; any failure aborts
// the connection.
func (pc *proxyConn) pipe(l link, src, dst *net.TCPConn) {
	chunks := make(chan chunk, chunksAhead)
	readErr := make(chan error, 1)
	go func() {
		defer close(chunks)
		var last time.Time
		buf := make([]byte, chunkMax)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				last = pc.p.due(l, last)
				select {
				case chunks <- chunk{slices.Clone(buf[:n]), last}:
				case <-pc.done:
					readErr <- net.ErrClosed
					return
				}
			}
			if err != nil {
				readErr <- err
				return
			}
		}
	}()
	for c := range chunks {
		if !pc.waitDeliver(l, c.due) {
			break
		}
		if _, err := dst.Write(c.data); err != nil {
			pc.abort()
			break
		}
	}
	for range chunks { // the reader ends once aborted
	}
	if err := <-readErr; errors.Is(err, io.EOF) {
		dst.CloseWrite()
		return
	}
	pc.abort()
}

// waitDeliver waits until a chunk due at due may be written on l: that
// time is past and l is not cut. False if the connection ends first.
func (pc *proxyConn) waitDeliver(l link, due time.Time) bool {
	if wait := time.Until(due); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-pc.done:
			return false
		}
	}
	for held := false; ; held = true {
		f, changed := pc.p.fault(l)
		if !f.cut {
			if held {
				pc.p.count(func(s *proxyStats) { s.heldCut++ })
			}
			return true
		}
		select {
		case <-changed:
		case <-pc.done:
			return false
		}
	}
}

// partitionLinks draws a partition of node i among nodes: from the
// clients, one peer or all of them; one way (i's bytes held, or theirs)
// or both ways. netns mode draws the same shape (partitionCuts).
func partitionLinks(pick func(int) int, i, nodes int) []link {
	var others []int
	switch x := pick(10); {
	case x < 3:
		others = []int{clientsEnd}
	case x < 6:
		others = []int{(i + 1 + pick(nodes-1)) % nodes}
	default:
		for j := range nodes {
			if j != i {
				others = append(others, j)
			}
		}
	}
	way := pick(3) // 0 both ways, 1 i's bytes out, 2 theirs in
	var links []link
	for _, o := range others {
		if way != 2 {
			links = append(links, link{i, o})
		}
		if way != 1 {
			links = append(links, link{o, i})
		}
	}
	return links
}

// nodeLinks draws links of node i for latency or loss: both ways to one
// other end (a peer or the clients), or to all of them.
func nodeLinks(pick func(int) int, i, nodes int) []link {
	var others []int
	if pick(2) == 0 {
		o := pick(nodes) // i itself stands for the clients
		if o == i {
			o = clientsEnd
		}
		others = []int{o}
	} else {
		others = []int{clientsEnd}
		for j := range nodes {
			if j != i {
				others = append(others, j)
			}
		}
	}
	var links []link
	for _, o := range others {
		links = append(links, link{i, o}, link{o, i})
	}
	return links
}

// proxyFault draws and makes fault (partition, latency or loss) on node
// i's links; it says what it did and returns its undoing.
func (p *proxyNet) proxyFault(pick func(int) int, fault string, i int) (string, func()) {
	var links []link
	var f linkFault
	detail := ""
	switch fault {
	case "partition":
		links, f = partitionLinks(pick, i, p.nodes), linkFault{cut: true}
	case "latency":
		links = nodeLinks(pick, i, p.nodes)
		f.delay = time.Duration(20+pick(181)) * time.Millisecond
		detail = fmt.Sprintf(" +%s", f.delay)
	case "loss":
		links = nodeLinks(pick, i, p.nodes)
		f.loss = float64(5+pick(21)) / 100
		detail = fmt.Sprintf(" %.0f%% of chunks held %s-%s", f.loss*100, lossHoldMin, lossHoldMax)
	}
	p.set(links, f)
	return fmt.Sprintf("%v%s", links, detail), func() { p.set(links, linkFault{}) }
}
