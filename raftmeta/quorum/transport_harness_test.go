package quorum_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/raftmeta/quorum"
	"github.com/sluicemq/sluice/sim"
)

// recorder is a fake raft node: it records what the transport delivers.
type recorder struct {
	steps       []*raftpb.Message
	unreachable []uint64
	snapshots   []snapshotReport
}

type snapshotReport struct {
	id     uint64
	failed bool
}

func (r *recorder) Step(m *raftpb.Message)      { r.steps = append(r.steps, m) }
func (r *recorder) ReportUnreachable(id uint64) { r.unreachable = append(r.unreachable, id) }
func (r *recorder) ReportSnapshot(id uint64, failed bool) {
	r.snapshots = append(r.snapshots, snapshotReport{id: id, failed: failed})
}

// from returns the indexes of the messages stepped from id, in order.
func (r *recorder) from(id uint64) []uint64 {
	var idx []uint64
	for _, m := range r.steps {
		if m.GetFrom() == id {
			idx = append(idx, m.GetIndex())
		}
	}
	return idx
}

// kafkaRecorder stands for the broker's Kafka side of a shared listener.
type kafkaRecorder struct {
	conns []*kafkaConn
}

type kafkaConn struct {
	c      env.Conn
	got    []byte
	closed bool
}

func (k *kafkaRecorder) accept(c env.Conn) env.ConnHandler {
	kc := &kafkaConn{c: c}
	k.conns = append(k.conns, kc)
	return kc
}

func (kc *kafkaConn) OnData(p []byte) { kc.got = append(kc.got, p...) }
func (kc *kafkaConn) OnClose(error)   { kc.closed = true }

// simNode is one node of a simulated quorum: its current incarnation's
// transport, recorder and connections.
type simNode struct {
	id     uint64
	name   string
	listen bool
	n      *sim.Node
	tr     *quorum.Transport
	rec    *recorder
	kafka  *kafkaRecorder
	// dialed are the connections this incarnation dialed, wrapped to
	// count their writes.
	dialed []*countingConn
}

func (sn *simNode) addr() string { return sn.name + ":9093" }

// dialedTo returns the live-or-not connections dialed to peer, oldest first.
func (sn *simNode) dialedTo(peer *simNode) []*countingConn {
	var out []*countingConn
	for _, c := range sn.dialed {
		if strings.HasPrefix(c.RemoteAddr(), peer.name+":") {
			out = append(out, c)
		}
	}
	return out
}

// cluster is a simulated world of raft transports.
type cluster struct {
	t     *testing.T
	w     *sim.World
	nodes []*simNode
	logs  *bytes.Buffer
	opts  []quorum.TransportOption
	// book says which peers each node knows the address of; nil means
	// every listening node.
	book func(self *simNode) []*simNode
}

// newCluster makes a world with one node per id; listening[i] says
// whether node i has a CONTROLLER listener (a learner has none).
func newCluster(t *testing.T, seed uint64, listening []bool, opts ...quorum.TransportOption) *cluster {
	c := &cluster{t: t, w: sim.New(seed), logs: &bytes.Buffer{}, opts: opts}
	c.w.SetLog(c.logs, slog.LevelDebug)
	for i, l := range listening {
		sn := &simNode{id: uint64(i + 1), name: fmt.Sprintf("n%d", i+1), listen: l, rec: &recorder{}, kafka: &kafkaRecorder{}}
		c.nodes = append(c.nodes, sn)
	}
	for _, sn := range c.nodes {
		sn.n = c.w.AddNode(sn.name, func(e env.Env) { c.boot(sn, e) })
	}
	return c
}

// boot starts a node's incarnation: a transport on a listener shared with
// a Kafka side through Demux, and the addresses of its peers.
func (c *cluster) boot(sn *simNode, e env.Env) {
	sn.rec = &recorder{}
	sn.kafka = &kafkaRecorder{}
	sn.dialed = nil
	e.Net = countingNet{Net: e.Net, sn: sn}
	sn.tr = quorum.NewTransport(e, sn.id, sn.rec, e.Log, c.opts...)
	if sn.listen {
		_, err := e.Net.Listen(sn.addr(), quorum.Demux(sn.tr.Accept, sn.kafka.accept, quorum.DemuxTimeout(e.Clock, 5*time.Second)))
		require.NoError(c.t, err)
	}
	peers := c.listeners()
	if c.book != nil {
		peers = c.book(sn)
	}
	for _, p := range peers {
		sn.tr.SetPeer(p.id, p.addr())
	}
}

func (c *cluster) listeners() []*simNode {
	var out []*simNode
	for _, sn := range c.nodes {
		if sn.listen {
			out = append(out, sn)
		}
	}
	return out
}

func (c *cluster) node(id uint64) *simNode { return c.nodes[id-1] }

