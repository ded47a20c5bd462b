package node

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/groups"
	"github.com/sluicemq/sluice/groups/assign"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/sluicemq/sluice/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The group coordinator's runtime: one groups.Shard per partition of
// __consumer_offsets this broker serves as leader, fed from the partition
// and writing to it.
//
//	becoming leader   replay the log, log start to log end, in steps of
//	                  1 MiB (COORDINATOR_LOAD_IN_PROGRESS meanwhile),
//	                  then Loaded; the replayed tail counts as a write
//	serving           Handle/Tick in; each Ready's Write is one leader batch
//	                  (acks=all: the partition's high watermark waiters), each
//	                  Respond goes out once the high watermark has passed
//	                  every Write before it
//	losing it         (leadership, lease, epoch, a failed write or log) the
//	                  shard is dropped and every request it holds answered
//	                  NOT_COORDINATOR; the next leadership replays again
//
// Nothing here is specific to groups but the shard type and the error
// responses, so that __transaction_state can run on the same loop later.

// offsetsTopic is Kafka's internal topic of group state and offsets.
const offsetsTopic = "__consumer_offsets"

// offsetsTopicSegmentBytes is Kafka's offsets.topic.segment.bytes default.
const offsetsTopicSegmentBytes = "104857600"

// loadStepBytesDefault bounds one step of a shard's replay: a large log
// is read over many loop turns, not one (Config.coordLoadStepBytes
// overrides it in tests).
const loadStepBytesDefault = 1 << 20

// writeBatchBytesMax bounds one batch of a shard's Write: a larger Write
// (a snapshot of many groups) goes as several batches in a row, each under
// message.max.bytes.
const writeBatchBytesMax = 512 << 10

// coordinator is the node's set of coordinator shards.
type coordinator struct {
	shards map[int32]*coordShard
	// now is the last time coordNow gave the shards.
	now    time.Time
	nextID groups.RequestID
	// loadSteps counts the replay steps of every load, for tests.
	loadSteps int
	// topics is the image's topic list the shards subscribe from.
	topics groupTopicsCache
	// creating says a creation of __consumer_offsets is in flight;
	// cappedLogged that the replication factor's cap was logged.
	creating, cappedLogged bool
}

// coordShard is one loaded (or loading) shard on the partition p leads.
type coordShard struct {
	index int32
	p     *partition
	// epoch is p's leader epoch when the load began: a new epoch is a new
	// leadership, and the shard is loaded again.
	epoch   int32
	shard   *groups.Shard
	loading bool
	// readAt is the next offset to replay, loadEnd the log end when the
	// load began.
	readAt, loadEnd int64
	// writeEnd is the end of the last Write appended (the load's end
	// before any), committed how far the high watermark has passed them.
	writeEnd, committed int64
	// responds wait for committed to reach their after, in order;
	// snapshots likewise, to move the log start.
	responds  []pendingRespond
	snapshots []pendingSnapshot
	// held is every request handed to the shard and not yet answered.
	held    map[groups.RequestID]heldRequest
	timer   env.Timer
	timerAt time.Time
	// timeout fires when the first of responds has waited
	// offsets.commit.timeout.ms.
	timeout env.Timer
}

// pendingRespond is an answer waiting for the records before it: until the
// high watermark passes after, or deadline.
type pendingRespond struct {
	after    int64
	deadline time.Time
	resp     groups.Response
}

// defaultOffsetsCommitTimeout is Kafka's offsets.commit.timeout.ms.
const defaultOffsetsCommitTimeout = 5 * time.Second

type pendingSnapshot struct{ after, start int64 }

type heldRequest struct {
	req  kmsg.Request
	done func(kmsg.Response)
}

// groupClient is who sent r, as Kafka keeps it in a member's description.
func groupClient(r *request) groups.Client {
	c := groups.Client{ID: r.header.ClientID}
	if r.c != nil && r.c.c != nil {
		host := r.c.c.RemoteAddr()
		if i := strings.LastIndexByte(host, ':'); i >= 0 {
			host = host[:i]
		}
		c.Host = "/" + strings.Trim(host, "[]")
	}
	return c
}

