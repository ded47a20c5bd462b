package node

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerId, versions 0-5, for idempotent producers.
//
// Every call without a transactional id gets a fresh producer id at epoch 0
// (KIP-360's epoch bump applies to transactional producers; an idempotent
// producer that lost its state simply starts over with a new id, as in
// Kafka). Ids are handed out from blocks that a metadata record reserves
// before any id of the block is used, so an id never repeats, across
// restarts included: a restart abandons the rest of its block.
//
// An id that cannot be reserved yet (no controller) gets
// COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
//
// Transactions are not served yet: a transactional id gets
// UNSUPPORTED_VERSION, which clients treat as fatal rather than retrying. An
// empty, non-null transactional id is INVALID_REQUEST, as in Kafka.
func (b *Broker) handleInitProducerID(r *request) {
	req := r.body.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	if req.TransactionalID != nil {
		if *req.TransactionalID == "" {
			resp.ErrorCode = kerr.InvalidRequest.Code
		} else {
			resp.ErrorCode = kerr.UnsupportedVersion.Code
		}
		r.respond(resp)
		return
	}
	b.producerIDs.next(b, func(id int64, err error) {
		if err != nil {
			// No block could be reserved (the controller is failing over,
			// say): COORDINATOR_LOAD_IN_PROGRESS, which every client
			// retries, as Kafka's RPCProducerIdManager answers while its
			// next block is not there; UNKNOWN_SERVER_ERROR made franz-go
			// give up on an idempotent producer after a controller's kill.
			b.env.Log.Warn("allocate producer id", "err", err)
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		} else {
			resp.ProducerID, resp.ProducerEpoch = id, 0
		}
		r.respond(resp)
	})
}

// producerIDBlock is the number of ids one metadata record reserves.
const producerIDBlock = 1000

// producerIDAllocator hands out producer ids from reserved blocks.
type producerIDAllocator struct {
	nextID, blockEnd int64 // [nextID, blockEnd) is reserved and unused
	// waiting are callers queued behind a reservation in flight.
	waiting []func(int64, error)
}

func (a *producerIDAllocator) next(b *Broker, done func(int64, error)) {
	if a.nextID < a.blockEnd {
		id := a.nextID
		a.nextID++
		b.env.Loop.Post(func() { done(id, nil) })
		return
	}
	a.waiting = append(a.waiting, done)
	if len(a.waiting) > 1 {
		return // a reservation is already in flight
	}
	b.allocateProducerIDs(func(first int64, err error) {
		waiting := a.waiting
		a.waiting = nil
		if err == nil {
			a.nextID, a.blockEnd = first, first+producerIDBlock
		}
		for _, w := range waiting {
			if err != nil {
				w(-1, err)
				continue
			}
			if a.nextID == a.blockEnd {
				a.next(b, w) // more waiters than one block holds
				continue
			}
			w(a.nextID, nil)
			a.nextID++
		}
	})
}

// allocateProducerIDs reserves a block of producerIDBlock ids: by a record
// on the active controller, else by AllocateProducerIds (key 67) to it.
func (b *Broker) allocateProducerIDs(done func(first int64, err error)) {
	if b.meta.activeTerm != 0 {
		b.reserveProducerIDs(b.cfg.NodeID, b.brokerEpoch, done)
		return
	}
	req := kmsg.NewPtrAllocateProducerIDsRequest()
	req.BrokerID, req.BrokerEpoch = b.cfg.NodeID, b.brokerEpoch
	b.toController(req, b.cfg.ControllerQuorumRequestTimeout, func(resp kmsg.Response, err error) {
		if err != nil {
			done(-1, err)
			return
		}
		ar := resp.(*kmsg.AllocateProducerIDsResponse)
		if ar.ErrorCode != 0 {
			done(-1, kerr.ErrorForCode(ar.ErrorCode))
			return
		}
		if ar.ProducerIDLen != producerIDBlock {
			done(-1, fmt.Errorf("node: the controller allocated %d producer ids, not %d", ar.ProducerIDLen, producerIDBlock))
			return
		}
		done(ar.ProducerIDStart, nil)
	})
}

// reserveProducerIDs has the active controller reserve the next block of
// producer ids for a broker.
func (b *Broker) reserveProducerIDs(broker int32, epoch int64, done func(first int64, err error)) {
	if b.ctl == nil {
		b.env.Loop.Post(func() { done(-1, errNotController) })
		return
	}
	reply, records := b.ctl.AllocateProducerIDs(broker, epoch)
	if reply.Err != nil {
		b.env.Loop.Post(func() { done(-1, reply.Err) })
		return
	}
	b.propose(records, func(err error) {
		if err != nil {
			done(-1, err)
			return
		}
		done(reply.First, nil)
	})
}

// AllocateProducerIds, version 0, served on the CONTROLLER listener of the
// active controller: a broker reserves a block of producer ids for its
// idempotent producers. NOT_CONTROLLER on any other node, STALE_BROKER_EPOCH
// for an epoch that is not the broker's registered one.
func (b *Broker) handleAllocateProducerIDs(r *request) {
	req := r.body.(*kmsg.AllocateProducerIDsRequest)
	resp := req.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
	b.reserveProducerIDs(req.BrokerID, req.BrokerEpoch, func(first int64, err error) {
		var kerrErr *kerr.Error
		switch {
		case errors.As(err, &kerrErr):
			resp.ErrorCode = kerrErr.Code
		case err != nil:
			resp.ErrorCode = commitErrorCode(err).Code
		default:
			resp.ProducerIDStart, resp.ProducerIDLen = first, producerIDBlock
		}
		r.respond(resp)
	})
}
