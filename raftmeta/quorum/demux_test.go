package quorum

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluicemq/sluice/env"
)

// byteRecorder is a handler that keeps what it is given.
type byteRecorder struct {
	side       string
	got        []byte
	deliveries int
	closed     bool
	closeErr   error
}

func (r *byteRecorder) OnData(p []byte) {
	r.got = append(r.got, p...)
	r.deliveries++
}

func (r *byteRecorder) OnClose(err error) { r.closed, r.closeErr = true, err }

// demuxRig is one connection through Demux, with a recorder per side.
type demuxRig struct {
	h            env.ConnHandler
	raft, kafka  []*byteRecorder
	clock        *fakeClock
	decidedAfter int // bytes delivered when a handler was made, -1 before
	delivered    int
}

func newDemuxRig(opts ...DemuxOption) *demuxRig {
	r := &demuxRig{decidedAfter: -1, clock: &fakeClock{}}
	side := func(list *[]*byteRecorder, name string) func(env.Conn) env.ConnHandler {
		return func(env.Conn) env.ConnHandler {
			h := &byteRecorder{side: name}
			*list = append(*list, h)
			r.decidedAfter = r.delivered
			return h
		}
	}
	r.h = Demux(side(&r.raft, "raft"), side(&r.kafka, "kafka"), opts...)(&fakeConn{})
	return r
}

func (r *demuxRig) feed(p []byte) {
	r.delivered += len(p)
	r.h.OnData(bytes.Clone(p))
}

// chosen returns the one handler made, failing if none or both were.
func (r *demuxRig) chosen(t *testing.T, msg string) *byteRecorder {
	t.Helper()
	require.Equal(t, 1, len(r.raft)+len(r.kafka), "%s: handlers made: raft %d, kafka %d", msg, len(r.raft), len(r.kafka))
	if len(r.raft) == 1 {
		return r.raft[0]
	}
	return r.kafka[0]
}

// TestDemuxHandsOverEveryByteHoweverSplit: a raft stream, a Kafka stream,
// and streams that start like the preamble and turn away from it, cut at
// every pair of places, go to the right side with every byte in order, the
// side is chosen as soon as the bytes tell, and a Kafka connection is
// decided on its first byte.
func TestDemuxHandsOverEveryByteHoweverSplit(t *testing.T) {
	raftStream := inboundStream(t, testMessage(7, 1, raftpb.MsgApp, 3))
	// A Metadata v1 request from client "kp" (wire/doc.go).
	kafkaStream := []byte{0, 0, 0, 0x10, 0, 3, 0, 1, 0, 0, 0, 7, 0, 2, 'k', 'p', 0xff, 0xff, 0xff, 0xff}
	streams := []struct {
		name    string
		stream  []byte
		side    string
		decided int // bytes it takes to decide
	}{
		{"raft", raftStream, "raft", len(transportPreamble)},
		{"kafka", kafkaStream, "kafka", 1},
		{"the preamble's first byte, then kafka", append([]byte{0xff}, kafkaStream...), "kafka", 2},
		{"most of the preamble, then something else", append([]byte(transportPreamble[:12]), 'x', 'y'), "kafka", 13},
		{"the preamble alone", []byte(transportPreamble), "raft", len(transportPreamble)},
	}
	for _, s := range streams {
		n := len(s.stream)
		for i := 0; i <= n; i++ {
			for j := i; j <= n; j++ {
				r := newDemuxRig()
				for _, piece := range [][]byte{s.stream[:i], s.stream[i:j], s.stream[j:]} {
					if len(piece) > 0 {
						r.feed(piece)
					}
				}
				what := s.name
				h := r.chosen(t, what)
				require.Equal(t, s.side, h.side, "%s cut at %d, %d", what, i, j)
				require.Equal(t, s.stream, h.got, "%s cut at %d, %d", what, i, j)
				// Decided by the delivery that held the deciding byte.
				for _, cut := range []int{i, j, n} {
					if cut >= s.decided {
						require.Equal(t, cut, r.decidedAfter, "%s cut at %d, %d: decided late or early", what, i, j)
						break
					}
				}
			}
		}
	}
}

// TestDemuxCloseBeforeDeciding: a connection that closes before it is
// decided goes to the side its bytes point to, which gets them and the
// close.
func TestDemuxCloseBeforeDeciding(t *testing.T) {
	broken := errors.New("reset")
	r := newDemuxRig()
	r.h.OnClose(broken)
	k := r.chosen(t, "silent")
	require.Equal(t, "kafka", k.side)
	require.True(t, k.closed)
	require.Equal(t, broken, k.closeErr)
	require.Zero(t, k.deliveries)

	r = newDemuxRig()
	r.feed([]byte(transportPreamble[:3]))
	r.feed([]byte(transportPreamble[3:6]))
	r.h.OnClose(nil)
	h := r.chosen(t, "part of a preamble")
	require.Equal(t, "raft", h.side)
	require.Equal(t, []byte(transportPreamble[:6]), h.got)
	require.Equal(t, 1, h.deliveries, "the held pieces come as one delivery")
	require.True(t, h.closed)
	require.NoError(t, h.closeErr)
}

// TestDemuxTimeout: a connection still undecided when the timeout fires
// goes to Kafka if it sent nothing; later bytes follow it there. One that
// decides first stops the timer.
func TestDemuxTimeout(t *testing.T) {
	r := newDemuxRig()
	r.h = Demux(func(env.Conn) env.ConnHandler { panic("raft") }, func(env.Conn) env.ConnHandler {
		h := &byteRecorder{side: "kafka"}
		r.kafka = append(r.kafka, h)
		return h
	}, DemuxTimeout(r.clock, 3*time.Second))(&fakeConn{})
	require.Len(t, r.clock.timers, 1)
	require.Equal(t, 3*time.Second, r.clock.timers[0].d)
	require.Empty(t, r.kafka)
	r.clock.fireAll()
	require.Len(t, r.kafka, 1)
	r.feed([]byte{0, 0, 0, 1, 9})
	require.Equal(t, []byte{0, 0, 0, 1, 9}, r.kafka[0].got)

	clock := &fakeClock{}
	r = newDemuxRig(DemuxTimeout(clock, time.Second))
	r.feed([]byte(transportPreamble))
	require.True(t, clock.timers[0].stopped, "the timer outlived the decision")
	require.Equal(t, "raft", r.chosen(t, "raft").side)
}