// shardOf is the __consumer_offsets partition of a group id, and false
// when the topic does not exist yet.
func (b *Broker) shardOf(groupID string) (int32, bool) {
	t := b.image.TopicByName(offsetsTopic)
	if t == nil || len(t.Partitions) == 0 {
		return 0, false
	}
	return groups.PartitionFor(groupID, int32(len(t.Partitions))), true
}

// toShard hands req, whose groups all hash to partition index, to that
// shard and calls done with its answer, or with req's error answer:
// COORDINATOR_NOT_AVAILABLE before the topic exists, NOT_COORDINATOR where
// this broker does not lead the partition, COORDINATOR_LOAD_IN_PROGRESS
// while the shard replays.
func (b *Broker) toShard(index int32, client groups.Client, req kmsg.Request, done func(kmsg.Response)) {
	cs, code := b.shardFor(index)
	if code != nil {
		done(coordErrorResponse(req, code))
		return
	}
	b.coord.nextID++
	id := b.coord.nextID
	cs.held[id] = heldRequest{req: req, done: done}
	cs.shard.HandleFrom(b.coordNow(), id, client, req)
	b.shardReady(cs)
}

// shardFor returns the loaded shard of partition index, or the error a
// request for it gets.
func (b *Broker) shardFor(index int32) (*coordShard, *kerr.Error) {
	t := b.image.TopicByName(offsetsTopic)
	if t == nil || index < 0 || int(index) >= len(t.Partitions) {
		// This broker's image does not have the partition yet (another
		// node answered FindCoordinator from a newer image): as Kafka's
		// broker that does not own a group, NOT_COORDINATOR, so that the
		// client looks the coordinator up again. kafkajs ends a consumer on
		// COORDINATOR_NOT_AVAILABLE from JoinGroup (seen in CI).
		return nil, kerr.NotCoordinator
	}
	b.checkShard(t, index)
	cs := b.coord.shards[index]
	switch {
	case cs == nil:
		return nil, kerr.NotCoordinator
	case cs.loading:
		return nil, kerr.CoordinatorLoadInProgress
	}
	return cs, nil
}

// checkShard brings the shard of partition index in line with this
// broker's replica: dropped if it no longer serves it (or serves a new
// leadership of it), loading if it serves it and has no shard.
func (b *Broker) checkShard(t *raftmeta.Topic, index int32) {
	p := b.partitions[partitionKey{t.ID, index}]
	cs := b.coord.shards[index]
	if cs != nil && (!p.serving() || cs.p != p || cs.epoch != p.leaderEpoch) {
		b.unloadShard(cs, "this broker no longer leads the partition")
		cs = b.coord.shards[index]
	}
	if cs == nil && p.serving() && b.state == stateRunning {
		b.loadShard(index, p)
	}
}

// syncShards checks every shard against the image, after metadata
// changed what this broker leads.
func (b *Broker) syncShards() {
	t := b.image.TopicByName(offsetsTopic)
	for _, index := range sortedKeys(b.coord.shards) {
		if cs := b.coord.shards[index]; cs != nil && (t == nil || cs.p.topicID != t.ID) {
			b.unloadShard(cs, "__consumer_offsets was deleted")
		}
	}
	if t == nil {
		return
	}
	for _, mp := range t.Partitions {
		if mp.Leader == b.cfg.NodeID || b.coord.shards[mp.Index] != nil {
			b.checkShard(t, mp.Index)
		}
	}
}

// shardPartitionLost drops the shard on p, whose leadership or log went.
func (b *Broker) shardPartitionLost(p *partition) {
	if p.topic != offsetsTopic {
		return
	}
	if cs := b.coord.shards[p.index]; cs != nil && cs.p == p {
		b.unloadShard(cs, "the partition's leadership or log went")
	}
}

