package simrun

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/jepsen"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Timeouts of the producer, on its node's clock.
const (
	// produceRequestTimeout is how long a Produce may go unanswered before
	// the client closes its connection; the broker is asked to answer
	// within produceBrokerTimeout, a little sooner.
	produceRequestTimeout = 3 * time.Second
	produceBrokerTimeout  = 2 * time.Second
	// produceOpTimeout is how long a round of produces retries before the
	// operations still open are given up with an unknown outcome (unless
	// every attempt of one failed definitely).
	produceOpTimeout = 10 * time.Second
	// probeOpTimeout is the same for the liveness phase's produces, which
	// must succeed.
	probeOpTimeout = 60 * time.Second
	// partitionsPerRequestMax bounds how many partitions one request
	// carries a batch for.
	partitionsPerRequestMax = 3
)

// producer is one idempotent producer client. The struct lives outside the
// simulated node, as a Jepsen worker does: it owns the value counter and
// the round in progress, which outlive a crash of the client's node;
// everything that lives in the node's memory (the connection, the producer
// id, the sequence numbers) is in the producerSession of the current
// incarnation.
type producer struct {
	w     *worker
	next  int // values drawn so far: "p<id>-<n>"
	round *produceRound
	sess  *producerSession
	// probes is set when the safety phase is over: one more round, to every
	// partition, must succeed.
	probes bool
}

// produceRound is one Produce request in progress, as Kafka producers send
// them: a batch for each of a few partitions, each batch its own operation
// in the history. The request is sent again, with the very same batches
// (so the broker can tell a retry by its sequence numbers), for the
// partitions not yet answered definitely, until every one is or the round
// runs out of time.
type produceRound struct {
	ops     []*produceOp
	expired bool
	timer   env.Timer
	// mustSucceed marks the liveness phase's round: anything but ok is a
	// failure of the run.
	mustSucceed bool
	// pid and epoch stamp every batch of the round.
	pid   int64
	epoch int16
	// reset says the producer's state on the broker is no longer known
	// (an unknown outcome, a refused sequence): the session starts over
	// with a new producer id once the round ends.
	reset bool
}

// produceOp is one partition's batch in a round.
type produceOp struct {
	id       jepsen.OpID
	tp       jepsen.TopicPartition
	values   []string
	seq      int32
	batch    []byte
	attempts []jepsen.Outcome
	lastErr  error
	done     bool
}

// producerSession is one incarnation of the producer's process.
type producerSession struct {
	p     *producer
	e     env.Env
	s     *session
	pid   int64 // -1 until InitProducerId answers
	epoch int16
	seq   []int32 // next sequence, per partition
	// running says the chain of rounds (see step) is alive.
	running bool
	// pipe is the pipelined producer's state when Options.InFlight > 1;
	// nil for one request at a time.
	pipe *pipeline
}

func (p *producer) boot(e env.Env) {
	ps := &producerSession{p: p, e: e, pid: -1, seq: make([]int32, p.w.r.opts.Partitions)}
	ps.s = p.w.newSession(e)
	if p.w.r.opts.inFlight() > 1 {
		ps.pipe = newPipeline(ps)
	}
	p.sess = ps
	ps.kick()
}

// crashed records what the client's death leaves: the operations in
// progress have unknown outcomes.
func (p *producer) crashed() {
	if rd := p.round; rd != nil {
		for _, op := range rd.ops {
			if !op.done {
				op.lastErr = errors.New("client crashed")
				p.w.r.h.Info(op.id, op.lastErr)
				p.w.r.opEnded(rd.mustSucceed, jepsen.KindInfo, op.tp, op.lastErr)
			}
		}
		rd.timer.Stop()
		p.round = nil
		p.probes = false
	}
	if p.sess != nil && p.sess.pipe != nil && p.sess.pipe.crashed() {
		p.probes = false
	}
	p.sess = nil
}

// busy reports whether the producer has a round, or pipelined batches, in
// progress.
func (p *producer) busy() bool {
	return p.round != nil || p.sess != nil && p.sess.pipe != nil && p.sess.pipe.busy()
}

// kick starts the session's chain of rounds unless it is running.
func (ps *producerSession) kick() {
	if !ps.running {
		ps.running = true
		if ps.pipe != nil {
			ps.pipe.step()
			return
		}
		ps.step()
	}
}

// step decides what the session does next: stop, make the liveness round,
// or start a round after a pause to think. Every path of the chain comes
// back here, so one round at most is in progress.
func (ps *producerSession) step() {
	p := ps.p
	r := p.w.r
	switch {
	case p.sess != ps:
		return // a dead incarnation
	case p.probes:
		ps.prepare(func() { ps.startRound(allPartitions(r.opts.Partitions), true) })
	case r.stopping:
		ps.running = false
	default:
		p.w.after(ps.e, p.w.think(), func() {
			if p.sess != ps {
				return
			}
			ps.prepare(func() {
				if r.stopping {
					ps.step()
					return
				}
				ps.startRound(p.w.choosePartitions(), false)
			})
		})
	}
}

