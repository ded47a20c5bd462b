package simrun

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluicemq/sluice/jepsen"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Idempotent producers of a cluster run (ClusterOptions.IdempotentProducers):
// the moments Kafka users lean on idempotence for are leader changes
// (failovers, reassignments, preferred-leader elections, a follower's
// truncation), which a single broker never has. Such a producer is a
// dataClient with a producer id and per-partition sequence numbers, and
// one batch in flight at a time (across partitions: a batch is retried
// until it ends before the next is made, so there is no ordering between
// batches in flight to get right). The rules, from Kafka's Sender and
// TransactionManager and franz-go's kgo/sink.go:
//
//   - InitProducerId from any node, again elsewhere after an error or a
//     lost connection (COORDINATOR_LOAD_IN_PROGRESS while no id block can
//     be reserved, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR).
//   - acks=all always (Kafka refuses idempotence with fewer acks).
//   - A batch of 1-3 records is numbered once, (pid, epoch, base
//     sequence), and every retry sends the very same bytes to the
//     partition's current leader, following NOT_LEADER_OR_FOLLOWER's hint
//     or refreshing the metadata as a plain producer does: a leader that
//     has it (appended it itself, or got it as a follower) answers with its
//     original offsets, and a leader that does not appends it once.
//   - OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID,
//     INVALID_PRODUCER_EPOCH and INVALID_PRODUCER_ID_MAPPING say the
//     leader's producer state and ours disagree, and that the batch is not
//     in its log (a leader that had it would have answered it as a
//     retry): the epoch is bumped locally (KIP-360), every partition's
//     sequence starts again at 0, and the batch, renumbered, is sent again
//     in the same operation (franz-go without StopOnDataLoss). A broker
//     that refuses a batch it holds makes the values land twice, which
//     the checker reports.
//   - DUPLICATE_SEQUENCE_NUMBER means the batch is in the log and the
//     broker no longer remembers where: acknowledged at OffsetUnknown
//     (Kafka's Sender and franz-go alike).
//   - A batch still failing after its delivery timeout is given up: failed
//     if every attempt failed definitely (its sequence is then reused by
//     the next batch), unknown otherwise, and then the epoch is bumped
//     (Kafka's idempotent producer after an expired batch): the broker
//     may hold it, so the next sequence would be refused or accepted
//     depending on what nobody knows.
//   - A crash of the client's node ends the open batch as unknown; the
//     next incarnation gets a new producer id, as does an epoch that would
//     pass MaxInt16.
//
// Every batch is an idempotent produce in the history, so jepsen.Check
// requires that no value of it lands twice and that acknowledged values
// sit in the order sent.

// Timings of an idempotent producer, on its node's clock: an attempt's
// request timeout (and the broker's, a little shorter), and the delivery
// timeout after which a batch still failing is given up, in the safety
// phase and in the liveness phase.
const (
	idempotentRequestTimeout      = 5 * time.Second
	idempotentBrokerTimeout       = 4 * time.Second
	idempotentDeliveryTimeout     = 10 * time.Second
	idempotentLiveDeliveryTimeout = probeOpTimeout
	// idempotentValuesMax bounds the records of one batch.
	idempotentValuesMax = 3
)

// idempotence is an idempotent producer's state in its node's memory: a
// new incarnation starts from newIdempotence.
type idempotence struct {
	pid   int64 // -1 until InitProducerId answers
	epoch int16
	// seq is each partition's next sequence under (pid, epoch).
	seq []int32
	// open is the batch made and not yet ended, nil between batches.
	open *idempotentBatch
	// ids counts the producer ids the client has been given (in every
	// incarnation: it is the run's), so that a second one is probed.
	ids int
}

func newIdempotence(partitions, ids int) *idempotence {
	return &idempotence{pid: -1, seq: make([]int32, partitions), ids: ids}
}

// idempotentBatch is one batch, one operation of the history.
type idempotentBatch struct {
	id     jepsen.OpID
	tp     jepsen.TopicPartition
	values []string
	// pid, epoch and seq number the batch; records are its bytes, nil
	// when it is to be numbered again (after a sequence refusal) before
	// the next attempt.
	pid         int64
	epoch       int16
	seq         int32
	records     []byte
	timestampMs int64
	deadline    time.Time
	attempts    []jepsen.Outcome
	lastErr     error
	// reached is the node the last attempt that left the client went to
	// (0: none yet); moved says an attempt went to another node than the
	// one before it: the partition's leader had changed.
	reached int32
	moved   bool
}

// unsure reports whether some attempt's outcome is unknown: the batch may
// be in the log.
func (b *idempotentBatch) unsure() bool {
	return jepsen.AfterRetries(b.attempts...) == jepsen.Unknown && len(b.attempts) > 0
}

// restartIdempotence is boot's part for an idempotent producer: the open
// batch's operation, unless the request in flight already ended it, has
// an unknown outcome, and the producer id is lost.
func (d *dataClient) restartIdempotence() {
	st := d.idem
	if b := st.open; b != nil && !(d.flying && d.inFlight == b.id) {
		d.r.h.Info(b.id, errors.New("the client's node lost power"))
	}
	d.idem = newIdempotence(d.r.partitions, st.ids)
}

