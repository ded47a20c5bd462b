package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The cluster tests and benchmarks run three `sluice serve` processes on
// 127.0.0.1, each a combined node (broker and controller) of one static
// quorum, as cmd/sluice/config/cluster/ does, but on free ports, in
// temporary directories, with configurations the test writes.

// clusterNode is one node of a real-process cluster: its configuration,
// and its process while it runs.
type clusterNode struct {
	id       int32
	addr     string // PLAINTEXT host:port
	ctrlAddr string // CONTROLLER host:port
	dir      string // log.dirs
	conf     string // the properties file
	logPath  string // stderr of every incarnation, appended

	nodeProcess       // as sluice jepsen's nodes are
	err         error // cmd's exit, once done is closed
}

type testCluster struct {
	tb    testing.TB
	nodes []*clusterNode
}

// freeAddrs returns n distinct free 127.0.0.1 addresses: all are held
// open together, so none is returned twice.
func freeAddrs(tb testing.TB, n int) []string {
	tb.Helper()
	addrs, err := freeLocalAddrs(n)
	require.NoError(tb, err)
	return addrs
}

// newCluster writes the configurations of an n-node cluster (ids 1 to n,
// every one a voter) and starts every node. extra lines are appended to
// every node's properties file.
func newCluster(tb testing.TB, n int, extra ...string) *testCluster {
	tb.Helper()
	return newClusterShape(tb, n, 0, extra...)
}

// newClusterShape is newCluster of n combined nodes (the voters, ids 1 to
// n) and brokerOnly broker-only nodes after them (process.roles=broker,
// raft learners, no CONTROLLER listener).
func newClusterShape(tb testing.TB, n, brokerOnly int, extra ...string) *testCluster {
	tb.Helper()
	return newClusterOf(tb, n, brokerOnly, nil, extra...)
}

