package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicemq/sluice/internal/invariants"
	"github.com/sluicemq/sluice/isr"
	"github.com/sluicemq/sluice/log"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/sluicemq/sluice/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A follower's side of replication: one fetcher per leader broker, over one
// connection made with wire's client, covering every partition this broker
// follows there. A round is one request: the epoch queries
// (OffsetForLeaderEpoch) of partitions that took a new leader or epoch, if
// any, else one Fetch of every partition whose truncation is done. The next
// round starts when the last one's records are durable, so a fetch offset
// always names synced data (replication.go's flush policy).

// fetcher replicates the partitions one leader serves to this broker.
type fetcher struct {
	leader int32
	parts  map[partitionKey]*partition
	client *wire.Client
	// clientEpoch is the leader's registration epoch when client was
	// dialed: a leader that restarted since left the connection dead
	// without a word (a crash sends no FIN), so it is dialed afresh.
	clientEpoch int64
	// busy says a round, a dial or a backoff is under way; a kick then
	// waits for it to end.
	busy bool
	// held are partitions whose last fetch failed, left out of rounds until
	// the backoff timer releases them; refused counts each partition's
	// refusals in a row, which lengthen its backoff.
	held    map[partitionKey]bool
	refused map[partitionKey]int
}

// firstRefusalBackoff is the backoff after a leader's first refusal of a
// partition; it doubles with each refusal in a row up to
// replica.fetch.backoff.ms. Most refusals are the metadata's lag (a
// leader that has not yet applied the creation or the leadership its
// follower acts on), gone within milliseconds: a whole second's wait held
// the first acks=all produce to every new topic for that second.
const firstRefusalBackoff = 50 * time.Millisecond

// Fetch sizes: Kafka's replica.fetch.max.bytes and
// replica.fetch.response.max.bytes defaults.
const (
	replicaFetchPartitionMaxBytes = 1 << 20
	replicaFetchResponseMaxBytes  = 10 << 20
)

// assignFetcher puts p in the fetcher of the leader it follows, or in
// none.
func (b *Broker) assignFetcher(p *partition) {
	key := partitionKey{p.topicID, p.index}
	leader := isr.NoLeader
	if p.rep.Role() == isr.RoleFollower && b.partitions[key] == p {
		leader = p.rep.Metadata().Leader
	}
	// p is in the parts of the fetcher it was last given to, if any: every
	// replica step comes here, and looking through every fetcher (sorted,
	// for determinism) each time was 2.6% of a node under offset commits.
	if f := p.fetcher; f != nil && f.leader != leader {
		if f.parts[key] == p {
			delete(f.parts, key)
		}
		p.fetcher = nil
	}
	if leader == isr.NoLeader {
		return
	}
	f := b.fetchers[leader]
	if f == nil {
		f = &fetcher{leader: leader, parts: map[partitionKey]*partition{}, held: map[partitionKey]bool{}, refused: map[partitionKey]int{}}
		b.fetchers[leader] = f
	}
	f.parts[key] = p
	p.fetcher = f
	if invariants.Enabled {
		for _, id := range sortedKeys(b.fetchers) {
			if other := b.fetchers[id]; other != f && other.parts[key] == p {
				invariants.Panicf("partition %s-%d is followed from leaders %d and %d at once", p.topic, p.index, id, leader)
			}
		}
	}
	b.kickFetcher(f)
}

// kickFetcher starts f's next round unless one is under way.
func (b *Broker) kickFetcher(f *fetcher) {
	b.dropStaleConnection(f)
	if f.busy || b.state == stateStopping || b.state == stateStopped {
		return
	}
	if len(f.parts) == 0 {
		if f.client != nil {
			f.client.Close()
		}
		delete(b.fetchers, f.leader)
		return
	}
	f.busy = true
	b.fetcherClient(f, func(c *wire.Client, err error) {
		if err != nil {
			b.env.Log.Debug("follower cannot reach its leader", "node", b.cfg.NodeID, "leader", f.leader, "err", err)
			b.fetcherBackoff(f)
			return
		}
		if b.sendEpochQueries(f, c) || b.sendFetch(f, c) {
			return
		}
		f.busy = false // nothing to fetch: a kick comes with the next change
	})
}

