// Package simnet is the simulator's network: byte streams with TCP semantics
// between named hosts, with latency, partitions, stalls, resets, crashes and
// half-open connections, all in virtual time and all decided by one seed.
//
// # The model
//
// A connection is two ends joined by two pipes, one per direction. A pipe
// carries segments (SYN, SYN-ACK, ACK, data, FIN, RST) across the link from
// its sender's host to its receiver's host, in order:
//
//	 n1:49152                 link n1->n2                 n2:9092
//	+--------+  out pipe  [data][data][FIN] ------>  +--------+  OnData...
//	|  end   |                                       |  end   |  OnClose(nil)
//	+--------+  <------ [data]  in pipe              +--------+
//	                    link n2->n1
//
// Each segment is given an arrival time when it is sent: now plus a draw
// from the link's latency Distribution, but never before the segment ahead
// of it, so a pipe never reorders. A write that would arrive together with
// the data ahead of it joins that segment (coalescing). Arrived bytes wait
// in the receiving end's buffer and reach the application through the
// host's sched.NodeLoop, in chunks of seeded sizes: all of the buffer, one
// write's worth, or a random prefix (splitting). Arrivals are the network's
// own events ("net.arrive"); what the application sees are the host's loop
// events "net.accept", "net.dial", "net.data" and "net.close", each with a
// sched.Digest of its payload.
//
// # Faults
//
//   - A partition of link a->b drops what arrives over it. TCP retransmits,
//     so a dropped segment is held, not lost: when the link heals it is
//     retransmitted after the link's latency plus a seeded backoff (up to the
//     time it was held, at most MaxBackoff), and everything behind it
//     follows in order. A segment bound for a host that is down is held the
//     same way, until the host restarts.
//   - Acknowledgements travel the other way: bytes that arrive over a->b
//     while b->a is cut are delivered but not acknowledged.
//   - A sender whose pipe stays blocked (a segment held, or an
//     acknowledgement lost) for the retransmission timeout (RTO, default
//     15s, see SetTimeouts) gives up: its end breaks with ErrTimedOut and
//     it sends an RST, which reaches the peer as soon as the link carries it
//     (the peer sees ErrConnReset), or the peer times out by the same rule
//     if it writes. An idle end behind a partition that never heals never
//     learns; one that heals learns.
//   - A stall of a->b delays what arrives over it until the stall ends, in
//     order; it never breaks a connection.
//   - A connection stall (StallConn) does the same to one connection, one
//     way or both, while the hosts' other connections, and newer ones,
//     flow: what a client wrote to a connection it then closed or gave up
//     still arrives at the end of the stall, with its FIN behind it, after
//     what it sent since on a new connection (connstall.go).
//   - Reset breaks every connection between two hosts at once: both ends
//     see ErrConnReset, and bytes not yet delivered are gone.
//   - Crash takes a host off the network: its ends and listeners vanish with
//     no FIN and no RST, and what it had sent but not yet delivered is lost.
//     Its peers keep half-open connections: an idle peer notices nothing; a
//     peer that writes has its bytes held (the host does not answer) until
//     its RTO breaks the connection with ErrTimedOut. After Restart, the
//     host answers anything sent on an old connection with an RST, so the
//     writer sees ErrConnReset.
//
// Dialing sends a SYN; a listening port answers SYN-ACK, the dialer is
// connected when that arrives, and the connection is accepted when the
// dialer's ACK arrives. A port nobody listens on answers RST (ErrConnRefused,
// after a round trip); a SYN that is dropped, or a host that is down, leaves
// the dial pending until the connect timeout (default 15s) fails it with
// ErrTimedOut, unless the link heals or the host comes back first. An
// acceptor whose ACK never comes gives up after the same timeout, silently.
// A listener closed before its accept func ran resets the connection.
//
// A host answers every segment but a SYN or an RST of a connection it does
// not know with an RST, every time, as a kernel does: a connection it gave
// up during the handshake (so a dialer whose final ACK was held past the
// acceptor's timeout sees ErrConnReset once it gets through), one it broke
// or refused, or one from before a reboot. An end that closed cleanly is
// not forgotten: it discards late bytes silently, as osenv drains them.
//
// A clean close wins: an end that received the FIN reports OnClose(nil)
// after the bytes before it, whatever breaks later. Not modelled: flow
// control (a Write never waits, a receive buffer never fills), keepalives,
// and the RST Linux sends when a socket closes with unread bytes (osenv
// drains them instead).
//
// # SendFile
//
// Ends implement env.FileSender (unless SetSendFile(false)) with osenv's
// semantics: a file range joins the stream like a write, and is read
// through a simfs Dup at a seeded time between the call and its segment's
// arrival, so the disk's read faults strike it and a change to the range
// meanwhile may or may not show. A read that fails or comes up short ends
// the stream there, with a FIN or an RST, and the sender's OnClose reports
// why (sendfile.go).
//
// Every random choice (latencies, backoffs, chunk sizes, read times) draws
// from a stream forked per link ("link/n1->n2"), so the same seed and the
// same calls give the same deliveries at the same virtual times.
package simnet

