package groups

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RequestID is chosen by the runtime for each request it hands to Handle,
// and echoed in the request's Response.
type RequestID uint64

// Client says who sent a request; Kafka keeps both in the member's
// description. Host is written as Kafka writes it ("/10.0.0.1").
type Client struct {
	ID   string
	Host string
}

// Record is one record of __consumer_offsets. A nil Value is a tombstone.
type Record struct {
	Key, Value []byte
}

// Response answers the request Handle was given with ID. Resp carries the
// request's version. Err is set (and Resp nil) only for a request of an API
// the shard does not serve, which the runtime's routing should never send.
type Response struct {
	ID   RequestID
	Resp kmsg.Response
	Err  error
}

// Effect is one effect, in order: exactly one of Write and Respond is set.
// The runtime appends each Write (acks=all through the ISR) and sends a
// Respond only once every Write before it in the order is committed.
type Effect struct {
	Write []Record
	// SnapshotStart marks a Write that restates the shard's whole live
	// state: once it is committed, the runtime may move the partition's log
	// start to the Write's first offset. A snapshot of an empty state has
	// no records (Write is empty, not nil): the log start may then move to
	// the log end as it stands once every earlier Write is committed.
	SnapshotStart bool
	Respond       *Response
}

// Ready is what the shard asks of the runtime since the last Ready.
type Ready struct {
	Effects []Effect
	// Deadline is when to call Tick next; zero: nothing is scheduled.
	Deadline time.Time
	// Snapshot says one of Effects is a snapshot Write.
	Snapshot bool
}

// Shard is the coordinator of the groups whose ids hash to one partition of
// __consumer_offsets. It is a pure state machine; see the package doc.
type Shard struct {
	cfg    Config
	rand   env.Rand
	groups map[string]*group
	timers timers
	loaded bool

	effects []Effect
	// recordsSince counts records written (or replayed) since the last
	// snapshot; liveOffsets and liveGroups count the records a snapshot
	// would restate now.
	recordsSince int
	liveOffsets  int
	liveGroups   int
	// liveConsumer counts the KIP-848 records a snapshot restates: three
	// per consumer group and three per member.
	liveConsumer int
	replayed     int
	// regexes caches compiled subscription regexes (Shard.regex).
	regexes map[string]*regexp.Regexp
}

// NewShard returns a shard that must replay its partition and be Loaded
// before it serves. cfg must be valid (Config.Validate); NewShard panics
// otherwise, since the runtime checks the configuration at startup.
func NewShard(cfg Config) *Shard {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	s := &Shard{cfg: cfg.withDefaults(), groups: make(map[string]*group), timers: newTimers()}
	s.rand = cfg.Rand
	if s.rand == nil {
		s.rand = &splitmix{state: uint64(cfg.Partition) + 0x9e3779b97f4a7c15}
	}
	return s
}

// Replay applies one record of the partition, in log order, while loading.
func (s *Shard) Replay(offset int64, key, value []byte) error {
	if s.loaded {
		return fmt.Errorf("groups: replay of offset %d after Loaded", offset)
	}
	k, err := decodeKey(key)
	if err != nil {
		return fmt.Errorf("groups: replay offset %d: %w", offset, err)
	}
	if err := s.apply(k, value); err != nil {
		return fmt.Errorf("groups: replay offset %d: %w", offset, err)
	}
	s.replayed++
	return nil
}

// apply sets the state a record describes; it is how Replay and every
// Write change offsets and persisted metadata, so both agree.
func (s *Shard) apply(k recordKey, value []byte) error {
	switch k.kind {
	case keyOffset:
		tp := topicPartition{k.topic, k.partition}
		if value == nil {
			if g := s.groups[k.group]; g != nil {
				s.dropOffset(g, tp)
				s.maybeForget(g)
			}
			return nil
		}
		o, err := decodeOffsetValue(value)
		if err != nil {
			return err
		}
		s.setOffset(s.group(k.group), tp, o)
	case keyGroup:
		if value == nil {
			if g := s.groups[k.group]; g != nil {
				s.setPersisted(g, nil)
				empty := kmsg.NewGroupMetadataValue()
				g.loadMetadata(&empty)
				s.maybeForget(g)
			}
			return nil
		}
		v, err := decodeGroupValue(value)
		if err != nil {
			return err
		}
		g := s.group(k.group)
		s.setPersisted(g, value)
		if !s.loaded {
			g.loadMetadata(v)
		}
	case keyConsumer:
		return s.applyConsumer(k, value)
	}
	return nil
}

