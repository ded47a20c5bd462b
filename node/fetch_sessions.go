package node

import (
	"math"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch sessions (KIP-227) let a consumer stop repeating every partition in
// every Fetch: the broker remembers the partitions of a session, and a
// request lists only what changed; the response lists only partitions with
// something new (records, an error, or a moved high watermark, last stable
// offset or log start offset).
//
// The session id and epoch in a request say what it is:
//
//	id 0, epoch -1   a full fetch without a session
//	id 0, epoch  0   a full fetch that opens a session
//	id X, epoch -1   close X; a full fetch without a session
//	id X, epoch  0   close X; a full fetch that opens a new session
//	id X, epoch  N   an incremental fetch in X, whose next epoch must be N
//
// An unknown X gets FETCH_SESSION_ID_NOT_FOUND, a wrong N
// INVALID_FETCH_SESSION_EPOCH; a session opened with topic names (v12 and
// older) used with topic ids (v13+), or the reverse, gets
// FETCH_SESSION_TOPIC_ID_ERROR. The cache holds fetchSessionSlots sessions;
// when full, a new one evicts the least recently used.

const (
	fetchSessionSlots = 1000
	// fetchSessionIdleEvict is how long a session must have been idle
	// before a new one may take its slot (Kafka's 120 seconds).
	fetchSessionIdleEvict = 2 * time.Minute
	// finalEpoch and initialEpoch are the epochs with special meaning.
	finalEpoch   int32 = -1
	initialEpoch int32 = 0
)

// sessionKey names a partition in a session: by topic id from v13, by topic
// name before (the other field is then zero).
type sessionKey struct {
	topic     string
	topicID   raftmeta.TopicID
	partition int32
}

// sessionPartition is what a session remembers of one partition: what the
// client asked for, and what the broker last told it, so that an incremental
// response can leave out partitions where nothing changed.
type sessionPartition struct {
	key         sessionKey
	fetchOffset int64
	maxBytes    int32
	leaderEpoch int32 // CurrentLeaderEpoch, -1 when the client sent none
	// replicaHW is a follower's own high watermark (v18, KIP-1166);
	// MaxInt64 when not sent.
	replicaHW int64
	// logStartOffset is a follower's log start (v5+), which the leader
	// keeps for KIP-392's choice of a read replica; -1 when not sent.
	logStartOffset int64
	// lastFetchedEpoch is the epoch of the last batch the client read
	// (v12+, KIP-320), -1 when not sent: a consumer's is checked for
	// divergence (diverging_epoch.go).
	lastFetchedEpoch int32

	sentHighWatermark  int64
	sentLastStable     int64
	sentLogStartOffset int64
}

type fetchSession struct {
	id           int32
	nextEpoch    int32
	usesTopicIDs bool
	partitions   []*sessionPartition // in the order the client added them
	index        map[sessionKey]*sessionPartition
	lastUsed     time.Time
}

type fetchSessionCache struct {
	rand     env.Rand
	sessions map[int32]*fetchSession
}

func newFetchSessionCache(r env.Rand) *fetchSessionCache {
	return &fetchSessionCache{rand: r, sessions: map[int32]*fetchSession{}}
}

// fetchContext is how one Fetch request is served: which partitions to read
// and how to shape the response.
type fetchContext struct {
	// partitions to read, each with the client's offset and byte limit.
	partitions []*sessionPartition
	// session is nil for a sessionless fetch. For a new session it is set
	// but not yet in the cache: finish adds it.
	session     *fetchSession
	incremental bool
	isNew       bool
}

// resolve interprets req's session fields, returning the context to serve
// it, or the error code for the whole response.
func (c *fetchSessionCache) resolve(req *kmsg.FetchRequest, now time.Time) (*fetchContext, *kerr.Error) {
	usesIDs := req.Version >= 13
	if req.Version < 7 || req.SessionEpoch == finalEpoch || req.SessionEpoch == initialEpoch {
		if req.SessionID != 0 {
			delete(c.sessions, req.SessionID)
		}
		if len(req.ForgottenTopics) > 0 {
			return nil, kerr.InvalidRequest
		}
		ctx := &fetchContext{partitions: requestPartitions(req, usesIDs)}
		if req.Version >= 7 && req.SessionEpoch == initialEpoch {
			s := &fetchSession{id: c.newID(), nextEpoch: 1, usesTopicIDs: usesIDs, index: map[sessionKey]*sessionPartition{}, lastUsed: now}
			for _, sp := range ctx.partitions {
				s.add(sp)
			}
			ctx.session, ctx.isNew = s, true
		}
		return ctx, nil
	}
	s := c.sessions[req.SessionID]
	switch {
	case s == nil:
		return nil, kerr.FetchSessionIDNotFound
	case s.nextEpoch != req.SessionEpoch:
		return nil, kerr.InvalidFetchSessionEpoch
	case s.usesTopicIDs != usesIDs:
		return nil, kerr.FetchSessionTopicIDError
	}
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			key := sessionKey{partition: p}
			if usesIDs {
				key.topicID = ft.TopicID
			} else {
				key.topic = ft.Topic
			}
			s.remove(key)
		}
	}
	for _, sp := range requestPartitions(req, usesIDs) {
		if old := s.index[sp.key]; old != nil {
			old.fetchOffset, old.maxBytes, old.leaderEpoch, old.replicaHW = sp.fetchOffset, sp.maxBytes, sp.leaderEpoch, sp.replicaHW
			old.logStartOffset, old.lastFetchedEpoch = sp.logStartOffset, sp.lastFetchedEpoch
		} else {
			s.add(sp)
		}
	}
	s.nextEpoch = nextSessionEpoch(s.nextEpoch)
	s.lastUsed = now
	return &fetchContext{partitions: s.partitions, session: s, incremental: true}, nil
}

