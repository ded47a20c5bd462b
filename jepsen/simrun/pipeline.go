package simrun

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/jepsen"
	"github.com/sluicemq/sluice/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The pipelined producer (Options.InFlight > 1) keeps several Produce
// requests in flight on its connection, as an idempotent Kafka client does
// (max.in.flight.requests.per.connection up to 5). Its batches wait in one
// queue per partition, at most maxInFlight of them unacknowledged, because
// the broker remembers a producer's last five batches per partition and
// dedupes a retry only among those. Each request takes the next unsent
// batch of every partition, so a partition's batches go out, and are
// numbered, in the order they were made. The rules, from franz-go's
// kgo/sink.go:
//
//   - A batch is numbered (producer id, epoch, first sequence) when it is
//     first sent, and keeps that numbering on every resend ("pinned"): the
//     broker may hold it, and dedupes only a batch it can recognize.
//   - Answers are taken in order, and only for a partition's oldest
//     unacknowledged batch (its head). The answer for a later batch is
//     skipped: it is sent again after the head, whatever the answer said.
//   - Any failure of the head (a lost connection, a timeout, a retriable
//     error) rewinds the partition: after a backoff, and once its requests
//     still in flight have all been answered, every unacknowledged batch is
//     sent again, in order, with its original numbering.
//   - After a new connection or any failure, a partition has one request in
//     flight until an answer is ok: a broker accepts any first sequence from
//     a producer it does not know (one it lost with its state), so a second
//     batch that overtook a failed first would land out of order (franz-go's
//     issue 223).
//   - OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID and their kin for a
//     head mean the broker's sequence state and the client's disagree:
//     franz-go's idempotent producer (without StopOnDataLoss) bumps its
//     epoch locally (KIP-360) and renumbers from sequence 0. Here too: the
//     refused batch is unpinned, every partition renumbers its first
//     unpinned batch from 0 under the new epoch, and nothing else goes out
//     for a partition until what it has in flight is answered. The records
//     are kept and sent again, so a run where this happens may show loss or
//     reordering, which the checks then report.
//   - A batch refused for good (CORRUPT_MESSAGE, ...) ends as failed; the
//     ones after it renumber under a new epoch, as their sequences no
//     longer follow.
//   - Unlike franz-go, which never gives up a batch it is unsure of, a head
//     still failing after produceOpTimeout (a Java client's
//     delivery.timeout.ms) gives up its whole partition queue: each batch
//     ends as failed if every attempt failed definitely (or it was never
//     sent), as unknown otherwise (one still in flight counts as unknown),
//     and the epoch is bumped if any had been sent, since the broker may
//     hold some.
//
// Each batch is its own operation in the history, invoked when it is made,
// so the history's invoke order is the send order the producer-order check
// holds the broker to.

// maxInFlight bounds Options.InFlight and each partition's queue.
const maxInFlight = 5

// pipeline is a pipelined producer session's state: it lives in the
// client node's memory and dies with it.
type pipeline struct {
	ps    *producerSession
	parts []*pipePartition
	// inflight counts the requests sent and not yet answered.
	inflight int
	// conn is the connection the last request went out on.
	conn *wire.Client
	// preparing is set while a dial, a metadata request or InitProducerId
	// is under way; drain waits for it.
	preparing bool
	// probeRound is set once the liveness round is made; probesOpen
	// counts its batches not yet ended.
	probeRound bool
	probesOpen int
}

type pipePartition struct {
	index int32
	// queue holds the unacknowledged batches, oldest (the head) first.
	queue []*pipeBatch
	// sent is how many batches of the queue went out since the last
	// rewind; queue[sent] is the next to send.
	sent int
	// inflight counts the requests in flight that carry a batch of the
	// partition (one each at most).
	inflight int
	// okOnConn is set when an answer was ok on this connection since the
	// last failure: only then may a second batch follow the first.
	okOnConn bool
	// needSeqReset says the epoch changed: the first unpinned batch starts
	// the numbering again from sequence 0.
	needSeqReset bool
	// seq is the sequence the next batch numbered will start at.
	seq int32
	// backingOff is set during the pause after a failure of the head.
	backingOff bool
}