// coordNow is the shards' now: the monotonic clock the controller's
// sessions use (controller.go), read finely and never backwards, so that
// a wall clock stepped back does not stall group timers (initial delays,
// rebalance and session timeouts) for the length of the step, nor one
// stepped forward expire every session at once. Kafka's coordinator times
// them by delays on a monotonic timer too.
func (b *Broker) coordNow() time.Time {
	now := b.monoNow()
	if now.Before(b.coord.now) {
		return b.coord.now
	}
	b.coord.now = now
	return now
}

// groupsConfig is the configuration of the shard of partition index.
// Its settings are the broker's keys (config_groups.go); the rest is the
// runtime's.
func (b *Broker) groupsConfig(index int32) groups.Config {
	cfg := b.cfg.groupsConfig()
	cfg.Partition, cfg.Rand, cfg.Topics = index, b.env.Rand, b.groupTopics
	cfg.TopicExists = func(topic string, partition int32) bool {
		t := b.image.TopicByName(topic)
		return t != nil && partition >= 0 && int(partition) < len(t.Partitions)
	}
	return cfg
}

// groupTopics lists the image's topics for KIP-848 subscriptions, by name.
// Every consumer-group heartbeat asks, so the list is made once per image
// (the shards only read it).
func (b *Broker) groupTopics() []groups.TopicInfo {
	if c := &b.coord.topics; c.image == b.image && c.applied == b.image.Applied {
		return c.list
	}
	names := b.image.TopicNames()
	out := make([]groups.TopicInfo, 0, len(names))
	for _, name := range names {
		t := b.image.TopicByName(name)
		out = append(out, groups.TopicInfo{Name: name, ID: assign.TopicID(t.ID), Partitions: int32(len(t.Partitions))})
	}
	b.coord.topics = groupTopicsCache{image: b.image, applied: b.image.Applied, list: out}
	return out
}

// groupTopicsCache is groupTopics' list and the image it was made from.
type groupTopicsCache struct {
	image   *raftmeta.Image
	applied uint64
	list    []groups.TopicInfo
}

// loadShard starts replaying p into a new shard.
func (b *Broker) loadShard(index int32, p *partition) {
	cs := &coordShard{index: index, p: p, epoch: p.leaderEpoch, shard: groups.NewShard(b.groupsConfig(index)),
		loading: true, readAt: p.log.LogStartOffset(), loadEnd: p.log.LogEndOffset(), committed: p.hw,
		held: map[groups.RequestID]heldRequest{}}
	cs.writeEnd = cs.loadEnd
	b.coord.shards[index] = cs
	b.env.Log.Debug("loading group coordinator", "partition", index, "leader_epoch", cs.epoch,
		"log_start", cs.readAt, "log_end", cs.loadEnd)
	b.replayStep(cs)
}

// replayStep replays up to loadStepBytesDefault of cs's partition, and posts the
// next step, or ends the load.
func (b *Broker) replayStep(cs *coordShard) {
	if b.coord.shards[cs.index] != cs {
		return
	}
	if cs.readAt < cs.loadEnd {
		if err := b.replayChunk(cs); err != nil {
			b.env.Log.Error("loading group coordinator failed", "partition", cs.index, "offset", cs.readAt, "err", err)
			b.unloadShard(cs, "its load failed")
			return
		}
		if cs.readAt < cs.loadEnd {
			b.env.Loop.Post(func() { b.replayStep(cs) })
			return
		}
	}
	cs.shard.Loaded(b.coordNow())
	cs.loading = false
	b.env.Log.Info("group coordinator loaded", "partition", cs.index, "leader_epoch", cs.epoch,
		"log_start", cs.p.log.LogStartOffset(), "log_end", cs.loadEnd)
	// The replayed tail is like a Write: what the shard answers waits for
	// the high watermark to reach it.
	b.awaitShardWrite(cs, cs.loadEnd)
	b.shardReady(cs)
}

