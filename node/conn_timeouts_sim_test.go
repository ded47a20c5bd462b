package node

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/wire"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn is a client connection that sends bytes as the test says and
// records what comes back and when the broker closed it.
type rawConn struct {
	s        *simBroker
	c        env.Conn
	received []byte
	closed   bool
	closedAt time.Duration // world time of the close
}

// dialRaw opens a raw connection from the client node c1.
func (s *simBroker) dialRaw() *rawConn {
	s.t.Helper()
	rc := &rawConn{s: s}
	done := false
	c1 := s.world.Node("c1")
	c1.Post(func() {
		c1.Env().Net.Dial("n1:9092", func(c env.Conn, err error) env.ConnHandler {
			require.NoError(s.t, err)
			rc.c, done = c, true
			return rc
		})
	})
	s.runUntil("raw dial", func() bool { return done })
	return rc
}

func (rc *rawConn) OnData(p []byte) { rc.received = append(rc.received, p...) }

func (rc *rawConn) OnClose(error) {
	rc.closed, rc.closedAt = true, rc.s.world.Now()
}

// write sends p from the client's loop and lets it arrive.
func (rc *rawConn) write(p []byte) {
	rc.s.world.Node("c1").Post(func() { require.NoError(rc.s.t, rc.c.Write(p)) })
	rc.s.world.Run(100 * time.Millisecond)
}

// runUntilClosed runs the world until the broker closes rc, for at most
// limit, and returns how long after from that was.
func (rc *rawConn) runUntilClosed(from, limit time.Duration) time.Duration {
	rc.s.t.Helper()
	require.True(rc.s.t, rc.s.world.RunUntil(func() bool { return rc.closed }, limit), "the broker kept the connection open")
	return rc.closedAt - from
}

// requireOpenFor runs the world for d and requires rc still open.
func (rc *rawConn) requireOpenFor(d time.Duration, why string) {
	rc.s.t.Helper()
	rc.s.world.Run(d)
	require.False(rc.s.t, rc.closed, why)
}

// Virtual time and a node's clock differ by its drift (at most 200 ppm): a
// second is far more than that over the timeouts tested here.
const clockSlack = time.Second

func TestIdleConnectionIsClosedAfterConnectionsMaxIdle(t *testing.T) {
	s := newSimBroker(t, 41, nil)
	rc := s.dialRaw()
	rc.write(wire.AppendRequest(nil, 1, "raw", kmsg.NewPtrApiVersionsRequest()))
	require.NotEmpty(t, rc.received, "no answer to ApiVersions")
	answered := s.world.Now()
	rc.requireOpenFor(10*time.Minute-clockSlack, "closed before connections.max.idle.ms")
	idle := rc.runUntilClosed(answered, 2*clockSlack)
	require.InDelta(t, float64(10*time.Minute), float64(idle), float64(clockSlack))

	// s.client, quiet since its dial, went the same way: its request meets
	// a closed connection.
	var err error
	done := false
	s.world.Node("c1").Post(func() {
		s.client.Request(kmsg.NewPtrApiVersionsRequest(), func(_ kmsg.Response, e error) { err, done = e, true })
	})
	s.runUntil("the request fails", func() bool { return done })
	require.ErrorIs(t, err, wire.ErrClientClosed)
	require.Empty(t, s.broker.conns)
}

func TestConnectionThatSaysNothingIsIdle(t *testing.T) {
	s := newSimBroker(t, 42, func(c *Config) { c.ConnectionsMaxIdle = time.Minute })
	start := s.world.Now()
	rc := s.dialRaw()
	idle := rc.runUntilClosed(start, time.Minute+clockSlack)
	require.InDelta(t, float64(time.Minute), float64(idle), float64(clockSlack))
}

func TestRequestsKeepAConnectionFromIdling(t *testing.T) {
	s := newSimBroker(t, 43, func(c *Config) { c.ConnectionsMaxIdle = time.Minute })
	for range 5 {
		s.world.Run(50 * time.Second)
		s.do(kmsg.NewPtrApiVersionsRequest()) // fails if the connection was closed
	}
}

func TestNegativeConnectionsMaxIdleNeverCloses(t *testing.T) {
	s := newSimBroker(t, 44, func(c *Config) { c.ConnectionsMaxIdle = -1 })
	rc := s.dialRaw()
	rc.requireOpenFor(24*time.Hour, "closed with connections.max.idle.ms=-1")
	s.do(kmsg.NewPtrApiVersionsRequest())
}

// A parked request is the broker's to answer: its connection is not idle,
// however long the wait. The idle clock starts again at the answer.
func TestParkedFetchIsNotIdle(t *testing.T) {
	s := newSimBroker(t, 45, func(c *Config) { c.ConnectionsMaxIdle = 2 * time.Second })
	s.createTopic("t", 1)
	rc := s.dialRaw()
	rc.write(wire.AppendRequest(nil, 1, "raw", fetchRequest("t", 0, 0, 10_000)))
	rc.requireOpenFor(9*time.Second, "closed while a fetch was parked")
	require.Empty(t, rc.received, "fetch answered before its wait")
	require.True(t, s.world.RunUntil(func() bool { return len(rc.received) > 0 }, 2*time.Second), "fetch not answered")
	answered := s.world.Now()
	idle := rc.runUntilClosed(answered, 5*time.Second)
	require.InDelta(t, float64(2*time.Second), float64(idle), float64(100*time.Millisecond))
}

