package quorum_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/raftmeta/quorum"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/simnet"
)

var listening3 = []bool{true, true, true}

// TestTransportsExchangeMessagesInOrder: two and three transports, each
// sending to every other from the first instant (while the dials are still
// in flight), deliver every message, in order per sender, with nothing
// reported unreachable.
func TestTransportsExchangeMessagesInOrder(t *testing.T) {
	for _, n := range []int{2, 3} {
		for seed := uint64(1); seed <= 3; seed++ {
			c := newCluster(t, seed, listening3[:n])
			const sends = 30
			for i := uint64(0); i < sends; i++ {
				for _, a := range c.nodes {
					var msgs []*raftpb.Message
					for _, b := range c.nodes {
						if a != b {
							msgs = append(msgs, msg(a.id, b.id, raftpb.MsgApp, 2*i), msg(a.id, b.id, raftpb.MsgHeartbeat, 2*i+1))
						}
					}
					c.send(a, msgs...)
				}
				c.w.Run(time.Duration(i%4) * 300 * time.Microsecond)
			}
			c.until(10*time.Second, func() bool {
				for _, a := range c.nodes {
					for _, b := range c.nodes {
						if a != b && len(b.rec.from(a.id)) < 2*sends {
							return false
						}
					}
				}
				return true
			}, "n=%d seed %d: not everything arrived", n, seed)
			for _, a := range c.nodes {
				for _, b := range c.nodes {
					if a != b {
						require.Equal(t, seq(0, 2*sends), b.rec.from(a.id), "n=%d seed %d: %d from %d", n, seed, b.id, a.id)
					}
				}
				require.Empty(t, a.rec.unreachable, "n=%d seed %d: node %d", n, seed, a.id)
			}
			// The entries arrived intact.
			for _, m := range c.node(2).rec.steps {
				if m.GetType() == raftpb.MsgApp {
					require.True(t, proto.Equal(msg(1, 2, raftpb.MsgApp, m.GetIndex()), m) || m.GetFrom() != 1, "a MsgApp changed on the way: %v", m)
				}
			}
		}
	}
}

// TestOneWritePerPeerPerSend: a Send writes each peer's messages with one
// Conn.Write; the Sends made while a connection is dialed go out with its
// handshake in one write.
func TestOneWritePerPeerPerSend(t *testing.T) {
	c := newCluster(t, 7, listening3)
	n1, n2, n3 := c.node(1), c.node(2), c.node(3)
	// The dials from boot are in flight: three Sends wait for them.
	for i := uint64(0); i < 3; i++ {
		c.send(n1, msg(1, 2, raftpb.MsgApp, i), msg(1, 3, raftpb.MsgApp, i), msg(1, 2, raftpb.MsgHeartbeat, 100+i))
	}
	c.until(5*time.Second, func() bool { return len(n2.rec.from(1)) == 6 && len(n3.rec.from(1)) == 3 }, "the pending messages did not arrive")
	require.Equal(t, []uint64{0, 100, 1, 101, 2, 102}, n2.rec.from(1))
	for _, peer := range []*simNode{n2, n3} {
		conns := n1.dialedTo(peer)
		require.Len(t, conns, 1)
		require.Equal(t, 1, conns[0].writes, "handshake and pending to %s", peer.name)
	}

	c.connect()
	before := map[*simNode]int{n2: n1.dialedTo(n2)[0].writes, n3: n1.dialedTo(n3)[0].writes}
	var msgs []*raftpb.Message
	for i := uint64(10); i < 20; i++ {
		msgs = append(msgs, msg(1, 2+i%2, raftpb.MsgApp, i))
	}
	c.send(n1, msgs...)
	c.until(5*time.Second, func() bool { return len(n2.rec.from(1)) == 6+1+5 && len(n3.rec.from(1)) == 3+1+5 }, "the batch did not arrive")
	require.Equal(t, []uint64{10, 12, 14, 16, 18}, n2.rec.from(1)[7:])
	require.Equal(t, []uint64{11, 13, 15, 17, 19}, n3.rec.from(1)[4:])
	for _, peer := range []*simNode{n2, n3} {
		require.Equal(t, before[peer]+1, n1.dialedTo(peer)[0].writes, "writes to %s for one Send", peer.name)
	}
}