type pipeBatch struct {
	op          *produceOp
	mustSucceed bool
	timestampMs int64
	timer       env.Timer
	// expired is set produceOpTimeout after the batch was made.
	expired bool
	// pinned is set once the batch went out: pid and epoch (and op.seq)
	// are then what every resend carries.
	pinned bool
	pid    int64
	epoch  int16
	// sends counts the times the batch went out; sending those not yet
	// answered.
	sends, sending int
}

func newPipeline(ps *producerSession) *pipeline {
	pl := &pipeline{ps: ps}
	for i := range ps.p.w.r.opts.Partitions {
		pl.parts = append(pl.parts, &pipePartition{index: int32(i)})
	}
	return pl
}

// busy reports whether batches are unacknowledged.
func (pl *pipeline) busy() bool {
	for _, part := range pl.parts {
		if len(part.queue) > 0 {
			return true
		}
	}
	return false
}

// crashed ends every unacknowledged batch as unknown: the client died. It
// reports whether there were any.
func (pl *pipeline) crashed() bool {
	r := pl.ps.p.w.r
	had := false
	for _, part := range pl.parts {
		for _, b := range part.queue {
			b.timer.Stop()
			b.op.done = true
			b.op.lastErr = errors.New("client crashed")
			r.h.Info(b.op.id, b.op.lastErr)
			r.opEnded(b.mustSucceed, jepsen.KindInfo, b.op.tp, b.op.lastErr)
			had = true
		}
		part.queue = nil
	}
	return had
}

// step is the pipelined producer's chain: after a pause to think, it makes
// a batch for each of a few partitions and goes on, without waiting for
// their answers; once the safety phase is over it stops, and makes the
// liveness round when asked.
func (pl *pipeline) step() {
	ps := pl.ps
	p := ps.p
	r := p.w.r
	switch {
	case p.sess != ps:
		return
	case p.probes:
		ps.running = false
		if !pl.probeRound {
			pl.probeRound = true
			ps.prepare(func() { pl.enqueue(allPartitions(r.opts.Partitions), true) })
		}
	case r.stopping:
		ps.running = false
	default:
		p.w.after(ps.e, p.w.think(), func() {
			if p.sess != ps {
				return
			}
			ps.prepare(func() {
				if !r.stopping && !p.probes {
					pl.enqueue(p.w.choosePartitions(), false)
				}
				pl.step()
			})
		})
	}
}

// enqueue invokes a produce of a fresh batch to each partition whose queue
// has room, and sends what it can.
func (pl *pipeline) enqueue(partitions []int32, mustSucceed bool) {
	ps := pl.ps
	p := ps.p
	r := p.w.r
	timeout := produceOpTimeout
	if mustSucceed {
		timeout = probeOpTimeout
	}
	now := ps.e.Clock.Now().UnixMilli()
	made := 0
	for _, partition := range partitions {
		part := pl.parts[partition]
		if len(part.queue) >= maxInFlight {
			r.probes.add("produce.queue_full")
			continue
		}
		if r.cfg.Sabotage == SabotagePipelineSkipsValue && !r.sabotaged && p.next > 20 {
			// A test-only lie, once: a value is numbered and never sent,
			// which no single run can tell from one never drawn.
			r.sabotaged = true
			p.next++
		}
		op := &produceOp{tp: jepsen.TopicPartition{Topic: r.topic, Partition: partition}, values: p.drawValues()}
		op.id = r.h.InvokeProduce(p.w.id, op.tp, true, op.values...)
		b := &pipeBatch{op: op, mustSucceed: mustSucceed, timestampMs: now}
		r.noteTimestamp(now)
		b.timer = ps.e.Clock.AfterFunc(timeout, func() { b.expired = true })
		if r.cfg.Sabotage == SabotageReorderPipeline && !r.sabotaged && part.sent < len(part.queue) && !part.queue[part.sent].pinned {
			// A test-only lie, once: the new batch goes out first.
			r.sabotaged = true
			part.queue = slices.Insert(part.queue, part.sent, b)
		} else {
			part.queue = append(part.queue, b)
		}
		if mustSucceed {
			pl.probesOpen++
		}
		made++
	}
	if made > 1 {
		r.probes.add("produce.multi_partition")
	}
	pl.drain()
}