// replayChunk reads the batches from cs.readAt, at most loadStepBytes (at
// least one batch), and replays their records.
func (b *Broker) replayChunk(cs *coordShard) error {
	step := b.cfg.coordLoadStepBytes
	if step <= 0 {
		step = loadStepBytesDefault
	}
	b.coord.loadSteps++
	recs, err := cs.p.log.Read(cs.readAt, step, cs.loadEnd, true)
	if err != nil {
		return err
	}
	if len(recs.Chunks) == 0 {
		return fmt.Errorf("no batch at offset %d below the load's end %d", cs.readAt, cs.loadEnd)
	}
	raw, err := recs.AppendTo(nil)
	if err != nil {
		return err
	}
	records, err := wire.DecodeBatches(raw)
	if err != nil {
		return err
	}
	for _, r := range records {
		if r.Offset < cs.readAt {
			continue // a log start inside a batch
		}
		if err := cs.shard.Replay(r.Offset, r.Key, r.Value); err != nil {
			// Kafka's loader skips what it cannot read, too.
			b.env.Log.Warn("skipping an unreadable record of __consumer_offsets", "partition", cs.index, "offset", r.Offset, "err", err)
		}
	}
	cs.readAt = recs.NextOffset()
	return nil
}

// shardReady does what cs's shard asks: appends its Writes, queues its
// Responds behind them, arms its next Tick, and sends what is committed.
func (b *Broker) shardReady(cs *coordShard) {
	rd := cs.shard.Ready()
	for _, e := range rd.Effects {
		if b.coord.shards[cs.index] != cs {
			return // a Write failed: the shard is gone, its requests answered
		}
		if e.Respond != nil {
			after := cs.writeEnd
			if b.cfg.SabotageCoordinatorEarlyAck {
				after = cs.committed
			}
			deadline := b.coordNow().Add(orDefault(b.cfg.OffsetsCommitTimeout, defaultOffsetsCommitTimeout))
			cs.responds = append(cs.responds, pendingRespond{after: after, deadline: deadline, resp: *e.Respond})
			continue
		}
		b.shardWrite(cs, e)
	}
	if b.coord.shards[cs.index] != cs {
		return
	}
	b.armShardTimer(cs, rd.Deadline)
	b.flushShard(cs)
}

// shardWrite appends one Write as leader batches, as an acks=all produce
// does; a failure drops the shard.
func (b *Broker) shardWrite(cs *coordShard, e groups.Effect) {
	p := cs.p
	if len(e.Write) == 0 {
		if e.SnapshotStart {
			cs.snapshots = append(cs.snapshots, pendingSnapshot{after: cs.writeEnd, start: cs.writeEnd})
		}
		return
	}
	switch {
	case !p.serving():
		b.unloadShard(cs, "a write found the partition no longer led")
		return
	case p.rep.UnderMinISR():
		b.unloadShard(cs, "a write found fewer in-sync replicas than min.insync.replicas")
		return
	}
	now := b.env.Clock.Now().UnixMilli()
	first := int64(-1)
	for _, batch := range writeBatches(e.Write, now) {
		res, err := p.log.AppendLeader(batch.bytes, p.leaderEpoch)
		if err != nil {
			b.env.Log.Error("group coordinator write failed", "partition", cs.index, "err", err)
			b.unloadShard(cs, "a write failed")
			return
		}
		if first < 0 {
			first = res.BaseOffset
		}
		end := res.LastOffset + 1
		p.appended(end, int64(batch.count))
		cs.writeEnd = end
	}
	b.wakeReplicaFetches(p)
	if e.SnapshotStart {
		cs.snapshots = append(cs.snapshots, pendingSnapshot{after: cs.writeEnd, start: first})
	}
	b.awaitShardWrite(cs, cs.writeEnd)
}

type writeBatch struct {
	bytes []byte
	count int
}

