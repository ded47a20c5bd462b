package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The runner's network in namespaces (--network netns, as root): every
// node in a network namespace of its own, joined by a veth pair to a bridge
// in a hub namespace, where the runner's clients open their sockets. A
// partition is a blackhole route in a node's namespace (its packets to a
// peer, or to the clients, dropped: one way; both nodes' routes: two
// ways). All traffic stays inside namespaces the run made, on a private
// subnet no other host sees, and they are deleted when it ends.

// netnsSubnet is every run's subnet: each run's namespaces are its own, so
// two runs at once do not meet.
const netnsSubnet = "10.77.0"

// hubHost is the clients' address on the bridge.
const hubHost = netnsSubnet + ".250"

// netnsNet is one run's namespaces.
type netnsNet struct {
	prefix string // "sj<pid>-": every namespace and veth of the run
	hubFD  int    // the hub namespace, for the clients' sockets
	nodes  int
}

// netnsAvailable says whether this process can make network namespaces.
func netnsAvailable() error {
	if os.Geteuid() != 0 {
		return errors.New("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("network namespaces need the ip command (iproute2)")
	}
	// Root in a container may still lack the right: try one.
	probe := fmt.Sprintf("sj%d-probe", os.Getpid())
	if err := ipCmd("netns", "add", probe); err != nil {
		return err
	}
	return ipCmd("netns", "del", probe)
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// inNS runs ip in namespace ns.
func inNS(ns string, args ...string) error {
	return ipCmd(append([]string{"netns", "exec", ns, "ip"}, args...)...)
}

func (n *netnsNet) hub() string           { return n.prefix + "hub" }
func (n *netnsNet) nodeNS(i int) string   { return fmt.Sprintf("%sn%d", n.prefix, i+1) }
func (n *netnsNet) nodeHost(i int) string { return fmt.Sprintf("%s.%d", netnsSubnet, i+1) }

// newNetnsNet makes the hub, the bridge and a namespace per node.
func newNetnsNet(nodes int) (*netnsNet, error) {
	removeStaleNamespaces()
	n := &netnsNet{prefix: fmt.Sprintf("sj%d-", os.Getpid()), hubFD: -1, nodes: nodes}
	fail := func(err error) (*netnsNet, error) {
		n.close()
		return nil, err
	}
	hub := n.hub()
	for _, args := range [][]string{
		{"netns", "add", hub},
		{"netns", "exec", hub, "ip", "link", "set", "lo", "up"},
		{"netns", "exec", hub, "ip", "link", "add", "br0", "type", "bridge"},
		{"netns", "exec", hub, "ip", "addr", "add", hubHost + "/24", "dev", "br0"},
		{"netns", "exec", hub, "ip", "link", "set", "br0", "up"},
	} {
		if err := ipCmd(args...); err != nil {
			return fail(err)
		}
	}
	for i := range nodes {
		ns := n.nodeNS(i)
		veth := fmt.Sprintf("sj%dv%d", os.Getpid()%100000, i+1)
		for _, args := range [][]string{
			{"netns", "add", ns},
			{"netns", "exec", ns, "ip", "link", "set", "lo", "up"},
			{"link", "add", veth, "type", "veth", "peer", "name", veth + "h"},
			{"link", "set", veth, "netns", ns},
			{"link", "set", veth + "h", "netns", hub},
			{"netns", "exec", hub, "ip", "link", "set", veth + "h", "master", "br0"},
			{"netns", "exec", hub, "ip", "link", "set", veth + "h", "up"},
			{"netns", "exec", ns, "ip", "addr", "add", n.nodeHost(i) + "/24", "dev", veth},
			{"netns", "exec", ns, "ip", "link", "set", veth, "up"},
		} {
			if err := ipCmd(args...); err != nil {
				return fail(err)
			}
		}
	}
	fd, err := unix.Open("/var/run/netns/"+hub, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("open the hub namespace: %w", err))
	}
	n.hubFD = fd
	return n, nil
}

// close deletes the run's namespaces (their veths go with them).
func (n *netnsNet) close() {
	if n.hubFD >= 0 {
		unix.Close(n.hubFD)
		n.hubFD = -1
	}
	for i := range n.nodes {
		ipCmd("netns", "del", n.nodeNS(i))
	}
	ipCmd("netns", "del", n.hub())
}

// removeStaleNamespaces deletes the namespaces of runs whose process is
// gone (a runner killed with kill -9 cannot delete its own).
func removeStaleNamespaces() {
	entries, err := os.ReadDir("/var/run/netns")
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		rest, ok := strings.CutPrefix(name, "sj")
		pidText, _, ok2 := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || !ok2 || err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == nil {
			continue // its run is alive
		}
		ipCmd("netns", "del", name)
	}
}

// dial opens a TCP connection from the hub namespace: the clients' sockets
// live there, whatever thread the runner's goroutines are on.
func (n *netnsNet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	runtime.LockOSThread()
	self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer unix.Close(self)
	if err := unix.Setns(n.hubFD, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("enter the hub namespace: %w", err)
	}
	// The socket is made here, in the hub; connecting may finish on
	// another thread, but the socket stays where it was made.
	conn, dialErr := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
		// This thread cannot go back: it ends with its goroutine, still
		// locked, and the runtime makes a fresh one.
		if conn != nil {
			conn.Close()
		}
		return nil, fmt.Errorf("leave the hub namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return conn, dialErr
}

// A cut drops the packets namespace ns sends to host: a node's to a
// peer or to the clients, or the clients' to a node.
type cut struct{ ns, host string }

func (c cut) String() string { return c.ns + "->" + c.host }

func (n *netnsNet) apply(c cut) error { return inNS(c.ns, "route", "add", "blackhole", c.host+"/32") }
func (n *netnsNet) undo(c cut) error  { return inNS(c.ns, "route", "del", "blackhole", c.host+"/32") }

// partitionCuts draws a partition of node i as the proxy does
// (partitionLinks: from one peer or all of them, or from the clients; one
// way or both), each link a cut in its sender's namespace.
func (n *netnsNet) partitionCuts(pick func(int) int, i int) []cut {
	var cuts []cut
	for _, l := range partitionLinks(pick, i, n.nodes) {
		cuts = append(cuts, cut{n.endNS(l.from), n.endHost(l.to)})
	}
	return cuts
}

// endNS and endHost are a link end's namespace and address.
func (n *netnsNet) endNS(e int) string {
	if e == clientsEnd {
		return n.hub()
	}
	return n.nodeNS(e)
}

func (n *netnsNet) endHost(e int) string {
	if e == clientsEnd {
		return hubHost
	}
	return n.nodeHost(e)
}
