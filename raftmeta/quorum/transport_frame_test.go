package quorum

import (
	"bytes"
	"encoding/binary"
	"errors"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/wire"
)

// Fakes of the environment, for driving one connection by hand.

type fakeLoop struct{ queue []func() }

func (l *fakeLoop) Post(f func()) { l.queue = append(l.queue, f) }

func (l *fakeLoop) run() {
	for len(l.queue) > 0 {
		f := l.queue[0]
		l.queue = l.queue[1:]
		f()
	}
}

type fakeClock struct{ timers []*fakeTimer }

func (c *fakeClock) Now() time.Time { return time.Unix(1700000000, 0) }

func (c *fakeClock) Elapsed() time.Duration { return 0 }

func (c *fakeClock) AfterFunc(d time.Duration, f func()) env.Timer {
	t := &fakeTimer{d: d, f: f}
	c.timers = append(c.timers, t)
	return t
}

// fireAll fires every timer armed and not stopped.
func (c *fakeClock) fireAll() {
	timers := c.timers
	c.timers = nil
	for _, t := range timers {
		if !t.stopped && !t.fired {
			t.fired = true
			t.f()
		}
	}
}

type fakeTimer struct {
	d              time.Duration
	f              func()
	stopped, fired bool
}

func (t *fakeTimer) Stop() bool {
	was := !t.stopped && !t.fired
	t.stopped = true
	return was
}

type fakeRand struct{ x uint64 }