// stepIdempotent is step for an idempotent producer: a producer id first,
// then the open batch again, or a new one.
func (d *dataClient) stepIdempotent() {
	st := d.idem
	if st.pid < 0 {
		d.initProducerID()
		return
	}
	var p int32
	if st.open != nil {
		p = st.open.tp.Partition
	} else if d.live {
		p = d.pending[0]
	} else {
		p = int32(d.rand.Intn(d.r.partitions))
	}
	leader := d.leaders[p]
	if leader < 1 {
		d.refresh()
		return
	}
	d.produceIdempotent(p, leader)
}

// initProducerID asks a random node for a producer id, then steps again.
func (d *dataClient) initProducerID() {
	r := d.r
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	req.TransactionTimeoutMillis = 60000
	inc := d.inc
	d.flying, d.inFlight = true, -1
	to := d.rand.Intn(len(d.sessions))
	d.sessions[to].do(req, metadataTimeout, func(resp kmsg.Response, err error) {
		if d.node.Incarnation() != inc || !d.flying || d.inFlight != -1 {
			return
		}
		d.flying = false
		if err == nil {
			if ip := resp.(*kmsg.InitProducerIDResponse); ip.ErrorCode != 0 {
				err = kerr.ErrorForCode(ip.ErrorCode)
			} else {
				st := d.idem
				st.pid, st.epoch = ip.ProducerID, ip.ProducerEpoch
				clear(st.seq)
				if st.ids++; st.ids > 1 {
					r.probes.add("data.idempotent_new_producer_id")
				}
				r.logf("%s: producer id %d epoch %d from n%d", d.name, st.pid, st.epoch, to+1)
				d.later(0)
				return
			}
		}
		r.logf("%s: InitProducerId from n%d: %v", d.name, to+1, err)
		r.probes.add("data.idempotent_init_retry")
		d.backoff()
	})
}

// newIdempotentBatch invokes a produce of a fresh batch to partition p.
func (d *dataClient) newIdempotentBatch(p int32) *idempotentBatch {
	r := d.r
	values := make([]string, 1+d.rand.Intn(idempotentValuesMax))
	for i := range values {
		d.values++
		values[i] = fmt.Sprintf("%s-%d", d.name, d.values)
	}
	now := d.e.Clock.Now()
	timeout := idempotentDeliveryTimeout
	if d.live {
		timeout = idempotentLiveDeliveryTimeout
	}
	b := &idempotentBatch{tp: jepsen.TopicPartition{Topic: clusterTopic, Partition: p}, values: values,
		timestampMs: now.UnixMilli(), deadline: now.Add(timeout)}
	b.id = r.h.InvokeProduce(d.id, b.tp, true, values...)
	r.probes.add("data.idempotent")
	return b
}

// number gives b the producer's current numbering and builds its bytes.
func (st *idempotence) number(b *idempotentBatch) {
	b.pid, b.epoch, b.seq = st.pid, st.epoch, st.seq[b.tp.Partition]
	b.records = buildBatch(producerBatch{ProducerID: b.pid, ProducerEpoch: b.epoch, BaseSequence: b.seq, TimestampMs: b.timestampMs}, b.values)
}

