package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/sluicemq/sluice/jepsen"
	"github.com/sluicemq/sluice/jepsen/simrun"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The metadata workload of a real-process run (--meta-clients): the
// simulator's metadata clients (jepsen/simrun's MetaOp: creates, deletes,
// partition adds, config changes and describes of a few topic names, each
// attempt sent to one node chosen at random, a change often read back at
// once on the node that answered it), here as goroutines sending the same
// requests to real nodes. Every attempt is an operation of a
// jepsen.MetaHistory with the node it went to; after healing each client
// must create a topic of its own, and once every node shows the same
// image, each node's image is recorded as final describes. The history is
// judged by jepsen.CheckMeta (porcupine over the metadata model, per
// topic) and jepsen.CheckConverged, as a simulated cluster run's is.
//
// A client holds one franz-go client per node, each with that node alone
// as its seed, and sends through its seed broker: so a request goes to the
// node the history names, never to one kgo would route it to. An attempt
// that could not dial is not sent (failed); one that broke or timed out
// after it was written has an unknown outcome.

// metaAttemptTimeout bounds one attempt: past the brokers' own timeouts
// (10 s), so that a broker usually answers first.
const metaAttemptTimeout = 15 * time.Second

// metaAttempts bounds the tries of one operation in the safety phase.
const metaAttempts = 5

// realMeta is the run's metadata workload.
type realMeta struct {
	r *realRun

	mu sync.Mutex // guards h and failures
	h  *jepsen.MetaHistory
	// finals are the nodes' images once they agree.
	finals   []jepsen.FinalImage
	failures []string
}

func newRealMeta(r *realRun) *realMeta { return &realMeta{r: r, h: jepsen.NewMetaHistory()} }

// intn adapts math/rand to simrun.Intn.
type intn struct{ *rand.Rand }

func (r intn) Intn(n int) int { return r.IntN(n) }

// metaConn is one client's connections: a franz-go client per node.
type metaConn struct {
	m       *realMeta
	id      int
	byNode  []*kgo.Client
	nodeIDs []int32
}

func (m *realMeta) connect(id int) (*metaConn, error) {
	c := &metaConn{m: m, id: id}
	for _, n := range m.r.nodes {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.Dialer(m.r.dial), kgo.ClientID(fmt.Sprintf("meta-%d", id+1)))
		if err != nil {
			c.close()
			return nil, err
		}
		c.byNode, c.nodeIDs = append(c.byNode, cl), append(c.nodeIDs, n.id)
	}
	return c, nil
}

func (c *metaConn) close() {
	for _, cl := range c.byNode {
		cl.Close()
	}
}

// request sends req to node index i and waits for the answer or
// metaAttemptTimeout; a dial that failed is wrapped by jepsen.NotSent.
func (c *metaConn) request(ctx context.Context, i int, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), metaAttemptTimeout)
	defer cancel()
	resp, err := c.byNode[i].SeedBrokers()[0].Request(ctx, req)
	if opErr, ok := errors.AsType[*net.OpError](err); ok && opErr.Op == "dial" {
		err = jepsen.NotSent(err)
	}
	return resp, err
}

// attempt sends one attempt of op to node index i, recording it.
func (c *metaConn) attempt(ctx context.Context, op simrun.MetaOp, i int) error {
	m := c.m
	var id jepsen.OpID
	var req kmsg.Request
	m.locked(func() { id, req = op.Invoke(m.h, c.id, c.nodeIDs[i]) })
	resp, err := c.request(ctx, i, req)
	m.locked(func() {
		if err != nil {
			m.h.Complete(id, err)
			return
		}
		err = simrun.RecordMetaAnswer(m.h, op, id, resp, nil)
	})
	return err
}

func (m *realMeta) locked(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f()
}

func (m *realMeta) fail(format string, args ...any) {
	m.locked(func() { m.failures = append(m.failures, fmt.Sprintf(format, args...)) })
}

// metaTopicNames are client id's topics: its own and its neighbour's, so
// that clients race on each name and each name has at most two clients
// (porcupine stays fast), as in the simulator.
func metaTopicNames(id, clients int) []string {
	return []string{fmt.Sprintf("t%d", id+1), fmt.Sprintf("t%d", (id+1)%clients+1), fmt.Sprintf("own-%d", id+1)}
}