// drain sends requests while fewer than InFlight are out and some
// partition has a batch it may send; first it makes sure of a producer id,
// a connection and the topic.
func (pl *pipeline) drain() {
	ps := pl.ps
	w := ps.p.w
	if ps.p.sess != ps || pl.preparing || !pl.sendable() {
		return
	}
	s := ps.s
	switch {
	case ps.pid < 0:
		pl.preparing = true
		ps.prepare(func() {
			pl.preparing = false
			pl.drain()
		})
		return
	case s.client == nil:
		pl.preparing = true
		s.connect(func(err error) {
			pl.preparing = false
			if ps.p.sess != ps {
				return
			}
			if err != nil {
				pl.expireHeads(err)
				w.backoff(ps.e, pl.drain)
				return
			}
			pl.drain()
		})
		return
	case s.topic == nil:
		pl.preparing = true
		w.ensureTopic(ps.e, s, func(*topicInfo) {
			pl.preparing = false
			pl.drain()
		})
		return
	}
	if s.client != pl.conn {
		pl.conn = s.client
		for _, part := range pl.parts {
			part.okOnConn = false
		}
	}
	// A send that fails at once (the connection was already closed) drops
	// the connection and answers within send: then stop here, the answer
	// has called drain again.
	for pl.inflight < w.r.opts.inFlight() && s.client == pl.conn && !pl.preparing {
		var batches []*pipeBatch
		for _, part := range pl.parts {
			if b := pl.next(part); b != nil {
				batches = append(batches, b)
			}
		}
		if len(batches) == 0 {
			return
		}
		pl.send(batches)
	}
}

// sendable reports whether some partition has a batch to send, once it is
// allowed to.
func (pl *pipeline) sendable() bool {
	for _, part := range pl.parts {
		if part.sent < len(part.queue) && !part.backingOff {
			return true
		}
	}
	return false
}

// expireHeads gives up every partition whose head ran out of time and has
// nothing in flight, after a dial failed: a producer that cannot reach the
// broker gives up as one whose requests fail does.
func (pl *pipeline) expireHeads(err error) {
	for _, part := range pl.parts {
		if len(part.queue) > 0 && part.queue[0].expired && part.inflight == 0 {
			part.queue[0].op.lastErr = err
			pl.giveUp(part)
		}
	}
}

// next returns the partition's next batch to send, numbering it if it was
// never sent, or nil if the partition must wait.
func (pl *pipeline) next(part *pipePartition) *pipeBatch {
	ps := pl.ps
	if part.backingOff || part.sent == len(part.queue) {
		return nil
	}
	// One in flight until an ok on this connection; and none beside the
	// head while the numbering is to start again.
	if part.inflight > 0 && (!part.okOnConn || part.needSeqReset) {
		return nil
	}
	b := part.queue[part.sent]
	if !b.pinned {
		if part.needSeqReset {
			if part.sent != 0 {
				return nil
			}
			// Nothing is in flight and the head was never taken (or was
			// refused), so the broker has none of the queue: all of it
			// renumbers under the new epoch.
			part.needSeqReset = false
			part.seq = 0
			for _, q := range part.queue {
				q.pinned = false
			}
		}
		// Batches are numbered in queue order, so the pinned ones are a
		// prefix of the queue.
		if i := slices.IndexFunc(part.queue[part.sent+1:], func(q *pipeBatch) bool { return q.pinned }); i >= 0 {
			panic(fmt.Sprintf("simrun: partition %d: batch %d of %d is numbered, batch %d is not", part.index, part.sent+1+i, len(part.queue), part.sent))
		}
		b.pinned, b.pid, b.epoch, b.op.seq = true, ps.pid, ps.epoch, part.seq
		b.op.batch = buildBatch(producerBatch{ProducerID: b.pid, ProducerEpoch: b.epoch, BaseSequence: b.op.seq, TimestampMs: b.timestampMs}, b.op.values)
		part.seq = nextSequence(part.seq, len(b.op.values))
	}
	part.sent++
	return b
}

