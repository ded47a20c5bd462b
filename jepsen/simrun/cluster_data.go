package simrun

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/jepsen"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/sluicemq/sluice/sim"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The data workload of a cluster run: the run's topic, made before the
// clients start and noted as existing in the metadata history, and
// producers and consumers that find each partition's leader from Metadata,
// follow NOT_LEADER_OR_FOLLOWER's leader hint, and refresh the metadata on
// LEADER_NOT_AVAILABLE, a -1 leader or a lost connection. Each plain
// produce sends one record, not idempotent, a fresh value every attempt,
// with acks=all or (a share of the seed's choosing) acks=1, whose
// acknowledgement the checker knows may be lost; some seeds' producers
// are idempotent instead (cluster_idempotent.go); each fetch reads one
// partition from the consumer's position. The topic's replication factor
// and min.insync.replicas are the seed's. The history is judged by
// jepsen.Check, as a single broker's is, and every answer is held against
// the disk of the node that gave it (durable.go).

// dataClient is one producer or consumer of a cluster run.
type dataClient struct {
	r        *clusterRun
	id       int
	name     string
	producer bool
	node     *sim.Node
	rand     *rng.Rand

	e        env.Env
	inc      int
	sessions []*session
	// leaders are the partitions' leaders by node id as last heard (-1:
	// none known), epochs their leader epochs (-1: unknown), which fetches
	// carry as CurrentLeaderEpoch.
	leaders  []int32
	epochs   []int32
	flying   bool
	inFlight jepsen.OpID
	// rack is a consumer's client.rack ("" none); readFrom[p] is the
	// follower the leader told it to read p from (KIP-392), -1 none.
	rack     string
	readFrom []int32
	// pos are a consumer's positions; values counts a producer's values.
	pos    []int64
	values int
	// live is set in the liveness phase: a producer then produces once
	// to every partition, each of which must succeed, and stops; a
	// consumer stops.
	live    bool
	pending []int32 // partitions a live producer still must produce to
	tries   int
	// idem is an idempotent producer's state (cluster_idempotent.go), nil
	// for a plain producer or a consumer.
	idem *idempotence
}

func (r *clusterRun) newDataClient(id int, name string, producer bool) *dataClient {
	d := &dataClient{r: r, id: id, name: name, producer: producer, rand: r.w.Rand("client/" + name),
		pos: make([]int64, r.partitions)}
	if !producer && r.opts.Racks > 0 && id%2 == 1 {
		// Every other consumer names a rack: some read from followers,
		// some from leaders.
		d.rack = rackOf(id, r.opts.Racks)
	}
	if producer && id <= r.opts.IdempotentProducers {
		d.idem = newIdempotence(r.partitions, 0)
	}
	return d
}

func (d *dataClient) boot(e env.Env) {
	d.e, d.inc = e, d.node.Incarnation()
	if d.idem != nil {
		d.restartIdempotence()
	}
	if d.flying {
		// A metadata refresh (inFlight -1) is not in the history.
		if d.inFlight >= 0 {
			d.r.h.Info(d.inFlight, errors.New("the client's node lost power"))
		}
		d.flying = false
	}
	d.sessions = make([]*session, len(d.r.nodes))
	for i, n := range d.r.nodes {
		d.sessions[i] = &session{e: e, addr: n.name + ":9092", clientID: d.name, dialTimeout: dialTimeout, probes: &d.r.probes}
	}
	d.leaders = make([]int32, d.r.partitions)
	d.epochs = make([]int32, d.r.partitions)
	d.readFrom = make([]int32, d.r.partitions)
	for i := range d.leaders {
		d.leaders[i], d.epochs[i], d.readFrom[i] = -1, -1, -1
	}
	d.later(time.Duration(d.rand.Intn(200)) * time.Millisecond)
}

func (d *dataClient) done() bool { return !d.flying && (!d.producer || !d.live || len(d.pending) == 0) }

func (d *dataClient) later(dur time.Duration) {
	inc := d.inc
	d.e.Clock.AfterFunc(dur, func() {
		if d.node.Incarnation() == inc {
			d.step()
		}
	})
}

