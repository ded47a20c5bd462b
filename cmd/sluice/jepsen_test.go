package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/jepsen"
)

// leftoverNodes lists the processes a jepsen run started that still run.
func leftoverNodes(t *testing.T) []string {
	t.Helper()
	var left []string
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	require.NoError(t, err)
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), "sluice-jepsen-") && strings.Contains(string(b), "serve") {
			left = append(left, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return left
}

// A short real run through kills, pauses and restarts keeps every
// acknowledged record, writes its files, and leaves nothing running; the
// same run with its final reads made to drop a record fails. Its consumer
// groups, one classic and one KIP-848, are assigned every partition,
// commit, settle and pass the group check.
func TestJepsenRunnerChecksARealCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real clusters")
	}
	dir := filepath.Join(t.TempDir(), "out")
	out, stderr, err := runSluice("jepsen", "--duration", "8s", "--fault-every", "1s", "--seed", "3", "--groups", "classic:3,consumer:2", "--out", dir)
	require.NoError(t, err, "%s%s", out, stderr)
	require.Regexp(t, `^seed=3 time=\S+ ops=\d+ meta_ops=\d+ result=ok nodes=3 network=(netns|proxy) partitions=3 producers=3 consumers=2 meta_clients=2 groups=classic:3\+cooperative-sticky,consumer:2 faults=kill,stop,restart(,partition)?(,latency,loss)?(,diskfull)? every=1s injected=\S+\n$`, out)
	require.Regexp(t, `groups: jepsen-g1 classic:3\+cooperative-sticky: \d+ restarts, \d+ assignments, [1-9]\d* polls processed, commits [1-9]\d* ok`, stderr)
	requireGroupHistory(t, filepath.Join(dir, jepsen.GroupHistoryFile), map[string]jepsen.GroupProtocol{"jepsen-g1": jepsen.GroupClassic, "jepsen-g2": jepsen.GroupConsumer}, 3)
	history, err := os.ReadFile(filepath.Join(dir, "history.jsonl"))
	require.NoError(t, err)
	require.Contains(t, string(history), `"kind":"ok","op"`, "operations completed")
	require.Regexp(t, `"client":10[12],"type":"fetch"`, string(history), "the consumers fetched during the faults")
	meta, err := os.ReadFile(filepath.Join(dir, "meta-history.jsonl"))
	require.NoError(t, err)
	require.Regexp(t, `"kind":"ok","op":\d+,"client":[01],"type":"create_topic"`, string(meta), "the metadata clients created topics")
	require.Contains(t, string(meta), `"final":true`, "every node's image was recorded")
	for _, name := range []string{"history.jsonl", "meta-history.jsonl", "group-history.jsonl", "summary.txt", "timeline.html", "linearizability-jepsen-0.html", "meta-linearizability-live-1.html", "n1.log"} {
		info, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err, name)
		require.Positive(t, info.Size(), name)
	}
	require.Empty(t, leftoverNodes(t))
	require.Empty(t, leftoverNamespaces(t))

	out, stderr, err = runSluice("jepsen", "--duration", "4s", "--fault-every", "1s", "--seed", "3", "--sabotage-drop-final", "--sabotage-meta-final")
	require.ErrorIs(t, err, errSimFailed, out)
	require.Contains(t, out, "result=violation")
	require.Contains(t, stderr, "lost-write")
	require.Contains(t, stderr, "metadata: result=violation")
	require.Contains(t, stderr, "not-converged")
	require.Empty(t, leftoverNodes(t))

	// Members that skip a record and commit past it are caught by the
	// group check through the runner, the data check passing.
	out, stderr, err = runSluice("jepsen", "--duration", "4s", "--fault-every", "1s", "--seed", "3", "--groups", "classic:2", "--sabotage-group-skip")
	require.ErrorIs(t, err, errSimFailed, out)
	require.Contains(t, out, "result=violation")
	require.Contains(t, stderr, "was processed by no member: a record was skipped")
	require.NotContains(t, stderr, "lost-write")
	require.Empty(t, leftoverNodes(t))

	require.Empty(t, leftoverNamespaces(t))
	_, _, err = runSluice("jepsen", "--nodes", "2")
	require.ErrorContains(t, err, "--nodes 2")
	_, _, err = runSluice("jepsen", "--faults", "meteor")
	require.ErrorContains(t, err, `"meteor"`)
	_, _, err = runSluice("jepsen", "--groups", "classic:0")
	require.ErrorContains(t, err, `--groups "classic:0"`)
	_, _, err = runSluice("jepsen", "--groups", "consumer:2+range")
	require.ErrorContains(t, err, "only a classic group names a balancer")
}

