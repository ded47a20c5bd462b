package simrun

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/jepsen"
	"github.com/sluicemq/sluice/raftmeta"
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
	cur      *metaOp
	attempts int
	// live is set in the liveness phase: the client makes one create of
	// a name of its own, which must succeed, and stops.
	live, liveDone bool
	liveOp         *metaOp
	// unknown says an attempt of cur ended with its outcome unknown.
	unknown bool
	// target is the node index the last attempt went to; readBack, when
	// set, is the node index the next operation (a describe of the topic
	// just changed) goes to at once: an application reading what it has
	// just written, on the broker it wrote through, as a Kafka client does
	// after CreateTopics. It is what shows a node answering a change
	// before its own image has it (the mutant forward-answers-unapplied).
	target   int
	readBack *int
}

// metaOp is one logical metadata operation.
type metaOp struct {
	typ        jepsen.MetaType
	topic      string
	partitions int32
	// value is a config change's value of metaConfigKey ("" deletes it).
	value string
}

// metaConfigKey is the topic config the metadata clients change and read:
// one a topic of the metadata workload (which holds no records) may have
// any value of.
const metaConfigKey = "retention.ms"

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
	c.liveOp = &metaOp{typ: jepsen.MetaCreate, topic: fmt.Sprintf("live-%d", c.id+1), partitions: 2}
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
		c.cur, c.attempts, c.unknown = c.draw(), 0, false
	}
	c.attempts++
	target := c.rand.Intn(len(c.r.nodes))
	if c.readBack != nil {
		target, c.readBack = *c.readBack, nil
	}
	c.send(c.cur, target)
}

func (c *metaClient) draw() *metaOp {
	op := &metaOp{topic: c.names[c.rand.Intn(len(c.names))]}
	switch x := c.rand.Intn(20); {
	case x < 5:
		op.typ, op.partitions = jepsen.MetaCreate, int32(1+c.rand.Intn(3))
	case x < 10:
		op.typ = jepsen.MetaDelete
	case x < 13:
		// To 2-5 partitions: often more than the topic has, sometimes
		// not (INVALID_PARTITIONS, a read).
		op.typ, op.partitions = jepsen.MetaAddPartitions, int32(2+c.rand.Intn(4))
	case x < 15:
		op.typ = jepsen.MetaAlterConfig
		// Two values or a delete: few enough that changes of unknown
		// outcome often restate the value (porcupine's states stay
		// few), enough that a lost or stale change shows.
		if x := c.rand.Intn(3); x > 0 {
			op.value = fmt.Sprint(3600000 * x)
		}
	case x < 16:
		op.typ = jepsen.MetaDescribeConfig
	default:
		op.typ = jepsen.MetaDescribe
	}
	return op
}