// client runs metadata client id until ctx ends: an operation, retried on
// another node while its outcome is unknown (up to metaAttempts tries;
// not a config change, which is read back instead), and half the time a
// describe of what it changed on the node that answered.
func (m *realMeta) client(ctx context.Context, id int) {
	c, err := m.connect(id)
	if err != nil {
		m.fail("metadata client %d: %v", id+1, err)
		return
	}
	defer c.close()
	pick := intn{rand.New(rand.NewPCG(m.r.o.seed, uint64(1000+id)))}
	names := metaTopicNames(id, m.r.o.metaClients)
	// readBack, once a change ended, is the node index that answered
	// it, which the next operation (a describe of what changed) goes to.
	readBack := -1
	var last simrun.MetaOp
	for ctx.Err() == nil {
		op := simrun.DrawMetaOp(pick, names)
		target := pick.Intn(len(c.byNode))
		if readBack >= 0 {
			op = simrun.MetaOp{Type: jepsen.MetaDescribe, Topic: last.Topic}
			if last.Type == jepsen.MetaAlterConfig {
				op.Type = jepsen.MetaDescribeConfig
			}
			target, readBack = readBack, -1
		}
		var err error
		for attempt := 1; ; attempt++ {
			err = c.attempt(ctx, op, target)
			if !retryMeta(op, err) || attempt >= metaAttempts || ctx.Err() != nil {
				break
			}
			target = pick.Intn(len(c.byNode))
			time.Sleep(time.Duration(50+pick.Intn(400)) * time.Millisecond)
		}
		changed := op.Type != jepsen.MetaDescribe && op.Type != jepsen.MetaDescribeConfig
		unknownConfig := op.Type == jepsen.MetaAlterConfig && jepsen.ClassifyMeta(op.Type, err) == jepsen.Unknown
		if changed && (err == nil || unknownConfig) && pick.Intn(2) == 0 {
			last, readBack = op, target
			continue
		}
		time.Sleep(time.Duration(pick.Intn(400)) * time.Millisecond)
	}
}

// retryMeta says whether an attempt of op that ended with err is tried
// again: a read on a lost connection, a change that was not sent or
// whose outcome is unknown, except a config change (read back instead:
// each retry of unknown outcome is one more change porcupine must place).
func retryMeta(op simrun.MetaOp, err error) bool {
	outcome := jepsen.ClassifyMeta(op.Type, err)
	switch {
	case err == nil:
		return false
	case op.Type == jepsen.MetaDescribe || op.Type == jepsen.MetaDescribeConfig:
		_, kafka := errors.AsType[*kerr.Error](err)
		return !kafka
	case outcome == jepsen.Unknown && op.Type == jepsen.MetaAlterConfig:
		return false
	}
	return true // failed but not sent, or unknown
}

// live is the liveness phase's operation of client id: a create of a
// topic of its own, which must succeed once the faults have healed
// (TOPIC_ALREADY_EXISTS after an attempt of unknown outcome counts: that
// attempt made it).
func (m *realMeta) live(ctx context.Context, id int) {
	c, err := m.connect(id)
	if err != nil {
		m.fail("metadata client %d: %v", id+1, err)
		return
	}
	defer c.close()
	op := simrun.MetaOp{Type: jepsen.MetaCreate, Topic: fmt.Sprintf("live-%d", id+1), Partitions: 2}
	unknown := false
	for attempt := 1; ctx.Err() == nil; attempt++ {
		err := c.attempt(ctx, op, (id+attempt)%len(c.byNode))
		switch {
		case err == nil, unknown && errors.Is(err, kerr.TopicAlreadyExists):
			return
		case attempt >= 50:
			m.fail("liveness: metadata client %d's create of %s failed %d times after healing, the last: %v", id+1, op.Topic, attempt, err)
			return
		}
		unknown = unknown || jepsen.ClassifyMeta(op.Type, err) == jepsen.Unknown
		time.Sleep(200 * time.Millisecond)
	}
}

// noteExisting notes topic, made before the history began, once every
// node shows it (with one id), as the history requires.
func (m *realMeta) noteExisting(ctx context.Context, topic string) error {
	finals, err := m.awaitImages(ctx, func(finals []jepsen.FinalImage) bool {
		t, ok := finals[0].Topics[topic]
		for _, f := range finals {
			ok = ok && f.Topics[topic].ID == t.ID && f.Topics[topic].Partitions == t.Partitions
		}
		return ok
	})
	if err != nil {
		return fmt.Errorf("not every node shows topic %s: %w", topic, err)
	}
	t := finals[0].Topics[topic]
	m.locked(func() { m.h.Existing(topic, t.ID, t.Partitions) })
	return nil
}