// requireGroupHistory reads a run's group history and requires it to be
// more than a formality: every group assigned every one of its partitions,
// acknowledged commits, offset fetches answered, and finals.
func requireGroupHistory(t *testing.T, path string, groups map[string]jepsen.GroupProtocol, partitions int32) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	invokes := map[int64]jepsen.GroupEvent{}
	assigned := map[string]map[int32]bool{}
	kinds := map[string]map[jepsen.GroupEventKind]int{}
	scanner := bufio.NewScanner(f)
	scanner.Buffer(nil, 1<<20)
	for scanner.Scan() {
		var e jepsen.GroupEvent
		require.NoError(t, json.Unmarshal(scanner.Bytes(), &e), scanner.Text())
		if e.Op != 0 {
			e.Group, e.Protocol = invokes[e.Op].Group, invokes[e.Op].Protocol
		} else {
			invokes[e.Time] = e
		}
		require.Equal(t, groups[e.Group], e.Protocol, scanner.Text())
		if kinds[e.Group] == nil {
			kinds[e.Group], assigned[e.Group] = map[jepsen.GroupEventKind]int{}, map[int32]bool{}
		}
		kinds[e.Group][e.Kind]++
		if e.Kind == jepsen.GroupAssigned {
			for _, p := range e.Partitions {
				assigned[e.Group][p] = true
			}
		}
	}
	require.NoError(t, scanner.Err())
	for g := range groups {
		require.Len(t, assigned[g], int(partitions), "%s: every partition assigned", g)
		for _, k := range []jepsen.GroupEventKind{jepsen.GroupProcessed, jepsen.GroupCommitOk, jepsen.GroupFetchOk, jepsen.GroupFinal} {
			require.Positive(t, kinds[g][k], "%s: %s events", g, k)
		}
	}
}

// leftoverNamespaces lists this process's jepsen namespaces still there.
func leftoverNamespaces(t *testing.T) []string {
	t.Helper()
	entries, _ := os.ReadDir("/var/run/netns")
	var left []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), fmt.Sprintf("sj%d-", os.Getpid())) {
			left = append(left, e.Name())
		}
	}
	return left
}

// Partitions need the namespaces: one way and both, between nodes and
// from the clients; full disks a small filesystem per node. The run still
// keeps every acknowledged record and leaves nothing behind.
func TestJepsenRunnerPartitionsInNamespaces(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real clusters")
	}
	if err := netnsAvailable(); err != nil {
		_, _, err := runSluice("jepsen", "--network", "netns", "--duration", "1s")
		require.ErrorContains(t, err, "--network netns")
		t.Skipf("no network namespaces here: %v", err)
	}
	for _, fault := range []string{"partition", "diskfull"} {
		out, stderr, err := runSluice("jepsen", "--network", "netns", "--faults", fault, "--duration", "8s", "--fault-every", "500ms", "--seed", "5")
		require.NoError(t, err, "%s%s", out, stderr)
		require.Contains(t, out, " network=netns ")
		require.Regexp(t, `injected=`+fault+`:\d+`, out)
	}
	mounts, err := os.ReadFile("/proc/self/mounts")
	require.NoError(t, err)
	require.NotContains(t, string(mounts), "sluice-jepsen-", "a node's small disk is still mounted")
	require.Empty(t, leftoverNodes(t))
	require.Empty(t, leftoverNamespaces(t))
	_, _, err = runSluice("jepsen", "--network", "loopback", "--faults", "partition")
	require.ErrorContains(t, err, "needs --network netns")
	_, _, err = runSluice("jepsen", "--network", "netns", "--faults", "kill,latency")
	require.ErrorContains(t, err, "--faults latency: needs --network proxy")
}

