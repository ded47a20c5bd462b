package node

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/sluicemq/sluice/raftmeta/quorum"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BrokerRegistration, versions 0-4, served on the active controller: a
// starting broker makes its incarnation known (raftmeta.Controller's
// RegisterBroker says how: a new epoch, the registration fenced until the
// broker's heartbeat shows it caught up, DUPLICATE_BROKER_REGISTRATION while
// another incarnation still holds a live session).
//
//   - On a node that is not the active controller: NOT_CONTROLLER.
//   - The answer carries, in a tagged field of Sluice's own, the metadata
//     index at which the registration is applied on the controller: the
//     broker goes on once it has applied that far.
//   - PreviousBrokerEpoch (v3+; -1 before) goes to the controller: a new
//     incarnation that does not name the epoch it replaces shut down
//     uncleanly and leaves every ISR and ELR (KIP-966).
//   - Features, log dirs and the ZooKeeper migration flag are ignored.
func (b *Broker) handleBrokerRegistration(r *request) {
	req := r.body.(*kmsg.BrokerRegistrationRequest)
	resp := req.ResponseKind().(*kmsg.BrokerRegistrationResponse)
	reg := raftmeta.BrokerRegistration{
		BrokerID:      req.BrokerID,
		ClusterID:     req.ClusterID,
		IncarnationID: raftmeta.IncarnationID(req.IncarnationID),
		Rack:          derefName(req.Rack),

		PreviousBrokerEpoch: req.PreviousBrokerEpoch,
	}
	for _, l := range req.Listeners {
		reg.Listeners = append(reg.Listeners, raftmeta.Listener{Name: l.Name, Host: l.Host, Port: int32(l.Port)})
	}
	b.registerLocally(reg, func(reply raftmeta.RegistrationReply, err error) {
		switch {
		case err != nil:
			resp.ErrorCode = commitErrorCode(err).Code
		case reply.Err != nil:
			resp.ErrorCode = reply.Err.Code
		default:
			// A broker that is not a voter follows the log as a learner;
			// it is answered once it is one, so that it can catch up to
			// the index the answer names.
			resp.BrokerEpoch = reply.Epoch
			index := b.meta.applied
			b.ensureLearner(req.BrokerID, func(err error) {
				if err != nil {
					b.env.Log.Info("adding a learner failed; the broker registers again", "broker", req.BrokerID, "err", err)
					resp.ErrorCode, resp.BrokerEpoch = kerr.NotController.Code, 0
				} else {
					setAppliedIndex(&resp.UnknownTags, max(index, b.meta.applied))
				}
				r.respond(resp)
			})
			return
		}
		r.respond(resp)
	})
}

// registerLocally registers a broker on this node's controller and calls
// done once the records are committed and applied.
func (b *Broker) registerLocally(reg raftmeta.BrokerRegistration, done func(raftmeta.RegistrationReply, error)) {
	if b.ctl == nil {
		b.env.Loop.Post(func() { done(raftmeta.RegistrationReply{}, errNotController) })
		return
	}
	reply, records := b.ctl.RegisterBroker(b.mono.now, reg)
	if reply.Err != nil {
		b.env.Loop.Post(func() { done(reply, nil) })
		return
	}
	b.propose(records, func(err error) { done(reply, err) })
}

// commitErrorCode is what a client is told of a metadata change that did
// not commit: NOT_CONTROLLER (retriable) when this node stopped being the
// controller, whose outcome is unknown to the client as to Kafka's.
func commitErrorCode(err error) *kerr.Error {
	if errors.Is(err, errNotController) || errors.Is(err, quorum.ErrNotLeader) || errors.Is(err, quorum.ErrLeadershipLost) ||
		errors.Is(err, quorum.ErrLeadershipUnconfirmed) {
		return kerr.NotController
	}
	return kerr.UnknownServerError
}

// registerRetry is how long a broker waits before it retries a
// registration that failed.
const registerRetry = 500 * time.Millisecond

