package node

import (
	"slices"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/isr"
	"github.com/sluicemq/sluice/log"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch, versions 4-18 (Kafka 4 removed 0-3 with message formats v0 and v1).
//
//   - Reads only below the high watermark (a follower replica's fetch:
//     below the log end); a fetch offset between the high watermark and
//     the log end returns nothing, one outside [log start, log end] is
//     OFFSET_OUT_OF_RANGE. READ_COMMITTED reads to the last stable offset,
//     which equals the high watermark while transactions are not served.
//   - Sizes: PartitionMaxBytes per partition, MaxBytes (v3+) for the whole
//     response, and at least one whole batch from the first partition that
//     has data even when it is larger than both (KIP-74), so that an
//     oversized batch never stalls a consumer.
//   - Long polling: when fewer than MinBytes are available the request
//     parks until a watched partition's high watermark moves (then it reads
//     again) or MaxWaitMillis passes. An error, a preferred read replica or
//     a diverging epoch answers at once.
//   - Fetch sessions (KIP-227, v7+): see fetch_sessions.go.
//   - CurrentLeaderEpoch (v9+): older than the partition's is
//     FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH.
//   - Who serves (KIP-392, replica_selector.go): followers' fetches
//     (ReplicaID, or ReplicaState v15+, >= 0) and v4-v10 consumers' are
//     served by the leader only, else NOT_LEADER_OR_FOLLOWER with KIP-951's
//     current leader (v12+) and its endpoint (v16+). A v11+ consumer's is
//     served by any replica here, a follower below its own high watermark
//     with CurrentLeaderEpoch checked against the epoch it knows. With
//     replica.selector.class set, the leader answers a consumer that names
//     its Rack with PreferredReadReplica and no records when Kafka's
//     RackAwareReplicaSelector picks a follower.
//   - LastFetchedEpoch (v12+, KIP-320, diverging_epoch.go): a consumer whose
//     (epoch, offset) is not on this replica's log gets DivergingEpoch and
//     no records; an epoch with no end here is OFFSET_OUT_OF_RANGE. Such a
//     response is encoded by kmsg (a tagged field).
//   - Topic ids (v13+): an unknown id is UNKNOWN_TOPIC_ID.
//   - A new leader answers consumers OFFSET_NOT_AVAILABLE (retriable; the
//     Java consumer refreshes its metadata and retries) until its high
//     watermark reaches the offset its epoch began at: until its followers
//     have fetched, it cannot know what its predecessor committed, and the
//     high watermark it would answer could be below one a consumer has
//     seen (KIP-207 answers ListOffsets so).
//   - A follower replica's fetch moves its replica's position at the
//     leader (replication.go); its HighWatermark (v18+, KIP-1166) answers
//     a parked follower fetch as soon as the leader's is ahead. In a
//     consumer's fetch ReplicaState (v15+), ReplicaDirectoryId (v17+,
//     KIP-853) and HighWatermark are decoded and ignored, as Kafka ignores
//     them. v18 differs from v17 only by that tagged field, which a
//     consumer leaves at its default (MaxInt64: not sent); the responses
//     of the two versions are identical.
func (b *Broker) handleFetch(r *request) {
	req := r.body.(*kmsg.FetchRequest)
	ctx, sessionErr := b.fetchSessions.resolve(req, b.env.Clock.Now())
	if sessionErr != nil {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = sessionErr.Code
		r.respond(resp)
		return
	}
	f := &fetchWait{b: b, r: r, req: req, ctx: ctx, replica: fetchReplicaID(req)}
	if f.replica >= 0 {
		b.followerFetchArrived(req, ctx, f.replica)
	}
	bytes, failed := f.probe()
	if bytes >= int64(req.MinBytes) || failed || req.MaxWaitMillis <= 0 {
		f.finish()
		return
	}
	f.park(time.Duration(req.MaxWaitMillis) * time.Millisecond)
}

// fetchWait is a Fetch being served, possibly parked.
type fetchWait struct {
	b     *Broker
	r     *request
	req   *kmsg.FetchRequest
	ctx   *fetchContext
	timer interface{ Stop() bool }
	// watched are the partitions whose watcher lists hold this fetch while
	// it is parked.
	watched []*partition
	done    bool
	// replica is the follower's broker id, -1 for a consumer.
	replica int32
}

// fetchReplicaID is the broker id of the follower that sent req, or -1
// (-2, Kafka's debugging consumer, too) for a consumer.
func fetchReplicaID(req *kmsg.FetchRequest) int32 {
	id := req.ReplicaID
	if req.Version >= 15 {
		id = req.ReplicaState.ID
	}
	return id
}

// fetchBrokerEpoch is the broker epoch a follower's fetch names (v15+),
// -1 before.
func fetchBrokerEpoch(req *kmsg.FetchRequest) int64 {
	if req.Version >= 15 {
		return req.ReplicaState.Epoch
	}
	return -1
}

// followerFetchArrived tells each partition's replica where the follower
// stands: its fetch offset is what it has (synced, replication.go).
func (b *Broker) followerFetchArrived(req *kmsg.FetchRequest, ctx *fetchContext, replica int32) {
	for _, sp := range ctx.partitions {
		if p, code := b.fetchPartition(req, sp); code == nil && slices.Contains(p.rep.Metadata().Replicas, replica) {
			if p.followerStarts == nil {
				p.followerStarts = map[int32]int64{}
			}
			p.followerStarts[replica] = sp.logStartOffset
			b.stepReplica(p, isr.Message{Type: isr.MsgFetch, Replica: replica, Offset: sp.fetchOffset, BrokerEpoch: fetchBrokerEpoch(req)})
		}
	}
}

// probe counts the bytes a response would carry now, and whether it must
// be sent at once (failed): a partition has an error, a preferred read
// replica or a diverging epoch. No records are copied.
func (f *fetchWait) probe() (bytes int64, failed bool) {
	var total int64
	for _, sp := range f.ctx.partitions {
		p, code := f.b.fetchPartition(f.req, sp)
		if code != nil {
			return total, true
		}
		if f.replica >= 0 && sp.replicaHW < p.hw {
			// KIP-1166: the follower's high watermark is behind; the
			// answer tells it at once.
			return total, true
		}
		if f.replica < 0 && f.b.consumerAnswerNow(f.req, p, sp) {
			return total, true
		}
		if f.replica >= 0 && f.req.MinBytes <= 1 && f.b.followerCanRead(p, sp, f.replica) {
			// A batch is there for it: enough to answer, and reading it
			// here would only be done again by finish.
			return total + 1, false
		}
		recs, err := f.b.readFetch(f.req, p, sp, total)
		if err != nil {
			return total, true
		}
		total += recs.Size
	}
	return total, false
}

// followerCanRead says a follower's fetch of p would get a batch: its
// offset lies in the log below the log end, and the throttle (if any)
// leaves it room, as readFetch would find.
func (b *Broker) followerCanRead(p *partition, sp *sessionPartition, replica int32) bool {
	if sp.fetchOffset < p.log.LogStartOffset() || sp.fetchOffset >= p.log.LogEndOffset() {
		return false
	}
	room, _ := b.throttledRoom(p, replica, 1, true)
	return room > 0
}

// consumerAnswerNow says a consumer's fetch of p is answered without its
// records, as Kafka answers it at once: another replica is preferred
// (KIP-392) or the consumer's log diverged (KIP-320).
func (b *Broker) consumerAnswerNow(req *kmsg.FetchRequest, p *partition, sp *sessionPartition) bool {
	if b.preferredReadReplica(req, p, sp.fetchOffset) >= 0 {
		return true
	}
	_, diverged, code := b.divergingEpoch(req, p, sp)
	return diverged || code != nil
}

// readFetch reads one partition's records below its high watermark (a
// follower: below its log end), within the room a response holding used
// bytes has left; the first partition with data may exceed it by one
// batch (KIP-74).
func (b *Broker) readFetch(req *kmsg.FetchRequest, p *partition, sp *sessionPartition, used int64) (log.Records, error) {
	upTo := p.highWatermark()
	room, minOneBatch := b.roomFor(req, sp, used), used == 0
	if id := fetchReplicaID(req); id >= 0 {
		upTo = p.log.LogEndOffset()
		room, minOneBatch = b.throttledRoom(p, id, room, minOneBatch) // throttle.go
	}
	return p.log.Read(sp.fetchOffset, room, upTo, minOneBatch)
}

// park waits for a high watermark to move on a watched partition, or for
// the deadline.
func (f *fetchWait) park(maxWait time.Duration) {
	f.timer = f.b.env.Clock.AfterFunc(maxWait, f.finish)
	for _, sp := range f.ctx.partitions {
		if p, code := f.b.fetchPartition(f.req, sp); code == nil && !slices.Contains(f.watched, p) {
			f.watched = append(f.watched, p)
			p.watchers = append(p.watchers, f)
		}
	}
}

// wake is called when a watched partition's high watermark moved.
func (f *fetchWait) wake() {
	if f.done {
		return
	}
	if bytes, failed := f.probe(); bytes >= int64(f.req.MinBytes) || failed {
		f.finish()
	}
}

// finish reads every partition and responds.
func (f *fetchWait) finish() {
	if f.done {
		return
	}
	f.done = true
	if f.timer != nil {
		f.timer.Stop()
	}
	for _, p := range f.watched {
		p.watchers = slices.DeleteFunc(p.watchers, func(w *fetchWait) bool { return w == f })
	}
	f.watched = nil
	sender, zeroCopy := f.r.c.c.(env.FileSender)
	resp, records := f.b.fetchResponse(f.req, f.ctx, zeroCopy)
	if (f.b.hintFetchLeaders(resp) || hasDivergingEpoch(resp)) && zeroCopy {
		// Rare (a client that has not yet heard of a leader change, or
		// whose log diverged): the batches are copied in, so kmsg encodes
		// the tagged fields.
		for t := range resp.Topics {
			for p := range resp.Topics[t].Partitions {
				rp := &resp.Topics[t].Partitions[p]
				var err error
				if rp.RecordBatches, err = records[t][p].AppendTo(rp.RecordBatches); err != nil {
					rp.RecordBatches = []byte{}
				}
			}
		}
		zeroCopy = false
	}
	if !zeroCopy {
		f.r.respond(resp)
		return
	}
	f.r.respondParts(encodeFetchFrame(f.r.header.CorrelationID, resp, records, f.b.cfg.FetchCopyMax), sender)
}

// hasDivergingEpoch says a partition of resp carries a diverging epoch.
func hasDivergingEpoch(resp *kmsg.FetchResponse) bool {
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.DivergingEpoch.Epoch >= 0 {
				return true
			}
		}
	}
	return false
}

