package simnet

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim/sched"
)

// Ephemeral ports (for dialers and for Listen on port 0) count up from here
// per host, wrapping at the top, as Linux's default range starts at 32768
// and IANA's at 49152.
const firstEphemeralPort = 49152

// host is one machine on the network, and its env.Net.
type host struct {
	n    *Network
	name string
	loop sched.NodeLoop
	up   bool
	// incarnation counts boots; a crash bumps it, so every end and
	// listener of an earlier boot can tell it is gone.
	incarnation uint64
	listeners   map[int]*listener
	nextPort    int
	// dialing counts the connections not yet retired that this host dialed
	// from each local port, so that a port is not reused while one lives
	// (code may key connections by their addresses).
	dialing map[int]int
}

var _ env.Net = (*host)(nil)

// Listen implements env.Net. The address's host must be empty, "0.0.0.0",
// "::" or the host's own name; the listener's Addr is always "name:port".
func (h *host) Listen(addr string, accept func(env.Conn) env.ConnHandler) (env.Listener, error) {
	if accept == nil {
		return nil, fmt.Errorf("listen %s: nil accept func", addr)
	}
	if !h.up {
		return nil, fmt.Errorf("listen %s on %s: %w", addr, h.name, ErrHostDown)
	}
	name, port, err := splitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if !h.isSelf(name, false) {
		return nil, fmt.Errorf("listen %s on host %s: %w", addr, h.name, ErrAddrNotAvail)
	}
	if port == 0 {
		if port = h.freePort(); port == 0 {
			return nil, fmt.Errorf("listen %s on %s: no free port: %w", addr, h.name, ErrAddrInUse)
		}
	} else if h.listeners[port] != nil {
		return nil, fmt.Errorf("listen %s on %s: %w", addr, h.name, ErrAddrInUse)
	}
	l := &listener{h: h, incarnation: h.incarnation, port: port,
		addr: joinHostPort(h.name, port), accept: accept}
	h.listeners[port] = l
	return l, nil
}

// Dial implements env.Net. An empty host, "localhost", "127.0.0.1", "::1",
// "0.0.0.0" or "::" dials the host itself. A host that is down dials
// nothing: its callbacks would never run anyway.
func (h *host) Dial(addr string, connected func(env.Conn, error) env.ConnHandler) {
	if connected == nil || !h.up {
		return
	}
	name, port, err := splitHostPort(addr)
	if err != nil {
		h.failDial(fmt.Errorf("dial: %w", err), connected)
		return
	}
	dst := h
	if !h.isSelf(name, true) {
		dst = h.n.hosts[name]
	}
	if dst == nil {
		h.failDial(fmt.Errorf("dial %s: %w", addr, ErrNoSuchHost), connected)
		return
	}
	local := h.freePort()
	if local == 0 {
		h.failDial(fmt.Errorf("dial %s from %s: no free local port: %w", addr, h.name, ErrAddrNotAvail), connected)
		return
	}
	h.dialing[local]++
	h.n.dial(h, local, dst, port, connected)
}

// failDial reports a dial that never left the host.
func (h *host) failDial(err error, connected func(env.Conn, error) env.ConnHandler) {
	incarnation := h.incarnation
	label := sched.Label{Kind: "net.dial", Node: h.name, Digest: digestError(err)}
	h.loop.Schedule(0, label, func() {
		if h.incarnation == incarnation {
			connected(nil, err)
		}
	})
}

func (h *host) isSelf(name string, dialing bool) bool {
	switch name {
	case "", "0.0.0.0", "::", h.name:
		return true
	case "localhost", "127.0.0.1", "::1":
		return dialing
	}
	return false
}

// freePort returns the next ephemeral port that no listener and no live
// connection holds, or 0 if every one is taken.
func (h *host) freePort() int {
	for range 65536 - firstEphemeralPort {
		p := h.nextPort
		h.nextPort++
		if h.nextPort > 65535 {
			h.nextPort = firstEphemeralPort
		}
		if h.listeners[p] == nil && h.dialing[p] == 0 {
			return p
		}
	}
	return 0
}

// listener is a port a host listens on.
type listener struct {
	h           *host
	incarnation uint64
	port        int
	addr        string
	accept      func(env.Conn) env.ConnHandler
	closed      bool
}

func (l *listener) Addr() string { return l.addr }

// Close implements env.Listener. A connection whose handshake completed but
// whose accept func has not run yet is reset, as the kernel resets its
// accept queue.
func (l *listener) Close() error {
	if !l.live() {
		l.closed = true
		return fmt.Errorf("close listener %s: %w", l.addr, env.ErrClosed)
	}
	l.closed = true
	delete(l.h.listeners, l.port)
	return nil
}

func (l *listener) live() bool {
	return !l.closed && l.incarnation == l.h.incarnation
}

// splitHostPort splits "host:port", "[host]:port" or ":port".
func splitHostPort(addr string) (string, int, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("%w %q: missing port", ErrBadAddress, addr)
	}
	name, digits := addr[:i], addr[i+1:]
	if strings.HasPrefix(name, "[") {
		if !strings.HasSuffix(name, "]") {
			return "", 0, fmt.Errorf("%w %q: missing ']'", ErrBadAddress, addr)
		}
		name = name[1 : len(name)-1]
	} else if strings.Contains(name, ":") {
		return "", 0, fmt.Errorf("%w %q: too many colons", ErrBadAddress, addr)
	}
	port, err := strconv.Atoi(digits)
	if err != nil || port < 0 || port > 65535 || digits[0] == '+' || digits[0] == '-' {
		return "", 0, fmt.Errorf("%w %q: invalid port %q", ErrBadAddress, addr, digits)
	}
	return name, port, nil
}

func joinHostPort(name string, port int) string {
	if strings.Contains(name, ":") {
		return "[" + name + "]:" + strconv.Itoa(port)
	}
	return name + ":" + strconv.Itoa(port)
}

func digestError(err error) uint64 {
	if err == nil {
		return 0
	}
	return sched.Digest([]byte(err.Error()))
}
