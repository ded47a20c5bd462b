package simrun

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/jepsen"
	"github.com/sluicemq/sluice/sim"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metaClient is one client of the metadata: it creates, deletes, grows
// (CreatePartitions) and describes a few topic names, each operation sent to a random node, and
// retries an attempt whose outcome is unknown or that never left
// (NOT_CONTROLLER, a timeout, a lost connection) on another random node,
// as a Kafka admin client does. Every attempt is one operation of the
// metadata history, with the node it went to. Its state lives outside the
// simulated node, so that a power loss of the client's node ends the
// attempt in flight as unknown.
type metaClient struct {
	r    *clusterRun
	id   int
	name string
	node *sim.Node
	rand *rng.Rand
	// names are the topics it works on: its own and its neighbour's, so
	// that clients race on each name, and each name has at most two
	// clients (porcupine stays fast).
	names []string

	e        env.Env
	inc      int
	sessions []*session // by node index, of the current incarnation
	// inFlight is the attempt awaiting its answer (-1: none).
	inFlight jepsen.OpID
	flying   bool
	// cur is the operation being tried, attempts the tries made.
	cur      *MetaOp
	attempts int
	// live is set in the liveness phase: the client makes one create of
	// a name of its own, which must succeed, and stops.
	live, liveDone bool
	liveOp         *MetaOp
	// unknown says an attempt of cur ended with its outcome unknown.
	unknown bool
	// pauseSeq and pauseStep are the controller pause aim
	// (cluster_paused_controller.go) this client last took part in and its
	// step in it, pauseTopic the topic whose config it set; steerNext says
	// the operation just drawn goes to the paused controller, steered that
	// the attempt in flight went there.
	pauseSeq, pauseStep int
	pauseTopic          string
	steerNext, steered  bool
	// target is the node index the last attempt went to; readBack, when
	// set, is the node index the next operation (a describe of the topic
	// just changed) goes to at once: an application reading what it has
	// just written, on the broker it wrote through, as a Kafka client does
	// after CreateTopics. It is what shows a node answering a change
	// before its own image has it (the mutant forward-answers-unapplied).
	target   int
	readBack *int
}

// metaAttempts bounds the tries of one operation in the safety phase;
// the liveness create tries until it succeeds.
const metaAttempts = 5

// metaTimeout is the client's timeout of a metadata request: past the
// broker's own (TimeoutMillis) so that the broker usually answers first.
const metaTimeout = 15 * time.Second

func newMetaClient(r *clusterRun, i int) *metaClient {
	c := &metaClient{r: r, id: i, name: fmt.Sprintf("m%d", i+1), rand: r.w.Rand(fmt.Sprintf("client/m%d", i+1))}
	k := r.opts.Clients
	c.names = []string{topicNameOf(i), topicNameOf((i + 1) % k), fmt.Sprintf("own-%d", i+1)}
	return c
}

func topicNameOf(i int) string { return fmt.Sprintf("t%d", i+1) }

func (c *metaClient) boot(e env.Env) {
	c.e, c.inc = e, c.node.Incarnation()
	if c.flying {
		// The node lost power with an attempt in flight.
		c.r.mh.Info(c.inFlight, errors.New("the client's node lost power"))
		c.flying = false
		c.unknown = true
	}
	c.sessions = make([]*session, len(c.r.nodes))
	for i, n := range c.r.nodes {
		c.sessions[i] = &session{e: e, addr: n.name + ":9092", clientID: c.name, dialTimeout: 3 * time.Second, probes: &c.r.probes}
	}
	c.later(time.Duration(c.rand.Intn(300)) * time.Millisecond)
}

func (c *metaClient) done() bool { return !c.flying && (!c.live || c.liveDone) }

func (c *metaClient) later(d time.Duration) {
	inc := c.inc
	c.e.Clock.AfterFunc(d, func() {
		if c.node.Incarnation() == inc {
			c.next()
		}
	})
}

// startLiveness begins the liveness phase: called from outside the
// simulated world, so that the run sees the client busy at once; the
// first attempt is posted to the client's loop.
func (c *metaClient) startLiveness() {
	c.live = true
	c.liveOp = &MetaOp{Type: jepsen.MetaCreate, Topic: fmt.Sprintf("live-%d", c.id+1), Partitions: 2}
	inc := c.inc
	c.node.Post(func() {
		if c.node.Incarnation() == inc && !c.flying {
			c.next()
		}
	})
}

// next starts the next attempt: of the current operation, or of a new one.
func (c *metaClient) next() {
	if c.flying || c.liveDone {
		return
	}
	if c.live && c.cur != c.liveOp {
		c.cur, c.attempts, c.unknown = c.liveOp, 0, false
	}
	if c.cur == nil {
		if c.r.stopping {
			return
		}
		op := c.r.nemesis.pauser.instead(c, DrawMetaOp(c.rand, c.names))
		c.cur, c.attempts, c.unknown = &op, 0, false
	}
	c.attempts++
	target := c.rand.Intn(len(c.r.nodes))
	if c.readBack != nil {
		target, c.readBack = *c.readBack, nil
	} else {
		target = c.r.nemesis.pauser.target(c, c.cur, target)
	}
	c.send(c.cur, target)
}