// fetchPartition resolves a session partition against the image and checks
// its leader epoch. A follower's fetch and a v4-v10 consumer's are served by
// the leader only; a v11+ consumer's by any replica here (readPartition).
func (b *Broker) fetchPartition(req *kmsg.FetchRequest, sp *sessionPartition) (*partition, *kerr.Error) {
	var t *raftmeta.Topic
	if req.Version >= 13 {
		if t = b.image.Topics[sp.key.topicID]; t == nil {
			return nil, kerr.UnknownTopicID
		}
	} else if t = b.image.TopicByName(sp.key.topic); t == nil {
		return nil, kerr.UnknownTopicOrPartition
	}
	var p *partition
	var code *kerr.Error
	if fetchReplicaID(req) < 0 && req.Version >= 11 {
		p, code = b.readPartition(t, sp.key.partition, sp.leaderEpoch)
	} else {
		p, code = b.ledPartition(t, sp.key.partition, sp.leaderEpoch)
	}
	switch id := fetchReplicaID(req); {
	case code != nil:
	case id >= 0 && !slices.Contains(p.rep.Metadata().Replicas, id):
		return nil, kerr.NotLeaderForPartition // a broker that holds no replica of it
	case id < 0 && p.serving() && p.hw < p.rep.EpochStart():
		// A new leader that does not yet know what its predecessor
		// committed: its high watermark would go back (see
		// ListOffsets, KIP-207). The consumer retries.
		return nil, kerr.OffsetNotAvailable
	}
	return p, code
}

