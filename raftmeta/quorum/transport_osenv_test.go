package quorum_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/env/osenv"
	"github.com/sluicemq/sluice/raftmeta/quorum"
)

// osNode is a transport on a real node of osenv, listening on 127.0.0.1
// through Demux.
type osNode struct {
	id   uint64
	node *osenv.Node
	tr   *quorum.Transport
	rec  *recorder
	ln   env.Listener
}

// TestTransportOverRealSockets: two transports on osenv exchange messages
// and snapshots (one above the size osenv reads in place) over 127.0.0.1,
// both ways, in order, each snapshot acknowledged.
func TestTransportOverRealSockets(t *testing.T) {
	loop := osenv.NewLoop()
	go loop.Run()
	defer loop.Stop()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	nodes := []*osNode{{id: 1}, {id: 2}}
	for _, on := range nodes {
		n, err := osenv.New(osenv.Config{Dir: t.TempDir(), Loop: loop, Log: quiet})
		require.NoError(t, err)
		defer n.Close()
		on.node, on.rec = n, &recorder{}
	}
	const count = 200
	snapshots := []int{5 << 20, 20 << 20}
	done := make(chan struct{})
	check := func() bool { // on the loop
		for _, on := range nodes {
			if len(on.rec.steps) < count+len(snapshots) || len(on.rec.snapshots) < len(snapshots) {
				return false
			}
		}
		return true
	}
	errc := make(chan error, 1)
	loop.Post(func() {
		for _, on := range nodes {
			e := on.node.Env()
			on.tr = quorum.NewTransport(e, on.id, on.rec, quiet)
			ln, err := e.Net.Listen("127.0.0.1:0", quorum.Demux(on.tr.Accept, (&kafkaRecorder{}).accept))
			if err != nil {
				errc <- err
				return
			}
			on.ln = ln
		}
		for _, a := range nodes {
			for _, b := range nodes {
				a.tr.SetPeer(b.id, b.ln.Addr())
			}
		}
		for i := uint64(0); i < count; i++ {
			for _, a := range nodes {
				other := 3 - a.id
				a.tr.Send([]*raftpb.Message{msg(a.id, other, raftpb.MsgApp, i)})
			}
		}
		// The snapshots go once the connections are up: the larger one is
		// above what waits for a connection (MaxPendingBytes).
		snapshotsSent := false
		var poll func()
		poll = func() {
			switch {
			case check():
				close(done)
				return
			case !snapshotsSent && len(nodes[0].rec.steps) >= count && len(nodes[1].rec.steps) >= count:
				snapshotsSent = true
				for i, size := range snapshots {
					for _, a := range nodes {
						a.tr.Send([]*raftpb.Message{snap(a.id, 3-a.id, uint64(1000+i), size)})
					}
				}
			}
			nodes[0].node.Env().Clock.AfterFunc(5*time.Millisecond, poll)
		}
		poll()
		errc <- nil
	})
	require.NoError(t, <-errc)
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the messages did not all arrive over real sockets")
	}
	finished := make(chan struct{})
	loop.Post(func() {
		for _, on := range nodes {
			on.tr.Close()
		}
		close(finished)
	})
	<-finished
	for _, on := range nodes {
		from := 3 - on.id
		require.Equal(t, seq(0, count), on.rec.from(from)[:count])
		for i, size := range snapshots {
			got := on.rec.steps[count+i]
			require.True(t, proto.Equal(snap(from, on.id, uint64(1000+i), size), got), "snapshot %d to %d", i, on.id)
		}
		require.Equal(t, []snapshotReport{{id: from}, {id: from}}, on.rec.snapshots)
		require.Empty(t, on.rec.unreachable)
	}
}