// dropStaleConnection closes f's connection if its leader registered
// again since it was made; the round waiting on it ends with the close.
func (b *Broker) dropStaleConnection(f *fetcher) {
	if f.client != nil && b.image.Brokers[f.leader].Epoch != f.clientEpoch {
		f.client.Close()
		f.client = nil
	}
}

// leaderRegistered dials afresh the fetcher of a broker that registered
// again (a restart).
func (b *Broker) leaderRegistered(id int32) {
	if f := b.fetchers[id]; f != nil {
		b.kickFetcher(f)
	}
}

// fetcherRequest sends one round's request on c, and fails it (closing
// the connection) if no answer comes within replica.socket.timeout.ms past
// the leader's own wait.
func (b *Broker) fetcherRequest(f *fetcher, c *wire.Client, req kmsg.Request, done func(kmsg.Response, error)) {
	answered := false
	timer := b.env.Clock.AfterFunc(b.cfg.ReplicaFetchWaitMax+b.cfg.ReplicaSocketTimeout, func() {
		if !answered {
			b.env.Log.Debug("follower request unanswered; reconnecting", "node", b.cfg.NodeID, "leader", f.leader)
			c.Close() // done runs with the close
		}
	})
	c.Request(req, func(resp kmsg.Response, err error) {
		answered = true
		timer.Stop()
		done(resp, err)
	})
}

// fetcherBackoff ends f's round and starts the next after
// replica.fetch.backoff.ms, on a new connection.
func (b *Broker) fetcherBackoff(f *fetcher) {
	if f.client != nil {
		f.client.Close()
		f.client = nil
	}
	b.env.Clock.AfterFunc(b.cfg.ReplicaFetchBackoff, func() {
		f.busy = false
		b.kickFetcher(f)
	})
}

// fetcherClient calls done with f's connection to its leader's
// inter-broker listener, dialing it if need be.
func (b *Broker) fetcherClient(f *fetcher, done func(*wire.Client, error)) {
	if f.client != nil {
		c := f.client
		b.env.Loop.Post(func() { done(c, nil) })
		return
	}
	addr, ok := b.interBrokerAddr(f.leader)
	if !ok {
		b.env.Loop.Post(func() { done(nil, fmt.Errorf("node: no address for broker %d", f.leader)) })
		return
	}
	wire.DialRecycling(b.env.Net, addr, fmt.Sprintf("sluice-replica-%d", b.cfg.NodeID), func(c *wire.Client, err error) {
		if err != nil {
			done(nil, fmt.Errorf("node: dial broker %d at %s: %w", f.leader, addr, err))
			return
		}
		f.client, f.clientEpoch = c, b.image.Brokers[f.leader].Epoch
		done(c, nil)
	})
}

// interBrokerAddr is broker id's address on inter.broker.listener.name,
// else its first listener.
func (b *Broker) interBrokerAddr(id int32) (string, bool) {
	br, ok := b.image.Brokers[id]
	if !ok || len(br.Listeners) == 0 {
		return "", false
	}
	l := br.Listeners[0]
	for _, candidate := range br.Listeners {
		if candidate.Name == b.cfg.InterBrokerListenerName {
			l = candidate
		}
	}
	return joinHostPort(l.Host, l.Port), true
}

// fetcherParts are f's partitions in key order (the order of requests).
func (b *Broker) fetcherParts(f *fetcher) []*partition {
	keys := sortedPartitionKeysOf(f.parts)
	out := make([]*partition, 0, len(keys))
	for _, key := range keys {
		if p := f.parts[key]; b.partitions[key] == p && !f.held[key] {
			out = append(out, p)
		}
	}
	return out
}

