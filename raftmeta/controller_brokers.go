package raftmeta

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// BrokerRegistration is a BrokerRegistration request, as the controller
// needs it.
type BrokerRegistration struct {
	BrokerID int32
	// ClusterID is checked against the log's when both are set.
	ClusterID     string
	IncarnationID IncarnationID
	Listeners     []Listener
	Rack          string
	// PreviousBrokerEpoch is the epoch the broker had when it last shut
	// down cleanly (Kafka's BrokerRegistrationRequest v3+ field of that
	// name), -1 when it did not or does not know. A new incarnation whose
	// previous epoch is not the registration's it replaces shut down
	// uncleanly: it leaves every ISR and ELR (KIP-966). The broker must
	// keep the epoch it had across a clean shutdown to set it.
	PreviousBrokerEpoch int64
}

// RegistrationReply answers a registration.
type RegistrationReply struct {
	Err     *kerr.Error
	Message string
	// Epoch is the broker's epoch from now on.
	Epoch int64
}

// RegisterBroker registers a broker, following Kafka's
// ClusterControlManager.registerBroker:
//
//   - A new broker, or a new incarnation of one (another incarnation id),
//     gets a new epoch: the offset its registration record takes, so every
//     epoch is above every earlier one. The registration starts fenced and
//     out of controlled shutdown; the broker is unfenced by a heartbeat that
//     shows it has applied the log up to that record.
//   - A new incarnation is refused with DUPLICATE_BROKER_REGISTRATION while
//     the old one still holds a live session (unfenced, heard from within
//     the session timeout), as in Kafka: two processes configured with one
//     node id would otherwise take the id from each other in turn. A
//     restarted broker retries until the old session runs out. Once it
//     has, the old registration is replaced; if it was still unfenced (its
//     session ran out but no Tick has fenced it yet), its leaderships and
//     ISR places are given up first, as a fencing would. (Kafka writes the
//     fenced registration without moving them, and relies on its periodic
//     session check having fenced the broker before.)
//   - A new incarnation is taken for one after an unclean shutdown unless
//     its PreviousBrokerEpoch is the epoch of the registration it replaces
//     (Kafka's check; a broker not registered then counts as unclean
//     too): it leaves every ISR and ELR, and partitions it led elect
//     again (controller_elect.go).
//   - The same incarnation asking again is the same process retrying: it
//     keeps its epoch and state and gets no record, unless its listeners or
//     rack changed, which a record with the same epoch amends (Kafka
//     amends always).
//
// Malformed requests (a negative id, a zero incarnation, no listeners, two
// listeners of one name, a port out of range) are INVALID_REQUEST; a
// cluster id other than the log's is INCONSISTENT_CLUSTER_ID.
func (c *Controller) RegisterBroker(now time.Time, req BrokerRegistration) (RegistrationReply, []Record) {
	c.observe(now)
	if c.failed != nil {
		err, msg := c.failedErr()
		return RegistrationReply{Err: err, Message: msg}, nil
	}
	next := normalizeBroker(Broker{ID: req.BrokerID, IncarnationID: req.IncarnationID,
		Listeners: append([]Listener(nil), req.Listeners...), Rack: req.Rack})
	if why := registrationProblem(req, next); why != "" {
		return RegistrationReply{Err: kerr.InvalidRequest, Message: why}, nil
	}
	if req.ClusterID != "" && c.view.ClusterID != "" && req.ClusterID != c.view.ClusterID {
		return RegistrationReply{Err: kerr.InconsistentClusterID,
			Message: fmt.Sprintf("expected cluster id %s, but got cluster id %s", c.view.ClusterID, req.ClusterID)}, nil
	}
	old, exists := c.view.Brokers[req.BrokerID]
	if exists && old.IncarnationID == req.IncarnationID {
		return c.amendRegistration(now, old, next)
	}
	if exists && c.session(req.BrokerID).heard && c.hasValidSession(req.BrokerID, now) {
		return RegistrationReply{Err: kerr.DuplicateBrokerRegistration,
			Message: fmt.Sprintf("broker %d is registered by incarnation %s, whose session is live", req.BrokerID, old.IncarnationID)}, nil
	}
	b := c.batch()
	switch {
	case !exists || req.PreviousBrokerEpoch != old.Epoch:
		c.uncleanShutdown(b, req.BrokerID)
	case !old.Fenced:
		c.giveUpPartitions(b, req.BrokerID)
	}
	next.Epoch = int64(c.view.Applied) + 1
	next.Fenced = true
	b.add(RegisterBrokerRecord{Broker: next})
	records := b.done()
	if c.failed != nil {
		err, msg := c.failedErr()
		return RegistrationReply{Err: err, Message: msg}, nil
	}
	c.sessions[req.BrokerID] = &session{epoch: next.Epoch, lastContact: now, heard: true}
	return RegistrationReply{Epoch: next.Epoch}, records
}