// Through the proxy a run partitions (one way and both), delays and
// "loses" (holds) the nodes' and the clients' bytes, keeps every
// acknowledged record and leaves nothing behind; a dropped final record
// is still caught there.
func TestJepsenRunnerFaultsThroughTheProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real clusters")
	}
	dir := filepath.Join(t.TempDir(), "out")
	// Seed 40's first faults: loss, partition, latency, partition.
	out, stderr, err := runSluice("jepsen", "--network", "proxy", "--faults", "partition,latency,loss", "--duration", "8s",
		"--fault-every", "500ms", "--seed", "40", "--out", dir)
	require.NoError(t, err, "%s%s", out, stderr)
	require.Regexp(t, ` network=proxy .* injected=partition:\d+,latency:\d+,loss:\d+\n$`, out)
	require.Regexp(t, `proxy: \d+ connections relayed, \d+ refused \(node down\), \d+ held until a partition healed; chunks held by a partition \d+, by latency [1-9]\d*, by loss [1-9]`, stderr)
	timeline, err := os.ReadFile(filepath.Join(dir, "timeline.html"))
	require.NoError(t, err)
	for _, s := range []string{"fault partition [", "fault latency [", "fault loss [", "class=latency", "class=loss"} {
		require.Contains(t, string(timeline), s)
	}
	require.Empty(t, leftoverNodes(t))

	out, stderr, err = runSluice("jepsen", "--network", "proxy", "--faults", "latency", "--duration", "3s", "--seed", "3", "--sabotage-drop-final")
	require.ErrorIs(t, err, errSimFailed, out)
	require.Contains(t, out, "result=violation")
	require.Contains(t, stderr, "lost-write")
	require.Empty(t, leftoverNodes(t))
}

// --network auto takes the proxy when latency or loss is asked for, and
// the proxy's default mix is every fault it makes.
func TestJepsenNetworkChoice(t *testing.T) {
	o := jepsenOptions{network: "auto", faults: []string{"kill", "loss"}}
	require.NoError(t, o.resolveNetwork())
	require.Equal(t, "proxy", o.network)
	o = jepsenOptions{network: "proxy"}
	require.NoError(t, o.resolveNetwork())
	want := []string{"kill", "stop", "restart", "partition", "latency", "loss"}
	if os.Geteuid() == 0 {
		want = append(want, "diskfull")
	}
	require.Equal(t, want, o.faults)
	o = jepsenOptions{network: "loopback", faults: []string{"latency"}}
	require.ErrorContains(t, o.resolveNetwork(), "--faults latency: needs --network proxy")
}

// proxyPair is a proxy of two nodes whose node n2 is a listener of the
// test's own, and a connection to it from a given end, both sides.
type proxyPair struct {
	p      *proxyNet
	target net.Listener
}

func newProxyPair(t *testing.T) *proxyPair {
	t.Helper()
	before := runtime.NumGoroutine()
	p, err := newProxyNet(2, 1)
	require.NoError(t, err)
	target, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := target.Addr().String()
	p.start([][2]string{{addr, addr}, {addr, addr}})
	t.Cleanup(func() {
		p.close()
		target.Close()
		// Every listener, connection and goroutine of the proxy is gone.
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		require.LessOrEqual(t, runtime.NumGoroutine(), before, "the proxy's goroutines ended")
		_, err := net.Dial("tcp", p.addr(1, 0))
		require.Error(t, err, "the proxy's listener is closed")
	})
	return &proxyPair{p: p, target: target}
}

// dial connects from end to n2's broker listener through the proxy; it
// returns the two ends once the target accepted.
func (pp *proxyPair) dial(t *testing.T, from netip.Addr) (client, server net.Conn) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: from.AsSlice()}}
	client, err := d.Dial("tcp", pp.p.addr(1, 0))
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	server, err = pp.target.Accept()
	require.NoError(t, err)
	t.Cleanup(func() { server.Close() })
	return client, server
}