func allPartitions(n int) []int32 {
	ps := make([]int32, n)
	for i := range ps {
		ps[i] = int32(i)
	}
	return ps
}

// choosePartitions draws the partitions of a round: usually one, sometimes
// a few, in increasing order.
func (w *worker) choosePartitions() []int32 {
	n := w.r.opts.Partitions
	k := 1
	if n > 1 && w.rand.Chance(0.3) {
		k = 2 + w.rand.Intn(min(n, partitionsPerRequestMax)-1)
	}
	perm := allPartitions(n)
	for i := 0; i < k; i++ {
		j := i + w.rand.Intn(n-i)
		perm[i], perm[j] = perm[j], perm[i]
	}
	chosen := perm[:k]
	slices.Sort(chosen)
	return chosen
}

// prepare makes sure the session has a producer id and the topic exists,
// retrying with backoff, then calls ready.
func (ps *producerSession) prepare(ready func()) {
	if ps.pid >= 0 {
		ready()
		return
	}
	w := ps.p.w
	w.ensureTopic(ps.e, ps.s, func(*topicInfo) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = 4
		req.TransactionTimeoutMillis = 60000
		ps.s.do(req, produceRequestTimeout, func(resp kmsg.Response, err error) {
			if err == nil {
				ip := resp.(*kmsg.InitProducerIDResponse)
				if ip.ErrorCode == 0 {
					ps.pid, ps.epoch = ip.ProducerID, ip.ProducerEpoch
					clear(ps.seq)
					ready()
					return
				}
			}
			w.r.probes.add("producer.init_retry")
			w.backoff(ps.e, func() {
				if ps.p.sess == ps {
					ps.prepare(ready)
				}
			})
		})
	})
}

// startRound invokes a produce of a fresh batch to each partition.
func (ps *producerSession) startRound(partitions []int32, mustSucceed bool) {
	p := ps.p
	w := p.w
	rd := &produceRound{mustSucceed: mustSucceed, pid: ps.pid, epoch: ps.epoch}
	now := ps.e.Clock.Now().UnixMilli()
	for _, partition := range partitions {
		values := p.drawValues()
		op := &produceOp{tp: jepsen.TopicPartition{Topic: w.r.topic, Partition: partition}, values: values, seq: ps.seq[partition]}
		op.batch = buildBatch(producerBatch{ProducerID: rd.pid, ProducerEpoch: rd.epoch, BaseSequence: op.seq, TimestampMs: now}, values)
		w.r.noteTimestamp(now)
		op.id = w.r.h.InvokeProduce(w.id, op.tp, true, values...)
		rd.ops = append(rd.ops, op)
	}
	if len(partitions) > 1 {
		w.r.probes.add("produce.multi_partition")
	}
	timeout := produceOpTimeout
	if mustSucceed {
		timeout = probeOpTimeout
	}
	rd.timer = ps.e.Clock.AfterFunc(timeout, func() { rd.expired = true })
	p.round = rd
	ps.attempt(rd)
}

// drawValues draws the values of a new batch: 1 to BatchMax of them, each
// unique in the run.
func (p *producer) drawValues() []string {
	w := p.w
	values := make([]string, 1+w.rand.Intn(w.r.opts.BatchMax))
	for i := range values {
		values[i] = fmt.Sprintf("p%d-%d", w.id, p.next)
		p.next++
	}
	return values
}

// attempt sends the batches of the round still open, in one request.
func (ps *producerSession) attempt(rd *produceRound) {
	w := ps.p.w
	req := kmsg.NewPtrProduceRequest()
	req.Version = w.r.opts.ProduceVersion
	req.Acks = -1
	req.TimeoutMillis = int32(produceBrokerTimeout / time.Millisecond)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = w.r.topic
	var open []*produceOp
	for _, op := range rd.ops {
		if !op.done {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = op.tp.Partition
			rp.Records = op.batch
			rt.Partitions = append(rt.Partitions, rp)
			open = append(open, op)
		}
	}
	req.Topics = append(req.Topics, rt)
	ps.s.do(req, produceRequestTimeout, func(resp kmsg.Response, err error) {
		if ps.p.sess != ps {
			return
		}
		for _, op := range open {
			ps.answered(rd, op, resp, err)
		}
		ps.afterAttempt(rd)
	})
}

// answered takes one partition's part of the answer: its offset, or an
// attempt that failed.
func (ps *producerSession) answered(rd *produceRound, op *produceOp, resp kmsg.Response, err error) {
	if err != nil {
		ps.failedAttempt(rd, op, jepsen.Classify(err), err, false)
		return
	}
	code, base, ok := producePartitionResult(resp.(*kmsg.ProduceResponse), op.tp)
	switch {
	case !ok:
		ps.failedAttempt(rd, op, jepsen.Unknown, fmt.Errorf("produce response has no partition %s", op.tp), false)
	case code == 0:
		ps.succeeded(rd, op, base)
	default:
		ps.failedAttempt(rd, op, jepsen.ClassifyCode(code), kerr.ErrorForCode(code), fatalProduceCode(code))
	}
}