// produceIdempotent sends the open batch, or a new one, to leader.
func (d *dataClient) produceIdempotent(p, leader int32) {
	r := d.r
	st := d.idem
	b := st.open
	if b == nil {
		b = d.newIdempotentBatch(p)
		st.open = b
	} else {
		r.probes.add("data.idempotent_retry")
		if b.reached != 0 && b.reached != leader {
			r.probes.add("data.idempotent_retry_new_leader")
			b.moved = true
		}
		if r.cfg.Sabotage == SabotageIdempotentFreshRetry && !r.sabotaged && b.records != nil && b.unsure() {
			// A test-only lie, once: the retry of a batch whose fate is
			// unknown goes out as a fresh batch, under a new epoch from
			// sequence 0, as a producer that resets its sequences
			// without waiting to learn the batch's fate would send it.
			r.sabotaged = true
			r.logf("%s: sabotage: %s's batch %v goes out again as a fresh batch", d.name, b.tp, b.values)
			st.bumpEpoch(b.pid, b.epoch, &r.probes)
			b.records = nil
		}
	}
	if b.records == nil {
		st.number(b)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version = 12
	req.Acks, req.TimeoutMillis = -1, int32(idempotentBrokerTimeout/time.Millisecond)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = clusterTopic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = p
	rp.Records = b.records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	d.flying, d.inFlight = true, b.id
	inc := d.inc
	d.sessionOf(leader).do(req, idempotentRequestTimeout, func(resp kmsg.Response, err error) {
		if d.node.Incarnation() != inc || !d.flying || d.inFlight != b.id {
			return
		}
		d.flying = false
		d.idempotentAnswer(b, leader, resp, err)
	})
}

// idempotentAnswer takes the answer to one attempt of b.
func (d *dataClient) idempotentAnswer(b *idempotentBatch, leader int32, resp kmsg.Response, err error) {
	r := d.r
	tp := b.tp
	if err == nil || jepsen.Classify(err) == jepsen.Unknown {
		b.reached = leader
	}
	if err != nil {
		r.logf("%s idempotent produce %s (pid %d epoch %d seq %d) to n%d: %v", d.name, tp, b.pid, b.epoch, b.seq, leader, err)
		d.leaders[tp.Partition] = -1
		d.idempotentFailed(b, jepsen.Classify(err), err)
		return
	}
	pr := resp.(*kmsg.ProduceResponse)
	code, base, ok := producePartitionResult(pr, tp)
	r.logf("%s idempotent produce %s (pid %d epoch %d seq %d) to n%d: error %d, offset %d", d.name, tp, b.pid, b.epoch, b.seq, leader, code, base)
	switch {
	case !ok:
		d.idempotentFailed(b, jepsen.Unknown, errors.New("produce response does not carry the partition"))
	case code == 0:
		d.idempotentAcked(b, leader, base)
	case code == kerr.DuplicateSequenceNumber.Code:
		r.probes.add("data.idempotent_duplicate_sequence")
		d.idempotentAcked(b, leader, jepsen.OffsetUnknown)
	case sequenceCode(code):
		r.probes.add("data.idempotent_sequence_refused")
		d.idem.bumpEpoch(b.pid, b.epoch, &r.probes)
		b.records = nil // renumbered before it goes out again
		d.idempotentFailed(b, jepsen.Failed, kerr.ErrorForCode(code))
	case fatalProduceCode(code):
		b.attempts, b.lastErr = append(b.attempts, jepsen.Failed), kerr.ErrorForCode(code)
		d.idempotentGiveUp(b)
	default:
		r.probeRefusal(code)
		d.followLeader(pr, tp, code)
		d.idempotentFailed(b, jepsen.ClassifyCode(code), kerr.ErrorForCode(code))
	}
}

// idempotentAcked ends b, acknowledged at base (OffsetUnknown: the broker
// did not say where).
func (d *dataClient) idempotentAcked(b *idempotentBatch, leader int32, base int64) {
	r := d.r
	st := d.idem
	r.h.ProduceOkAtEpoch(b.id, base, r.epochBound(leader, b.tp.Partition))
	if !r.cfg.NoOracle && !r.opts.PageCache && base != jepsen.OffsetUnknown {
		r.probes.add("oracle.ack")
		n := r.nodes[leader-1]
		why, err := n.oracle.ackedProblem(b.tp, ackedRef(b.records, len(b.values), base))
		r.judgeDurable(n, why, err)
	}
	if b.pid != st.pid || b.epoch != st.epoch {
		panic(fmt.Sprintf("simrun: %s's batch acknowledged under pid %d epoch %d, the producer is at pid %d epoch %d", d.name, b.pid, b.epoch, st.pid, st.epoch))
	}
	st.seq[b.tp.Partition] = nextSequence(b.seq, len(b.values))
	if len(b.attempts) > 0 {
		r.probes.add("data.idempotent_ok_after_retry")
	}
	if b.moved {
		r.probes.add("data.idempotent_ok_after_leader_change")
	}
	st.open = nil
	if d.live && len(d.pending) > 0 && d.pending[0] == b.tp.Partition {
		d.pending = d.pending[1:]
	}
	d.tries = 0
	d.later(d.think())
}

// idempotentFailed notes a failed attempt of b, and retries it after a
// backoff, or gives it up past its delivery timeout.
func (d *dataClient) idempotentFailed(b *idempotentBatch, outcome jepsen.Outcome, err error) {
	b.attempts, b.lastErr = append(b.attempts, outcome), err
	if !d.e.Clock.Now().Before(b.deadline) {
		d.idempotentGiveUp(b)
		return
	}
	d.failed(b.tp, err)
}

// idempotentGiveUp ends b, which did not succeed: failed if every attempt
// failed definitely, unknown otherwise, and then the epoch moves on.
func (d *dataClient) idempotentGiveUp(b *idempotentBatch) {
	r := d.r
	st := d.idem
	r.probes.add("data.idempotent_given_up")
	if jepsen.AfterRetries(b.attempts...) == jepsen.Failed {
		r.h.Fail(b.id, b.lastErr)
	} else {
		r.h.Info(b.id, b.lastErr)
		st.bumpEpoch(b.pid, b.epoch, &r.probes)
	}
	st.open = nil
	d.failed(b.tp, b.lastErr)
}

// bumpEpoch moves the producer to the next epoch of its id, unless it has
// left (pid, epoch) already, and every partition's sequence to 0; past the
// last epoch it asks for a new producer id instead (KIP-360).
func (st *idempotence) bumpEpoch(pid int64, epoch int16, pr *probes) {
	if pid != st.pid || epoch != st.epoch {
		return
	}
	pr.add("data.idempotent_epoch_bump")
	if st.epoch >= math.MaxInt16-1 {
		st.pid = -1
	} else {
		st.epoch++
	}
	clear(st.seq)
}