// newClusterOf is newClusterShape with perNode's lines (nil: none) added
// to node id's configuration.
func newClusterOf(tb testing.TB, n, brokerOnly int, perNode func(id int32) []string, extra ...string) *testCluster {
	tb.Helper()
	c := &testCluster{tb: tb}
	addrs := freeAddrs(tb, 2*(n+brokerOnly))
	root := tb.TempDir()
	if keep := os.Getenv("SLUICE_CLUSTER_DIR"); keep != "" {
		// Kept after the run, to read the nodes' logs and directories.
		var err error
		root, err = os.MkdirTemp(keep, "cluster-")
		require.NoError(tb, err)
		tb.Logf("cluster in %s", root)
	}
	var voters []string
	for i := range n + brokerOnly {
		nd := &clusterNode{id: int32(i + 1), addr: addrs[2*i], ctrlAddr: addrs[2*i+1]}
		nd.dir = filepath.Join(root, fmt.Sprintf("node-%d", nd.id))
		nd.conf = filepath.Join(root, fmt.Sprintf("server-%d.properties", nd.id))
		nd.logPath = filepath.Join(root, fmt.Sprintf("node-%d.log", nd.id))
		if i < n {
			voters = append(voters, fmt.Sprintf("%d@%s", nd.id, nd.ctrlAddr))
		} else {
			nd.ctrlAddr = "" // a learner has no CONTROLLER listener
		}
		c.nodes = append(c.nodes, nd)
	}
	for _, nd := range c.nodes {
		roles, listeners := "process.roles=broker,controller", fmt.Sprintf("listeners=PLAINTEXT://%s,CONTROLLER://%s", nd.addr, nd.ctrlAddr)
		if nd.ctrlAddr == "" {
			roles, listeners = "process.roles=broker", "listeners=PLAINTEXT://"+nd.addr
		}
		lines := []string{
			roles,
			fmt.Sprintf("node.id=%d", nd.id),
			"controller.quorum.voters=" + strings.Join(voters, ","),
			listeners,
			"inter.broker.listener.name=PLAINTEXT",
			"controller.listener.names=CONTROLLER",
			"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
			"log.dirs=" + nd.dir,
			"num.partitions=1",
			"default.replication.factor=1",
			"auto.create.topics.enable=false",
		}
		lines = append(lines, extra...)
		if perNode != nil {
			lines = append(lines, perNode(nd.id)...)
		}
		require.NoError(tb, os.WriteFile(nd.conf, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	}
	tb.Cleanup(func() {
		for _, nd := range c.nodes {
			if nd.running() {
				nd.cmd.Process.Kill()
				<-nd.done
			}
		}
		if tb.Failed() {
			for _, nd := range c.nodes {
				out, _ := os.ReadFile(nd.logPath)
				tb.Logf("node %d's log (last 8 KiB):\n%s", nd.id, tail(out, 8<<10))
			}
		}
	})
	for _, nd := range c.nodes {
		c.start(nd)
	}
	for _, nd := range c.nodes {
		c.waitListening(nd, 60*time.Second)
	}
	return c
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// start starts nd's process; it does not wait for it to serve.
func (c *testCluster) start(nd *clusterNode) {
	c.tb.Helper()
	require.False(c.tb, nd.running(), "node %d is running", nd.id)
	logf, err := os.OpenFile(nd.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(c.tb, err)
	fmt.Fprintf(logf, "=== start %s\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(sluiceBin, "serve", "--config", nd.conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(c.tb, cmd.Start())
	logf.Close() // the child holds its own descriptor
	nd.cmd, nd.done = cmd, make(chan struct{})
	go func() {
		nd.err = cmd.Wait()
		close(nd.done)
	}()
}

// kill kill -9s nd's process and waits for it to be gone.
func (c *testCluster) kill(nd *clusterNode) {
	c.tb.Helper()
	require.True(c.tb, nd.running(), "node %d is not running", nd.id)
	require.NoError(c.tb, nd.cmd.Process.Signal(syscall.SIGKILL))
	<-nd.done
}

// stop sends nd SIGTERM and waits for it to exit, cleanly.
func (c *testCluster) stop(nd *clusterNode) {
	c.tb.Helper()
	require.True(c.tb, nd.running(), "node %d is not running", nd.id)
	require.NoError(c.tb, nd.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-nd.done:
		require.NoError(c.tb, nd.err, "node %d's exit after SIGTERM", nd.id)
	case <-time.After(60 * time.Second):
		c.tb.Fatalf("node %d did not exit within 60 s of SIGTERM", nd.id)
	}
}

// waitListening waits until nd accepts connections on its PLAINTEXT
// listener, which a broker opens only once the controller has unfenced it.
func (c *testCluster) waitListening(nd *clusterNode, timeout time.Duration) {
	c.tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", nd.addr, 200*time.Millisecond)
		if err == nil {
			conn.Close()
			return
		}
		select {
		case <-nd.done:
			c.tb.Fatalf("node %d exited: %v (log %s)", nd.id, nd.err, nd.logPath)
		default:
		}
		if time.Now().After(deadline) {
			c.tb.Fatalf("node %d did not listen on %s within %v: %v", nd.id, nd.addr, timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *testCluster) running() []*clusterNode {
	var out []*clusterNode
	for _, nd := range c.nodes {
		if nd.running() {
			out = append(out, nd)
		}
	}
	return out
}

func (c *testCluster) addrs() []string {
	var out []string
	for _, nd := range c.nodes {
		out = append(out, nd.addr)
	}
	return out
}

// rawRequest sends one request on a connection of its own to addr and
// reads its response: for the CONTROLLER listener, or to ask one node and
// no other (a kgo client follows Metadata to the other brokers).
func rawRequest(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	kc, err := dialKafka(ctx, addr, "sluice-cluster-test")
	if err != nil {
		return nil, err
	}
	defer kc.close()
	return kc.request(ctx, req)
}

// kafkaConn is one connection to a broker on which requests go one after
// another, each answered before the next is sent: a member of a group
// whose JoinGroup waits at the coordinator holds a connection of its own.
type kafkaConn struct {
	conn          net.Conn
	formatter     *kmsg.RequestFormatter
	correlationID int32
}

func dialKafka(ctx context.Context, addr, clientID string) (*kafkaConn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &kafkaConn{conn: conn, formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}, nil
}

func (kc *kafkaConn) close() { kc.conn.Close() }

// request sends req and reads its response, within ctx's deadline (at
// most 60 s).
func (kc *kafkaConn) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	deadline, ok := ctx.Deadline()
	if !ok || time.Until(deadline) > 60*time.Second {
		deadline = time.Now().Add(60 * time.Second)
	}
	kc.conn.SetDeadline(deadline)
	kc.correlationID++
	correlationID := kc.correlationID
	frame := kc.formatter.AppendRequest(nil, req, correlationID)
	if _, err := kc.conn.Write(frame); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(kc.conn, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(kc.conn, body); err != nil {
		return nil, err
	}
	if len(body) < 4 || int32(binary.BigEndian.Uint32(body)) != correlationID {
		return nil, fmt.Errorf("response of %d bytes with a wrong correlation id", len(body))
	}
	body = body[4:]
	// Flexible responses but ApiVersions' carry a tag buffer in the header.
	if req.IsFlexible() && req.Key() != 18 {
		if len(body) == 0 || body[0] != 0 {
			return nil, errors.New("unexpected tagged fields in the response header")
		}
		body = body[1:]
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %T: %w", resp, err)
	}
	return resp, nil
}

// quorumLeader asks nd's CONTROLLER listener for the metadata quorum's
// state and returns the leader's id if nd is that leader, else -1.
func quorumLeader(ctx context.Context, nd *clusterNode) (int32, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.SetVersion(1)
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := rawRequest(ctx, nd.ctrlAddr, req)
	if err != nil {
		return -1, err
	}
	r := resp.(*kmsg.DescribeQuorumResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return -1, err
	}
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return -1, fmt.Errorf("DescribeQuorum answered %d topics", len(r.Topics))
	}
	p := r.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.LeaderID != nd.id {
		return -1, nil
	}
	return p.LeaderID, nil
}

// activeController asks every running node, on its CONTROLLER listener,
// until one says it leads the metadata quorum.
func (c *testCluster) activeController(ctx context.Context) *clusterNode {
	c.tb.Helper()
	for {
		for _, nd := range c.running() {
			if nd.ctrlAddr == "" {
				continue // broker-only
			}
			qctx, cancel := context.WithTimeout(ctx, time.Second)
			id, err := quorumLeader(qctx, nd)
			cancel()
			if err == nil && id == nd.id {
				return nd
			}
		}
		if ctx.Err() != nil {
			c.tb.Fatalf("no node leads the metadata quorum: %v", ctx.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// topicsOn asks nd alone, with Metadata v12, for every topic it knows, and
// returns them with their partition counts. A topic with an error is left
// out.
func topicsOn(ctx context.Context, nd *clusterNode) (map[string]int, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	req.Topics = nil // every topic
	resp, err := rawRequest(ctx, nd.addr, req)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, t := range resp.(*kmsg.MetadataResponse).Topics {
		if t.ErrorCode == 0 && t.Topic != nil {
			out[*t.Topic] = len(t.Partitions)
		}
	}
	return out, nil
}

// waitTopics waits until nd's Metadata lists every topic of want with its
// partition count, and returns how long that took.
func (c *testCluster) waitTopics(ctx context.Context, nd *clusterNode, want map[string]int) time.Duration {
	c.tb.Helper()
	start := time.Now()
	var missing []string
	for {
		got, err := topicsOn(ctx, nd)
		if err == nil {
			missing = missing[:0]
			for name, n := range want {
				if got[name] != n {
					missing = append(missing, name)
				}
			}
			if len(missing) == 0 {
				return time.Since(start)
			}
		}
		if ctx.Err() != nil {
			sort.Strings(missing)
			if len(missing) > 5 {
				missing = missing[:5]
			}
			c.tb.Fatalf("node %d: topics missing or with other partition counts after %v (%v; last error %v): %v",
				nd.id, time.Since(start), ctx.Err(), err, missing)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// adminClient is a kadm client seeded with every node's address: it
// follows the cluster's metadata, retrying NOT_CONTROLLER and dead brokers.
func (c *testCluster) adminClient(opts ...kgo.Opt) *kadm.Client {
	c.tb.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.addrs()...),
		kgo.RetryTimeout(30 * time.Second), kgo.RequestTimeoutOverhead(5 * time.Second)}, opts...)...)
	require.NoError(c.tb, err)
	c.tb.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	// A forward the new controller holds on to is given up on (and
	// retried) after this plus the overhead, rather than kadm's 15 s.
	adm.SetTimeoutMillis(5000)
	return adm
}

// createTopic creates one topic, returning nil only if the creation was
// acknowledged.
func createTopic(ctx context.Context, adm *kadm.Client, name string, partitions int32) error {
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, name)
	if err != nil {
		return err
	}
	return resp.Err
}

// createReplicatedTopic creates a topic of partitions partitions at
// replication factor 3 and fails the test unless the creation was
// acknowledged.
func createReplicatedTopic(ctx context.Context, t testing.TB, adm *kadm.Client, name string, partitions int32) {
	t.Helper()
	resp, err := adm.CreateTopic(ctx, partitions, 3, nil, name)
	require.NoError(t, err)
	require.NoError(t, resp.Err, "create %s", name)
}

// produceConsume produces n records to topic through a kgo client seeded
// with addrs and reads back every record of the topic from the start,
// checking that the last n are the ones produced.
func produceConsume(ctx context.Context, tb testing.TB, addrs []string, topic, tag string, n int) {
	tb.Helper()
	pr, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(tb, err)
	defer pr.Close()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("%s-%d", tag, i))})
	}
	require.NoError(tb, pr.ProduceSync(ctx, recs...).FirstErr())

	co, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(tb, err)
	defer co.Close()
	seen := map[string]bool{}
	for len(seen) < n {
		fs := co.PollFetches(ctx)
		require.NoError(tb, ctx.Err(), "consumed %d of %d records tagged %s", len(seen), n, tag)
		fs.EachError(func(t string, p int32, err error) { tb.Fatalf("fetch %s/%d: %v", t, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if strings.HasPrefix(string(r.Value), tag+"-") {
				seen[string(r.Value)] = true
			}
		})
	}
	for i := range n {
		require.True(tb, seen[fmt.Sprintf("%s-%d", tag, i)])
	}
}

// TestClusterControllerFailover: three real processes; topics are created
// in a loop through a kadm client seeded with all three; the active
// controller is kill -9'd mid-loop, another takes over and creation goes
// on; every topic whose creation was acknowledged is on all three nodes
// once the killed one has restarted, and records flow before and after.
func TestClusterControllerFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	c := newCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := c.adminClient()

	// Records flow before the failover: a topic with a partition on every
	// node (placement spreads leaders over the three).
	require.NoError(t, createTopic(ctx, adm, "flow", 3))
	produceConsume(ctx, t, c.addrs(), "flow", "before", 30)

	// The loop runs on its own goroutine, so that the kill lands while a
	// creation is in flight; a creation whose outcome is unknown (an error
	// once the request left) is retried, and TOPIC_ALREADY_EXISTS counts as
	// acknowledged, since no name is asked for twice: kgo itself retries a
	// request whose connection died, and its retry may find the topic its
	// first try created. Every topic so counted is checked on every node.
	type result struct {
		name  string
		parts int
		err   error
		at    time.Time
	}
	const total, killAfter = 60, 20
	results := make(chan result, total)
	go func() {
		defer close(results)
		for i := range total {
			name, parts := fmt.Sprintf("t-%03d", i), int32(1+i%4)
			var err error
			for attempt := 0; attempt < 20 && ctx.Err() == nil; attempt++ {
				err = createTopic(ctx, adm, name, parts)
				if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
					err = nil
					break
				}
				t.Logf("create %s, attempt %d: %v", name, attempt, err)
				time.Sleep(50 * time.Millisecond)
			}
			results <- result{name, int(parts), err, time.Now()}
		}
	}()
	acked := map[string]int{"flow": 3}
	var unknown []string
	var victim *clusterNode
	var killedAt time.Time
	var firstAfterKill time.Duration
	for r := range results {
		if r.err != nil {
			unknown = append(unknown, r.name)
			continue
		}
		acked[r.name] = r.parts
		if victim != nil && firstAfterKill == 0 && r.at.After(killedAt) {
			firstAfterKill = r.at.Sub(killedAt)
		}
		if len(acked) == killAfter+1 {
			victim = c.activeController(ctx)
			t.Logf("kill -9 node %d, the active controller, after %d topics", victim.id, killAfter)
			c.kill(victim)
			killedAt = time.Now()
		}
	}
	require.Empty(t, unknown, "creations never acknowledged")
	require.NotNil(t, victim)
	require.NotZero(t, firstAfterKill, "no creation acknowledged after the kill")
	t.Logf("%d topics acknowledged; the first after the kill %v after it", len(acked), firstAfterKill)
	newController := c.activeController(ctx)
	require.NotEqual(t, victim.id, newController.id)

	// The survivors have every acknowledged topic, and still serve records
	// (of the partitions they lead: the victim's are unavailable).
	for _, nd := range c.running() {
		c.waitTopics(ctx, nd, acked)
	}

	// The killed node restarts and catches up.
	c.start(victim)
	c.waitListening(victim, 60*time.Second)
	for _, nd := range c.nodes {
		c.waitTopics(ctx, nd, acked)
	}
	got, err := topicsOn(ctx, victim)
	require.NoError(t, err)
	for name := range got {
		if strings.HasPrefix(name, "t-") {
			_, ok := acked[name]
			require.True(t, ok, "node %d lists %s, never acknowledged", victim.id, name)
		}
	}
	produceConsume(ctx, t, c.addrs(), "flow", "after", 30)
	for _, nd := range c.nodes {
		require.True(t, nd.running(), "node %d exited: %v", nd.id, nd.err)
	}
}
