package node

import (
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BrokerHeartbeat, versions 0-1, served on the active controller: a
// registered broker says it is alive, how far it has applied the metadata
// log, and whether it wants to be fenced or to shut down. The controller
// keeps sessions in memory (raftmeta.Controller's Heartbeat); only a
// change of state (unfence, fence, controlled shutdown and the leader
// moves it causes) is a record, and the answer waits for it to commit.
// NOT_CONTROLLER on any other node; STALE_BROKER_EPOCH and
// BROKER_ID_NOT_REGISTERED as the controller decides (the broker then
// registers again).
func (b *Broker) handleBrokerHeartbeat(r *request) {
	req := r.body.(*kmsg.BrokerHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
	hb := raftmeta.BrokerHeartbeat{
		BrokerID:       req.BrokerID,
		BrokerEpoch:    req.BrokerEpoch,
		MetadataOffset: uint64(max(req.CurrentMetadataOffset, 0)),
		WantFence:      req.WantFence,
		WantShutDown:   req.WantShutdown,
	}
	b.heartbeatLocally(hb, func(reply raftmeta.HeartbeatReply, err error) {
		fillHeartbeatResponse(resp, reply, err)
		r.respond(resp)
	})
}

func fillHeartbeatResponse(resp *kmsg.BrokerHeartbeatResponse, reply raftmeta.HeartbeatReply, err error) {
	switch {
	case err != nil:
		resp.ErrorCode = commitErrorCode(err).Code
	case reply.Err != nil:
		resp.ErrorCode = reply.Err.Code
	default:
		resp.IsCaughtUp, resp.IsFenced, resp.ShouldShutdown = reply.IsCaughtUp, reply.IsFenced, reply.ShouldShutDown
	}
}

// heartbeatLocally hands a heartbeat to this node's controller.
func (b *Broker) heartbeatLocally(hb raftmeta.BrokerHeartbeat, done func(raftmeta.HeartbeatReply, error)) {
	if b.ctl == nil {
		b.env.Loop.Post(func() { done(raftmeta.HeartbeatReply{}, errNotController) })
		return
	}
	reply, records := b.ctl.Heartbeat(b.mono.now, hb)
	if reply.Err != nil || len(records) == 0 {
		b.env.Loop.Post(func() { done(reply, nil) })
		return
	}
	b.propose(records, func(err error) { done(reply, err) })
}

// heartbeats is the broker's side of its session with the controller.
type heartbeats struct {
	timer env.Timer
	// inFlight says a heartbeat awaits its answer; the next waits for it.
	inFlight bool
	// due says the next heartbeat came due while one was in flight: the
	// answer sends it. (Without this a timer that fires a moment before
	// the answer would end the session's heartbeats for good.)
	due bool
	// fenced is what the controller last said; the broker starts fenced.
	fenced bool
	// unfenced are waiting for the first answer that unfences the broker.
	unfenced waiters
	// wantShutDown asks the controller to move this broker's leaderships
	// away (controlled shutdown); shutDown waits for its go-ahead.
	wantShutDown bool
	shutDown     waiters
	// leaseUntil is when this broker's lease as a partition leader ends
	// (on the monotonic clock; zero: none held): the send time of the last
	// heartbeat the controller answered unfenced, plus the session
	// timeout less a margin. The controller fences the broker, and may
	// elect other leaders for its partitions, only a session timeout
	// after it last heard from it, which is after that send: so a broker
	// cut off from the controller stops leading before anyone else may
	// start, and a zombie leader never answers a fetch with a high
	// watermark below one a new leader has acknowledged past (the
	// cluster sweep found one that did).
	leaseUntil time.Time
	// withheld counts the heartbeats answered unfenced that renewed no
	// lease, since the image lagged the committed log.
	withheld int
}

// leaseMargin is how much of the session timeout a lease leaves
// unclaimed, for clocks that run at different rates.
func leaseMargin(session time.Duration) time.Duration { return session / 10 }

// leaseHeld says this broker may act as the leader of its partitions.
func (b *Broker) leaseHeld() bool {
	return !b.hb.leaseUntil.IsZero() && b.mono.now.Before(b.hb.leaseUntil)
}

// startHeartbeats starts the session: one heartbeat at once, then one every
// broker.heartbeat.interval.ms.
func (b *Broker) startHeartbeats() {
	b.hb.fenced = true
	b.sendHeartbeat()
}

func (b *Broker) stopHeartbeats() {
	if b.hb.timer != nil {
		b.hb.timer.Stop()
		b.hb.timer = nil
	}
}

// sendHeartbeat sends one heartbeat and arms the next; while one is in
// flight, its answer sends the next.
func (b *Broker) sendHeartbeat() {
	if b.state == stateStopped {
		return
	}
	if b.hb.inFlight {
		b.hb.due = true
		return
	}
	b.hb.due = false
	b.stopHeartbeats()
	b.hb.timer = b.env.Clock.AfterFunc(b.cfg.BrokerHeartbeatInterval, func() {
		b.hb.timer = nil
		b.sendHeartbeat()
	})
	hb := raftmeta.BrokerHeartbeat{
		BrokerID:       b.cfg.NodeID,
		BrokerEpoch:    b.brokerEpoch,
		MetadataOffset: b.image.Applied,
		WantShutDown:   b.hb.wantShutDown,
	}
	b.hb.inFlight = true
	sentAt := b.mono.now
	answer := func(reply raftmeta.HeartbeatReply, err error) {
		b.hb.inFlight = false
		switch {
		case err != nil || reply.Err != nil || reply.IsFenced || sentAt.IsZero():
		case reply.IsCaughtUp:
			b.hb.leaseUntil = later(b.hb.leaseUntil, sentAt.Add(b.cfg.BrokerSessionTimeout-leaseMargin(b.cfg.BrokerSessionTimeout)))
		default:
			// The controller says this broker's image lags the committed
			// log (its raft link is down while heartbeats get through):
			// the leaderships it shows may have moved on, so it leads
			// nothing until it has caught up.
			b.hb.withheld++
			if b.leaseHeld() {
				b.env.Log.Warn("the metadata image lags the controller's; giving up the leader lease until it catches up", "node", b.cfg.NodeID, "applied", hb.MetadataOffset)
			}
			b.hb.leaseUntil = time.Time{}
		}
		if b.heartbeatAnswered(reply, err) && b.hb.due {
			b.sendHeartbeat()
		}
	}
	if b.meta.activeTerm != 0 {
		b.heartbeatLocally(hb, answer)
		return
	}
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.BrokerID, req.BrokerEpoch = hb.BrokerID, hb.BrokerEpoch
	req.CurrentMetadataOffset = int64(hb.MetadataOffset)
	req.WantShutdown = hb.WantShutDown
	// A heartbeat that waits longer than its interval is stale: the next
	// one says more.
	b.toController(req, b.cfg.BrokerHeartbeatInterval, func(resp kmsg.Response, err error) {
		if err != nil {
			answer(raftmeta.HeartbeatReply{}, err)
			return
		}
		hr := resp.(*kmsg.BrokerHeartbeatResponse)
		reply := raftmeta.HeartbeatReply{IsCaughtUp: hr.IsCaughtUp, IsFenced: hr.IsFenced, ShouldShutDown: hr.ShouldShutdown}
		if hr.ErrorCode != 0 {
			reply.Err = kerr.ErrorForCode(hr.ErrorCode).(*kerr.Error)
		}
		answer(reply, nil)
	})
}

// heartbeatAnswered follows what the controller said, and reports whether
// the session goes on (false: the broker registers again).
func (b *Broker) heartbeatAnswered(reply raftmeta.HeartbeatReply, err error) bool {
	switch {
	case err != nil:
		b.env.Log.Debug("heartbeat failed", "node", b.cfg.NodeID, "err", err)
		return true
	case reply.Err == kerr.StaleBrokerEpoch || reply.Err == kerr.BrokerIDNotRegistered:
		// The controller no longer knows this incarnation (a registration
		// lost with a failover, or replaced): register again.
		b.env.Log.Warn("the controller does not know this broker's registration; registering again", "node", b.cfg.NodeID, "err", reply.Err)
		b.stopHeartbeats()
		b.hb.due = false
		b.reregister()
		return false
	case reply.Err != nil:
		b.env.Log.Debug("heartbeat refused", "node", b.cfg.NodeID, "err", reply.Err)
		return true
	}
	if b.hb.fenced != reply.IsFenced {
		b.env.Log.Info("broker fencing changed", "node", b.cfg.NodeID, "fenced", reply.IsFenced)
	}
	b.hb.fenced = reply.IsFenced
	if !reply.IsFenced {
		b.hb.unfenced.wake(nil)
	}
	if reply.ShouldShutDown {
		b.hb.shutDown.wake(nil)
	}
	return true
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// reregister registers this incarnation again while it runs.
func (b *Broker) reregister() {
	b.register(func(err error) {
		if err != nil {
			b.env.Log.Error("registering again failed", "node", b.cfg.NodeID, "err", err)
		}
	})
}

// whenUnfenced calls done once the controller has unfenced this broker.
func (b *Broker) whenUnfenced(done func(error)) {
	if !b.hb.fenced {
		b.env.Loop.Post(func() { done(nil) })
		return
	}
	b.hb.unfenced.add(done)
}

// controlledShutdownTimeout bounds how long a broker waits for the
// controller to move its leaderships before it shuts down anyway.
const controlledShutdownTimeout = 10 * time.Second

// controlledShutdown asks the controller to move this broker's leaderships
// away, and calls done once it says the broker may go (or after
// controlledShutdownTimeout, or at once when no controller answers).
func (b *Broker) controlledShutdown(done func()) {
	if b.brokerEpoch == 0 {
		b.env.Loop.Post(done)
		return
	}
	finished := false
	finish := func(error) {
		if !finished {
			finished = true
			done()
		}
	}
	b.hb.wantShutDown = true
	b.hb.shutDown.add(finish)
	b.env.Clock.AfterFunc(controlledShutdownTimeout, func() { finish(nil) })
	b.sendHeartbeat()
}