// send makes one Send call on from's loop.
func (c *cluster) send(from *simNode, msgs ...*raftpb.Message) {
	from.n.Post(func() { from.tr.Send(msgs) })
}

// do runs f on sn's loop and waits for it.
func (c *cluster) do(sn *simNode, f func()) {
	c.t.Helper()
	done := false
	sn.n.Post(func() { f(); done = true })
	require.True(c.t, c.w.RunUntil(func() bool { return done }, time.Second), "the post never ran")
}

// until runs the world until cond holds, failing with what after limit.
func (c *cluster) until(limit time.Duration, cond func() bool, what string, args ...any) {
	c.t.Helper()
	if !c.w.RunUntil(cond, limit) {
		c.t.Fatalf("after %v: "+what+"\nlogs:\n%s", append([]any{limit}, append(args, c.logs.String())...)...)
	}
}

// eventually calls step, then runs the world for every, until cond holds,
// failing with what after limit. For conditions that need traffic to come
// true (a redial noticed by writing), which RunUntil cannot drive.
func (c *cluster) eventually(limit, every time.Duration, step func(), cond func() bool, what string, args ...any) {
	c.t.Helper()
	for deadline := c.w.Now() + limit; !cond(); {
		if c.w.Now() > deadline {
			c.t.Fatalf("after %v: "+what+"\nlogs:\n%s", append([]any{limit}, append(args, c.logs.String())...)...)
		}
		step()
		c.w.Run(every)
	}
}

// connect sends a message each way between every pair and waits until all
// arrived: every connection is dialed and past its handshake.
func (c *cluster) connect() {
	c.t.Helper()
	for _, a := range c.nodes {
		for _, b := range c.nodes {
			if a != b {
				c.send(a, msg(a.id, b.id, raftpb.MsgHeartbeat, 0))
			}
		}
	}
	c.until(10*time.Second, func() bool {
		for _, a := range c.nodes {
			for _, b := range c.nodes {
				if a != b && len(b.rec.from(a.id)) == 0 {
					return false
				}
			}
		}
		return true
	}, "the warm-up heartbeats did not all arrive")
}

// msg is a raft message with an index that tests use as a sequence number
// and an entry whose size varies with it.
func msg(from, to uint64, typ raftpb.MessageType, index uint64) *raftpb.Message {
	m := &raftpb.Message{Type: typ.Enum(), From: new(from), To: new(to), Term: new(uint64(3)), Index: new(index)}
	if typ == raftpb.MsgApp {
		data := bytes.Repeat([]byte{byte(index)}, int(index%50)*7)
		m.Entries = []*raftpb.Entry{{Term: new(uint64(3)), Index: new(index + 1), Data: data}}
	}
	return m
}

// snap is a MsgSnap whose snapshot holds size bytes.
func snap(from, to, index uint64, size int) *raftpb.Message {
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + int(index))
	}
	return &raftpb.Message{
		Type: raftpb.MsgSnap.Enum(), From: new(from), To: new(to), Term: new(uint64(3)),
		Snapshot: &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{
			Index: new(index), Term: new(uint64(3)), ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}},
		}},
	}
}

// seq returns [lo, hi).
func seq(lo, hi uint64) []uint64 {
	var out []uint64
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

// countingNet counts the writes of every connection a node dials.
type countingNet struct {
	env.Net
	sn *simNode
}

func (n countingNet) Dial(addr string, connected func(env.Conn, error) env.ConnHandler) {
	sn := n.sn
	n.Net.Dial(addr, func(c env.Conn, err error) env.ConnHandler {
		if err != nil {
			return connected(nil, err)
		}
		cc := &countingConn{Conn: c}
		sn.dialed = append(sn.dialed, cc)
		return connected(cc, nil)
	})
}

type countingConn struct {
	env.Conn
	writes int
	bytes  int
}

func (c *countingConn) Write(p []byte) error {
	c.writes++
	c.bytes += len(p)
	return c.Conn.Write(p)
}

// rawClient is a connection a test drives by hand.
type rawClient struct {
	c      env.Conn
	err    error
	got    []byte
	closed bool
	why    error
}

func (r *rawClient) OnData(p []byte)   { r.got = append(r.got, p...) }
func (r *rawClient) OnClose(err error) { r.closed, r.why = true, err }

// dialRaw connects a node that runs no transport to addr and writes p.
func (c *cluster) dialRaw(from *sim.Node, addr string, p []byte) *rawClient {
	c.t.Helper()
	r := &rawClient{}
	connected := false
	from.Post(func() {
		from.Env().Net.Dial(addr, func(conn env.Conn, err error) env.ConnHandler {
			connected = true
			r.c, r.err = conn, err
			if err == nil && len(p) > 0 {
				conn.Write(slices.Clone(p))
			}
			return r
		})
	})
	c.until(5*time.Second, func() bool { return connected }, "the dial of %s never completed", addr)
	require.NoError(c.t, r.err)
	return r
}