// writeBatches encodes a Write as batches of at most writeBatchBytesMax of
// keys and values each (one batch, unless it is large).
func writeBatches(write []groups.Record, nowMs int64) []writeBatch {
	var out []writeBatch
	var recs []wire.Record
	size := 0
	flush := func() {
		if len(recs) > 0 {
			out = append(out, writeBatch{bytes: wire.AppendBatch(nil, wire.NoProducer, recs), count: len(recs)})
			recs, size = nil, 0
		}
	}
	for _, r := range write {
		n := len(r.Key) + len(r.Value) + 32
		if size+n > writeBatchBytesMax {
			flush()
		}
		recs = append(recs, wire.Record{Key: r.Key, Value: r.Value, Timestamp: nowMs})
		size += n
	}
	flush()
	return out
}

// awaitShardWrite counts cs's records before end committed once the high
// watermark reaches end; a wait that fails (leadership moved, the log
// failed, the ISR fell below min.insync.replicas) drops the shard.
func (b *Broker) awaitShardWrite(cs *coordShard, end int64) {
	cs.p.whenReplicated(end, func(err error) {
		if b.coord.shards[cs.index] != cs {
			return
		}
		if err != nil {
			b.env.Log.Info("group coordinator write not replicated", "partition", cs.index, "end", end, "err", err)
			b.unloadShard(cs, "a write was not replicated")
			return
		}
		cs.committed = max(cs.committed, end)
		b.flushShard(cs)
	})
}

// flushShard sends the responses whose Writes are committed and moves
// the log start to committed snapshots.
func (b *Broker) flushShard(cs *coordShard) {
	n := 0
	for n < len(cs.snapshots) && cs.snapshots[n].after <= cs.committed {
		b.moveLogStart(cs, cs.snapshots[n].start)
		n++
	}
	cs.snapshots = cs.snapshots[n:]
	n = 0
	for n < len(cs.responds) && cs.responds[n].after <= cs.committed {
		n++
	}
	ready := cs.responds[:n:n]
	cs.responds = cs.responds[n:]
	for _, pr := range ready {
		if b.coord.shards[cs.index] != cs {
			return // an answer's next request unloaded it: unloadShard answered the rest
		}
		h, ok := cs.held[pr.resp.ID]
		if !ok {
			panic(fmt.Sprintf("node: group coordinator %d answered request %d, which it does not hold", cs.index, pr.resp.ID))
		}
		delete(cs.held, pr.resp.ID)
		if pr.resp.Err != nil {
			b.env.Log.Error("group coordinator could not answer", "partition", cs.index, "err", pr.resp.Err)
			h.done(coordErrorResponse(h.req, kerr.UnknownServerError))
			continue
		}
		h.done(pr.resp.Resp)
	}
	if b.coord.shards[cs.index] == cs {
		b.armCommitTimeout(cs)
	}
}

// armCommitTimeout makes sure a timer waits for the first held answer's
// deadline.
func (b *Broker) armCommitTimeout(cs *coordShard) {
	if cs.timeout != nil || len(cs.responds) == 0 {
		return
	}
	cs.timeout = b.env.Clock.AfterFunc(max(cs.responds[0].deadline.Sub(b.coordNow()), 0), func() {
		cs.timeout = nil
		if b.coord.shards[cs.index] != cs {
			return
		}
		b.expireResponds(cs)
	})
}

