package simnet

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/sched"
)

type recordingHandler struct {
	closed   bool
	closeErr error
}

func (h *recordingHandler) OnData([]byte)     {}
func (h *recordingHandler) OnClose(err error) { h.closed, h.closeErr = true, err }

func TestKilledHostResetsItsPeersAndRefusesDials(t *testing.T) {
	s := sched.New()
	n := New(s, rng.New(1))
	server := n.Host("srv", sched.Direct(s, "srv"))
	client := n.Host("cli", sched.Direct(s, "cli"))
	if _, err := server.Listen(":9092", func(env.Conn) env.ConnHandler { return &recordingHandler{} }); err != nil {
		t.Fatal(err)
	}
	peer := &recordingHandler{}
	connected := false
	client.Dial("srv:9092", func(c env.Conn, err error) env.ConnHandler {
		if err != nil {
			t.Fatal(err)
		}
		connected = true
		return peer
	})
	s.RunUntil(time.Second)
	if !connected {
		t.Fatal("no connection")
	}
	n.Kill("srv")
	s.RunUntil(2 * time.Second)
	if !peer.closed || !errors.Is(peer.closeErr, ErrConnReset) {
		t.Fatalf("peer after the kill: closed %v, err %v; want a reset", peer.closed, peer.closeErr)
	}
	var dialErr error
	client.Dial("srv:9092", func(c env.Conn, err error) env.ConnHandler {
		dialErr = err
		return &recordingHandler{}
	})
	s.RunUntil(3 * time.Second)
	if !errors.Is(dialErr, ErrConnRefused) {
		t.Fatalf("dial to a killed process: %v, want connection refused", dialErr)
	}
}