// TestReconnectAfterPeerCrashAndRestart: a crashed peer's connection is
// half-open; writing to it times out and is reported. Once the peer
// restarts, both sides redial and messages flow again both ways.
func TestReconnectAfterPeerCrashAndRestart(t *testing.T) {
	c := newCluster(t, 11, listening3[:2])
	c.w.Net().SetTimeouts(2*time.Second, 2*time.Second)
	n1, n2 := c.node(1), c.node(2)
	c.connect()

	n2.n.Crash()
	next := uint64(1)
	tick := func() {
		c.send(n1, msg(1, 2, raftpb.MsgHeartbeat, next))
		next++
		c.w.Run(100 * time.Millisecond)
	}
	for len(n1.rec.unreachable) == 0 && next < 100 {
		tick()
	}
	require.NotEmpty(t, n1.rec.unreachable, "writing into a crashed peer was never reported")
	require.Equal(t, uint64(2), n1.rec.unreachable[0])
	for range 20 { // backoff while down: dials time out or are refused
		tick()
	}
	n2.n.Restart()
	c.w.Run(time.Millisecond)
	restartedAt := next
	c.eventually(5*time.Second, 0, tick, func() bool {
		got := n2.rec.from(1)
		return len(got) > 0 && got[len(got)-1] >= restartedAt+3
	}, "no message reached the restarted peer")
	c.send(n2, msg(2, 1, raftpb.MsgHeartbeatResp, 1000))
	c.until(5*time.Second, func() bool {
		got := n1.rec.from(2)
		return len(got) > 0 && got[len(got)-1] == 1000
	}, "the restarted peer's message did not arrive")
	got := n2.rec.from(1)
	for i := 1; i < len(got); i++ {
		require.Less(t, got[i-1], got[i], "delivered out of order: %v", got)
	}
}

// TestPeerThatConnectsIsRedialedAtOnce: a peer down long enough for the
// backoff to reach its cap is redialed as soon as it connects to us, not
// when the backoff runs out.
func TestPeerThatConnectsIsRedialedAtOnce(t *testing.T) {
	c := newCluster(t, 14, listening3[:2])
	n1, n2 := c.node(1), c.node(2)
	c.connect()
	n2.n.Kill()
	c.w.Run(5 * time.Second) // dials are refused; the backoff grows to 1s
	dials := len(n1.dialedTo(n2))
	n2.n.Restart()
	c.w.Run(20 * time.Millisecond)
	require.Equal(t, dials+1, len(n1.dialedTo(n2)), "the peer's own connection did not trigger a redial")
	c.send(n1, msg(1, 2, raftpb.MsgApp, 9))
	c.until(10*time.Millisecond, func() bool { return len(n2.rec.from(1)) == 1 }, "the redialed connection did not carry a message")
}

// TestKilledPeerIsReportedAtOnce: a killed process's connections are reset,
// so the next Send is already reported, and the new process is reached
// again.
func TestKilledPeerIsReportedAtOnce(t *testing.T) {
	c := newCluster(t, 12, listening3[:2])
	n1, n2 := c.node(1), c.node(2)
	c.connect()
	n2.n.Kill()
	c.until(time.Second, func() bool { return len(n1.rec.unreachable) > 0 }, "the reset was not reported")
	n2.n.Restart()
	c.eventually(10*time.Second, 50*time.Millisecond, func() { c.send(n1, msg(1, 2, raftpb.MsgHeartbeat, 5)) },
		func() bool { return len(n2.rec.from(1)) > 0 }, "the restarted peer was not reached")
}