// sendEpochQueries sends the epoch queries of f's partitions that have
// one, and reports whether there were any.
func (b *Broker) sendEpochQueries(f *fetcher, c *wire.Client) bool {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = 4
	req.ReplicaID = b.cfg.NodeID
	var asked []*partition
	var queries []isr.EpochQuery
	for _, p := range b.fetcherParts(f) {
		if p.query == nil {
			continue
		}
		q := *p.query
		p.query = nil
		asked, queries = append(asked, p), append(queries, q)
		if len(req.Topics) == 0 || req.Topics[len(req.Topics)-1].Topic != p.topic {
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = p.topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = p.index, q.CurrentLeaderEpoch, q.Epoch
		rt := &req.Topics[len(req.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	if len(asked) == 0 {
		return false
	}
	b.fetcherRequest(f, c, req, func(resp kmsg.Response, err error) {
		if err != nil {
			for i, p := range asked {
				p.query = &queries[i] // asked again on the next connection
			}
			b.fetcherBackoff(f)
			return
		}
		b.epochQueriesAnswered(f, asked, queries, resp.(*kmsg.OffsetForLeaderEpochResponse))
		f.busy = false
		b.kickFetcher(f)
	})
	return true
}

// epochQueriesAnswered steps each asked partition's replica with the
// leader's answer and its own log's end for the answered epoch.
func (b *Broker) epochQueriesAnswered(f *fetcher, asked []*partition, queries []isr.EpochQuery, resp *kmsg.OffsetForLeaderEpochResponse) {
	answers := map[partitionKey]kmsg.OffsetForLeaderEpochResponseTopicPartition{}
	for _, rt := range resp.Topics {
		t := b.image.TopicByName(rt.Topic)
		if t == nil {
			continue
		}
		for _, rp := range rt.Partitions {
			answers[partitionKey{t.ID, rp.Partition}] = rp
		}
	}
	for i, p := range asked {
		key := partitionKey{p.topicID, p.index}
		rp, ok := answers[key]
		if b.partitions[key] != p || p.rep.Metadata().LeaderEpoch != queries[i].CurrentLeaderEpoch {
			continue // the partition moved on; its new role asks afresh
		}
		if !ok || rp.ErrorCode != 0 {
			code := kerr.UnknownServerError
			if ok {
				code = kerr.ErrorForCode(rp.ErrorCode).(*kerr.Error)
			}
			b.env.Log.Debug("epoch query refused", "topic", p.topic, "partition", p.index, "leader", f.leader, "err", code)
			b.countFenced(code)
			p.query = &queries[i]
			b.holdPartition(f, key)
			continue
		}
		delete(f.refused, key)
		localEpoch, localEnd, found := p.log.EndOffsetForEpoch(rp.LeaderEpoch)
		if !found {
			localEpoch, localEnd = -1, -1
		}
		b.stepReplica(p, isr.Message{Type: isr.MsgEpochEnd, Epoch: rp.LeaderEpoch, Offset: rp.EndOffset,
			LocalEpoch: localEpoch, LocalOffset: localEnd})
	}
}

// holdPartition leaves a partition out of f's rounds for a while: its
// leader refused it (not the leader yet, an epoch the two disagree on
// until the metadata settles), 50 ms after the first refusal, doubling
// with each refusal in a row up to replica.fetch.backoff.ms.
func (b *Broker) holdPartition(f *fetcher, key partitionKey) {
	if f.held[key] {
		return
	}
	f.held[key] = true
	backoff := b.cfg.ReplicaFetchBackoff
	if n := f.refused[key]; n < 8 {
		backoff = min(backoff, firstRefusalBackoff<<n)
	}
	f.refused[key]++
	b.env.Clock.AfterFunc(backoff, func() {
		delete(f.held, key)
		b.kickFetcher(f)
	})
}

// sendFetch sends one Fetch of f's partitions that are fetching, and
// reports whether there were any.
func (b *Broker) sendFetch(f *fetcher, c *wire.Client) bool {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 18
	req.ReplicaID = -1
	req.ReplicaState.ID, req.ReplicaState.Epoch = b.cfg.NodeID, b.brokerEpoch
	req.MaxWaitMillis = int32(b.cfg.ReplicaFetchWaitMax.Milliseconds())
	req.MinBytes, req.MaxBytes = 1, replicaFetchResponseMaxBytes
	req.SessionID, req.SessionEpoch = 0, -1
	var sent []*partition
	var epochs []int32
	for _, p := range b.fetcherParts(f) {
		if !p.fetching || p.truncating {
			continue
		}
		if len(req.Topics) == 0 || req.Topics[len(req.Topics)-1].TopicID != p.topicID {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = p.topic, p.topicID
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p.index
		rp.CurrentLeaderEpoch = p.rep.Metadata().LeaderEpoch
		rp.FetchOffset = p.log.LogEndOffset()
		rp.LastFetchedEpoch = p.local().LatestEpoch
		rp.LogStartOffset = p.log.LogStartOffset()
		rp.PartitionMaxBytes = replicaFetchPartitionMaxBytes
		rp.HighWatermark = p.hw
		rt := &req.Topics[len(req.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
		sent, epochs = append(sent, p), append(epochs, rp.CurrentLeaderEpoch)
	}
	if len(sent) == 0 {
		return false
	}
	offsets := make([]int64, len(sent))
	for i, p := range sent {
		offsets[i] = p.log.LogEndOffset()
	}
	b.fetcherRequest(f, c, req, func(resp kmsg.Response, err error) {
		if err != nil {
			b.fetcherBackoff(f)
			return
		}
		b.fetched(f, sent, epochs, offsets, resp.(*kmsg.FetchResponse))
	})
	return true
}

// fetched appends what a fetch brought, and starts the next round once it
// is durable.
func (b *Broker) fetched(f *fetcher, sent []*partition, epochs []int32, offsets []int64, resp *kmsg.FetchResponse) {
	answers := map[partitionKey]*kmsg.FetchResponseTopicPartition{}
	for t := range resp.Topics {
		for i := range resp.Topics[t].Partitions {
			rp := &resp.Topics[t].Partitions[i]
			answers[partitionKey{raftmeta.TopicID(resp.Topics[t].TopicID), rp.Partition}] = rp
		}
	}
	all := newJoin(func(error) {
		f.busy = false
		b.kickFetcher(f)
	})
	if resp.ErrorCode != 0 {
		b.env.Log.Debug("follower fetch refused", "node", b.cfg.NodeID, "leader", f.leader, "err", kerr.ErrorForCode(resp.ErrorCode))
		for _, p := range sent {
			b.holdPartition(f, partitionKey{p.topicID, p.index})
		}
	}
	for i, p := range sent {
		key := partitionKey{p.topicID, p.index}
		rp := answers[key]
		if rp == nil || b.partitions[key] != p || !p.fetching || p.rep.Metadata().LeaderEpoch != epochs[i] ||
			p.log.LogEndOffset() != offsets[i] {
			continue // not answered, or the partition moved on meanwhile
		}
		b.fetchedPartition(f, p, rp, all.add())
	}
	all.wait()
}

// fetchedPartition appends one partition's records and tells its replica
// the leader's high watermark; done runs once they are durable.
func (b *Broker) fetchedPartition(f *fetcher, p *partition, rp *kmsg.FetchResponseTopicPartition, done func(error)) {
	key := partitionKey{p.topicID, p.index}
	switch code := kerr.ErrorForCode(rp.ErrorCode); {
	case rp.ErrorCode == 0:
		delete(f.refused, key)
	case code == kerr.OffsetOutOfRange && p.log.LogEndOffset() < rp.LogStartOffset:
		// The leader's retention passed this follower's log end: start
		// the log afresh at the leader's start.
		b.env.Log.Info("follower log behind its leader's start; starting over", "topic", p.topic, "partition", p.index,
			"log_end", p.log.LogEndOffset(), "leader_log_start", rp.LogStartOffset)
		if err := p.log.TruncateFullyAndStartAt(rp.LogStartOffset); err != nil {
			b.partitionFailed(p, err)
			done(nil)
			return
		}
		p.hw = max(p.hw, p.log.LogStartOffset())
		p.truncating = true
		p.log.Ready(func(err error) {
			p.truncating = false
			if err != nil {
				b.partitionFailed(p, err)
			} else {
				b.localMoved(p)
			}
			done(nil)
		})
		return
	default:
		b.env.Log.Debug("follower fetch refused", "topic", p.topic, "partition", p.index, "leader", f.leader, "err", code)
		b.countFenced(code)
		b.holdPartition(f, key)
		done(nil)
		return
	}
	var appended int64
	if len(rp.RecordBatches) > 0 {
		if invariants.Enabled {
			checkServedEpochs(p, f.leader, rp.RecordBatches)
		}
		res, err := p.log.AppendFollower(rp.RecordBatches)
		if err != nil {
			b.followerAppendFailed(f, p, err)
			done(nil)
			return
		}
		if res.LastOffset >= 0 {
			appended = res.LastOffset - res.BaseOffset + 1
		}
		b.wakeReplicaFetches(p)
	}
	b.stepReplica(p, isr.Message{Type: isr.MsgFetched, Offset: rp.HighWatermark})
	if p.pageCache() {
		// Kafka's mode: what is appended counts at once; the log syncs
		// by its own policy.
		if appended > 0 {
			p.appended(p.log.LogEndOffset(), appended)
		}
		done(nil)
		return
	}
	p.log.Flush(p.log.LogEndOffset(), func(err error) {
		if err != nil {
			b.partitionFailed(p, err)
		} else {
			b.localMoved(p)
		}
		done(nil)
	})
}

// checkServedEpochs asserts the leader's half of epoch fencing (KIP-101):
// a fetch made at leader epoch E is answered with records only by the
// leader of epoch E, and its log holds no batch of a later epoch. A batch
// stamped after the epoch this follower fetched at means a leader of a
// later epoch served a stale fetch, so a follower that missed a leader
// change appended without truncating first (its log may hold another
// leader's records below them).
func checkServedEpochs(p *partition, leader int32, batches []byte) {
	const epochEnd = 16 // base offset 8, length 4, partition leader epoch 4
	fetchedAt := p.rep.Metadata().LeaderEpoch
	for len(batches) >= epochEnd {
		if epoch := int32(binary.BigEndian.Uint32(batches[12:epochEnd])); epoch > fetchedAt {
			invariants.Panicf("partition %s-%d: broker %d answered a fetch at leader epoch %d with a batch of epoch %d at offset %d",
				p.topic, p.index, leader, fetchedAt, epoch, int64(binary.BigEndian.Uint64(batches[:8])))
		}
		next := 12 + int(binary.BigEndian.Uint32(batches[8:12]))
		if next <= 12 || next > len(batches) {
			return
		}
		batches = batches[next:]
	}
}

// followerAppendFailed handles batches the log refused: batches that do
// not continue the log (a leader whose log changed under this follower)
// send it back to the epoch query; a storage failure takes the partition
// offline; a batch that fails its checks (damaged on the way or on the
// leader's disk) is fetched again after the backoff.
func (b *Broker) followerAppendFailed(f *fetcher, p *partition, err error) {
	key := partitionKey{p.topicID, p.index}
	switch code := log.ErrorCode(err); {
	case errors.Is(err, log.ErrUnexpectedOffset):
		b.env.Log.Warn("follower append refused; reconciling with the leader again", "topic", p.topic, "partition", p.index,
			"leader", f.leader, "err", err)
		b.holdPartition(f, key)
		p.rep.Restart()
		b.replicaReady(p)
	case code == kerr.KafkaStorageError || code == kerr.UnknownServerError:
		b.partitionFailed(p, err)
	default:
		b.env.Log.Warn("follower append refused; fetching again", "topic", p.topic, "partition", p.index, "leader", f.leader, "err", err)
		b.holdPartition(f, key)
	}
}

// countFenced counts a leader's answer that the epochs disagree.
func (b *Broker) countFenced(code error) {
	if code == kerr.FencedLeaderEpoch || code == kerr.UnknownLeaderEpoch {
		b.replStats.FencedFetches++
	}
}

// wakeReplicaFetches wakes the followers' fetches parked on p: its log
// grew.
func (b *Broker) wakeReplicaFetches(p *partition) {
	for _, w := range slices.Clone(p.watchers) {
		if w.replica >= 0 {
			w.wake()
		}
	}
}

// stopFetchers closes every fetcher's connection.
func (b *Broker) stopFetchers() {
	for _, id := range sortedKeys(b.fetchers) {
		if c := b.fetchers[id].client; c != nil {
			c.Close()
		}
	}
	b.fetchers = map[int32]*fetcher{}
}
