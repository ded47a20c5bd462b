package osenv

import (
	"io"
	"net"
	"testing"

	"github.com/sluicemq/sluice/env"
)

// TestUnsentCountNeverGoesNegative writes many small pieces from the loop
// while the writer goroutine drains them as fast as a reading peer takes
// them. The writer must never count a piece as sent before the loop counted
// it as queued (it did: Write queued the piece, unlocked, and only then
// counted it, and the writer's dequeued panicked on a negative count under
// a produce benchmark).
func TestUnsentCountNeverGoesNegative(t *testing.T) {
	n := startNode(t)
	const pieces, perTurn = 200_000, 50
	var server env.Conn
	var addr string
	do(t, n, func(e env.Env) error {
		ln, err := e.Net.Listen("127.0.0.1:0", func(c env.Conn) env.ConnHandler {
			server = c
			return nopHandler{}
		})
		if err != nil {
			return err
		}
		addr = ln.Addr()
		return nil
	})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	waitFor(t, n, func() bool { return server != nil })
	written := 0
	var turn func()
	turn = func() {
		for range perTurn {
			if err := server.Write([]byte{byte(written)}); err != nil {
				t.Error(err)
				return
			}
			written++
		}
		if written < pieces {
			n.Loop().Post(turn)
		}
	}
	n.Loop().Post(turn)
	got, err := io.ReadFull(nc, make([]byte, pieces))
	if err != nil {
		t.Fatalf("read %d of %d bytes: %v", got, pieces, err)
	}
	waitForValue(t, func() bool { return server.(*conn).unsent.Load() == 0 })
}