// TestPartitionLosesMessagesThenHeals: messages sent into a partition are
// lost once the connection gives up, ReportUnreachable fires while it
// lasts, the other peer hears everything, and after healing messages flow
// again.
func TestPartitionLosesMessagesThenHeals(t *testing.T) {
	c := newCluster(t, 13, listening3)
	c.w.Net().SetTimeouts(time.Second, time.Second)
	n1, n2, n3 := c.node(1), c.node(2), c.node(3)
	c.connect()
	c.w.Net().Partition("n1", "n3")
	c.w.Net().Partition("n3", "n1")
	next := uint64(1)
	tick := func() {
		c.send(n1, msg(1, 2, raftpb.MsgApp, next), msg(1, 3, raftpb.MsgApp, next))
		next++
		c.w.Run(100 * time.Millisecond)
	}
	for range 50 {
		tick()
	}
	require.Contains(t, n1.rec.unreachable, uint64(3))
	require.NotContains(t, n1.rec.unreachable, uint64(2))
	require.Equal(t, seq(1, next), n2.rec.from(1)[1:], "the healthy peer missed messages")
	require.Len(t, n3.rec.from(1), 1, "messages crossed the partition")

	c.w.Net().HealAll()
	healedAt := next
	c.eventually(10*time.Second, 0, tick, func() bool {
		got := n3.rec.from(1)
		return got[len(got)-1] > healedAt
	}, "no message crossed after healing")
	got := n3.rec.from(1)[1:]
	require.Less(t, len(got), int(next-1), "nothing was lost in a partition longer than the retransmission timeout")
	for i := 1; i < len(got); i++ {
		require.Less(t, got[i-1], got[i], "delivered out of order: %v", got)
	}
}

// TestLearnerIsAnsweredOnItsOwnConnection: a learner has no listener; the
// voter knows no address for it and answers over the connection the
// learner dialed. Before it dials, and after that connection breaks until
// the learner redials, the voter reports the learner unreachable.
func TestLearnerIsAnsweredOnItsOwnConnection(t *testing.T) {
	c := newCluster(t, 17, []bool{true, true, false})
	n1, n2, learner := c.node(1), c.node(2), c.node(3)
	// The learner's dials happen at boot; a send before they complete has
	// no route.
	c.send(n1, msg(1, 3, raftpb.MsgApp, 1))
	c.w.Run(time.Millisecond / 10)
	c.until(time.Second, func() bool { return len(n1.rec.unreachable) > 0 }, "no report for a learner without a route")
	require.Equal(t, []uint64{3}, n1.rec.unreachable)
	require.Empty(t, learner.rec.steps)

	// Once the learner's connections are up, both voters reach it, without
	// the learner having sent anything.
	c.w.Run(time.Second)
	for i := uint64(2); i < 6; i++ {
		c.send(n1, msg(1, 3, raftpb.MsgApp, i))
		c.send(n2, msg(2, 3, raftpb.MsgHeartbeat, i))
	}
	c.until(time.Second, func() bool { return len(learner.rec.steps) == 8 }, "the voters' messages did not reach the learner")
	require.Equal(t, seq(2, 6), learner.rec.from(1))
	require.Equal(t, seq(2, 6), learner.rec.from(2))
	c.send(learner, msg(3, 1, raftpb.MsgAppResp, 5), msg(3, 2, raftpb.MsgHeartbeatResp, 5))
	c.until(time.Second, func() bool { return len(n1.rec.from(3)) == 1 && len(n2.rec.from(3)) == 1 }, "the learner's answers did not arrive")
	require.Len(t, learner.dialed, 2, "the learner dialed more than once per voter")
	for _, cc := range learner.dialed {
		require.Equal(t, 2, cc.writes, "the learner's connection carried the handshake and one answer")
	}

	// The connection breaks: the voter has no route until the learner
	// redials, which it does on its own.
	c.w.Net().Reset("n1", "n3")
	c.w.Run(time.Millisecond)
	n1.rec.unreachable = nil
	c.send(n1, msg(1, 3, raftpb.MsgApp, 6))
	c.w.Run(time.Millisecond)
	require.Equal(t, []uint64{3}, n1.rec.unreachable)
	c.eventually(5*time.Second, 20*time.Millisecond, func() { c.send(n1, msg(1, 3, raftpb.MsgApp, 7)) },
		func() bool { return len(learner.rec.from(1)) > 4 }, "the learner did not redial")
	require.Equal(t, uint64(7), learner.rec.from(1)[4])
	require.Len(t, learner.dialedTo(n1), 2)
}