// think is the pause between two of the client's operations: up to 100 ms
// (mean 50 ms), or ClusterOptions.Think's mean when set.
func (d *dataClient) think() time.Duration {
	if t := d.r.opts.Think; t > 0 {
		return time.Duration(d.rand.Uint64n(uint64(2 * t)))
	}
	return time.Duration(d.rand.Intn(100)) * time.Millisecond
}

func (d *dataClient) backoff() {
	d.later(backoffMin + time.Duration(d.rand.Uint64n(uint64(backoffMax-backoffMin))))
}

// startLiveness begins the liveness phase: called from outside the
// simulated world, so that the run sees the producer busy at once.
func (d *dataClient) startLiveness() {
	d.live = true
	if d.producer {
		d.pending = allPartitions(d.r.partitions)
		inc := d.inc
		d.node.Post(func() {
			if d.node.Incarnation() == inc && !d.flying {
				d.step()
			}
		})
	}
}

func (d *dataClient) step() {
	if d.flying || (d.r.stopping && (!d.live || !d.producer || len(d.pending) == 0)) {
		return
	}
	if d.idem != nil {
		d.stepIdempotent()
		return
	}
	p := int32(d.rand.Intn(d.r.partitions))
	if d.live {
		p = d.pending[0]
	}
	leader := d.leaders[p]
	if s := d.r.steer; s != nil && !d.live && d.rand.Intn(2) == 0 {
		// The lagging-image aim (cluster_lagging_image.go): a producer
		// whose metadata is fresh writes to the partition's new leader, a
		// consumer whose metadata came from the old one reads there.
		p, leader = s.part, s.fresh
		if !d.producer {
			leader = s.stale
			d.epochs[p] = s.staleEpoch
		}
	}
	if leader < 1 {
		d.refresh()
		return
	}
	if d.producer {
		d.produce(p, leader)
	} else {
		d.fetch(p, leader)
	}
}

// refresh asks a random node for the topic's leaders, then steps again.
func (d *dataClient) refresh() {
	d.r.probes.add("data.metadata_refresh")
	d.r.logf("%s refreshes the metadata", d.name)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	t := kmsg.NewMetadataRequestTopic()
	name := clusterTopic
	t.Topic = &name
	req.Topics = append(req.Topics, t)
	inc := d.inc
	d.flying = true
	d.inFlight = -1
	d.sessions[d.rand.Intn(len(d.sessions))].do(req, metadataTimeout, func(resp kmsg.Response, err error) {
		if d.node.Incarnation() != inc || !d.flying || d.inFlight != -1 {
			return
		}
		d.flying = false
		if err != nil {
			d.r.logf("%s: metadata refresh: %v", d.name, err)
		}
		if err == nil {
			for _, t := range resp.(*kmsg.MetadataResponse).Topics {
				if t.Topic == nil || *t.Topic != clusterTopic || t.ErrorCode != 0 {
					continue
				}
				for _, p := range t.Partitions {
					if int(p.Partition) < len(d.leaders) && p.Partition >= 0 {
						d.r.logf("%s: metadata says %s-%d is led by %d at epoch %d (error %d)", d.name, clusterTopic, p.Partition, p.Leader, p.LeaderEpoch, p.ErrorCode)
						d.leaders[p.Partition], d.epochs[p.Partition] = p.Leader, p.LeaderEpoch
					}
				}
			}
		}
		d.backoff()
	})
}

func (d *dataClient) sessionOf(leader int32) *session { return d.sessions[leader-1] }