// expireResponds answers COORDINATOR_NOT_AVAILABLE to every held answer
// whose records were not replicated within offsets.commit.timeout.ms: as
// Kafka does, the client is told to retry, though the records may still
// commit (the shard took them as written, and the next leader replays
// them if they did). Deadlines come in the order of responds, so the
// expired answers are its first.
func (b *Broker) expireResponds(cs *coordShard) {
	now := b.coordNow()
	n := 0
	for n < len(cs.responds) && !cs.responds[n].deadline.After(now) {
		n++
	}
	expired := cs.responds[:n:n]
	cs.responds = cs.responds[n:]
	if n > 0 {
		b.env.Log.Warn("group coordinator answers timed out waiting for replication", "partition", cs.index,
			"answers", n, "committed", cs.committed, "written", cs.writeEnd)
	}
	for _, pr := range expired {
		if b.coord.shards[cs.index] != cs {
			return
		}
		h, ok := cs.held[pr.resp.ID]
		if !ok {
			panic(fmt.Sprintf("node: group coordinator %d timed out request %d, which it does not hold", cs.index, pr.resp.ID))
		}
		delete(cs.held, pr.resp.ID)
		h.done(coordErrorResponse(h.req, kerr.CoordinatorNotAvailable))
	}
	if b.coord.shards[cs.index] == cs {
		b.armCommitTimeout(cs)
	}
}

// moveLogStart moves cs's partition's log start to a committed snapshot's
// first offset, as DeleteRecords does: replay from there gives the state
// replay of the whole log gives.
func (b *Broker) moveLogStart(cs *coordShard, start int64) {
	p := cs.p
	if start <= p.log.LogStartOffset() || start > p.highWatermark() {
		return
	}
	if err := p.log.DeleteRecords(start); err != nil {
		b.env.Log.Warn("moving the log start to a group coordinator snapshot failed", "partition", cs.index, "offset", start, "err", err)
		return
	}
	b.env.Log.Debug("group coordinator snapshot committed", "partition", cs.index, "log_start", start)
}

// armShardTimer schedules cs's next Tick at deadline (zero: none).
func (b *Broker) armShardTimer(cs *coordShard, deadline time.Time) {
	if cs.timer != nil && cs.timerAt.Equal(deadline) {
		return
	}
	if cs.timer != nil {
		cs.timer.Stop()
		cs.timer = nil
	}
	cs.timerAt = deadline
	if deadline.IsZero() {
		return
	}
	cs.timer = b.env.Clock.AfterFunc(max(deadline.Sub(b.coordNow()), 0), func() {
		if b.coord.shards[cs.index] != cs {
			return
		}
		cs.timer, cs.timerAt = nil, time.Time{}
		if !cs.p.serving() || cs.p.leaderEpoch != cs.epoch {
			// Its lease ran out with no metadata to say so: what the
			// timer would answer is for the next leader.
			b.unloadShard(cs, "this broker no longer serves the partition")
			return
		}
		cs.shard.Tick(b.coordNow())
		b.shardReady(cs)
	})
}

// unloadShard drops cs and answers every request it holds
// NOT_COORDINATOR: the clients find the coordinator again and retry, and
// the next leader replays what was committed.
func (b *Broker) unloadShard(cs *coordShard, why string) {
	if b.coord.shards[cs.index] != cs {
		return
	}
	delete(b.coord.shards, cs.index)
	if cs.timer != nil {
		cs.timer.Stop()
		cs.timer = nil
	}
	if cs.timeout != nil {
		cs.timeout.Stop()
		cs.timeout = nil
	}
	b.env.Log.Info("unloading group coordinator", "partition", cs.index, "leader_epoch", cs.epoch, "why", why, "held", len(cs.held))
	held := cs.held
	cs.held = nil
	cs.responds, cs.snapshots = nil, nil
	for _, id := range sortedKeys(held) {
		h := held[id]
		h.done(coordErrorResponse(h.req, kerr.NotCoordinator))
	}
}

// unloadShards drops every shard.
func (b *Broker) unloadShards(why string) {
	for _, index := range sortedKeys(b.coord.shards) {
		if cs := b.coord.shards[index]; cs != nil {
			b.unloadShard(cs, why)
		}
	}
}

// shardsTopicDeleted tells every loaded shard that a topic is gone, so its
// groups' offsets of it go too.
func (b *Broker) shardsTopicDeleted(name string) {
	for _, index := range sortedKeys(b.coord.shards) {
		if cs := b.coord.shards[index]; cs != nil && !cs.loading {
			cs.shard.TopicsDeleted([]string{name})
			b.shardReady(cs)
		}
	}
}