// Loaded ends replay: members loaded from the log get a full session
// timeout from now, as Kafka's coordinator gives them on load.
func (s *Shard) Loaded(now time.Time) {
	s.loaded = true
	s.recordsSince = s.replayed
	for _, id := range s.sortedGroupIDs() {
		g := s.groups[id]
		for _, m := range g.members {
			s.timers.set(heartbeatKey(g, m.id), now.Add(m.sessionTimeout))
		}
		s.loadConsumerTimers(now, g)
	}
	s.timers.set(timerKey{kind: timerRetention}, now.Add(s.cfg.OffsetsRetentionCheckInterval))
}

// Ready returns the effects accumulated since the last Ready, then clears
// them, and the next deadline.
func (s *Shard) Ready() Ready {
	s.checkInvariants()
	s.maybeSnapshot()
	rd := Ready{Effects: s.effects}
	s.effects = nil
	for _, e := range rd.Effects {
		rd.Snapshot = rd.Snapshot || e.SnapshotStart
	}
	if e, ok := s.timers.next(); ok {
		rd.Deadline = e.at
	}
	return rd
}

// Tick fires every deadline at or before now.
func (s *Shard) Tick(now time.Time) {
	if !s.loaded {
		return
	}
	for {
		k, ok := s.timers.popDue(now)
		if !ok {
			return
		}
		s.fire(now, k)
	}
}

func (s *Shard) fire(now time.Time, k timerKey) {
	if k.kind == timerRetention {
		s.expireOffsets(now)
		s.timers.set(k, now.Add(s.cfg.OffsetsRetentionCheckInterval))
		return
	}
	g := s.groups[k.group]
	if g == nil {
		return
	}
	switch k.kind {
	case timerHeartbeat:
		s.expireMember(now, g, k.member)
	case timerJoin:
		s.joinTimerFired(now, g)
	case timerSync:
		s.expirePendingSync(now, g)
	case timerConsumerSession:
		s.consumerSessionExpired(g, k.member)
	case timerConsumerRebalance:
		s.consumerRebalanceExpired(g, k.member)
	}
}

// Handle serves one request of a group API, already routed to this shard.
func (s *Shard) Handle(now time.Time, id RequestID, req kmsg.Request) {
	s.HandleFrom(now, id, Client{}, req)
}

// HandleFrom is Handle with the client the request came from.
func (s *Shard) HandleFrom(now time.Time, id RequestID, c Client, req kmsg.Request) {
	if !s.loaded {
		panic(fmt.Sprintf("groups: partition %d: request %d before Loaded", s.cfg.Partition, id))
	}
	switch r := req.(type) {
	case *kmsg.OffsetCommitRequest:
		s.offsetCommit(now, id, r)
	case *kmsg.OffsetFetchRequest:
		s.offsetFetch(id, r)
	case *kmsg.OffsetDeleteRequest:
		s.offsetDelete(id, r)
	case *kmsg.JoinGroupRequest:
		s.joinGroup(now, id, c, r)
	case *kmsg.SyncGroupRequest:
		s.syncGroup(now, id, r)
	case *kmsg.HeartbeatRequest:
		s.heartbeat(now, id, r)
	case *kmsg.LeaveGroupRequest:
		s.leaveGroup(now, id, r)
	case *kmsg.DescribeGroupsRequest:
		s.describeGroups(id, r)
	case *kmsg.ListGroupsRequest:
		s.listGroups(id, r)
	case *kmsg.DeleteGroupsRequest:
		s.deleteGroups(now, id, r)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		s.consumerGroupHeartbeat(now, id, c, r)
	case *kmsg.ConsumerGroupDescribeRequest:
		s.consumerGroupDescribe(id, r)
	default:
		s.effects = append(s.effects, Effect{Respond: &Response{ID: id,
			Err: fmt.Errorf("groups: API key %d is not served by a group shard", req.Key())}})
	}
}