// registration is this broker's registration request, the same for every
// attempt of one process (its incarnation id is drawn once).
func (b *Broker) registration() raftmeta.BrokerRegistration {
	if b.incarnation.IsZero() {
		env.Fill(b.env.Rand, b.incarnation[:])
	}
	reg := raftmeta.BrokerRegistration{
		BrokerID:      b.cfg.NodeID,
		ClusterID:     b.image.ClusterID,
		IncarnationID: b.incarnation,
		Rack:          b.cfg.BrokerRack,
		// The broker keeps no epoch across a clean shutdown yet (Kafka
		// writes it to the log dirs' clean-shutdown file), so every
		// restart counts as unclean: it leaves the ELRs, and partitions
		// it alone led come back through their last known leader.
		PreviousBrokerEpoch: -1,
	}
	for _, l := range b.cfg.Advertised() {
		reg.Listeners = append(reg.Listeners, raftmeta.Listener{Name: l.Name, Host: l.Host, Port: l.Port})
	}
	return reg
}

// register makes this incarnation of the broker known to the active
// controller, and calls done once the registration is applied here. It
// retries until the quorum has a controller that accepts it (a restarted
// broker waits out the session of its previous incarnation).
func (b *Broker) register(done func(error)) {
	if b.state >= stateStopping {
		return
	}
	retry := func(why string, err error) {
		level := slog.LevelDebug
		if msg := why + ": " + err.Error(); msg != b.lastRegistrationProblem {
			// Once per kind of problem: a restarted broker may retry for a
			// whole session timeout.
			b.lastRegistrationProblem, level = msg, slog.LevelInfo
		}
		b.env.Log.Log(context.Background(), level, "broker registration: retrying", "why", why, "err", err)
		b.env.Clock.AfterFunc(registerRetry, func() { b.register(done) })
	}
	registered := func(epoch int64, index uint64) {
		b.brokerEpoch = epoch
		b.whenApplied(index, func(error) {
			b.startHeartbeats()
			done(nil)
		})
	}
	if b.meta.activeTerm != 0 {
		if b.meta.journal != nil || b.image.ClusterID == "" {
			// The cluster is being named, or a journal migrated.
			b.meta.leaderWaiters.add(func(error) { b.register(done) })
			return
		}
		b.registerLocally(b.registration(), func(reply raftmeta.RegistrationReply, err error) {
			switch {
			case err != nil:
				retry("commit", err)
			case reply.Err != nil:
				retry("controller refused", reply.Err)
			default:
				registered(reply.Epoch, b.meta.applied)
			}
		})
		return
	}
	leader := nodeIDOfRaft(b.meta.leader)
	if commit := b.meta.node.Status().Commit; leader < 0 && b.cfg.Roles().IsController() && commit > b.meta.applied {
		// Whether this node is still in the quorum is in the recovered
		// log: decide once it is applied.
		b.whenApplied(commit, func(error) { b.register(done) })
		return
	}
	if leader == b.cfg.NodeID || (leader < 0 && b.cfg.Roles().IsController() && !b.removedFromQuorum()) {
		// This node leads (or will know who does): wait for the quorum. A
		// controller removed from the quorum hears from no leader, so it
		// asks the voters, as a broker-only node does, and its
		// registration makes it a learner again.
		b.meta.leaderWaiters.add(func(error) { b.register(done) })
		return
	}
	reg := b.registration()
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID, req.ClusterID, req.IncarnationID = reg.BrokerID, reg.ClusterID, reg.IncarnationID
	req.PreviousBrokerEpoch = reg.PreviousBrokerEpoch
	if reg.Rack != "" {
		req.Rack = &reg.Rack
	}
	for _, l := range reg.Listeners {
		rl := kmsg.NewBrokerRegistrationRequestListener()
		rl.Name, rl.Host, rl.Port = l.Name, l.Host, uint16(l.Port)
		req.Listeners = append(req.Listeners, rl)
	}
	b.toController(req, b.cfg.ControllerQuorumRequestTimeout, func(resp kmsg.Response, err error) {
		if err != nil {
			retry("controller unreachable", err)
			return
		}
		rr := resp.(*kmsg.BrokerRegistrationResponse)
		if rr.ErrorCode == kerr.InconsistentClusterID.Code {
			done(errors.New("node: the controller belongs to another cluster than this broker's data directory (INCONSISTENT_CLUSTER_ID)"))
			return
		}
		if rr.ErrorCode != 0 {
			retry("controller refused", kerr.ErrorForCode(rr.ErrorCode))
			return
		}
		registered(rr.BrokerEpoch, appliedIndexOf(rr.UnknownTags))
	})
}