func (c *metaClient) send(op *metaOp, target int) {
	h := c.r.mh
	nodeID := c.r.nodes[target].id
	var req kmsg.Request
	switch op.typ {
	case jepsen.MetaCreate:
		c.inFlight = h.InvokeCreate(c.id, nodeID, op.topic, op.partitions)
		q := kmsg.NewPtrCreateTopicsRequest()
		q.Version = 7
		q.TimeoutMillis = 10000
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = op.topic, op.partitions, 1
		q.Topics = append(q.Topics, t)
		req = q
	case jepsen.MetaDelete:
		c.inFlight = h.InvokeDelete(c.id, nodeID, op.topic)
		q := kmsg.NewPtrDeleteTopicsRequest()
		q.Version = 4
		q.TimeoutMillis = 10000
		q.TopicNames = []string{op.topic}
		req = q
	case jepsen.MetaAddPartitions:
		c.inFlight = h.InvokeAddPartitions(c.id, nodeID, op.topic, op.partitions)
		q := kmsg.NewPtrCreatePartitionsRequest()
		q.Version = 3
		q.TimeoutMillis = 10000
		t := kmsg.NewCreatePartitionsRequestTopic()
		t.Topic, t.Count = op.topic, op.partitions
		q.Topics = append(q.Topics, t)
		req = q
	case jepsen.MetaAlterConfig:
		c.inFlight = h.InvokeAlterConfig(c.id, nodeID, op.topic, metaConfigKey, op.value)
		q := kmsg.NewPtrIncrementalAlterConfigsRequest()
		q.Version = 1
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, op.topic
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Op = metaConfigKey, kmsg.IncrementalAlterConfigOpDelete
		if op.value != "" {
			cfg.Op, cfg.Value = kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(op.value)
		}
		rr.Configs = append(rr.Configs, cfg)
		q.Resources = append(q.Resources, rr)
		req = q
	case jepsen.MetaDescribeConfig:
		c.inFlight = h.InvokeDescribeConfig(c.id, nodeID, op.topic, metaConfigKey)
		q := kmsg.NewPtrDescribeConfigsRequest()
		q.Version = 4
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, op.topic, []string{metaConfigKey}
		q.Resources = append(q.Resources, rr)
		req = q
	default:
		c.inFlight = h.InvokeDescribe(c.id, nodeID, op.topic)
		q := kmsg.NewPtrMetadataRequest()
		q.Version = 12
		t := kmsg.NewMetadataRequestTopic()
		name := op.topic
		t.Topic = &name
		q.Topics = append(q.Topics, t)
		q.AllowAutoTopicCreation = false
		req = q
	}
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
func (c *metaClient) answered(op *metaOp, id jepsen.OpID, resp kmsg.Response, err error) {
	h := c.r.mh
	if err == nil {
		err = c.record(op, id, resp)
	} else {
		h.Complete(id, err)
	}
	outcome := jepsen.ClassifyMeta(op.typ, err)
	retry := false
	switch {
	case err == nil:
	case op.typ == jepsen.MetaDescribe || op.typ == jepsen.MetaDescribeConfig:
		// A failed read: retry only on a lost connection.
		var ke *kerr.Error
		retry = !errors.As(err, &ke)
	case outcome == jepsen.Failed && isNotSent(err):
		retry = true
	case outcome == jepsen.Unknown && op.typ == jepsen.MetaAlterConfig:
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
			c.r.fail("liveness: %s's create of %s failed %d times after healing, the last: %v", c.name, op.topic, c.attempts, err)
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
	if (err == nil || op.typ == jepsen.MetaAlterConfig && outcome == jepsen.Unknown) && op.typ != jepsen.MetaDescribe && op.typ != jepsen.MetaDescribeConfig && c.rand.Intn(2) == 0 {
		target := c.target
		read := jepsen.MetaDescribe
		if op.typ == jepsen.MetaAlterConfig {
			read = jepsen.MetaDescribeConfig
		}
		c.cur, c.attempts, c.unknown, c.readBack = &metaOp{typ: read, topic: op.topic}, 0, false, &target
		c.r.probes.add("meta.read_back")
		c.later(0)
		return
	}
	c.later(time.Duration(c.rand.Intn(400)) * time.Millisecond)
}

func isNotSent(err error) bool { return jepsen.ClassifyMeta(jepsen.MetaCreate, err) == jepsen.Failed }

// record records a response to the attempt, and returns its error (nil for
// success).
func (c *metaClient) record(op *metaOp, id jepsen.OpID, resp kmsg.Response) error {
	h := c.r.mh
	fail := func(err error) error {
		h.Complete(id, err)
		return err
	}
	switch resp := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		if len(resp.Topics) != 1 || resp.Topics[0].Topic != op.topic {
			return fail(fmt.Errorf("CreateTopics answered %d topics, not %s", len(resp.Topics), op.topic))
		}
		t := resp.Topics[0]
		if t.ErrorCode != 0 {
			return fail(kerr.ErrorForCode(t.ErrorCode))
		}
		h.CreateOk(id, raftmeta.TopicID(t.TopicID), t.NumPartitions)
		return nil
	case *kmsg.DeleteTopicsResponse:
		if len(resp.Topics) != 1 || resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != op.topic {
			return fail(fmt.Errorf("DeleteTopics answered %d topics, not %s", len(resp.Topics), op.topic))
		}
		if code := resp.Topics[0].ErrorCode; code != 0 {
			return fail(kerr.ErrorForCode(code))
		}
		h.DeleteOk(id)
		return nil
	case *kmsg.CreatePartitionsResponse:
		if len(resp.Topics) != 1 || resp.Topics[0].Topic != op.topic {
			return fail(fmt.Errorf("CreatePartitions answered %d topics, not %s", len(resp.Topics), op.topic))
		}
		if code := resp.Topics[0].ErrorCode; code != 0 {
			if code == kerr.InvalidPartitions.Code {
				c.r.probes.add("meta.partitions_refused")
			}
			return fail(kerr.ErrorForCode(code))
		}
		c.r.probes.add("meta.partitions_added")
		h.AddPartitionsOk(id)
		return nil
	case *kmsg.IncrementalAlterConfigsResponse:
		if len(resp.Resources) != 1 || resp.Resources[0].ResourceName != op.topic {
			return fail(fmt.Errorf("IncrementalAlterConfigs answered %d resources, not %s", len(resp.Resources), op.topic))
		}
		if code := resp.Resources[0].ErrorCode; code != 0 {
			return fail(kerr.ErrorForCode(code))
		}
		c.r.probes.add("meta.config_altered")
		h.AlterConfigOk(id)
		return nil
	case *kmsg.DescribeConfigsResponse:
		if len(resp.Resources) != 1 || resp.Resources[0].ResourceName != op.topic {
			return fail(fmt.Errorf("DescribeConfigs answered %d resources, not %s", len(resp.Resources), op.topic))
		}
		res := resp.Resources[0]
		if res.ErrorCode != 0 {
			return fail(kerr.ErrorForCode(res.ErrorCode))
		}
		value := ""
		for _, cfg := range res.Configs {
			// Set on the topic, or a default (then "": none set).
			if cfg.Name == metaConfigKey && cfg.Source == kmsg.ConfigSourceDynamicTopicConfig && cfg.Value != nil {
				value = *cfg.Value
			}
		}
		if value != "" {
			c.r.probes.add("meta.config_seen_set")
		}
		h.DescribeConfigValue(id, value)
		return nil
	case *kmsg.MetadataResponse:
		if len(resp.Topics) != 1 || resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != op.topic {
			return fail(fmt.Errorf("metadata answered %d topics, not %s", len(resp.Topics), op.topic))
		}
		t := resp.Topics[0]
		if t.ErrorCode != 0 {
			return fail(kerr.ErrorForCode(t.ErrorCode))
		}
		partitions := int32(len(t.Partitions))
		if c.r.cfg.Sabotage == SabotageDescribeAbsent && !c.r.nemesis.sabotaged && c.r.w.Now() > 5*time.Second {
			// As if the node had answered from an image that lost the topic.
			c.r.nemesis.sabotaged = true
			h.DescribeAbsent(id)
			return nil
		}
		h.DescribeExists(id, raftmeta.TopicID(t.TopicID), partitions)
		return nil
	}
	return fail(fmt.Errorf("unexpected response %T", resp))
}