func TestProduceAwaitingDurabilityIsNotIdle(t *testing.T) {
	s := newSimBroker(t, 46, func(c *Config) { c.ConnectionsMaxIdle = 500 * time.Millisecond })
	s.createTopic("t", 1)
	s.slowDisk() // every sync takes a second
	rc := s.dialRaw()
	sent := s.world.Now()
	rc.c.Write(wire.AppendRequest(nil, 1, "raw", produceRequest("t", 0, -1, valueBatch(wire.NoProducer, 1, "v"))))
	require.True(t, s.world.RunUntil(func() bool { return len(rc.received) > 0 || rc.closed }, 10*time.Second))
	require.False(t, rc.closed, "closed while the produce awaited its sync")
	require.Greater(t, s.world.Now()-sent, time.Second, "the produce did not wait for the slow sync")
	rc.runUntilClosed(s.world.Now(), 2*time.Second)
}

// rawFrame is the size prefix and body of an ApiVersions request.
func rawFrame() []byte {
	return wire.AppendRequest(nil, 1, "raw", kmsg.NewPtrApiVersionsRequest())
}

func TestPartialRequestIsClosedAfterRequestReadTimeout(t *testing.T) {
	frame := rawFrame()
	for _, tc := range []struct {
		name string
		cut  int
		log  string
	}{
		{"half a size prefix", 2, "2 of the 4 bytes of a request's size arrived"},
		{"a size prefix", 4, fmt.Sprintf("0 of the %d bytes of a request arrived", len(frame)-4)},
		{"part of a body", 9, fmt.Sprintf("5 of the %d bytes of a request arrived", len(frame)-4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSimBroker(t, 47, nil)
			var logs bytes.Buffer
			s.world.SetLog(&logs, slog.LevelWarn)
			rc := s.dialRaw()
			sent := s.world.Now()
			rc.write(frame[:tc.cut])
			took := rc.runUntilClosed(sent, time.Minute)
			require.InDelta(t, float64(30*time.Second), float64(took), float64(clockSlack),
				"sluice.request.read.timeout.ms is 30 s, connections.max.idle.ms 10 min")
			require.Contains(t, logs.String(), "closing connection: request read timed out")
			require.Contains(t, logs.String(), tc.log+", the rest not within sluice.request.read.timeout.ms (30s)")
		})
	}
}

// The read timeout counts from a frame's first bytes: a client trickling
// one byte every few seconds keeps the connection from idling, not its
// request from timing out.
func TestTrickledRequestTimesOutFromItsFirstBytes(t *testing.T) {
	s := newSimBroker(t, 48, func(c *Config) {
		c.ConnectionsMaxIdle, c.RequestReadTimeout = 10*time.Second, 30*time.Second
	})
	rc := s.dialRaw()
	frame := rawFrame()
	sent := s.world.Now()
	for i := 0; !rc.closed && i < len(frame)-1; i++ {
		rc.write(frame[i : i+1])
		s.world.Run(5*time.Second - 100*time.Millisecond)
	}
	require.True(t, rc.closed, "a frame trickled over %v was waited for", s.world.Now()-sent)
	require.InDelta(t, float64(30*time.Second), float64(rc.closedAt-sent), float64(clockSlack))
}

// A frame that completes starts the next frame's clock afresh: a stream of
// frames each arriving in pieces, none slower than the timeout, is served.
func TestEachFrameGetsItsOwnReadTimeout(t *testing.T) {
	s := newSimBroker(t, 49, func(c *Config) { c.RequestReadTimeout = 10 * time.Second })
	rc := s.dialRaw()
	var stream []byte
	for i := range 6 {
		stream = wire.AppendRequest(stream, int32(i), "raw", kmsg.NewPtrApiVersionsRequest())
	}
	// Pieces that straddle frames, 4 s apart: every frame is whole within
	// 10 s of its first byte, though the stream takes far longer.
	piece := len(stream)/12 + 1
	for off := 0; off < len(stream); off += piece {
		rc.write(stream[off:min(off+piece, len(stream))])
		s.world.Run(4 * time.Second)
		require.False(t, rc.closed, "closed after %d of %d bytes", off+piece, len(stream))
	}
	require.Equal(t, 6, countFrames(t, rc.received))
}

// countFrames counts the size-prefixed frames in b, which must be whole.
func countFrames(t *testing.T, b []byte) int {
	n := 0
	for len(b) > 0 {
		require.GreaterOrEqual(t, len(b), 4)
		size := int(binary.BigEndian.Uint32(b))
		require.GreaterOrEqual(t, len(b), 4+size)
		b, n = b[4+size:], n+1
	}
	return n
}

func TestNegativeRequestReadTimeoutWaitsForTheIdleTimeout(t *testing.T) {
	s := newSimBroker(t, 50, func(c *Config) {
		c.ConnectionsMaxIdle, c.RequestReadTimeout = 5*time.Minute, -1
	})
	rc := s.dialRaw()
	sent := s.world.Now()
	rc.write(rawFrame()[:6])
	took := rc.runUntilClosed(sent, 6*time.Minute)
	require.InDelta(t, float64(5*time.Minute), float64(took), float64(clockSlack))
}