// TestSnapshotReports: a MsgSnap is reported exactly once: a success once
// the receiver stepped it, a failure when it had no route, did not fit
// the pending bound, lost its connection before the ack, or waited too long
// for the ack.
func TestSnapshotReports(t *testing.T) {
	t.Run("acknowledged", func(t *testing.T) {
		c := newCluster(t, 21, listening3[:2])
		n1, n2 := c.node(1), c.node(2)
		c.connect()
		s := snap(1, 2, 500, 3<<20)
		c.send(n1, s)
		c.until(5*time.Second, func() bool { return len(n1.rec.snapshots) > 0 }, "no report")
		require.Equal(t, []snapshotReport{{id: 2}}, n1.rec.snapshots)
		last := n2.rec.steps[len(n2.rec.steps)-1]
		require.True(t, proto.Equal(s, last), "the snapshot changed on the way")
		c.w.Run(2 * time.Minute)
		require.Len(t, n1.rec.snapshots, 1)
		require.Empty(t, n1.rec.unreachable)
	})
	t.Run("acknowledged on a learner's connection", func(t *testing.T) {
		c := newCluster(t, 22, []bool{true, false})
		n1, learner := c.node(1), c.node(2)
		c.w.Run(time.Second)
		c.send(n1, snap(1, 2, 9, 1000), snap(1, 2, 10, 2000))
		c.until(5*time.Second, func() bool { return len(n1.rec.snapshots) == 2 }, "no reports")
		require.Equal(t, []snapshotReport{{id: 2}, {id: 2}}, n1.rec.snapshots)
		require.Len(t, learner.rec.steps, 2)
	})
	t.Run("no route", func(t *testing.T) {
		c := newCluster(t, 23, listening3[:2])
		n1 := c.node(1)
		c.send(n1, snap(1, 9, 5, 10), msg(1, 9, raftpb.MsgApp, 1))
		c.w.Run(time.Millisecond)
		require.Equal(t, []snapshotReport{{id: 9, failed: true}}, n1.rec.snapshots)
		require.Equal(t, []uint64{9}, n1.rec.unreachable)
	})
	t.Run("above the pending bound", func(t *testing.T) {
		c := newCluster(t, 24, listening3[:2], func(cfg *quorum.TransportConfig) { cfg.MaxPendingBytes = 64 << 10 })
		n1, n2 := c.node(1), c.node(2)
		c.send(n1, snap(1, 2, 5, 100<<10), msg(1, 2, raftpb.MsgApp, 1)) // while the dial is in flight
		c.until(time.Second, func() bool { return len(n1.rec.snapshots) > 0 }, "no report")
		require.Equal(t, []snapshotReport{{id: 2, failed: true}}, n1.rec.snapshots)
		c.until(time.Second, func() bool { return len(n2.rec.steps) > 0 }, "the message that fit did not arrive")
		require.Equal(t, []uint64{1}, n2.rec.from(1))
		// Connected, a snapshot above the pending bound goes.
		c.send(n1, snap(1, 2, 6, 100<<10))
		c.until(time.Second, func() bool { return len(n1.rec.snapshots) == 2 }, "no report")
		require.Equal(t, snapshotReport{id: 2}, n1.rec.snapshots[1])
	})
	t.Run("connection lost before the ack", func(t *testing.T) {
		c := newCluster(t, 25, listening3[:2])
		n1, n2 := c.node(1), c.node(2)
		c.connect()
		c.send(n1, snap(1, 2, 5, 1<<20))
		c.w.Run(time.Microsecond)
		c.w.Net().Reset("n1", "n2")
		c.until(time.Second, func() bool { return len(n1.rec.snapshots) > 0 }, "no report")
		require.Equal(t, []snapshotReport{{id: 2, failed: true}}, n1.rec.snapshots)
		require.Len(t, n2.rec.from(1), 1, "the snapshot arrived after all")
		c.w.Run(time.Minute)
		require.Len(t, n1.rec.snapshots, 1)
	})
	t.Run("ack timeout", func(t *testing.T) {
		c := newCluster(t, 26, listening3[:2], func(cfg *quorum.TransportConfig) { cfg.SnapshotAckTimeout = time.Second })
		n1, n2 := c.node(1), c.node(2)
		c.connect()
		n2.n.Pause()
		c.send(n1, snap(1, 2, 5, 1000))
		c.w.Run(900 * time.Millisecond)
		require.Empty(t, n1.rec.snapshots)
		c.until(time.Second, func() bool { return len(n1.rec.snapshots) > 0 }, "no report")
		require.Equal(t, []snapshotReport{{id: 2, failed: true}}, n1.rec.snapshots)
		require.Contains(t, c.logs.String(), "snapshot not acknowledged")
		n2.n.Resume()
		c.w.Run(time.Second)
		require.Len(t, n1.rec.snapshots, 1, "a late ack was reported too")
		c.send(n1, msg(1, 2, raftpb.MsgApp, 77))
		c.until(3*time.Second, func() bool {
			got := n2.rec.from(1)
			return got[len(got)-1] == 77
		}, "the redialed connection does not carry messages")
	})
}