// fetchResponse reads every partition of ctx, in order, into a response.
// With zeroCopy, record batches are not read: records[t][p] holds the
// file ranges of resp.Topics[t].Partitions[p], for sendfile. Without it,
// the batches are read (and checked) into RecordBatches.
func (b *Broker) fetchResponse(req *kmsg.FetchRequest, ctx *fetchContext, zeroCopy bool) (*kmsg.FetchResponse, [][]log.Records) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.SessionID = b.fetchSessions.finish(ctx, b.env.Clock.Now())
	var records [][]log.Records
	var used int64
	byTopic := map[sessionTopic]int{}
	for _, sp := range ctx.partitions {
		rp, recs := b.fetchOne(req, sp, used, zeroCopy)
		used += recs.Size
		if !ctx.include(sp, &rp, recs.Size) {
			continue
		}
		key := sessionTopic{sp.key.topic, sp.key.topicID}
		i, ok := byTopic[key]
		if !ok {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = sp.key.topic, sp.key.topicID
			resp.Topics = append(resp.Topics, rt)
			records = append(records, nil)
			i = len(resp.Topics) - 1
			byTopic[key] = i
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
		records[i] = append(records[i], recs)
	}
	return resp, records
}

// fetchOne reads one partition of a response that holds used bytes so far.
func (b *Broker) fetchOne(req *kmsg.FetchRequest, sp *sessionPartition, used int64, zeroCopy bool) (kmsg.FetchResponseTopicPartition, log.Records) {
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.Partition = sp.key.partition
	rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
	if req.IsolationLevel == 1 {
		rp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
	}
	// Empty, never null: librdkafka rejects a null record set.
	rp.RecordBatches = []byte{}
	p, code := b.fetchPartition(req, sp)
	if p != nil {
		rp.HighWatermark = p.highWatermark()
		rp.LastStableOffset = rp.HighWatermark
		rp.LogStartOffset = p.log.LogStartOffset()
	}
	var recs log.Records
	if code == nil {
		if id := b.preferredReadReplica(req, p, sp.fetchOffset); id >= 0 {
			rp.PreferredReadReplica = id // and no records, as Kafka skips the read
			return rp, recs
		}
		var diverged bool
		rp.DivergingEpoch, diverged, code = b.divergingEpoch(req, p, sp)
		if diverged {
			return rp, recs
		}
	}
	if code == nil {
		var err error
		recs, err = b.readFetch(req, p, sp, used)
		if err == nil {
			b.chargeThrottle(p, fetchReplicaID(req), recs.Size)
		}
		if err == nil && !zeroCopy {
			rp.RecordBatches, err = recs.AppendTo(rp.RecordBatches)
		}
		if err != nil {
			recs, rp.RecordBatches = log.Records{}, []byte{}
			code = log.ErrorCode(err)
			if code != kerr.OffsetOutOfRange {
				b.env.Log.Error("fetch read failed", "topic", p.topic, "partition", p.index, "err", err)
			}
		}
	}
	if code != nil {
		rp.ErrorCode = code.Code
		if code == kerr.NotLeaderForPartition && req.Version >= 12 {
			key := partitionKey{sp.key.topicID, sp.key.partition}
			if t := b.image.TopicByName(sp.key.topic); key.topic.IsZero() && t != nil {
				key.topic = t.ID
			}
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = b.currentLeader(key)
		}
	}
	return rp, recs
}