func registrationProblem(req BrokerRegistration, b Broker) string {
	switch {
	case req.BrokerID < 0:
		return fmt.Sprintf("broker id %d is negative", req.BrokerID)
	case req.IncarnationID.IsZero():
		return "the incarnation id is the zero UUID"
	case len(req.Listeners) == 0:
		return "the registration names no listener"
	}
	if err := checkBroker(b); err != nil {
		return err.Error()
	}
	return ""
}

// amendRegistration answers the same incarnation registering again.
func (c *Controller) amendRegistration(now time.Time, old, next Broker) (RegistrationReply, []Record) {
	c.session(old.ID).lastContact, c.session(old.ID).heard = now, true
	next.Epoch, next.Fenced, next.InControlledShutdown = old.Epoch, old.Fenced, old.InControlledShutdown
	if brokersEqual(next, old) {
		return RegistrationReply{Epoch: old.Epoch}, nil
	}
	b := c.batch()
	b.add(RegisterBrokerRecord{Broker: next})
	return RegistrationReply{Epoch: old.Epoch}, b.done()
}

// BrokerHeartbeat is a BrokerHeartbeat request, as the controller needs it.
type BrokerHeartbeat struct {
	BrokerID    int32
	BrokerEpoch int64
	// MetadataOffset is the offset (Image.Applied) the broker has applied.
	MetadataOffset uint64
	WantFence      bool
	WantShutDown   bool
}

// HeartbeatReply answers a heartbeat, as Kafka's BrokerHeartbeatResponse.
type HeartbeatReply struct {
	Err                  *kerr.Error
	IsCaughtUp           bool
	IsFenced             bool
	InControlledShutdown bool
	ShouldShutDown       bool
}

// brokerState is a broker's place in Kafka's BrokerControlState machine.
type brokerState int

const (
	stateFenced brokerState = iota
	stateUnfenced
	stateControlledShutdown
	stateShutdownNow
)

func stateOf(b Broker) brokerState {
	switch {
	case b.InControlledShutdown:
		return stateControlledShutdown
	case b.Fenced:
		return stateFenced
	}
	return stateUnfenced
}

// Heartbeat handles a broker's heartbeat in memory: it renews the session
// and records the broker's metadata offset, and only a change of the
// broker's state becomes records. It follows Kafka's
// BrokerHeartbeatManager.calculateNextBrokerState and
// ReplicationControlManager.processBrokerHeartbeat:
//
//   - fenced: wantShutDown shuts it down at once; otherwise, unless it
//     wants to stay fenced, it is unfenced once its metadata offset reaches
//     its registration record's offset (its epoch), and the partitions
//     without a leader whose ISR holds it elect a leader.
//   - unfenced: wantFence fences it (and shuts it down if it also wants
//     that); wantShutDown begins a controlled shutdown if it leads
//     anything, else shuts it down at once.
//   - in controlled shutdown: it shuts down once it leads nothing and every
//     active broker (unfenced, not shutting down) has applied the log up
//     to the end of the batch that began the shutdown.
//
// Fencing and controlled shutdown take the broker out of every ISR (into
// the ELR where the ISR falls below min ISR) and move its leaderships
// (leader choice in controller_elect.go). Shutting down fences it. A broker not registered
// gets BROKER_ID_NOT_REGISTERED, one with another epoch STALE_BROKER_EPOCH.
func (c *Controller) Heartbeat(now time.Time, hb BrokerHeartbeat) (HeartbeatReply, []Record) {
	c.observe(now)
	if c.failed != nil {
		err, _ := c.failedErr()
		return HeartbeatReply{Err: err}, nil
	}
	br, ok := c.view.Brokers[hb.BrokerID]
	if !ok {
		return HeartbeatReply{Err: kerr.BrokerIDNotRegistered}, nil
	}
	if br.Epoch != hb.BrokerEpoch {
		return HeartbeatReply{Err: kerr.StaleBrokerEpoch}, nil
	}
	// The leaderships this heartbeat itself moves away (a fencing) do not
	// count against its image: the broker is told it is fenced.
	demoted := c.view.DemotedAt(br.ID)
	s := c.session(hb.BrokerID)
	current := stateOf(br)
	next := c.nextState(br, s, hb)
	b := c.batch()
	if next != current {
		switch next {
		case stateFenced, stateShutdownNow:
			if current != stateFenced {
				c.fence(b, br.ID)
			}
		case stateUnfenced:
			c.unfence(b, br.ID)
		case stateControlledShutdown:
			c.beginControlledShutdown(b, br.ID)
		}
	}
	records := b.done()
	if c.failed != nil {
		err, _ := c.failedErr()
		return HeartbeatReply{Err: err}, nil
	}
	s.lastContact, s.metadataOffset, s.heard = now, hb.MetadataOffset, true
	if next == stateControlledShutdown && current != stateControlledShutdown {
		s.shutdownOffset = c.view.Applied
	}
	return HeartbeatReply{
		IsCaughtUp:           hb.MetadataOffset >= uint64(br.Epoch) && hb.MetadataOffset >= demoted && c.imageCaughtUp(hb.MetadataOffset),
		IsFenced:             next == stateFenced || next == stateShutdownNow,
		InControlledShutdown: next == stateControlledShutdown,
		ShouldShutDown:       next == stateShutdownNow,
	}, records
}