// frame builds a raft transport frame by hand.
func frame(kind byte, body []byte) []byte {
	f := make([]byte, 9, 9+len(body))
	f[8] = kind
	f = append(f, body...)
	binary.BigEndian.PutUint32(f[0:4], uint32(len(f)-4))
	binary.BigEndian.PutUint32(f[4:8], crc32.Checksum(f[8:], crc32.MakeTable(crc32.Castagnoli)))
	return f
}

func hello(version uint16, from, to uint64) []byte {
	b := binary.BigEndian.AppendUint16(nil, version)
	b = binary.BigEndian.AppendUint64(b, from)
	return frame(1, binary.BigEndian.AppendUint64(b, to))
}

func messageFrame(m *raftpb.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return frame(2, b)
}

const preamble = "\xffsluice-raft\n"

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestMalformedInputClosesTheConnection: whatever a stranger sends, the
// transport closes the connection with a warning naming the remote
// address, steps nothing it should not, and goes on serving its peers.
func TestMalformedInputClosesTheConnection(t *testing.T) {
	r := rng.New(99)
	junk := make([]byte, 4096)
	env.Fill(r, junk)
	good := hello(1, 7, 1)
	badCRC := messageFrame(msg(7, 1, raftpb.MsgApp, 1))
	badCRC[len(badCRC)-1] ^= 0x40
	cases := []struct {
		name   string
		stream []byte
		warn   string
		steps  int
	}{
		{"random bytes after the preamble", cat([]byte(preamble), junk), "closing connection", 0},
		{"a huge length", cat([]byte(preamble), []byte{0x7f, 0xff, 0xff, 0xff}, junk[:10]), "above the 268435456 bytes", 0},
		{"a negative length", cat([]byte(preamble), []byte{0xff, 0, 0, 0}), "negative or above", 0},
		{"a bad checksum", cat([]byte(preamble), good, messageFrame(msg(7, 1, raftpb.MsgApp, 1)), badCRC), "fails its checksum", 1},
		{"a hello for another node", cat([]byte(preamble), hello(1, 7, 2)), "meant for raft node 2, but this is raft node 1", 0},
		{"a hello of another version", cat([]byte(preamble), hello(9, 7, 1)), "version 9", 0},
		{"a hello from node 0", cat([]byte(preamble), hello(1, 0, 1)), "sender 0", 0},
		{"a hello from itself", cat([]byte(preamble), hello(1, 1, 1)), "own id", 0},
		{"a short hello", cat([]byte(preamble), frame(1, []byte{0, 1})), "hello of 2 bytes", 0},
		{"a message before the hello", cat([]byte(preamble), messageFrame(msg(7, 1, raftpb.MsgApp, 1))), "not a hello", 0},
		{"a second hello", cat([]byte(preamble), good, good), "a second hello", 0},
		{"a message from another node", cat([]byte(preamble), good, messageFrame(msg(8, 1, raftpb.MsgApp, 1))), "on a connection from 7", 0},
		{"a message for another node", cat([]byte(preamble), good, messageFrame(msg(7, 2, raftpb.MsgApp, 1))), "on a connection from 7", 0},
		{"a local message", cat([]byte(preamble), good, messageFrame(msg(7, 1, raftpb.MsgHup, 1))), "never sends to a peer", 0},
		{"a snapshot without one", cat([]byte(preamble), good, messageFrame(msg(7, 1, raftpb.MsgSnap, 1))), "without a snapshot", 0},
		{"a body that is not a message", cat([]byte(preamble), good, frame(2, []byte{0xff, 0xff, 0xff})), "does not decode", 0},
		{"an unknown kind", cat([]byte(preamble), good, frame(42, nil)), "unknown frame kind 42", 0},
		{"a keepalive with a body", cat([]byte(preamble), good, frame(5, nil), messageFrame(msg(7, 1, raftpb.MsgApp, 1)), frame(5, []byte{1})), "keepalive with a 1-byte body", 1},
		{"an ack of nothing", cat([]byte(preamble), good, frame(3, make([]byte, 16))), "none was sent", 0},
		{"an empty frame", cat([]byte(preamble), good, []byte{0, 0, 0, 0}), "shorter than its checksum", 0},
	}
	c := newCluster(t, 31, listening3[:2])
	stranger := c.w.AddNode("x", nil)
	n1 := c.node(1)
	c.connect()
	for _, tc := range cases {
		c.logs.Reset()
		stepsBefore := len(n1.rec.steps)
		rc := c.dialRaw(stranger, n1.addr(), tc.stream)
		c.until(time.Second, func() bool { return rc.closed }, "%s: the connection was not closed", tc.name)
		require.Contains(t, c.logs.String(), tc.warn, tc.name)
		require.Contains(t, c.logs.String(), "remote="+rc.c.LocalAddr(), "%s: the warning does not name the remote address", tc.name)
		require.Equal(t, tc.steps, len(n1.rec.steps)-stepsBefore, tc.name)
	}
	// A refusal says why to the dialer too.
	rc := c.dialRaw(stranger, n1.addr(), cat([]byte(preamble), hello(1, 7, 2)))
	c.until(time.Second, func() bool { return rc.closed }, "not closed")
	require.Contains(t, string(rc.got), "meant for raft node 2")
	// Bytes that are not the preamble go to the Kafka side, whole: random
	// ones, and a preamble that goes wrong.
	for _, kafka := range [][]byte{append([]byte{0, 0, 0, 20}, junk[:20]...), cat([]byte(preamble[:9]), []byte("kafka"))} {
		before := len(n1.kafka.conns)
		c.dialRaw(stranger, n1.addr(), kafka)
		c.until(time.Second, func() bool { k := n1.kafka.conns; return len(k) > before && len(k[len(k)-1].got) == len(kafka) },
			"the Kafka side did not get %q", kafka)
		require.Equal(t, kafka, n1.kafka.conns[len(n1.kafka.conns)-1].got)
	}
	// The transport still serves its peer.
	c.send(c.node(2), msg(2, 1, raftpb.MsgApp, 42))
	c.until(time.Second, func() bool { got := n1.rec.from(2); return got[len(got)-1] == 42 }, "the transport stopped serving")
}