// hintFetchLeaders adds KIP-951's node endpoints (v16+) of the leaders a
// response's NOT_LEADER_OR_FOLLOWER partitions name, and says whether it
// names any: such a response is encoded by kmsg (with its tagged fields),
// not by the zero-copy encoder, which writes none.
func (b *Broker) hintFetchLeaders(resp *kmsg.FetchResponse) bool {
	hinted := false
	seen := map[int32]bool{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != kerr.NotLeaderForPartition.Code || rp.CurrentLeader.LeaderID < 0 {
				continue
			}
			hinted = true
			id := rp.CurrentLeader.LeaderID
			br, ok := b.leaderEndpoint(id)
			if !ok || seen[id] || resp.Version < 16 {
				continue
			}
			seen[id] = true
			ep := kmsg.NewFetchResponseBroker()
			ep.NodeID, ep.Host, ep.Port = br.ID, br.Host, br.Port
			if br.Rack != "" {
				rack := br.Rack
				ep.Rack = &rack
			}
			resp.Brokers = append(resp.Brokers, ep)
		}
	}
	return hinted
}

type sessionTopic struct {
	name string
	id   raftmeta.TopicID
}

// roomFor is how many bytes one partition may add to a response that holds
// used bytes already.
// The response limit is the client's MaxBytes, capped as Kafka caps it by
// fetch.max.bytes.
func (b *Broker) roomFor(req *kmsg.FetchRequest, sp *sessionPartition, used int64) int64 {
	room := int64(sp.maxBytes)
	if req.MaxBytes > 0 {
		room = min(room, min(int64(req.MaxBytes), fetchMaxBytes)-used)
	}
	return room
}

// fetchMaxBytes is Kafka's default fetch.max.bytes: 55 MiB.
const fetchMaxBytes = 55 << 20
