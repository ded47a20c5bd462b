package node

import (
	"github.com/sluicemq/sluice/raftmeta"
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
			b.env.Log.Error("allocate producer id", "err", err)
			resp.ErrorCode = kerr.UnknownServerError.Code
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
	first := b.image.NextProducerID
	b.commit([]raftmeta.Record{raftmeta.ProducerIDsRecord{First: first, Count: producerIDBlock}}, func(err error) {
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