// arrives reads want from c within limit; "" expects nothing in limit.
func arrives(t *testing.T, c net.Conn, want string, limit time.Duration) {
	t.Helper()
	buf := make([]byte, 64)
	c.SetReadDeadline(time.Now().Add(limit))
	defer c.SetReadDeadline(time.Time{})
	n, err := io.ReadAtLeast(c, buf, max(len(want), 1))
	if want == "" {
		require.True(t, errors.Is(err, os.ErrDeadlineExceeded), "nothing arrives, got %q %v", buf[:n], err)
		return
	}
	require.NoError(t, err)
	require.Equal(t, want, string(buf[:n]))
}

// A one-way cut holds one direction of a pair and nothing else: the other
// direction, and the clients' connection to the same node, flow; a new
// connection on the cut pair reaches its node only when the cut heals,
// and what was held arrives then, in order.
func TestJepsenProxyCutsOneWay(t *testing.T) {
	pp := newProxyPair(t)
	n1, n2 := pp.dial(t, nodeSourceAddr(0))
	_, err := n1.Write([]byte("a"))
	require.NoError(t, err)
	arrives(t, n2, "a", 5*time.Second)

	pp.p.set([]link{{0, 1}}, linkFault{cut: true})
	n1.Write([]byte("b"))
	n2.Write([]byte("c"))
	arrives(t, n1, "c", 5*time.Second)
	arrives(t, n2, "", 300*time.Millisecond)
	clients, server := pp.dial(t, clientsAddr)
	clients.Write([]byte("d"))
	arrives(t, server, "d", 5*time.Second)

	// A new connection from n1 waits unrelayed while either way is cut.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: nodeSourceAddr(0).AsSlice()}}
	later, err := d.Dial("tcp", pp.p.addr(1, 0))
	require.NoError(t, err, "the proxy accepts it")
	defer later.Close()
	later.Write([]byte("e"))
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := pp.target.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	select {
	case <-accepted:
		t.Fatal("a connection on a cut pair reached its node")
	case <-time.After(300 * time.Millisecond):
	}

	pp.p.set([]link{{0, 1}}, linkFault{})
	n1.Write([]byte("f"))
	arrives(t, n2, "bf", 5*time.Second)
	var laterServer net.Conn
	select {
	case laterServer = <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("the held connection was not relayed once the cut healed")
	}
	defer laterServer.Close()
	arrives(t, laterServer, "e", 5*time.Second)
	require.Equal(t, 1, pp.p.statsNow().heldOpen)
	require.Positive(t, pp.p.statsNow().heldCut)
}

// Latency holds every chunk of its link for the delay, in order; a lossy
// link holds a chunk it "loses" for a retransmission's 200 ms or more. The
// pair's other direction is not slowed.
func TestJepsenProxyDelaysAndLoses(t *testing.T) {
	pp := newProxyPair(t)
	clients, server := pp.dial(t, clientsAddr)
	pp.p.set([]link{{clientsEnd, 1}}, linkFault{delay: 300 * time.Millisecond})
	start := time.Now()
	for _, s := range []string{"1", "2", "3"} {
		clients.Write([]byte(s))
		time.Sleep(5 * time.Millisecond)
	}
	arrives(t, server, "123", 5*time.Second)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	start = time.Now()
	server.Write([]byte("r"))
	arrives(t, clients, "r", 5*time.Second)
	require.Less(t, time.Since(start), 250*time.Millisecond, "the other direction is not delayed")

	pp.p.set([]link{{clientsEnd, 1}}, linkFault{loss: 1})
	start = time.Now()
	clients.Write([]byte("x"))
	arrives(t, server, "x", 5*time.Second)
	require.GreaterOrEqual(t, time.Since(start), lossHoldMin)
	require.Positive(t, pp.p.statsNow().retransmit)
}

