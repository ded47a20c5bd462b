package simrun

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/jepsen"
	"github.com/sluicemq/sluice/node/env"
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
	// produceOpTimeout is how long one operation retries before it is
	// given up with an unknown outcome (unless every attempt failed
	// definitely).
	produceOpTimeout = 10 * time.Second
	// probeOpTimeout is the same for the liveness phase's produces, which
	// must succeed.
	probeOpTimeout = 60 * time.Second
)

// producer is one idempotent producer client. The struct lives outside the
// simulated node, as a Jepsen worker does: it owns the value counter and
// the operation in progress, which outlive a crash of the client's node;
// everything that lives in the node's memory (the connection, the producer
// id, the sequence numbers) is in the producerSession of the current
// incarnation.
type producer struct {
	w    *worker
	next int // values drawn so far: "p<id>-<n>"
	op   *produceOp
	sess *producerSession
	// probes is how many liveness produces are still to make (one per
	// partition, in partition order), once the safety phase is over.
	probes int
}

// produceOp is an operation in progress: one batch, retried with the same
// sequence numbers until an answer is definite or it runs out of time.
type produceOp struct {
	id       jepsen.OpID
	tp       jepsen.TopicPartition
	values   []string
	attempts []jepsen.Outcome
	lastErr  error
	expired  bool
	timer    env.Timer
	// mustSucceed marks a liveness produce: anything but ok is a failure
	// of the run.
	mustSucceed bool
	// seq and pid are the sequence and producer the batch was stamped
	// with; a retry sends the very same batch.
	pid   int64
	epoch int16
	seq   int32
	batch []byte
}

// producerSession is one incarnation of the producer's process.
type producerSession struct {
	p     *producer
	e     env.Env
	s     *session
	pid   int64 // -1 until InitProducerId answers
	epoch int16
	seq   []int32 // next sequence, per partition
	// running says the chain of operations (see step) is alive.
	running bool
}

func (p *producer) boot(e env.Env) {
	ps := &producerSession{p: p, e: e, pid: -1, seq: make([]int32, p.w.r.opts.Partitions)}
	ps.s = p.w.newSession(e)
	p.sess = ps
	ps.kick()
}

// crashed records what the client's death leaves: the operation in
// progress has an unknown outcome.
func (p *producer) crashed() {
	if p.op != nil {
		p.w.r.h.Info(p.op.id, errors.New("client crashed"))
		p.w.r.opEnded(p.op.mustSucceed, jepsen.KindInfo, p.op.tp, p.op.lastErr)
		p.op = nil
	}
	p.sess = nil
}

// busy reports whether the producer has an operation in progress.
func (p *producer) busy() bool { return p.op != nil }

// kick starts the session's chain of operations unless it is running.
func (ps *producerSession) kick() {
	if !ps.running {
		ps.running = true
		ps.step()
	}
}

// step decides what the session does next: stop, make a liveness produce,
// or start an operation after a pause to think. Every path of the chain
// comes back here, so one operation at most is in progress.
func (ps *producerSession) step() {
	p := ps.p
	r := p.w.r
	switch {
	case p.sess != ps:
		return // a dead incarnation
	case p.probes > 0:
		ps.prepare(func() { ps.startOp(int32(r.opts.Partitions-p.probes), true) })
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
				ps.startOp(int32(p.w.rand.Intn(r.opts.Partitions)), false)
			})
		})
	}
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
				err = kerr.ErrorForCode(ip.ErrorCode)
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

// startOp invokes a produce of a fresh batch to partition.
func (ps *producerSession) startOp(partition int32, mustSucceed bool) {
	p := ps.p
	w := p.w
	n := 1 + w.rand.Intn(w.r.opts.BatchMax)
	values := make([]string, n)
	for i := range values {
		values[i] = fmt.Sprintf("p%d-%d", w.id, p.next)
		p.next++
	}
	tp := jepsen.TopicPartition{Topic: w.r.topic, Partition: partition}
	op := &produceOp{tp: tp, values: values, mustSucceed: mustSucceed, pid: ps.pid, epoch: ps.epoch, seq: ps.seq[partition]}
	op.batch = buildBatch(producerBatch{ProducerID: op.pid, ProducerEpoch: op.epoch, BaseSequence: op.seq,
		TimestampMs: ps.e.Clock.Now().UnixMilli()}, values)
	op.id = w.r.h.InvokeProduce(w.id, tp, true, values...)
	timeout := produceOpTimeout
	if mustSucceed {
		timeout = probeOpTimeout
	}
	op.timer = ps.e.Clock.AfterFunc(timeout, func() { op.expired = true })
	p.op = op
	ps.attempt(op)
}

