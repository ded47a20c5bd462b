package quorum

import (
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/internal/invariants"
)

// DemuxOption configures Demux.
type DemuxOption func(*demuxConfig)

type demuxConfig struct {
	clock   env.Clock
	timeout time.Duration
}

// DemuxTimeout hands a connection that has not shown what it is within d
// (measured on clock) to the side its bytes so far point to: to kafka if
// it sent nothing. Without it an accepted connection that never sends a
// byte belongs to no handler, so no idle timeout of either side watches it.
func DemuxTimeout(clock env.Clock, d time.Duration) DemuxOption {
	return func(c *demuxConfig) { c.clock, c.timeout = clock, d }
}

// Demux returns an accept function for a listener that takes both raft
// connections and Kafka-protocol ones (the CONTROLLER listener). It reads
// a connection's first bytes: a connection that opens with the raft
// preamble goes to raft (Transport.Accept), any other to kafka. A Kafka
// client's first byte, the top byte of a frame size, is never the
// preamble's 0xff, so a Kafka connection is decided on its first byte; a
// raft one on the preamble's last.
//
// The chosen handler is made when the connection is decided and receives
// every byte that arrived, in order, the bytes that decided included: the
// first delivery holds everything that came before the decision (one
// slice, copied together only when it came in pieces), later ones are
// passed through as they come. A connection that closes, or times out
// (DemuxTimeout), before it is decided goes to the side its bytes point to
// (raft if they are a prefix of the preamble, kafka if there are none),
// which then sees those bytes and the close.
//
// The handlers returned are never lent frame buffers (env.FrameBorrower
// must answer from a frame's head alone, before the decision is known):
// fine for a listener that carries metadata, not produce traffic.
func Demux(raft, kafka func(env.Conn) env.ConnHandler, opts ...DemuxOption) func(env.Conn) env.ConnHandler {
	var cfg demuxConfig
	for _, o := range opts {
		o(&cfg)
	}
	return func(c env.Conn) env.ConnHandler {
		d := &demuxConn{c: c, raft: raft, kafka: kafka}
		if cfg.clock != nil && cfg.timeout > 0 {
			d.timer = cfg.clock.AfterFunc(cfg.timeout, d.timedOut)
		}
		return d
	}
}

// demuxConn holds a connection's first bytes until they say which handler
// it belongs to, then passes everything to that handler.
type demuxConn struct {
	c           env.Conn
	raft, kafka func(env.Conn) env.ConnHandler
	// h is the handler chosen; nil until the connection is decided.
	h env.ConnHandler
	// held are the deliveries before the decision, all of them a prefix
	// of the preamble: matched bytes in all.
	held    [][]byte
	matched int
	timer   env.Timer
}

// OnData implements env.ConnHandler.
func (d *demuxConn) OnData(p []byte) {
	if d.h != nil {
		d.h.OnData(p)
		return
	}
	if len(p) == 0 {
		return
	}
	n := min(len(p), len(transportPreamble)-d.matched)
	switch {
	case string(p[:n]) != transportPreamble[d.matched:d.matched+n]:
		d.decide(d.kafka, p)
	case d.matched+n == len(transportPreamble):
		d.decide(d.raft, p)
	default:
		d.held = append(d.held, p)
		d.matched += n
	}
}

// OnClose implements env.ConnHandler.
func (d *demuxConn) OnClose(err error) {
	if d.h == nil {
		d.decide(d.side(), nil)
	}
	d.h.OnClose(err)
}

func (d *demuxConn) timedOut() {
	d.timer = nil
	if d.h == nil {
		d.decide(d.side(), nil)
	}
}

// side is where an undecided connection belongs: raft if it sent part of
// the preamble, kafka if it sent nothing.
func (d *demuxConn) side() func(env.Conn) env.ConnHandler {
	if d.matched > 0 {
		return d.raft
	}
	return d.kafka
}

// decide makes the handler with f and gives it the held bytes and p.
func (d *demuxConn) decide(f func(env.Conn) env.ConnHandler, p []byte) {
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	d.h = f(d.c)
	if d.h == nil {
		if invariants.Enabled {
			invariants.Panicf("quorum.Demux: the accept function returned a nil handler for a connection from %s", d.c.RemoteAddr())
		}
		d.c.Close()
		d.h = discardHandler{}
	}
	first := p
	if len(d.held) > 0 {
		size := len(p)
		for _, h := range d.held {
			size += len(h)
		}
		first = make([]byte, 0, size)
		for _, h := range d.held {
			first = append(first, h...)
		}
		first = append(first, p...)
	}
	d.held = nil
	if len(first) > 0 {
		d.h.OnData(first)
	}
}