func (c *metaClient) send(op *MetaOp, target int) {
	var req kmsg.Request
	c.inFlight, req = op.Invoke(c.r.mh, c.id, c.r.nodes[target].id)
	c.flying, c.target = true, target
	id, inc := c.inFlight, c.inc
	c.sessions[target].do(req, metaTimeout, func(resp kmsg.Response, err error) {
		if c.node.Incarnation() != inc || !c.flying || c.inFlight != id {
			return
		}
		c.flying = false
		c.answered(op, id, resp, err)
	})
}

// answered records how an attempt ended and decides what comes next.
func (c *metaClient) answered(op *MetaOp, id jepsen.OpID, resp kmsg.Response, err error) {
	h := c.r.mh
	if err == nil {
		err = c.record(op, id, resp)
	} else {
		h.Complete(id, err)
	}
	outcome := jepsen.ClassifyMeta(op.Type, err)
	steered := c.steered
	if steered {
		c.steered = false
		c.r.logf("pause_controller: %s's %s of %s answered by n%d: %v", c.name, op.Type, op.Topic, c.r.nodes[c.target].id, err)
	}
	if err == nil && op.Type != jepsen.MetaDescribe && op.Type != jepsen.MetaDescribeConfig {
		c.r.nemesis.pauser.changed(c, *op)
	}
	retry := false
	switch {
	case err == nil:
	case op.Type == jepsen.MetaDescribe || op.Type == jepsen.MetaDescribeConfig:
		// A failed read: retry only on a lost connection.
		var ke *kerr.Error
		retry = !errors.As(err, &ke)
	case outcome == jepsen.Failed && isNotSent(err):
		retry = true
	case outcome == jepsen.Unknown && op.Type == jepsen.MetaAlterConfig:
		// Not retried: the read-back below asks whether it took
		// effect, as an operator would (every retry of unknown outcome
		// is one more change porcupine must place anywhere after it).
		c.unknown = true
	case outcome == jepsen.Unknown:
		c.unknown = true
		retry = true
	}
	if c.live && op != c.liveOp {
		// An attempt of the safety phase ended: the liveness create next.
		c.later(10 * time.Millisecond)
		return
	}
	if c.live {
		switch {
		case err == nil, c.unknown && errors.Is(err, kerr.TopicAlreadyExists):
			// Made, by this attempt or an earlier one of unknown outcome.
			c.liveDone, c.cur = true, nil
			return
		case c.attempts >= 50:
			c.r.fail("liveness: %s's create of %s failed %d times after healing, the last: %v", c.name, op.Topic, c.attempts, err)
			c.liveDone, c.cur = true, nil
			return
		}
		c.r.probes.add("meta.live_retry")
		c.later(200 * time.Millisecond)
		return
	}
	if retry && c.attempts < metaAttempts && !c.r.stopping {
		c.r.probes.add("meta.retry")
		c.later(time.Duration(50+c.rand.Intn(400)) * time.Millisecond)
		return
	}
	c.cur = nil
	if c.r.stopping {
		return
	}
	if (err == nil || op.Type == jepsen.MetaAlterConfig && outcome == jepsen.Unknown) && op.Type != jepsen.MetaDescribe && op.Type != jepsen.MetaDescribeConfig && (c.rand.Intn(2) == 0 || steered) {
		target := c.target
		read := jepsen.MetaDescribe
		if op.Type == jepsen.MetaAlterConfig {
			read = jepsen.MetaDescribeConfig
		}
		c.cur, c.attempts, c.unknown, c.readBack = &MetaOp{Type: read, Topic: op.Topic}, 0, false, &target
		c.r.probes.add("meta.read_back")
		if steered {
			// Once the resumed controller has caught up: the image it
			// answered from may not hold yet the change its answer
			// contradicts, and a read of it then is no proof.
			c.later(300 * time.Millisecond)
			return
		}
		c.later(0)
		return
	}
	c.later(time.Duration(c.rand.Intn(400)) * time.Millisecond)
}

func isNotSent(err error) bool { return jepsen.ClassifyMeta(jepsen.MetaCreate, err) == jepsen.Failed }

// record records a response to the attempt, and returns its error (nil for
// success).
func (c *metaClient) record(op *MetaOp, id jepsen.OpID, resp kmsg.Response) error {
	if md, ok := resp.(*kmsg.MetadataResponse); ok && c.r.cfg.Sabotage == SabotageDescribeAbsent && !c.r.nemesis.sabotaged && c.r.w.Now() > 5*time.Second &&
		len(md.Topics) == 1 && md.Topics[0].Topic != nil && *md.Topics[0].Topic == op.Topic && md.Topics[0].ErrorCode == 0 {
		// As if the node had answered from an image that lost the topic.
		c.r.nemesis.sabotaged = true
		c.r.mh.DescribeAbsent(id)
		return nil
	}
	return RecordMetaAnswer(c.r.mh, *op, id, resp, c.r.probes.add)
}