// The ends are told apart by their source addresses, and a connection
// from none of them is not relayed.
func TestJepsenProxyKnowsEndsBySourceAddress(t *testing.T) {
	pp := newProxyPair(t)
	for _, c := range []struct {
		addr string
		end  int
		ok   bool
	}{{"127.0.0.2:5000", clientsEnd, true}, {"127.0.0.11:5000", 0, true}, {"127.0.0.12:5000", 1, true},
		{"127.0.0.13:5000", 0, false}, {"127.0.0.1:5000", 0, false}} {
		end, ok := pp.p.source(&net.TCPAddr{IP: netip.MustParseAddrPort(c.addr).Addr().AsSlice(), Port: 5000})
		require.Equal(t, c.ok, ok, c.addr)
		if ok {
			require.Equal(t, c.end, end, c.addr)
		}
	}
	stranger, err := net.Dial("tcp", pp.p.addr(1, 0)) // from 127.0.0.1
	require.NoError(t, err)
	defer stranger.Close()
	stranger.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = stranger.Read(make([]byte, 1))
	require.Error(t, err, "closed by the proxy")
	n, first := pp.p.strangers()
	require.Equal(t, 1, n)
	require.Contains(t, first, "127.0.0.1:")
}

// The netns network draws a partition as the proxy does, the same draws
// giving the same cuts as before the two shared it.
func TestJepsenPartitionShapeIsShared(t *testing.T) {
	draws := func(seq ...int) func(int) int {
		return func(n int) int { v := seq[0] % n; seq = seq[1:]; return v }
	}
	require.Equal(t, []link{{0, clientsEnd}, {clientsEnd, 0}}, partitionLinks(draws(0, 0), 0, 3))
	require.Equal(t, []link{{1, 2}}, partitionLinks(draws(4, 0, 1), 1, 3))
	require.Equal(t, []link{{0, 2}, {1, 2}}, partitionLinks(draws(9, 2), 2, 3))
	ns := &netnsNet{prefix: "sjX-", nodes: 3}
	require.Equal(t, []cut{{"sjX-n2", "10.77.0.3"}}, ns.partitionCuts(draws(4, 0, 1), 1))
	require.Equal(t, []cut{{"sjX-n1", hubHost}, {"sjX-hub", "10.77.0.1"}}, ns.partitionCuts(draws(0, 0), 0))
}

// --groups reads as the simulator's groups= option; a classic group that
// names no balancer gets the seed's, the same for the same seed.
func TestJepsenGroupsOption(t *testing.T) {
	for _, c := range []struct {
		in, want, err string
	}{
		{in: "none", want: "none"},
		{in: "classic:3", want: "classic:3"},
		{in: "classic:3+range,consumer:2", want: "classic:3+range,consumer:2"},
		{in: "classic:9", err: "1 to 8 members"},
		{in: "classic", err: "protocol:members"},
		{in: "share:2", err: `protocol "share"`},
		{in: "consumer:2+sticky", err: "only a classic group names a balancer"},
		{in: "classic:2+fair", err: `balancer "fair"`},
		{in: "classic:1,classic:1,classic:1,classic:1,consumer:1", err: "at most 4 groups"},
	} {
		gs, err := parseGroups(c.in)
		if c.err != "" {
			require.ErrorContains(t, err, c.err, c.in)
			continue
		}
		require.NoError(t, err, c.in)
		require.Equal(t, c.want, groupsString(gs), c.in)
	}
	gs, err := parseGroups("classic:3,consumer:2,classic:1+sticky")
	require.NoError(t, err)
	chosen := map[string]int{}
	for seed := range uint64(60) {
		got := chooseBalancers(seed, gs)
		require.Equal(t, got, chooseBalancers(seed, gs), "seed %d", seed)
		require.Equal(t, "", got[1].balancer, "KIP-848 has no client balancer")
		require.Equal(t, "sticky", got[2].balancer, "a named balancer is kept")
		chosen[got[0].balancer]++
	}
	require.Len(t, chosen, len(groupBalancers), "every balancer is some seed's: %v", chosen)
	require.Greater(t, chosen["cooperative-sticky"], 30, "cooperative-sticky in most seeds: %v", chosen)
}