// settle waits until every node's image is the same, notes
// __consumer_offsets (made by a coordinator, named by no client) as
// existing if it is there, and records each node's image as final
// describes.
func (m *realMeta) settle(ctx context.Context) error {
	finals, err := m.awaitImages(ctx, imagesAgree)
	if err != nil {
		return fmt.Errorf("the nodes did not converge after healing: %w", err)
	}
	if m.r.o.sabotageMeta {
		// A test-only lie: the first node's image lost the data topic.
		delete(finals[0].Topics, dataTopic)
	}
	m.locked(func() {
		if t, ok := finals[0].Topics[offsetsTopicName]; ok {
			m.h.Existing(offsetsTopicName, t.ID, t.Partitions)
		}
		for _, f := range finals {
			m.h.FinalImage(metaFinalClient, f)
		}
		m.finals = finals
	})
	return nil
}

// awaitImages asks every node for its image, over one set of
// connections, every 300 ms until ready holds of the images or a minute
// has passed.
func (m *realMeta) awaitImages(ctx context.Context, ready func([]jepsen.FinalImage) bool) ([]jepsen.FinalImage, error) {
	c, err := m.connect(-1)
	if err != nil {
		return nil, err
	}
	defer c.close()
	deadline := time.Now().Add(time.Minute)
	for {
		finals, err := c.images(ctx)
		if err == nil && ready(finals) {
			return finals, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if err == nil {
				err = errors.New("their images differ")
			}
			return nil, fmt.Errorf("after a minute: %w", err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

const offsetsTopicName = "__consumer_offsets"

// metaFinalClient is the client id of the final describes, as in the
// simulator's histories.
const metaFinalClient = 1000

// images asks every node for its image: every topic's id and partition
// count (Metadata), and the metadata workload's config of each
// (DescribeConfigs).
func (c *metaConn) images(ctx context.Context) ([]jepsen.FinalImage, error) {
	var out []jepsen.FinalImage
	for i, node := range c.nodeIDs {
		f := jepsen.FinalImage{Node: node, Topics: map[string]jepsen.TopicSummary{}}
		q := kmsg.NewPtrMetadataRequest()
		q.Version = 12
		resp, err := c.request(ctx, i, q)
		if err != nil {
			return nil, fmt.Errorf("metadata of node %d: %w", node, err)
		}
		for _, t := range resp.(*kmsg.MetadataResponse).Topics {
			if t.ErrorCode != 0 || t.Topic == nil {
				continue
			}
			f.Topics[*t.Topic] = jepsen.TopicSummary{ID: raftmeta.TopicID(t.TopicID), Partitions: int32(len(t.Partitions))}
		}
		for _, name := range slices.Sorted(maps.Keys(f.Topics)) {
			q := kmsg.NewPtrDescribeConfigsRequest()
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, name, []string{simrun.MetaConfigKey}
			q.Resources = append(q.Resources, rr)
			resp, err := c.request(ctx, i, q)
			if err != nil {
				return nil, fmt.Errorf("configs of %s on node %d: %w", name, node, err)
			}
			value, err := simrun.DescribedConfig(resp.(*kmsg.DescribeConfigsResponse), name)
			if err != nil {
				return nil, fmt.Errorf("configs of %s on node %d: %w", name, node, err)
			}
			t := f.Topics[name]
			if value != "" {
				t.Configs = map[string]string{simrun.MetaConfigKey: value}
			}
			f.Topics[name] = t
		}
		out = append(out, f)
	}
	return out, nil
}

// imagesAgree says every node's image holds the same topics, ids, counts
// and configs.
func imagesAgree(finals []jepsen.FinalImage) bool {
	for _, f := range finals[1:] {
		if !maps.EqualFunc(f.Topics, finals[0].Topics, func(a, b jepsen.TopicSummary) bool {
			return a.ID == b.ID && a.Partitions == b.Partitions && maps.Equal(a.Configs, b.Configs)
		}) {
			return false
		}
	}
	return true
}

// check judges the metadata history: the model, and the final images.
func (m *realMeta) check() jepsen.MetaResult {
	res := jepsen.CheckMeta(m.h, jepsen.MetaConfig{})
	if len(m.finals) > 0 {
		vs, err := jepsen.CheckConverged(m.h.Events(), m.finals)
		if err != nil {
			vs = append(vs, jepsen.MetaViolation{Check: jepsen.CheckNotConverged, Message: err.Error()})
		}
		if len(vs) > 0 {
			res.Violations, res.Verdict = append(res.Violations, vs...), jepsen.Invalid
		}
	}
	return res
}

// ops counts the history's operations.
func (m *realMeta) ops() int {
	n := 0
	for _, e := range m.h.Events() {
		if e.Kind == jepsen.KindInvoke {
			n++
		}
	}
	return n
}
