package simnet

import (
	"slices"
	"time"

	"github.com/sluicemq/sluice/sim/sched"
)

// SetLatency sets the latency distribution of the link from one host to
// another, for segments sent from now on. A nil d restores the default
// (uniform between 100µs and 600µs; 10µs to 50µs from a host to itself).
func (n *Network) SetLatency(from, to string, d Distribution) {
	l := n.link(from, to)
	switch {
	case d != nil:
		l.latency = d
	case from == to:
		l.latency = loopbackLatency
	default:
		l.latency = defaultLatency
	}
}

// Partition cuts the link from one host to another: what from sends to is
// dropped (and retransmitted once the link heals), and acknowledgements of
// what to sends to from are lost. Cut both links for a symmetric partition.
func (n *Network) Partition(from, to string) {
	n.link(from, to).cut = true
}

// Heal ends the partition of the link from one host to another; what was
// held is retransmitted.
func (n *Network) Heal(from, to string) {
	n.link(from, to).cut = false
	n.retransmit()
}

// PartitionPort is Partition for the connections to port only (the
// acceptor's port, on either host): the segments of every other connection
// between the two hosts still flow. Cutting a node's links to its peers'
// controller port, both ways, parts it from the controller quorum while it
// still replicates data.
func (n *Network) PartitionPort(from, to string, port int) {
	l := n.link(from, to)
	if !slices.Contains(l.cutPorts, port) {
		l.cutPorts = append(l.cutPorts, port)
	}
}

// HealPort ends PartitionPort(from, to, port); what was held is
// retransmitted.
func (n *Network) HealPort(from, to string, port int) {
	l := n.link(from, to)
	l.cutPorts = slices.DeleteFunc(l.cutPorts, func(p int) bool { return p == port })
	n.retransmit()
}

// HealAll ends every partition. Stalls run out on their own.
func (n *Network) HealAll() {
	for _, l := range n.linkList {
		l.cut = false
		l.cutPorts = nil
	}
	n.retransmit()
}

// Stall holds back everything that would arrive over the link from one
// host to another during the next d; it then arrives in order. A stall
// never breaks a connection.
func (n *Network) Stall(from, to string, d time.Duration) {
	l := n.link(from, to)
	l.stallUntil = max(l.stallUntil, n.s.Now()+d)
}

// Reset breaks every connection between hosts a and b (either way round,
// including dials in progress): both ends see OnClose with ErrConnReset,
// and bytes not yet delivered are lost.
func (n *Network) Reset(a, b string) {
	for _, c := range n.liveConns() {
		x, y := c.ends[0].h.name, c.ends[1].h.name
		if (x == a && y == b) || (x == b && y == a) {
			c.reset()
		}
	}
}

// Crash takes the host off the network: its connections vanish without FIN
// or RST, its listeners are gone, and what it had sent but not delivered
// is lost. Its peers keep half-open connections. Crashing a host that is
// down, or unknown, does nothing.
func (n *Network) Crash(name string) {
	h := n.hosts[name]
	if h == nil || !h.up {
		return
	}
	old := h.incarnation
	h.up = false
	h.incarnation++
	h.listeners = make(map[int]*listener)
	for _, c := range n.liveConns() {
		for _, e := range c.ends {
			if e.h == h && e.incarnation == old {
				e.vanish()
			}
		}
		c.maybeRetire()
	}
}

// Kill ends the host's process while the machine stays up, as kill -9
// does: the kernel closes every connection of the process (each peer sees
// its connection reset) and its listeners, so dials to the host are refused
// until it listens again, rather than timing out as for a host that is
// down. Killing a host that is down, or unknown, does nothing.
func (n *Network) Kill(name string) {
	h := n.hosts[name]
	if h == nil || !h.up {
		return
	}
	h.listeners = make(map[int]*listener)
	for _, c := range n.liveConns() {
		if c.ends[0].h == h || c.ends[1].h == h {
			c.reset()
		}
	}
}

// Restart brings the host back with a new loop (nil keeps the old one),
// crashing it first if it is up. It has no connections and no listeners;
// segments held for it are retransmitted, and it answers those of old
// connections with an RST.
func (n *Network) Restart(name string, loop sched.NodeLoop) {
	n.Crash(name)
	h := n.hosts[name]
	if h == nil {
		n.Host(name, loop)
		return
	}
	h.up = true
	if loop != nil {
		h.loop = loop
	}
	n.retransmit()
}

// retransmit lets every connection retry what it could not send or get
// acknowledged, after a link healed or a host came back.
func (n *Network) retransmit() {
	for _, c := range n.liveConns() {
		for _, e := range c.ends {
			e.out.reconsider()
		}
		c.maybeRetire()
	}
}