// nextSequence is the sequence after n records from seq; sequences wrap at
// MaxInt32 to 0.
func nextSequence(seq int32, n int) int32 {
	next := int64(seq) + int64(n)
	if next > math.MaxInt32 {
		next -= math.MaxInt32 + 1
	}
	return int32(next)
}

// send sends one request carrying batches, one per partition.
func (pl *pipeline) send(batches []*pipeBatch) {
	ps := pl.ps
	w := ps.p.w
	r := w.r
	req := kmsg.NewPtrProduceRequest()
	req.Version = r.opts.ProduceVersion
	req.Acks = -1
	req.TimeoutMillis = int32(produceBrokerTimeout / time.Millisecond)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = r.topic
	resend := false
	for _, b := range batches {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = b.op.tp.Partition
		rp.Records = b.op.batch
		rt.Partitions = append(rt.Partitions, rp)
		pl.parts[b.op.tp.Partition].inflight++
		resend = resend || b.sends > 0
		b.sends++
		b.sending++
	}
	req.Topics = append(req.Topics, rt)
	pl.inflight++
	if pl.inflight > 1 {
		r.probes.add("produce.pipelined")
	}
	if resend {
		r.probes.add("produce.pipeline_resend")
	}
	ps.s.do(req, produceRequestTimeout, func(resp kmsg.Response, err error) {
		pl.inflight--
		for _, b := range batches {
			pl.parts[b.op.tp.Partition].inflight--
			b.sending--
		}
		if pl.inflight < 0 || slices.ContainsFunc(pl.parts, func(p *pipePartition) bool { return p.inflight < 0 }) {
			panic(fmt.Sprintf("simrun: more produce answers than requests: %d in flight", pl.inflight))
		}
		if ps.p.sess != ps {
			return
		}
		for _, b := range batches {
			part := pl.parts[b.op.tp.Partition]
			if pl.answered(part, b, resp, err) && !part.backingOff {
				part.backingOff = true
				w.backoff(ps.e, func() {
					part.backingOff = false
					pl.drain()
				})
			}
		}
		pl.drain()
	})
}

// answered takes one batch's part of an answer. It reports whether the
// partition's head failed, so that the partition backs off.
func (pl *pipeline) answered(part *pipePartition, b *pipeBatch, resp kmsg.Response, err error) (headFailed bool) {
	op := b.op
	if op.done {
		return false // given up meanwhile
	}
	base, code, outcome, aerr := produceOutcome(resp, err, op.tp)
	head := len(part.queue) > 0 && part.queue[0] == b
	if head && outcome == jepsen.Succeeded {
		pl.pop(part)
		part.okOnConn = true
		pl.ps.p.w.acked(op, base, b.mustSucceed)
		pl.ended(b)
		return false
	}
	// What the attempt says is kept (for a batch given up later), even
	// when the answer is skipped.
	op.attempts = append(op.attempts, outcome)
	if outcome != jepsen.Succeeded {
		op.lastErr = aerr
	}
	if !head {
		// A later batch of a chain whose head failed: resent after it.
		pl.ps.p.w.r.probes.add("produce.pipeline_skipped")
		return false
	}
	pl.headFailed(part, b, code, aerr)
	return true
}