func producePartitionResult(resp *kmsg.ProduceResponse, tp jepsen.TopicPartition) (code int16, base int64, ok bool) {
	for _, t := range resp.Topics {
		if t.Topic != tp.Topic {
			continue
		}
		for _, p := range t.Partitions {
			if p.Partition == tp.Partition {
				return p.ErrorCode, p.BaseOffset, true
			}
		}
	}
	return 0, 0, false
}

// fatalProduceCode reports the codes a retry of the same batch cannot fix:
// the batch or the producer's state is refused.
func fatalProduceCode(code int16) bool {
	switch code {
	case kerr.CorruptMessage.Code, kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code,
		kerr.InvalidRecord.Code, kerr.InvalidRequiredAcks.Code, kerr.InvalidRequest.Code,
		kerr.UnsupportedVersion.Code, kerr.UnsupportedForMessageFormat.Code, kerr.InvalidTopicException.Code,
		kerr.OutOfOrderSequenceNumber.Code, kerr.InvalidProducerEpoch.Code, kerr.ProducerFenced.Code,
		kerr.UnknownProducerID.Code, kerr.InvalidProducerIDMapping.Code:
		return true
	}
	return false
}

func (ps *producerSession) succeeded(rd *produceRound, op *produceOp, base int64) {
	if rd.pid == ps.pid && rd.epoch == ps.epoch {
		ps.seq[op.tp.Partition] = op.seq + int32(len(op.values))
	}
	ps.p.w.acked(op, base, rd.mustSucceed)
}

// acked ends op, acknowledged at base offset base.
func (w *worker) acked(op *produceOp, base int64, mustSucceed bool) {
	r := w.r
	if r.cfg.Sabotage == SabotageShiftOffset && base >= 10 && !r.sabotaged {
		base++ // a test-only lie, once, so that the check has something to find
		r.sabotaged = true
	}
	op.done = true
	r.checkAckedDurable(op, base)
	r.h.ProduceOk(op.id, base)
	if len(op.attempts) > 0 {
		r.probes.add("produce.ok_after_retry")
	}
	r.opEnded(mustSucceed, jepsen.KindOk, op.tp, nil)
}

// failedAttempt notes an attempt of op that failed; a fatal error, or one
// after the round has run out of time, ends the operation with what its
// attempts together say.
func (ps *producerSession) failedAttempt(rd *produceRound, op *produceOp, outcome jepsen.Outcome, err error, fatal bool) {
	op.attempts = append(op.attempts, outcome)
	op.lastErr = err
	if staleTopicCode(err) {
		ps.s.topic = nil
	}
	if fatal || rd.expired {
		ps.endOp(rd, op)
		rd.reset = rd.reset || fatal
	}
}

// endOp ends an operation that did not succeed: failed if every attempt
// failed definitely, unknown otherwise.
func (ps *producerSession) endOp(rd *produceRound, op *produceOp) {
	if ps.p.w.gaveUp(op, rd.mustSucceed) == jepsen.KindInfo {
		rd.reset = true
	}
}

// gaveUp ends op, which did not succeed: failed if every attempt failed
// definitely, unknown otherwise. It returns which.
func (w *worker) gaveUp(op *produceOp, mustSucceed bool) jepsen.Kind {
	r := w.r
	op.done = true
	kind := jepsen.KindInfo
	if jepsen.AfterRetries(op.attempts...) == jepsen.Failed {
		kind = jepsen.KindFail
		r.h.Fail(op.id, op.lastErr)
	} else {
		r.h.Info(op.id, op.lastErr)
	}
	r.probes.add("produce." + string(kind))
	r.opEnded(mustSucceed, kind, op.tp, op.lastErr)
	return kind
}

// afterAttempt retries what is still open after a backoff, or ends the
// round.
func (ps *producerSession) afterAttempt(rd *produceRound) {
	p := ps.p
	r := p.w.r
	if slices.ContainsFunc(rd.ops, func(op *produceOp) bool { return !op.done }) {
		r.probes.add("produce.retry")
		p.w.backoff(ps.e, func() {
			if p.sess == ps {
				p.w.ensureTopic(ps.e, ps.s, func(*topicInfo) { ps.attempt(rd) })
			}
		})
		return
	}
	rd.timer.Stop()
	if rd.reset {
		// A batch's fate, or the producer's state on the broker, is
		// unknown: a Kafka producer would bump its epoch; this one starts
		// over with a new producer id.
		ps.pid = -1
		r.probes.add("producer.reset")
	}
	p.round = nil
	if rd.mustSucceed {
		p.probes = false
	}
	ps.step()
}