func (ps *producerSession) attempt(op *produceOp) {
	w := ps.p.w
	req := kmsg.NewPtrProduceRequest()
	req.Version = w.r.opts.ProduceVersion
	req.Acks = -1
	req.TimeoutMillis = int32(produceBrokerTimeout / time.Millisecond)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = op.tp.Topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = op.tp.Partition
	rp.Records = op.batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ps.s.do(req, produceRequestTimeout, func(resp kmsg.Response, err error) {
		if ps.p.sess != ps {
			return
		}
		if err != nil {
			ps.failedAttempt(op, jepsen.Classify(err), err, false)
			return
		}
		code, base, ok := producePartitionResult(resp.(*kmsg.ProduceResponse), op.tp)
		if !ok {
			ps.failedAttempt(op, jepsen.Unknown, fmt.Errorf("produce response has no partition %s", op.tp), false)
			return
		}
		if code == 0 {
			ps.succeeded(op, base)
			return
		}
		err = kerr.ErrorForCode(code)
		ps.failedAttempt(op, jepsen.ClassifyCode(code), err, fatalProduceCode(code))
	})
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

func (ps *producerSession) succeeded(op *produceOp, base int64) {
	p := ps.p
	r := p.w.r
	if r.cfg.Sabotage == SabotageShiftOffset && base >= 10 && !r.sabotaged {
		base++ // a test-only lie, once, so that the check has something to find
		r.sabotaged = true
	}
	op.timer.Stop()
	if op.pid == ps.pid && op.epoch == ps.epoch {
		ps.seq[op.tp.Partition] = op.seq + int32(len(op.values))
	}
	r.h.ProduceOk(op.id, base)
	if len(op.attempts) > 0 {
		r.probes.add("produce.ok_after_retry")
	}
	r.opEnded(op.mustSucceed, jepsen.KindOk, op.tp, nil)
	p.finish(op)
	ps.step()
}

// failedAttempt retries op after a backoff, unless the error is fatal or
// the operation has run out of time; then it ends the operation with what
// its attempts together say.
func (ps *producerSession) failedAttempt(op *produceOp, outcome jepsen.Outcome, err error, fatal bool) {
	p := ps.p
	r := p.w.r
	op.attempts = append(op.attempts, outcome)
	op.lastErr = err
	if staleTopicCode(err) {
		ps.s.topic = nil
	}
	if !fatal && !op.expired {
		r.probes.add("produce.retry")
		p.w.backoff(ps.e, func() {
			if p.sess == ps {
				p.w.ensureTopic(ps.e, ps.s, func(*topicInfo) { ps.attempt(op) })
			}
		})
		return
	}
	op.timer.Stop()
	kind := jepsen.KindInfo
	if jepsen.AfterRetries(op.attempts...) == jepsen.Failed {
		kind = jepsen.KindFail
		r.h.Fail(op.id, err)
	} else {
		r.h.Info(op.id, err)
	}
	r.probes.add("produce." + string(kind))
	r.opEnded(op.mustSucceed, kind, op.tp, err)
	if kind == jepsen.KindInfo || fatal {
		// The batch's fate, or the producer's state on the broker, is
		// unknown: a Kafka producer would bump its epoch; this one starts
		// over with a new producer id.
		ps.pid = -1
		r.probes.add("producer.reset")
	}
	p.finish(op)
	ps.step()
}

func (p *producer) finish(op *produceOp) {
	if p.op == op {
		p.op = nil
	}
	if op.mustSucceed && p.probes > 0 {
		p.probes--
	}
}