// TestMisconfiguredVoterIsRefusedOnBothSides: a node that has another
// node's address for a peer is refused by it, and both log why; messages
// to that peer are reported unreachable, and the backoff grows.
func TestMisconfiguredVoterIsRefusedOnBothSides(t *testing.T) {
	c := newCluster(t, 37, listening3)
	c.book = func(self *simNode) []*simNode {
		if self.id == 2 { // node 2 has node 3's address for node 1
			return []*simNode{{id: 1, name: "n3"}, c.node(3)}
		}
		return c.listeners()
	}
	c.node(2).n.Restart()
	c.w.Run(time.Second)
	logs := c.logs.String()
	require.Contains(t, logs, "refusing connection")
	require.Contains(t, logs, "the connection is meant for raft node 1, but this is raft node 3")
	require.Contains(t, logs, "peer refused the connection")
	n2 := c.node(2)
	refused := n2.dialedTo(c.node(3))
	c.w.Run(10 * time.Second)
	dials := len(n2.dialedTo(c.node(3))) - len(refused)
	require.Less(t, dials, 2*10+2, "redials of a refused connection do not back off") // one per second at most, plus the good one
	c.send(n2, msg(2, 1, raftpb.MsgApp, 1), msg(2, 3, raftpb.MsgApp, 1))
	c.until(time.Second, func() bool { return len(c.node(3).rec.from(2)) > 0 }, "the good peer was not reached")
	require.Contains(t, n2.rec.unreachable, uint64(1))
	require.Empty(t, c.node(1).rec.from(2))
	require.True(t, strings.Count(c.logs.String(), "refusing connection") > 1)
}