// checkedConfigs is what planTopic validates of a spec's configs:
// __consumer_offsets is created with cleanup.policy=compact, as Kafka's
// tools expect, though Sluice does not compact yet (its retention is off
// and the shards' snapshots bound it), which no other topic may ask for.
func checkedConfigs(spec topicSpec) map[string]string {
	if spec.name != offsetsTopic || spec.configs["cleanup.policy"] != "compact" {
		return spec.configs
	}
	m := copyMap(spec.configs)
	delete(m, "cleanup.policy")
	return m
}

// offsetsTopicConfigs are __consumer_offsets' topic configs.
func offsetsTopicConfigs() map[string]string {
	return map[string]string{"cleanup.policy": "compact", "retention.ms": "-1", "retention.bytes": "-1",
		"segment.bytes": offsetsTopicSegmentBytes}
}

// createOffsetsTopic creates __consumer_offsets, unless a creation is in
// flight or fewer brokers are registered than its replication factor
// (offsets.topic.replication.factor, capped once, with a log line, at the
// brokers the cluster is configured to have): a cluster whose third node
// starts late waits for it rather than create the topic with two replicas.
func (b *Broker) createOffsetsTopic() {
	if b.coord.creating {
		return
	}
	rf := b.cfg.OffsetsTopicReplicationFactor
	capped := int(rf) > b.cfg.BrokersMax()
	if capped {
		rf = int16(b.cfg.BrokersMax())
	}
	live := 0
	for _, id := range b.image.BrokerIDs() {
		if !b.image.Brokers[id].Fenced {
			live++
		}
	}
	if live < int(rf) {
		b.env.Log.Debug("waiting for brokers to create __consumer_offsets", "brokers", live, "replication_factor", rf)
		return
	}
	if capped && !b.coord.cappedLogged {
		b.coord.cappedLogged = true
		b.env.Log.Info("creating __consumer_offsets with fewer replicas than offsets.topic.replication.factor: "+
			"the cluster is configured to have no more brokers", "offsets.topic.replication.factor", b.cfg.OffsetsTopicReplicationFactor,
			"replication_factor", rf, "brokers_max", b.cfg.BrokersMax())
	}
	spec := topicSpec{name: offsetsTopic, partitions: b.cfg.OffsetsTopicNumPartitions, replicationFactor: rf,
		configs: offsetsTopicConfigs()}
	b.coord.creating = true
	b.createInternalTopic(spec, func(code *kerr.Error, msg string) {
		b.coord.creating = false
		if code != nil && code != kerr.TopicAlreadyExists {
			b.env.Log.Warn("creating __consumer_offsets failed", "err", code, "msg", msg)
		}
	})
}

// createInternalTopic creates one topic as spec says: here on the active
// controller, else by a CreateTopics forwarded to it.
func (b *Broker) createInternalTopic(spec topicSpec, done func(*kerr.Error, string)) {
	if b.meta.activeTerm != 0 {
		b.createTopics([]topicSpec{spec}, false, func(res []topicResult) { done(res[0].err, res[0].msg) })
		return
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(controllerRequestTimeout / time.Millisecond)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = spec.name, spec.partitions, spec.replicationFactor
	for _, name := range sortedKeys(spec.configs) {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = name, kmsg.StringPtr(spec.configs[name])
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	b.forwardRequest(req, func(resp kmsg.Response, err error) {
		if err != nil {
			done(kerr.LeaderNotAvailable, err.Error())
			return
		}
		topics := resp.(*kmsg.CreateTopicsResponse).Topics
		if len(topics) != 1 || topics[0].ErrorCode != 0 {
			code := kerr.UnknownServerError
			if len(topics) == 1 {
				if e, ok := kerr.ErrorForCode(topics[0].ErrorCode).(*kerr.Error); ok {
					code = e
				}
			}
			done(code, "")
			return
		}
		done(nil, "")
	})
}
