package osenv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
)

// The mute tests run a server on a node that answers every request, a frame
// of muteReqSize bytes carrying a sequence number, with a response of
// muteRespSize bytes: that number, then muteBody (by Write, or by SendFile
// from a file holding it). A raw client sends muteRequests requests and reads
// nothing until told.
const (
	muteReqSize  = 512 << 10
	muteRespSize = 512 << 10
	muteRequests = 64
)

// muteBound is the most a muted connection may hold: sendQueueMax, plus the
// responses to the requests that the reader may have read but the loop not
// yet handled when it last looked (readAheadMax posted, one more read, and a
// request cut by either end of that).
const muteBound = sendQueueMax + ((readAheadMax+readBufferSize)/muteReqSize+2)*muteRespSize

var muteBody = func() []byte {
	b := make([]byte, muteRespSize-8)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}()

// muteServer is the server side; its fields are loop-owned.
type muteServer struct {
	c *conn
	// pos is how much of the current request has arrived, of which head
	// holds the size prefix and sequence number.
	pos     int
	head    [12]byte
	handled int
	closed  bool
	err     error
}

// startMuteServer listens on n for one connection answered as described
// above, with SendFile if useFile. It returns the address.
func startMuteServer(t *testing.T, n *Node, s *muteServer, useFile bool) string {
	t.Helper()
	var addr string
	do(t, n, func(e env.Env) error {
		var f env.File
		if useFile {
			var err error
			if f, err = e.FS.Create("body"); err != nil {
				return err
			}
			if _, err := f.WriteAt(muteBody, 0); err != nil {
				return err
			}
		}
		ln, err := e.Net.Listen("127.0.0.1:0", func(ec env.Conn) env.ConnHandler {
			s.c = ec.(*conn)
			// A small send buffer keeps the kernel from absorbing what
			// the test wants queued here.
			s.c.nc.SetWriteBuffer(64 << 10)
			return handlerFunc{
				data: func(p []byte) {
					for len(p) > 0 {
						if s.pos < len(s.head) {
							copy(s.head[s.pos:], p)
						}
						k := min(len(p), muteReqSize-s.pos)
						p, s.pos = p[k:], s.pos+k
						if s.pos < muteReqSize {
							break
						}
						s.pos = 0
						seq := binary.BigEndian.Uint64(s.head[4:])
						if seq != uint64(s.handled) {
							t.Errorf("request %d carries sequence number %d", s.handled, seq)
						}
						s.handled++
						ec.Write(binary.BigEndian.AppendUint64(nil, seq))
						if useFile {
							ec.(env.FileSender).SendFile(f, 0, int64(len(muteBody)))
						} else {
							ec.Write(muteBody) // shared, never changed
						}
					}
				},
				closed: func(err error) { s.closed, s.err = true, err },
			}
		})
		if err != nil {
			return err
		}
		addr = ln.Addr()
		return nil
	})
	return addr
}

// dialMuteClient connects to addr with a small receive buffer and sends the
// requests from a goroutine, which the returned wait waits for. The writes
// fail once the test closes the connection; that is not an error.
func dialMuteClient(t *testing.T, addr string) (cl *net.TCPConn, wait func()) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cl = nc.(*net.TCPConn)
	cl.SetReadBuffer(64 << 10)
	var wg sync.WaitGroup
	wg.Go(func() {
		req := make([]byte, muteReqSize)
		binary.BigEndian.PutUint32(req, muteReqSize-4)
		for seq := range uint64(muteRequests) {
			binary.BigEndian.PutUint64(req[4:], seq)
			if _, err := cl.Write(req); err != nil {
				return
			}
		}
	})
	return cl, wg.Wait
}

// waitForMute waits until the server's reader has stopped reading for a
// client that does not read.
func waitForMute(t *testing.T, n *Node, s *muteServer) *conn {
	t.Helper()
	waitFor(t, n, func() bool { return s.c != nil })
	c := s.c
	waitForValue(t, func() bool { return c.mutes.Load() > 0 })
	return c
}