func (r *fakeRand) Uint64() uint64 { // splitmix64
	r.x += 0x9e3779b97f4a7c15
	z := r.x
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

type fakeConn struct {
	written [][]byte
	closed  bool
}

func (c *fakeConn) Write(p []byte) error {
	if c.closed {
		return env.ErrClosed
	}
	c.written = append(c.written, p)
	return nil
}

func (c *fakeConn) Close() error {
	if c.closed {
		return env.ErrClosed
	}
	c.closed = true
	return nil
}

func (c *fakeConn) LocalAddr() string  { return "n1:9093" }
func (c *fakeConn) RemoteAddr() string { return "x:40000" }

type fakeNet struct{ dials []string }

func (n *fakeNet) Listen(string, func(env.Conn) env.ConnHandler) (env.Listener, error) {
	return nil, errors.New("fakeNet does not listen")
}

func (n *fakeNet) Dial(addr string, _ func(env.Conn, error) env.ConnHandler) {
	n.dials = append(n.dials, addr)
}

type stepRecorder struct {
	steps       []*raftpb.Message
	unreachable []uint64
	snapshots   []bool
}

func (r *stepRecorder) Step(m *raftpb.Message)      { r.steps = append(r.steps, m) }
func (r *stepRecorder) ReportUnreachable(id uint64) { r.unreachable = append(r.unreachable, id) }
func (r *stepRecorder) ReportSnapshot(_ uint64, failed bool) {
	r.snapshots = append(r.snapshots, failed)
}

type fakeWorld struct {
	loop  *fakeLoop
	clock *fakeClock
	net   *fakeNet
	rec   *stepRecorder
	tr    *Transport
	logs  *bytes.Buffer
}

// newFakeWorld makes the transport of raft node 1 over fakes.
func newFakeWorld() *fakeWorld {
	w := &fakeWorld{loop: &fakeLoop{}, clock: &fakeClock{}, net: &fakeNet{}, rec: &stepRecorder{}, logs: &bytes.Buffer{}}
	e := env.Env{Loop: w.loop, Clock: w.clock, Rand: &fakeRand{}, Net: w.net,
		Log: slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	w.tr = NewTransport(e, 1, w.rec, nil)
	return w
}

func testMessage(from, to uint64, typ raftpb.MessageType, index uint64) *raftpb.Message {
	m := &raftpb.Message{Type: typ.Enum(), From: new(from), To: new(to), Term: new(uint64(2)), Index: new(index)}
	if typ == raftpb.MsgApp {
		m.Entries = []*raftpb.Entry{{Term: new(uint64(2)), Index: new(index + 1), Data: bytes.Repeat([]byte{'e'}, int(index))}}
	}
	if typ == raftpb.MsgSnap {
		m.Snapshot = &raftpb.Snapshot{Data: []byte("snapshot"), Metadata: &raftpb.SnapshotMetadata{Index: new(index), Term: new(uint64(2))}}
	}
	return m
}

// inboundStream is what a dialer from node 7 to node 1 sends: preamble,
// hello, then msgs.
func inboundStream(t testing.TB, msgs ...*raftpb.Message) []byte {
	b := []byte(transportPreamble)
	b = appendHello(b, transportHello{version: transportVersion, sender: 7, receiver: 1})
	for _, m := range msgs {
		messageFrameLen(m)
		var err error
		b, err = appendMessage(b, m)
		require.NoError(t, err)
	}
	return b
}

// TestPreambleIsNoKafkaFrame: read as a Kafka request's size, the preamble
// is negative, above any unsigned limit, and refused by our own Kafka
// framing at the largest limit it can be given.
func TestPreambleIsNoKafkaFrame(t *testing.T) {
	size := binary.BigEndian.Uint32([]byte(transportPreamble))
	require.Less(t, int32(size), int32(0))
	require.Greater(t, uint64(size), uint64(math.MaxInt32))
	require.Equal(t, int32(-9212811), int32(size), "the figure transport_frame.go gives")
	fr := wire.NewFrameReader(wire.FrameReaderConfig{MaxBytes: math.MaxInt32})
	fr.Feed([]byte(transportPreamble))
	_, _, err := fr.Next()
	var fse *wire.FrameSizeError
	require.ErrorAs(t, err, &fse)
}

// TestFramesRoundTrip: every kind of frame reads back as written, and any
// flipped bit fails the checksum or the size.
func TestFramesRoundTrip(t *testing.T) {
	m := testMessage(2, 1, raftpb.MsgApp, 40)
	frameLen, _ := messageFrameLen(m)
	b, err := appendMessage(nil, m)
	require.NoError(t, err)
	require.Len(t, b, frameLen)
	b = appendHello(b, transportHello{version: 1, sender: 2, receiver: 1})
	b = appendSnapshotAck(b, 10, 3)
	b = appendRefusal(b, string(bytes.Repeat([]byte{'r'}, 2000)))

	fr := wire.NewFrameReader(wire.FrameReaderConfig{MaxBytes: DefaultMaxFrameBytes})
	fr.Feed(b)
	var kinds []byte
	var bodies [][]byte
	for {
		f, ok, err := fr.Next()
		require.NoError(t, err)
		if !ok {
			break
		}
		kind, body, err := parseFrame(f)
		require.NoError(t, err)
		kinds, bodies = append(kinds, kind), append(bodies, body)
	}
	require.Equal(t, []byte{frameMessage, frameHello, frameSnapshotAck, frameRefusal}, kinds)
	got, err := parseMessage(bodies[0])
	require.NoError(t, err)
	require.True(t, proto.Equal(m, got))
	h, err := parseHello(bodies[1])
	require.NoError(t, err)
	require.Equal(t, transportHello{version: 1, sender: 2, receiver: 1}, h)
	index, term, err := parseSnapshotAck(bodies[2])
	require.NoError(t, err)
	require.Equal(t, [2]uint64{10, 3}, [2]uint64{index, term})
	require.Len(t, parseRefusal(bodies[3]), refusalMax)

	one, err := appendMessage(nil, m)
	require.NoError(t, err)
	for bit := 8 * 4; bit < 8*len(one); bit++ { // every bit after the size
		flipped := bytes.Clone(one)
		flipped[bit/8] ^= 1 << (bit % 8)
		_, _, err := parseFrame(flipped[4:])
		require.Error(t, err, "bit %d flipped", bit)
	}
}

// TestStreamSplitAnywhereThroughDemux: a raft connection's stream, cut
// into three pieces at every pair of places, reaches the transport
// through Demux whole: every message stepped, in order, nothing refused.
func TestStreamSplitAnywhereThroughDemux(t *testing.T) {
	msgs := []*raftpb.Message{testMessage(7, 1, raftpb.MsgApp, 3), testMessage(7, 1, raftpb.MsgHeartbeat, 4), testMessage(7, 1, raftpb.MsgApp, 5)}
	stream := inboundStream(t, msgs...)
	for i := 0; i <= len(stream); i++ {
		for j := i; j <= len(stream); j++ {
			w := newFakeWorld()
			kafka := 0
			accept := Demux(w.tr.Accept, func(env.Conn) env.ConnHandler { kafka++; return discardHandler{} })
			c := &fakeConn{}
			h := accept(c)
			for _, piece := range [][]byte{stream[:i], stream[i:j], stream[j:]} {
				if len(piece) > 0 {
					h.OnData(bytes.Clone(piece))
				}
			}
			require.Zero(t, kafka, "cut at %d, %d: went to Kafka", i, j)
			require.False(t, c.closed, "cut at %d, %d: closed: %s", i, j, w.logs)
			require.Len(t, w.rec.steps, len(msgs), "cut at %d, %d", i, j)
			for k, m := range msgs {
				require.True(t, proto.Equal(m, w.rec.steps[k]), "cut at %d, %d: message %d", i, j, k)
			}
			require.Len(t, c.written, 1, "the hello answer")
		}
	}
}

// TestHandshakeTimeout: an inbound connection that never says hello is
// closed with a warning.
func TestHandshakeTimeout(t *testing.T) {
	w := newFakeWorld()
	c := &fakeConn{}
	h := w.tr.Accept(c)
	h.OnData([]byte(transportPreamble[:5]))
	w.clock.fireAll()
	require.True(t, c.closed)
	require.Contains(t, w.logs.String(), "handshake timed out")
	require.Contains(t, w.logs.String(), "remote=x:40000")
}

// TestSendNeverCallsBack: reports of a Send come on a later loop turn,
// never from inside Send.
func TestSendNeverCallsBack(t *testing.T) {
	w := newFakeWorld()
	w.tr.Send([]*raftpb.Message{testMessage(1, 5, raftpb.MsgSnap, 3), testMessage(1, 5, raftpb.MsgApp, 4), testMessage(1, 6, raftpb.MsgApp, 4)})
	require.Empty(t, w.rec.unreachable)
	require.Empty(t, w.rec.snapshots)
	w.loop.run()
	require.Equal(t, []uint64{5, 6}, w.rec.unreachable)
	require.Equal(t, []bool{true}, w.rec.snapshots)
}

// TestBackoffGrowsToItsCapWithJitter: the wait doubles per failure from
// BackoffMin to BackoffMax, within ±20%.
func TestBackoffGrowsToItsCapWithJitter(t *testing.T) {
	w := newFakeWorld()
	p := &transportPeer{t: w.tr, id: 2, addr: "n2:9093"}
	want := []time.Duration{50, 100, 200, 400, 800, 1000, 1000, 1000}
	for i, ms := range want {
		p.failures = i + 1
		d := p.backoff()
		base := ms * time.Millisecond
		require.GreaterOrEqual(t, d, base*8/10, "failure %d", i+1)
		require.Less(t, d, base*12/10, "failure %d", i+1)
	}
}

// FuzzInboundConnection: whatever follows the preamble, in whatever
// pieces, the transport neither panics nor steps a message that is not
// from the hello's sender to this node; once it closes the connection it
// steps nothing more.
func FuzzInboundConnection(f *testing.F) {
	f.Add(inboundStream(f, testMessage(7, 1, raftpb.MsgApp, 3), testMessage(7, 1, raftpb.MsgSnap, 9))[len(transportPreamble):], []byte{3, 50, 7})
	f.Add(inboundStream(f, testMessage(7, 1, raftpb.MsgHeartbeat, 1))[len(transportPreamble):], []byte{})
	f.Add(appendHello(nil, transportHello{version: 1, sender: 7, receiver: 2}), []byte{1})
	bad := inboundStream(f, testMessage(7, 1, raftpb.MsgApp, 3))[len(transportPreamble):]
	bad[len(bad)-2] ^= 1
	f.Add(bad, []byte{200})
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 1, 2, 3}, []byte{})
	f.Add(appendFrame(appendHello(nil, transportHello{version: 1, sender: 7, receiver: 1}), frameSnapshotAck, make([]byte, 16)), []byte{})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		w := newFakeWorld()
		c := &fakeConn{}
		h := w.tr.Accept(c)
		h.OnData([]byte(transportPreamble))
		stepsAtClose := -1
		for len(data) > 0 {
			n := len(data)
			if len(cuts) > 0 {
				n = min(n, int(cuts[0])+1)
				cuts = cuts[1:]
			}
			h.OnData(bytes.Clone(data[:n]))
			data = data[n:]
			if c.closed && stepsAtClose < 0 {
				stepsAtClose = len(w.rec.steps)
			}
		}
		if stepsAtClose >= 0 {
			require.Equal(t, stepsAtClose, len(w.rec.steps), "stepped after closing")
		}
		for _, m := range w.rec.steps {
			require.Equal(t, uint64(7), m.GetFrom())
			require.Equal(t, uint64(1), m.GetTo())
		}
		w.clock.fireAll()
		w.loop.run()
		w.tr.Close()
		require.True(t, c.closed, "Close left the connection open")
		require.Empty(t, w.tr.conns)
	})
}

// TestConfigOutOfRangeFallsBackToDefaults: nonsense values are replaced,
// with a warning, rather than break the transport.
func TestConfigOutOfRangeFallsBackToDefaults(t *testing.T) {
	logs := &bytes.Buffer{}
	e := env.Env{Loop: &fakeLoop{}, Clock: &fakeClock{}, Rand: &fakeRand{}, Net: &fakeNet{},
		Log: slog.New(slog.NewTextHandler(logs, nil))}
	tr := NewTransport(e, 1, &stepRecorder{}, nil, func(c *TransportConfig) {
		c.MaxFrameBytes = 10
		c.MaxPendingBytes = -1
		c.BackoffMin, c.BackoffMax = time.Second, time.Millisecond
	})
	cfg := tr.Config()
	require.Equal(t, DefaultMaxFrameBytes, cfg.MaxFrameBytes)
	require.Equal(t, DefaultMaxPendingBytes, cfg.MaxPendingBytes)
	require.Equal(t, time.Second, cfg.BackoffMax)
	require.Contains(t, logs.String(), "MaxFrameBytes")
}