import (
	"errors"
	"slices"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/sched"
)

// Defaults of the timeouts that SetTimeouts changes.
const (
	// DefaultRetransmitTimeout is how long a sender keeps retransmitting
	// into a partition (or to a dead host) before its end breaks. Linux's
	// default is about 15 minutes; production brokers lower it
	// (tcp_user_timeout), and a simulated run wants partitions that outlast
	// it often.
	DefaultRetransmitTimeout = 15 * time.Second
	// DefaultConnectTimeout is how long a dial waits for a SYN-ACK (or an
	// RST) before it fails with ErrTimedOut.
	DefaultConnectTimeout = 15 * time.Second
	// MaxBackoff bounds the extra delay of the first retransmission after a
	// link heals or a host comes back.
	MaxBackoff = time.Second
)

// Errors reported through Listen, the Dial callback and OnClose. They wrap
// into messages that name the addresses; test with errors.Is.
var (
	ErrConnRefused = errors.New("connection refused")
	ErrConnReset   = errors.New("connection reset by peer")
	ErrTimedOut    = errors.New("connection timed out")
	ErrNoSuchHost  = errors.New("no such host")
	ErrAddrInUse   = errors.New("address already in use")
	// ErrAddrNotAvail: a host may listen only on its own name or on all
	// interfaces ("", "0.0.0.0", "::").
	ErrAddrNotAvail = errors.New("cannot assign requested address")
	ErrBadAddress   = errors.New("bad address")
	ErrHostDown     = errors.New("host is down")
)

// Default latencies of links nobody configured.
var (
	defaultLatency  = Uniform(100*time.Microsecond, 600*time.Microsecond)
	loopbackLatency = Uniform(10*time.Microsecond, 50*time.Microsecond)
)

// Network is the simulated network of one run. It is not safe for
// concurrent use; the simulation is one goroutine.
type Network struct {
	s *sched.Scheduler
	r *rng.Rand

	hosts map[string]*host
	links map[linkKey]*link
	// linkList holds the links in creation order, for HealAll.
	linkList []*link
	// conns holds live connections in creation (id) order; retired ones
	// are dropped when the slice is next scanned.
	conns    []*conn
	retired  int
	nextConn uint64

	rto            time.Duration
	connectTimeout time.Duration
	// noSendFile: connections made now do not implement env.FileSender.
	noSendFile bool
	stats      Stats
}

// New returns an empty network whose events run on s and whose randomness
// forks from r.
func New(s *sched.Scheduler, r *rng.Rand) *Network {
	return &Network{
		s:              s,
		r:              r,
		hosts:          make(map[string]*host),
		links:          make(map[linkKey]*link),
		rto:            DefaultRetransmitTimeout,
		connectTimeout: DefaultConnectTimeout,
	}
}

// SetTimeouts changes the retransmission timeout and the connect timeout
// (non-positive values leave one unchanged). It applies to timers armed
// from now on.
func (n *Network) SetTimeouts(retransmit, connect time.Duration) {
	if retransmit > 0 {
		n.rto = retransmit
	}
	if connect > 0 {
		n.connectTimeout = connect
	}
}

// Host returns the network as the host name sees it, registering the host
// (up) on first use. Its application events run through loop; a later call
// for the same name returns the same view and gives the host this loop from
// now on. A nil loop schedules straight onto the scheduler (sched.Direct).
func (n *Network) Host(name string, loop sched.NodeLoop) env.Net {
	if loop == nil {
		loop = sched.Direct(n.s, name)
	}
	h := n.hosts[name]
	if h == nil {
		h = &host{n: n, name: name, up: true, incarnation: 1, nextPort: firstEphemeralPort,
			listeners: make(map[int]*listener), dialing: make(map[int]int)}
		n.hosts[name] = h
	}
	h.loop = loop
	return h
}

// liveConns returns a copy of the connections not yet retired, in creation
// order, compacting the list first. Being a copy, it may be ranged over while
// connections retire.
func (n *Network) liveConns() []*conn {
	if n.retired > 0 {
		live := n.conns[:0]
		for _, c := range n.conns {
			if !c.retired {
				live = append(live, c)
			}
		}
		clear(n.conns[len(live):])
		n.conns = live
		n.retired = 0
	}
	return slices.Clone(n.conns)
}