func (d *dataClient) produce(p, leader int32) {
	r := d.r
	tp := jepsen.TopicPartition{Topic: clusterTopic, Partition: p}
	d.values++
	value := fmt.Sprintf("%s-%d", d.name, d.values)
	acks := int16(-1)
	if !d.live && d.rand.Float64() < r.opts.LeaderAcks {
		acks = 1
	}
	var id jepsen.OpID
	if acks == 1 {
		r.probes.add("data.acks1")
		id = r.h.InvokeProduceLeaderAck(d.id, tp, false, value)
	} else {
		id = r.h.InvokeProduce(d.id, tp, false, value)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version = 12
	req.Acks, req.TimeoutMillis = acks, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = clusterTopic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = p
	rp.Records = buildBatch(producerBatch{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, TimestampMs: d.e.Clock.Now().UnixMilli()}, []string{value})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	d.flying, d.inFlight = true, id
	inc := d.inc
	d.sessionOf(leader).do(req, 10*time.Second, func(resp kmsg.Response, err error) {
		if d.node.Incarnation() != inc || !d.flying || d.inFlight != id {
			return
		}
		d.flying = false
		if err != nil {
			r.logf("%s produce %s to n%d: %v", d.name, tp, leader, err)
		}
		if err == nil {
			pr := resp.(*kmsg.ProduceResponse)
			code, base, ok := producePartitionResult(pr, tp)
			switch {
			case !ok:
				err = errors.New("produce response does not carry the partition")
			case code == 0:
				r.logf("%s produce %s to n%d: offset %d", d.name, tp, leader, base)
				r.h.ProduceOkAtEpoch(id, base, r.epochBound(leader, p))
				if !r.cfg.NoOracle && !r.opts.PageCache && acks == -1 {
					r.probes.add("oracle.ack")
					n := r.nodes[leader-1]
					why, err := n.oracle.ackedProblem(tp, ackedRef(rp.Records, 1, base))
					r.judgeDurable(n, why, err)
				}
				if d.live && len(d.pending) > 0 && d.pending[0] == p {
					d.pending = d.pending[1:]
				}
				d.tries = 0
				d.later(d.think())
				return
			default:
				err = kerr.ErrorForCode(code)
				r.probeRefusal(code)
				d.followLeader(pr, tp, code)
			}
		} else {
			d.leaders[p] = -1
		}
		r.h.Complete(id, err)
		d.failed(tp, err)
	})
}

// followLeader takes a NOT_LEADER_OR_FOLLOWER's leader hint, or forgets
// the leader so that the next step refreshes the metadata.
func (d *dataClient) followLeader(pr *kmsg.ProduceResponse, tp jepsen.TopicPartition, code int16) {
	d.leaders[tp.Partition] = -1
	if code != kerr.NotLeaderForPartition.Code {
		return
	}
	for _, t := range pr.Topics {
		for _, p := range t.Partitions {
			if t.Topic == tp.Topic && p.Partition == tp.Partition && p.CurrentLeader.LeaderID > 0 && int(p.CurrentLeader.LeaderID) <= len(d.sessions) {
				d.leaders[tp.Partition], d.epochs[tp.Partition] = p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch
				d.r.probes.add("data.leader_hint")
			}
		}
	}
}

func (d *dataClient) failed(tp jepsen.TopicPartition, err error) {
	d.tries++
	if d.live && d.tries >= 100 {
		d.r.fail("liveness: %s's produce to %s failed %d times after healing, the last: %v", d.name, tp, d.tries, err)
		d.pending = nil
		return
	}
	d.backoff()
}

func (d *dataClient) fetch(p, leader int32) {
	r := d.r
	tp := jepsen.TopicPartition{Topic: clusterTopic, Partition: p}
	from := d.pos[p]
	epoch := d.epochs[p]
	// A follower the leader pointed at serves below its own high
	// watermark, which lags the leader's: its answers are held to the
	// model and the final read, not to the order of high watermarks.
	server, follower := leader, d.readFrom[p] >= 1
	if follower {
		server = d.readFrom[p]
	}
	var id jepsen.OpID
	if epoch >= 0 && !follower {
		id = r.h.InvokeFetchAtEpoch(d.id, tp, from, 0, epoch)
	} else {
		id = r.h.InvokeFetch(d.id, tp, from, 0)
	}
	topic := &topicInfo{id: r.topicID, partitions: r.partitions}
	req := fetchRequest(12, topic, tp, from, fetchMaxWait)
	req.Topics[0].Partitions[0].CurrentLeaderEpoch = epoch
	req.Rack = d.rack
	d.flying, d.inFlight = true, id
	inc := d.inc
	d.sessionOf(server).do(req, fetchRequestTimeout, func(resp kmsg.Response, err error) {
		if d.node.Incarnation() != inc || !d.flying || d.inFlight != id {
			return
		}
		d.flying = false
		fp, err := fetchResult(resp, err, topic, tp, from)
		switch {
		case err == nil && !follower && fp.preferred >= 1 && fp.preferred != leader && int(fp.preferred) <= len(d.sessions):
			// Sent elsewhere, with no records: read there next.
			r.probes.add("data.preferred_replica")
			d.readFrom[p] = fp.preferred
			r.h.FetchOk(id, nil)
			d.later(0)
			return
		case err == nil:
			r.logf("%s fetch %s from n%d at %d: %d records, high watermark %d", d.name, tp, server, from, len(fp.records), fp.marks.HighWatermark)
			if s := r.steer; s != nil && s.part == p && s.stale == server {
				r.probes.add("fault.lagging_image_served")
			}
			if follower {
				r.probes.add("data.follower_fetch")
				r.h.FetchOk(id, fp.records)
			} else {
				r.h.FetchOkWatermarks(id, fp.records, fp.marks)
			}
			// Page-cache mode serves and acknowledges what is in the page
			// cache: nothing the oracle would hold it to (its records are
			// held to the final read instead, as any seed's).
			if !r.cfg.NoOracle && !r.opts.PageCache {
				r.probes.add("oracle.fetch")
				n := r.nodes[server-1]
				why, err := n.oracle.servedProblem(tp, fp)
				r.judgeDurable(n, why, err)
			}
			if n := len(fp.records); n > 0 {
				d.pos[p] = fp.records[n-1].Offset + 1
			}
			d.later(d.think())
			return
		case errors.Is(err, kerr.OffsetOutOfRange):
			d.r.probes.add("data.out_of_range")
			d.pos[p] = 0
		case follower:
			d.readFrom[p] = -1 // back to the leader, which may point elsewhere
		default:
			d.leaders[p] = -1
		}
		r.h.Complete(id, err)
		d.backoff()
	})
}

// epochBound is an epoch that the leader epoch at which node leader
// acknowledged a produce to partition p cannot exceed: the partition's
// epoch in that node's image as the answer arrives (images only move
// forward), or the largest epoch when the node is down.
func (r *clusterRun) epochBound(leader, p int32) int32 {
	if b := r.nodes[leader-1].broker(); b != nil {
		if t := b.MetadataImage().TopicByName(clusterTopic); t != nil && int(p) < len(t.Partitions) {
			return t.Partitions[p].LeaderEpoch
		}
	}
	return math.MaxInt32
}

// clusterTopic is the data workload's topic.
const clusterTopic = "jepsen"

// makeTopic creates the data topic from the admin node before any client
// starts, and waits until every node's image holds it.
func (r *clusterRun) makeTopic() bool {
	admin := r.w.AddNode("admin", nil)
	s := &session{e: admin.Env(), addr: "", clientID: "admin", dialTimeout: dialTimeout, probes: &r.probes}
	made := false
	var try func(i int)
	try = func(i int) {
		s.addr = r.nodes[i%len(r.nodes)].name + ":9092"
		s.client = nil
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 7
		req.TimeoutMillis = 10000
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = clusterTopic, int32(r.partitions), int16(r.opts.ReplicationFactor)
		configs := [][2]string{{"segment.index.bytes", fmt.Sprint(topicIndexBytes)}, {"min.insync.replicas", fmt.Sprint(r.opts.MinInSync)}}
		if r.opts.PageCache {
			configs = append(configs, [2]string{"flush.messages", fmt.Sprint(int64(math.MaxInt64))})
			r.probes.add("data.page_cache")
		}
		for _, kv := range configs {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = kv[0], &kv[1]
			t.Configs = append(t.Configs, c)
		}
		req.Topics = append(req.Topics, t)
		s.do(req, metaTimeout, func(resp kmsg.Response, err error) {
			if err == nil {
				code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode
				if code == 0 || code == kerr.TopicAlreadyExists.Code {
					made = true
					return
				}
			}
			admin.Env().Clock.AfterFunc(200*time.Millisecond, func() { try(i + 1) })
		})
	}
	admin.Post(func() { try(0) })
	held := func() bool {
		if !made {
			return false
		}
		for _, n := range r.nodes {
			b := n.broker()
			if b == nil || b.MetadataImage().TopicByName(clusterTopic) == nil {
				return false
			}
		}
		return true
	}
	if !r.w.RunUntil(held, livenessLimit) {
		r.fail("setup: the data topic was not made on every node in %s: %s", livenessLimit, r.describeBusy())
		return false
	}
	t := r.nodes[0].broker().MetadataImage().TopicByName(clusterTopic)
	r.topicID = t.ID
	r.mh.Existing(clusterTopic, raftmeta.TopicID(t.ID), int32(len(t.Partitions)))
	return true
}

// finalReads reads every partition whole from its leader, once the
// cluster has converged, into the history's final reads.
func (r *clusterRun) finalReads() {
	reader := r.w.AddNode("reader", nil)
	e := reader.Env()
	sessions := make([]*session, len(r.nodes))
	for i, n := range r.nodes {
		sessions[i] = &session{e: e, addr: n.name + ":9092", clientID: "reader", dialTimeout: dialTimeout, probes: &r.probes}
	}
	topic := &topicInfo{id: r.topicID, partitions: r.partitions}
	for p := range r.partitions {
		tp := jepsen.TopicPartition{Topic: clusterTopic, Partition: int32(p)}
		var leader int32 = -1
		led := func() bool {
			b := r.nodes[0].broker()
			if b == nil {
				return false
			}
			t := b.MetadataImage().TopicByName(clusterTopic)
			leader = t.Partitions[p].Leader
			return leader >= 1
		}
		if !r.w.RunUntil(led, livenessLimit) {
			r.fail("liveness: %s has no leader %s after convergence", tp, livenessLimit)
			return
		}
		id := r.h.InvokeFinalRead(finalClient, tp, 0)
		var records []jepsen.Record
		done, failed := false, 0
		var read func(from int64)
		read = func(from int64) {
			sessions[leader-1].do(fetchRequest(12, topic, tp, from, 0), fetchRequestTimeout, func(resp kmsg.Response, err error) {
				fp, err := fetchResult(resp, err, topic, tp, from)
				if err != nil {
					if failed++; failed > 20 {
						r.h.Info(id, err)
						r.fail("final read of %s: %v", tp, err)
						done = true
						return
					}
					// A reassignment still completing may have moved the
					// leadership since: ask the image again.
					if prev := leader; !led() {
						leader = prev
					}
					e.Clock.AfterFunc(200*time.Millisecond, func() { read(from) })
					return
				}
				if len(fp.records) == 0 && from < fp.marks.HighWatermark {
					if failed++; failed > 20 {
						r.h.Info(id, errors.New("no records below the high watermark"))
						r.fail("final read of %s: no records at %d below the high watermark %d", tp, from, fp.marks.HighWatermark)
						done = true
						return
					}
					e.Clock.AfterFunc(200*time.Millisecond, func() { read(from) })
					return
				}
				records = append(records, fp.records...)
				next := from
				if n := len(fp.records); n > 0 {
					next = fp.records[n-1].Offset + 1
				}
				if next >= fp.marks.HighWatermark {
					r.h.FetchOk(id, records)
					r.compareReplicas(e, sessions, topic, tp, leader, records)
					done = true
					return
				}
				read(next)
			})
		}
		reader.Post(func() { read(0) })
		if !r.w.RunUntil(func() bool { return done }, livenessLimit) {
			r.fail("liveness: the final read of %s did not complete in %s", tp, livenessLimit)
			return
		}
	}
}

// compareReplicas reads a partition from each of its followers once the
// cluster has converged, and holds what each serves (below its high
// watermark) to the leader's final read: replicas agree on every offset
// both hold. A follower that diverged (it skipped a truncation, or fetched
// on from a leader of another epoch) may serve nothing that a client saw
// differ yet; this finds it at the end of the run.
func (r *clusterRun) compareReplicas(e env.Env, sessions []*session, topic *topicInfo, tp jepsen.TopicPartition, leader int32, final []jepsen.Record) {
	b := r.nodes[leader-1].broker()
	if b == nil {
		return
	}
	t := b.MetadataImage().TopicByName(clusterTopic)
	if t == nil {
		return
	}
	mp := t.Partitions[tp.Partition]
	want := make(map[int64]string, len(final))
	for _, rec := range final {
		want[rec.Offset] = rec.Value
	}
	for _, id := range mp.Replicas {
		if id == leader || r.nodes[id-1].broker() == nil {
			continue
		}
		id := id
		tries := 0
		r.comparing++
		finish := func() { r.comparing-- }
		var read func(from int64)
		read = func(from int64) {
			req := fetchRequest(12, topic, tp, from, 0)
			req.Topics[0].Partitions[0].CurrentLeaderEpoch = mp.LeaderEpoch
			sessions[id-1].do(req, fetchRequestTimeout, func(resp kmsg.Response, err error) {
				fp, err := fetchResult(resp, err, topic, tp, from)
				if err != nil || len(fp.records) == 0 {
					// Truncating, behind, or not yet caught up: a few tries,
					// then what it served so far is all that is compared.
					if tries++; tries < 10 && (err != nil || from < fp.marks.HighWatermark) {
						e.Clock.AfterFunc(100*time.Millisecond, func() { read(from) })
						return
					}
					finish()
					return
				}
				r.probes.add("data.replica_compared")
				for _, rec := range fp.records {
					if v, ok := want[rec.Offset]; ok && v != rec.Value {
						r.fail("violation: replicas: %s on n%d holds %q at offset %d where its leader n%d holds %q", tp, id, rec.Value, rec.Offset, leader, v)
						finish()
						return
					}
				}
				if next := fp.records[len(fp.records)-1].Offset + 1; next < fp.marks.HighWatermark {
					read(next)
					return
				}
				finish()
			})
		}
		read(0)
	}
}

// The mover: in a replicated run, an operator moving the data topic's
// partitions between brokers (AlterPartitionReassignments) every few
// seconds while the faults and the clients go on, so that followers are
// added, catch up and join the ISR, leaders are moved off removed replicas,
// and removed replicas are deleted, all under faults. It records nothing:
// the clients' histories and the end's replica comparison judge the run.
// It starts again when its machine comes back from a power loss (which
// cuts every machine, the operator's too).
func (r *clusterRun) startMover() {
	if r.cfg.MetaOnly || r.opts.ReplicationFactor < 2 || !r.opts.Moves {
		return
	}
	rand := r.w.Rand("mover")
	r.w.AddNode("mover", func(e env.Env) { r.runMover(e, rand) })
}

func (r *clusterRun) runMover(e env.Env, rand *rng.Rand) {
	s := &session{e: e, clientID: "mover", dialTimeout: dialTimeout, probes: &r.probes}
	var move func()
	move = func() {
		if r.stopping {
			return
		}
		ids := make([]int32, len(r.nodes))
		for i := range ids {
			ids[i] = int32(i + 1)
		}
		for i := len(ids) - 1; i > 0; i-- {
			j := rand.Intn(i + 1)
			ids[i], ids[j] = ids[j], ids[i]
		}
		p := int32(rand.Intn(r.partitions))
		target := ids[:r.opts.ReplicationFactor]
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		req.TimeoutMillis = 10000
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = clusterTopic
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition, rp.Replicas = p, target
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		s.addr, s.client = r.nodes[rand.Intn(len(r.nodes))].name+":9092", nil
		s.do(req, metaTimeout, func(resp kmsg.Response, err error) {
			if err == nil {
				ar := resp.(*kmsg.AlterPartitionAssignmentsResponse)
				code := ar.ErrorCode
				if code == 0 && len(ar.Topics) > 0 && len(ar.Topics[0].Partitions) > 0 {
					code = ar.Topics[0].Partitions[0].ErrorCode
				}
				r.logf("mover: %s-%d to %v: error %d", clusterTopic, p, target, code)
				if code == 0 {
					r.probes.add("data.reassignment")
					if r.nemesis.faultedNow() {
						r.probes.add("data.reassignment_during_fault")
					}
				}
			}
			e.Clock.AfterFunc(time.Duration(1000+rand.Intn(5000))*time.Millisecond, move)
		})
	}
	e.Clock.AfterFunc(time.Duration(rand.Intn(3000))*time.Millisecond, move)
}

// probeRefusal counts a produce refused for want of in-sync replicas.
func (r *clusterRun) probeRefusal(code int16) {
	switch code {
	case kerr.NotEnoughReplicas.Code:
		r.probes.add("data.not_enough_replicas")
	case kerr.NotEnoughReplicasAfterAppend.Code:
		r.probes.add("data.not_enough_replicas_after_append")
	}
}