// finish records a served context: a new session joins the cache and its id
// goes in the response. When the cache is full, the least recently used
// session makes room only if it has been idle for fetchSessionIdleEvict, as
// in Kafka; otherwise the new session is not kept (id 0: the client goes on
// with full fetches), so a crowd of consumers cannot evict each other's live
// sessions in turn.
func (c *fetchSessionCache) finish(ctx *fetchContext, now time.Time) int32 {
	if ctx.session == nil {
		return 0
	}
	if ctx.isNew {
		if len(c.sessions) >= fetchSessionSlots && !c.evictIdle(now) {
			return 0
		}
		c.sessions[ctx.session.id] = ctx.session
	}
	return ctx.session.id
}

// include reports whether a partition's result belongs in the response, and
// remembers what was sent. Full fetches include every partition.
func (ctx *fetchContext) include(sp *sessionPartition, rp *kmsg.FetchResponseTopicPartition, recordBytes int64) bool {
	// A preferred read replica or a diverging epoch is always sent, as
	// Kafka's CachedPartition.maybeUpdateResponseData sends them.
	changed := recordBytes > 0 || rp.ErrorCode != 0 || rp.PreferredReadReplica >= 0 || rp.DivergingEpoch.Epoch >= 0 ||
		rp.HighWatermark != sp.sentHighWatermark || rp.LastStableOffset != sp.sentLastStable ||
		rp.LogStartOffset != sp.sentLogStartOffset
	sp.sentHighWatermark, sp.sentLastStable, sp.sentLogStartOffset = rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset
	if rp.ErrorCode != 0 {
		// Once the error clears the partition must be sent again, even if
		// its offsets did not move meanwhile.
		sp.sentHighWatermark = -1
	}
	return !ctx.incremental || changed
}

func (c *fetchSessionCache) newID() int32 {
	for {
		id := int32(c.rand.Uint64() & 0x7fffffff)
		if id != 0 && c.sessions[id] == nil {
			return id
		}
	}
}

// evictIdle removes the least recently used session if it has been idle
// long enough, and reports whether it did.
func (c *fetchSessionCache) evictIdle(now time.Time) bool {
	ids := sortedKeys(c.sessions)
	oldest := ids[0]
	for _, id := range ids[1:] {
		if c.sessions[id].lastUsed.Before(c.sessions[oldest].lastUsed) {
			oldest = id
		}
	}
	if now.Sub(c.sessions[oldest].lastUsed) < fetchSessionIdleEvict {
		return false
	}
	delete(c.sessions, oldest)
	return true
}

func (s *fetchSession) add(sp *sessionPartition) {
	s.partitions = append(s.partitions, sp)
	s.index[sp.key] = sp
}

func (s *fetchSession) remove(key sessionKey) {
	if s.index[key] == nil {
		return
	}
	delete(s.index, key)
	for i, sp := range s.partitions {
		if sp.key == key {
			s.partitions = append(s.partitions[:i], s.partitions[i+1:]...)
			return
		}
	}
}

// nextSessionEpoch wraps from MaxInt32 to 1, skipping the special epochs.
func nextSessionEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// requestPartitions lists the partitions named in req, in request order.
func requestPartitions(req *kmsg.FetchRequest, usesIDs bool) []*sessionPartition {
	var out []*sessionPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			key := sessionKey{partition: p.Partition}
			if usesIDs {
				key.topicID = t.TopicID
			} else {
				key.topic = t.Topic
			}
			leaderEpoch := int32(-1)
			if req.Version >= 9 {
				leaderEpoch = p.CurrentLeaderEpoch
			}
			replicaHW := int64(math.MaxInt64)
			if req.Version >= 18 {
				replicaHW = p.HighWatermark
			}
			logStart, lastFetchedEpoch := int64(-1), int32(-1)
			if req.Version >= 5 {
				logStart = p.LogStartOffset
			}
			if req.Version >= 12 {
				lastFetchedEpoch = p.LastFetchedEpoch
			}
			out = append(out, &sessionPartition{
				key: key, fetchOffset: p.FetchOffset, maxBytes: p.PartitionMaxBytes, leaderEpoch: leaderEpoch, replicaHW: replicaHW,
				logStartOffset: logStart, lastFetchedEpoch: lastFetchedEpoch,
				sentHighWatermark: -1, sentLastStable: -1, sentLogStartOffset: -1,
			})
		}
	}
	return out
}