// produceOutcome reads tp's part of a Produce answer.
func produceOutcome(resp kmsg.Response, err error, tp jepsen.TopicPartition) (base int64, code int16, outcome jepsen.Outcome, aerr error) {
	if err != nil {
		return 0, 0, jepsen.Classify(err), err
	}
	code, base, ok := producePartitionResult(resp.(*kmsg.ProduceResponse), tp)
	switch {
	case !ok:
		return 0, 0, jepsen.Unknown, fmt.Errorf("produce response has no partition %s", tp)
	case code == 0:
		return base, 0, jepsen.Succeeded, nil
	}
	return 0, code, jepsen.ClassifyCode(code), kerr.ErrorForCode(code)
}

// headFailed handles a failed attempt of a partition's head: the partition
// rewinds, and renumbers or gives up as the error requires.
func (pl *pipeline) headFailed(part *pipePartition, b *pipeBatch, code int16, err error) {
	ps := pl.ps
	w := ps.p.w
	if staleTopicCode(err) {
		ps.s.topic = nil
	}
	part.okOnConn = false
	part.sent = 0
	switch {
	case sequenceCode(code):
		// The broker's sequence state and ours disagree: the batch was
		// refused, so it renumbers under a new epoch.
		w.r.probes.add("producer.sequence_refused")
		b.pinned = false
		pl.bumpEpoch(b.pid, b.epoch)
	case code != 0 && fatalProduceCode(code):
		// Refused for good: the batch fails, and the batches after it no
		// longer follow in sequence.
		pl.pop(part)
		w.gaveUp(b.op, b.mustSucceed)
		pl.ended(b)
		pl.bumpEpoch(b.pid, b.epoch)
		return
	}
	if b.expired {
		pl.giveUp(part)
	}
}

// sequenceCode reports the errors by which a broker says it disagrees with
// the producer's sequence numbers or epoch.
func sequenceCode(code int16) bool {
	switch code {
	case kerr.OutOfOrderSequenceNumber.Code, kerr.UnknownProducerID.Code, kerr.InvalidProducerIDMapping.Code, kerr.InvalidProducerEpoch.Code:
		return true
	}
	return false
}

// giveUp ends every batch of the partition's queue.
func (pl *pipeline) giveUp(part *pipePartition) {
	w := pl.ps.p.w
	w.r.probes.add("produce.pipeline_given_up")
	queue := part.queue
	part.queue, part.sent = nil, 0
	for _, b := range queue {
		b.timer.Stop()
		switch {
		case b.sends == 0:
			// Never sent, so it cannot land.
			b.op.attempts = append(b.op.attempts, jepsen.Failed)
			if b.op.lastErr == nil {
				b.op.lastErr = errors.New("given up before it was sent")
			}
		case b.sending > 0:
			b.op.attempts = append(b.op.attempts, jepsen.Unknown) // may still land
		}
		if b.pinned {
			pl.bumpEpoch(b.pid, b.epoch)
		}
		w.gaveUp(b.op, b.mustSucceed)
		pl.ended(b)
	}
}

// pop removes the partition's head.
func (pl *pipeline) pop(part *pipePartition) {
	part.queue[0].timer.Stop()
	part.queue = part.queue[1:]
	part.sent = max(part.sent-1, 0)
}

// ended notes that a batch ended; the liveness round is over when all of
// its batches have.
func (pl *pipeline) ended(b *pipeBatch) {
	if !b.mustSucceed {
		return
	}
	pl.probesOpen--
	if pl.probesOpen == 0 && pl.probeRound {
		pl.probeRound = false
		pl.ps.p.probes = false
	}
}

// bumpEpoch moves the session to the next epoch of its producer id, unless
// it has left (pid, epoch) already, and makes every partition renumber. At
// the last epoch it asks for a new producer id instead.
func (pl *pipeline) bumpEpoch(pid int64, epoch int16) {
	ps := pl.ps
	if pid != ps.pid || epoch != ps.epoch {
		return
	}
	ps.p.w.r.probes.add("producer.epoch_bump")
	if ps.epoch >= math.MaxInt16-1 {
		ps.pid = -1
	} else {
		ps.epoch++
	}
	for _, part := range pl.parts {
		part.needSeqReset = true
	}
}