func (s *Shard) respond(id RequestID, resp kmsg.Response) {
	s.effects = append(s.effects, Effect{Respond: &Response{ID: id, Resp: resp}})
}

func (s *Shard) write(recs ...Record) {
	if len(recs) == 0 {
		return
	}
	for _, r := range recs {
		k, err := decodeKey(r.Key)
		if err != nil {
			panic(fmt.Sprintf("groups: writing an undecodable key %x: %v", r.Key[:min(len(r.Key), 64)], err))
		}
		if err := s.apply(k, r.Value); err != nil {
			panic(fmt.Sprintf("groups: writing an undecodable record %x: %v", r.Value[:min(len(r.Value), 64)], err))
		}
	}
	s.recordsSince += len(recs)
	s.effects = append(s.effects, Effect{Write: recs})
}

// group returns the group with id, creating it (Empty) if there is none.
func (s *Shard) group(id string) *group {
	g := s.groups[id]
	if g == nil {
		g = newGroup(id)
		s.groups[id] = g
	}
	return g
}

// maybeForget drops a group that has nothing left: no members, no offsets,
// no metadata in the log.
func (s *Shard) maybeForget(g *group) {
	if g.consumer != nil && !g.consumer.hasMetadata && len(g.consumer.members) == 0 {
		g.consumer = nil
	}
	if len(g.members) == 0 && len(g.pending) == 0 && len(g.offsets) == 0 && g.persisted == nil &&
		(g.state == stateEmpty || g.state == stateDead) && g.consumer == nil {
		g.state = stateDead
		delete(s.groups, g.id)
	}
}

func (s *Shard) setOffset(g *group, tp topicPartition, o offsetValue) {
	if _, ok := g.offsets[tp]; !ok {
		s.liveOffsets++
	}
	g.offsets[tp] = o
}

func (s *Shard) dropOffset(g *group, tp topicPartition) {
	if _, ok := g.offsets[tp]; ok {
		s.liveOffsets--
		delete(g.offsets, tp)
	}
}

func (s *Shard) setPersisted(g *group, value []byte) {
	switch {
	case g.persisted == nil && value != nil:
		s.liveGroups++
	case g.persisted != nil && value == nil:
		s.liveGroups--
	}
	g.persisted = value
}

func (s *Shard) sortedGroupIDs() []string {
	ids := make([]string, 0, len(s.groups))
	for id := range s.groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// splitmix is the fallback member-id source (splitmix64).
type splitmix struct{ state uint64 }

func (r *splitmix) Uint64() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// writeAt is write with the Write placed at effect index at, before the
// effects a handler added after it.
func (s *Shard) writeAt(at int, recs ...Record) {
	tail := append([]Effect(nil), s.effects[at:]...)
	s.effects = s.effects[:at]
	s.write(recs...)
	s.effects = append(s.effects, tail...)
}

// GroupView is one group as it stands, for a simulator's state dump or an
// operator's probe: nothing here changes the shard.
type GroupView struct {
	ID string
	// Protocol is "classic", "consumer" (KIP-848) or "" (a group that only
	// holds offsets).
	Protocol string
	// State is Kafka's name of the group's state; Generation the classic
	// generation or the consumer group's epoch.
	State      string
	Generation int32
	Members    int
	// Offsets is how many partitions have a committed offset.
	Offsets int
}

// Groups describes every group the shard holds, by id.
func (s *Shard) Groups() []GroupView {
	out := make([]GroupView, 0, len(s.groups))
	for _, id := range slices.Sorted(maps.Keys(s.groups)) {
		g := s.groups[id]
		v := GroupView{ID: id, State: g.state.String(), Generation: g.generation, Members: len(g.members), Offsets: len(g.offsets)}
		switch {
		case g.consumer != nil:
			v.Protocol, v.State, v.Generation, v.Members = "consumer", g.consumer.state(), g.consumer.epoch, len(g.consumer.members)
		case g.protocolType != "":
			v.Protocol = "classic"
		}
		out = append(out, v)
	}
	return out
}