// nextState is Kafka's calculateNextBrokerState.
func (c *Controller) nextState(br Broker, s *session, hb BrokerHeartbeat) brokerState {
	switch stateOf(br) {
	case stateFenced:
		switch {
		case hb.WantShutDown:
			return stateShutdownNow
		case !hb.WantFence && hb.MetadataOffset >= uint64(br.Epoch):
			return stateUnfenced
		}
		return stateFenced
	case stateUnfenced:
		switch {
		case hb.WantFence && hb.WantShutDown:
			return stateShutdownNow
		case hb.WantFence:
			return stateFenced
		case hb.WantShutDown && c.view.LeaderCount(br.ID) > 0:
			return stateControlledShutdown
		case hb.WantShutDown:
			return stateShutdownNow
		}
		return stateUnfenced
	}
	// In controlled shutdown.
	if c.view.LeaderCount(br.ID) > 0 || s.shutdownOffset > c.lowestActiveOffset() {
		return stateControlledShutdown
	}
	return stateShutdownNow
}

// lowestActiveOffset is the least metadata offset reported by an active
// broker (unfenced, not shutting down); the maximum when there is none.
func (c *Controller) lowestActiveOffset() uint64 {
	lowest := ^uint64(0)
	for _, id := range c.view.BrokerIDs() {
		if c.eligible(id) {
			lowest = min(lowest, c.session(id).metadataOffset)
		}
	}
	return lowest
}

// fence gives up the broker's partitions and fences it (Kafka's
// handleBrokerFenced: the partition changes first, then the fence record,
// so no record leaves a fenced broker leading).
func (c *Controller) fence(b *batch, id int32) {
	c.giveUpPartitions(b, id)
	b.add(BrokerChangeRecord{BrokerID: id, BrokerEpoch: c.view.Brokers[id].Epoch, Change: BrokerFence})
}

// unfence unfences the broker, then lets the partitions without a leader
// whose ISR holds it elect one (Kafka's handleBrokerUnfenced).
func (c *Controller) unfence(b *batch, id int32) {
	b.add(BrokerChangeRecord{BrokerID: id, BrokerEpoch: c.view.Brokers[id].Epoch, Change: BrokerUnfence})
	c.electLeaderless(b, id)
}

// beginControlledShutdown marks the broker as shutting down, then moves its
// leaderships and takes it out of the ISRs (Kafka's
// handleBrokerInControlledShutdown).
func (c *Controller) beginControlledShutdown(b *batch, id int32) {
	b.add(BrokerChangeRecord{BrokerID: id, BrokerEpoch: c.view.Brokers[id].Epoch, Change: BrokerBeginControlledShutdown})
	c.giveUpPartitions(b, id)
}

// UnregisterBroker removes a broker (Kafka's UnregisterBroker admin call):
// its leaderships move and it leaves every ISR (into the ELR where the ISR
// falls below min ISR, as in Kafka), then the registration goes. Its session ends.
func (c *Controller) UnregisterBroker(id int32) (*kerr.Error, []Record) {
	if c.failed != nil {
		err, _ := c.failedErr()
		return err, nil
	}
	br, ok := c.view.Brokers[id]
	if !ok {
		return kerr.BrokerIDNotRegistered, nil
	}
	b := c.batch()
	c.giveUpPartitions(b, id)
	b.add(UnregisterBrokerRecord{BrokerID: id, BrokerEpoch: br.Epoch})
	records := b.done()
	if c.failed != nil {
		err, _ := c.failedErr()
		return err, nil
	}
	delete(c.sessions, id)
	return nil, records
}