// TestMutedWhileThePeerDoesNotRead floods a server with requests whose
// responses nobody reads: the server must stop reading rather than queue
// them all, and must send every response, intact and in order, once the
// client reads.
func TestMutedWhileThePeerDoesNotRead(t *testing.T) {
	for _, useFile := range []bool{false, true} {
		name := map[bool]string{false: "Write", true: "SendFile"}[useFile]
		t.Run(name, func(t *testing.T) {
			n := startNode(t)
			var s muteServer
			cl, wait := dialMuteClient(t, startMuteServer(t, n, &s, useFile))
			defer cl.Close()
			c := waitForMute(t, n, &s)
			// Were the reader to resume too early, it would run on meanwhile.
			time.Sleep(200 * time.Millisecond)
			if peak := c.unsentPeak.Load(); peak > muteBound {
				t.Errorf("%d bytes queued for a peer that does not read, bound %d", peak, muteBound)
			}

			cl.SetReadBuffer(4 << 20) // the rest goes faster
			want := make([]byte, muteRespSize)
			copy(want[8:], muteBody)
			got := make([]byte, muteRespSize)
			for seq := range uint64(muteRequests) {
				if _, err := io.ReadFull(cl, got); err != nil {
					t.Fatalf("response %d: %v", seq, err)
				}
				binary.BigEndian.PutUint64(want, seq)
				if !bytes.Equal(got, want) {
					t.Fatalf("response %d is not the one sent (sequence number %d)", seq, binary.BigEndian.Uint64(got))
				}
			}
			wait()
			var handled int
			do(t, n, func(env.Env) error { handled = s.pos + s.handled*muteReqSize; return nil })
			if handled != muteRequests*muteReqSize {
				t.Errorf("server consumed %d request bytes, want %d", handled, muteRequests*muteReqSize)
			}
			peak := c.unsentPeak.Load()
			t.Logf("muted %d times, at most %d bytes queued (bound %d, unmuted it would be about %d)",
				c.mutes.Load(), peak, muteBound, muteRequests*muteRespSize)
			if peak > muteBound {
				t.Errorf("%d bytes queued at most, bound %d", peak, muteBound)
			}
			// The writer accounts for bytes after the kernel took them, so
			// possibly after the client read them.
			waitForValue(t, func() bool { return c.unsent.Load() == 0 })
		})
	}
}

// TestNodeCloseWhileMuted closes the node while a connection's reader is
// muted and its writer blocked: Close must not hang, and every goroutine
// must end (startNode's cleanup checks).
func TestNodeCloseWhileMuted(t *testing.T) {
	n := startNode(t)
	var s muteServer
	cl, wait := dialMuteClient(t, startMuteServer(t, n, &s, false))
	defer cl.Close()
	waitForMute(t, n, &s)
	closed := make(chan error, 1)
	go func() { closed <- n.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitMax):
		t.Fatal("Node.Close hung on a muted connection")
	}
	cl.Close()
	wait()
}

// TestPeerCloseWhileMuted closes the client, unread responses and all,
// while the server's reader is muted: the server must see the connection
// break.
func TestPeerCloseWhileMuted(t *testing.T) {
	n := startNode(t)
	var s muteServer
	cl, wait := dialMuteClient(t, startMuteServer(t, n, &s, true))
	c := waitForMute(t, n, &s)
	cl.Close() // unread bytes: the kernel resets the connection
	wait()
	waitFor(t, n, func() bool { return s.closed })
	do(t, n, func(env.Env) error {
		if s.err == nil {
			return errors.New("a reset connection reported a clean close")
		}
		return nil
	})
	waitForValue(t, func() bool { return c.unsent.Load() == 0 }) // all dropped
}

// TestLocalCloseWhileMuted closes the server's side while its reader is
// muted and the client still does not read: the reader must drain what the
// client sends, and the connection must be torn down after CloseTimeout.
func TestLocalCloseWhileMuted(t *testing.T) {
	before := runtime.NumGoroutine()
	loop := NewLoop()
	go loop.Run()
	n, err := New(Config{
		Dir:          t.TempDir(),
		Loop:         loop,
		Log:          slog.New(slog.NewTextHandler(t.Output(), nil)),
		CloseTimeout: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.Close()
		loop.Stop()
		<-loop.Done()
		checkNoLeaks(t, before)
	})
	var s muteServer
	cl, wait := dialMuteClient(t, startMuteServer(t, n, &s, false))
	defer cl.Close()
	waitForMute(t, n, &s)
	do(t, n, func(env.Env) error { return s.c.Close() })
	wait() // every request written: the muted reader drained them
	waitFor(t, n, func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		return len(n.conns) == 0
	})
}