// TestAddressChangeRedials: a peer whose address changes is redialed at
// the new one, and what was waiting for the old one goes there.
func TestAddressChangeRedials(t *testing.T) {
	c := newCluster(t, 41, listening3[:2])
	c.book = func(self *simNode) []*simNode {
		if self.id == 1 {
			return []*simNode{{id: 2, name: "nowhere"}}
		}
		return c.listeners()
	}
	n1, n2 := c.node(1), c.node(2)
	n1.n.Restart()
	c.w.Run(time.Millisecond)
	c.send(n1, msg(1, 2, raftpb.MsgApp, 1))
	c.do(n1, func() { n1.tr.SetPeer(2, n2.addr()) })
	c.send(n1, msg(1, 2, raftpb.MsgApp, 2))
	c.until(time.Second, func() bool { return len(n2.rec.from(1)) == 2 }, "messages did not follow the new address")
	require.Equal(t, []uint64{1, 2}, n2.rec.from(1))
	// Removing the address drops the connection: the peer is reached only
	// over its own connection to us, the reply path.
	c.do(n1, func() { n1.tr.SetPeer(2, "") })
	c.send(n1, msg(1, 2, raftpb.MsgApp, 3))
	c.until(time.Second, func() bool { return len(n2.rec.from(1)) == 3 }, "the reply path was not used")
}

// TestCloseStopsEverything: after Close nothing is delivered or reported,
// and the peer sees its connections close.
func TestCloseStopsEverything(t *testing.T) {
	c := newCluster(t, 43, listening3[:2])
	n1, n2 := c.node(1), c.node(2)
	c.connect()
	steps := len(n1.rec.steps)
	c.do(n1, func() {
		n1.tr.Send([]*raftpb.Message{snap(1, 2, 4, 10)})
		n1.tr.Close()
		n1.tr.Send([]*raftpb.Message{msg(1, 2, raftpb.MsgApp, 9)})
		n1.tr.SetPeer(3, "n3:9093")
	})
	c.send(n2, msg(2, 1, raftpb.MsgApp, 8))
	c.w.Run(10 * time.Second)
	require.Equal(t, steps, len(n1.rec.steps))
	require.Empty(t, n1.rec.snapshots)
	require.Empty(t, n1.rec.unreachable)
	require.Contains(t, n2.rec.unreachable, uint64(1))
}

// TestSameSeedSameRun: the transport draws only on the simulated world, so
// a seed replays the same trace.
func TestSameSeedSameRun(t *testing.T) {
	run := func() (string, int) {
		c := newCluster(t, 51, []bool{true, true, false}, func(cfg *quorum.TransportConfig) { cfg.BackoffMax = 200 * time.Millisecond })
		c.w.Net().SetTimeouts(time.Second, time.Second)
		for i := uint64(0); i < 50; i++ {
			for _, a := range c.nodes {
				for _, b := range c.nodes {
					if a != b {
						c.send(a, msg(a.id, b.id, raftpb.MsgApp, i))
					}
				}
			}
			if i == 20 {
				c.node(2).n.Crash()
			}
			if i == 30 {
				c.node(2).n.Restart()
			}
			c.w.Run(100 * time.Millisecond)
		}
		return c.w.Trace(), len(c.node(1).rec.steps)
	}
	trace1, steps1 := run()
	trace2, steps2 := run()
	require.Equal(t, trace1, trace2)
	require.Equal(t, steps1, steps2)
}

// TestReachedOnlyThroughAnAddressThatAnswersAsThePeer: a learner without a
// listener, whose own connections carry its messages, is not reached; a
// voter is once its hello came back, and no longer when its address is
// removed.
func TestReachedOnlyThroughAnAddressThatAnswersAsThePeer(t *testing.T) {
	c := newCluster(t, 19, []bool{true, true, false})
	n1, learner := c.node(1), c.node(3)
	c.w.Run(time.Second)
	c.do(n1, func() { n1.tr.SetPeer(3, "n3:9093") })
	c.send(learner, msg(3, 1, raftpb.MsgAppResp, 1))
	c.until(time.Second, func() bool { return len(n1.rec.from(3)) == 1 }, "the learner's message did not arrive")
	c.w.Run(time.Second)
	reached := func(id uint64) (ok bool) {
		c.do(n1, func() { ok = n1.tr.Reached(id) })
		return ok
	}
	require.True(t, reached(2))
	require.False(t, reached(3), "the learner has no listener")
	require.False(t, reached(4), "no such peer")
	c.do(n1, func() { n1.tr.SetPeer(2, "") })
	require.False(t, reached(2))
}

// TestLearnerFindsAVoterThatRebooted: a voter crashes (its end of the
// learner's connection vanishes without a word) and comes back. The
// learner sends nothing of its own, so only its keepalives find out that
// the connection is dead; it redials, and the restarted voter reaches it
// again. Without keepalives the learner would wait on the dead connection
// for good, and the voter, which cannot dial a learner, could never reach
// it.
func TestLearnerFindsAVoterThatRebooted(t *testing.T) {
	c := newCluster(t, 18, []bool{true, true, false})
	n1, learner := c.node(1), c.node(3)
	c.w.Run(time.Second)
	c.send(n1, msg(1, 3, raftpb.MsgApp, 1))
	c.until(time.Second, func() bool { return len(learner.rec.from(1)) == 1 }, "the voter did not reach the learner")

	n1.n.Crash()
	c.w.Run(time.Second)
	n1.n.Restart()
	c.w.Run(time.Millisecond)
	c.eventually(10*time.Second, 50*time.Millisecond, func() { c.send(n1, msg(1, 3, raftpb.MsgApp, 2)) },
		func() bool { return len(learner.rec.from(1)) > 1 }, "the restarted voter never reached the learner")
	require.Len(t, learner.dialedTo(n1), 2, "the learner redialed the voter once")
}

// TestKeepalivesOnlyOnIdleConnections: a connection that carries messages
// writes no keepalive; an idle one writes one per interval.
func TestKeepalivesOnlyOnIdleConnections(t *testing.T) {
	c := newCluster(t, 19, listening3[:2], quorum.WithTransportConfig(quorum.TransportConfig{KeepaliveInterval: 100 * time.Millisecond}))
	n1, n2 := c.node(1), c.node(2)
	c.connect()
	conn := n1.dialedTo(n2)[0]
	before := conn.writes
	for i := range 20 {
		c.send(n1, msg(1, 2, raftpb.MsgHeartbeat, uint64(i+1)))
		c.w.Run(50 * time.Millisecond)
	}
	require.Equal(t, before+20, conn.writes, "keepalives on a busy connection")
	c.w.Run(time.Second + 50*time.Millisecond)
	require.InDelta(t, before+30, conn.writes, 1, "one keepalive per interval on an idle connection")
	require.Len(t, n2.rec.from(1), 20+1, "a keepalive was stepped as a message")
}

// TestSilentConnectionIsRedialed: a path that holds what is sent (no reset,
// no timeout: TCP may retransmit for many minutes) makes the learner's
// connection to its voter silent; both ends write keepalives, so silence
// past SilenceTimeout means the path is dead, and the learner redials: the
// voter's messages reach it again within seconds, not when the hold ends.
func TestSilentConnectionIsRedialed(t *testing.T) {
	c := newCluster(t, 20, []bool{true, true, false}, quorum.WithTransportConfig(quorum.TransportConfig{KeepaliveInterval: 200 * time.Millisecond}))
	n1, learner := c.node(1), c.node(3)
	c.w.Run(time.Second)
	c.send(n1, msg(1, 3, raftpb.MsgApp, 1))
	c.until(time.Second, func() bool { return len(learner.rec.from(1)) == 1 }, "the voter did not reach the learner")

	// An idle connection is not silent: the voter's keepalives keep it.
	c.w.Run(3 * time.Second)
	require.Len(t, learner.dialedTo(n1), 1, "an idle connection was taken for dead")

	net := c.w.Net()
	for _, id := range net.Conns(learner.name, n1.name, 9093) {
		require.True(t, net.StallConn(id, simnet.BothWays, time.Hour))
	}
	c.eventually(3*time.Second, 20*time.Millisecond, func() { c.send(n1, msg(1, 3, raftpb.MsgApp, 2)) },
		func() bool { return len(learner.rec.from(1)) > 1 }, "the learner did not give up on its silent connection")
	require.Len(t, learner.dialedTo(n1), 2, "the learner redialed once")
}
