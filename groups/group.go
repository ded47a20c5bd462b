package groups

import (
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupState is Kafka's classic group state.
type groupState uint8

const (
	stateEmpty groupState = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

func (st groupState) String() string {
	return [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}[st]
}

// parked is a request the shard answers later: a JoinGroup waiting for the
// join phase to end, or a SyncGroup waiting for the leader's assignment.
type parked struct {
	id      RequestID
	version int16
}

type protocol struct {
	name     string
	metadata []byte
}

// member is one member of a classic group.
type member struct {
	id         string
	instanceID *string
	clientID   string
	clientHost string

	rebalanceTimeout time.Duration
	sessionTimeout   time.Duration
	protocolType     string
	// protocols are the member's protocols in its order of preference;
	// their metadata goes to the leader untouched.
	protocols  []protocol
	assignment []byte

	join *parked
	sync *parked
	// isNew marks a member added during this join phase: it is expired by
	// the new-member join timeout even while its JoinGroup is parked,
	// since a client that gave up and retried would otherwise leave
	// defunct members in the rebalance forever (Kafka's reasoning).
	isNew bool
}

func (m *member) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

// matches says whether the member's protocols equal ps, in order.
func (m *member) matches(ps []kmsg.JoinGroupRequestProtocol) bool {
	if len(ps) != len(m.protocols) {
		return false
	}
	for i, p := range ps {
		if p.Name != m.protocols[i].name || string(p.Metadata) != string(m.protocols[i].metadata) {
			return false
		}
	}
	return true
}

type topicPartition struct {
	topic     string
	partition int32
}

// group is one group: its membership (classic protocol) and its offsets.
// A group whose offsets alone keep it alive (a "simple" group, committing
// with generation -1) is Empty with no protocol type.
type group struct {
	id           string
	state        groupState
	protocolType string // "": none
	protocol     string // "": none
	generation   int32
	leader       string // "": none
	// members in the order they joined, which is the order they are
	// described, written and chosen as leader in.
	members    []*member
	byID       map[string]*member
	byInstance map[string]string // group.instance.id -> member id
	// pending are the member ids handed out with MEMBER_ID_REQUIRED whose
	// owners have not joined with them yet.
	pending map[string]bool
	// pendingSync are the members that have not sent SyncGroup since the
	// join phase ended.
	pendingSync map[string]bool
	// newMemberAdded extends the initial rebalance delay.
	// initialRebalance marks the join phase of a group that was Empty: it
	// ends only by its timer, after initialDelay, extended by another
	// delay while members keep joining until initialRemaining (what is
	// left of the rebalance timeout) runs out.
	initialRebalance bool
	newMemberAdded   bool
	initialDelay     time.Duration
	initialRemaining time.Duration
	// stateMs is Kafka's currentStateTimestamp: when the group last changed
	// state, or -1; offset expiry of an Empty group counts from it.
	stateMs int64

	offsets map[topicPartition]offsetValue
	// persisted is the group's latest GroupMetadataValue as written to the
	// log (nil: none, or a tombstone). A snapshot restates it, not the
	// in-memory state, so that a log that starts at a snapshot replays to
	// what the whole log would.
	persisted []byte
	// consumer is set for a KIP-848 consumer group, whose members and
	// assignments live there; the classic fields are then unused (the
	// group is Empty to the classic code). A group uses one protocol at a
	// time.
	consumer *consumerGroup
}

func newGroup(id string) *group {
	return &group{
		id:          id,
		byID:        make(map[string]*member),
		byInstance:  make(map[string]string),
		pending:     make(map[string]bool),
		pendingSync: make(map[string]bool),
		offsets:     make(map[topicPartition]offsetValue),
		stateMs:     -1,
	}
}

func (g *group) transition(st groupState, now time.Time) {
	g.state = st
	g.stateMs = now.UnixMilli()
}

func (g *group) add(m *member) {
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	g.members = append(g.members, m)
	g.byID[m.id] = m
	if m.instanceID != nil {
		g.byInstance[*m.instanceID] = m.id
	}
	if g.leader == "" {
		g.leader = m.id
	}
}

func (g *group) remove(id string) {
	m := g.byID[id]
	if m == nil {
		return
	}
	delete(g.byID, id)
	delete(g.pendingSync, id)
	if m.instanceID != nil && g.byInstance[*m.instanceID] == id {
		delete(g.byInstance, *m.instanceID)
	}
	for i, x := range g.members {
		if x == m {
			g.members = append(g.members[:i:i], g.members[i+1:]...)
			break
		}
	}
	if g.leader == id {
		g.leader = ""
		if len(g.members) > 0 {
			g.leader = g.members[0].id
		}
	}
}

// replaceStatic gives a static member a new member id, keeping its place,
// its assignment and its leadership.
func (g *group) replaceStatic(m *member, newID string) {
	delete(g.byID, m.id)
	delete(g.pendingSync, m.id)
	if g.leader == m.id {
		g.leader = newID
	}
	m.id = newID
	g.byID[newID] = m
	g.byInstance[*m.instanceID] = newID
}

// supportsProtocols is Kafka's check for a joining member: a group with no
// members takes any non-empty type and protocol list; otherwise the type
// must match and one of the protocols must be one every member supports.
func (g *group) supportsProtocols(protocolType string, ps []kmsg.JoinGroupRequestProtocol) bool {
	if len(g.members) == 0 {
		return protocolType != "" && len(ps) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range ps {
		if g.supportCount(p.Name) == len(g.members) {
			return true
		}
	}
	return false
}

func (g *group) supportCount(name string) int {
	n := 0
	for _, m := range g.members {
		if hasProtocol(m, name) {
			n++
		}
	}
	return n
}

func hasProtocol(m *member, name string) bool {
	for _, p := range m.protocols {
		if p.name == name {
			return true
		}
	}
	return false
}

// selectProtocol picks the protocol every member supports that most
// members prefer (each votes for its first supported candidate); ties go
// to the lexically first name, where Kafka leaves them to hash order.
func (g *group) selectProtocol() string {
	votes := make(map[string]int)
	var candidates []string
	for _, m := range g.members {
		for _, p := range m.protocols {
			if g.supportCount(p.name) == len(g.members) {
				if _, ok := votes[p.name]; !ok {
					candidates = append(candidates, p.name)
				}
				votes[p.name] += 0
			}
		}
	}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if _, ok := votes[p.name]; ok {
				votes[p.name]++
				break
			}
		}
	}
	sort.Strings(candidates)
	best := ""
	for _, c := range candidates {
		if best == "" || votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

func (g *group) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.join == nil {
			return false
		}
	}
	return true
}

// metadataValue is the group's GroupMetadataValue as Kafka writes it: each
// member with the metadata of the selected protocol and its assignment.
func (g *group) metadataValue() *kmsg.GroupMetadataValue {
	v := kmsg.NewGroupMetadataValue()
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	if g.protocol != "" {
		v.Protocol = kmsg.StringPtr(g.protocol)
	}
	if g.leader != "" {
		v.Leader = kmsg.StringPtr(g.leader)
	}
	v.CurrentStateTimestamp = g.stateMs
	for _, m := range g.members {
		mv := kmsg.NewGroupMetadataValueMember()
		mv.MemberID, mv.InstanceID = m.id, m.instanceID
		mv.ClientID, mv.ClientHost = m.clientID, m.clientHost
		mv.RebalanceTimeoutMillis = int32(m.rebalanceTimeout.Milliseconds())
		mv.SessionTimeoutMillis = int32(m.sessionTimeout.Milliseconds())
		mv.Subscription = nonNil(m.metadataFor(g.protocol))
		mv.Assignment = nonNil(m.assignment)
		v.Members = append(v.Members, mv)
	}
	return &v
}

// loadMetadata sets the group from a replayed GroupMetadataValue, as Kafka
// loads a group: Stable with members, Empty without.
func (g *group) loadMetadata(v *kmsg.GroupMetadataValue) {
	offsets, persisted, consumer := g.offsets, g.persisted, g.consumer
	*g = *newGroup(g.id)
	g.offsets, g.persisted, g.consumer = offsets, persisted, consumer
	g.protocolType, g.generation, g.stateMs = v.ProtocolType, v.Generation, v.CurrentStateTimestamp
	if v.Protocol != nil {
		g.protocol = *v.Protocol
	}
	for _, mv := range v.Members {
		m := &member{
			id: mv.MemberID, instanceID: mv.InstanceID, clientID: mv.ClientID, clientHost: mv.ClientHost,
			rebalanceTimeout: time.Duration(mv.RebalanceTimeoutMillis) * time.Millisecond,
			sessionTimeout:   time.Duration(mv.SessionTimeoutMillis) * time.Millisecond,
			protocolType:     v.ProtocolType,
			protocols:        []protocol{{name: g.protocol, metadata: mv.Subscription}},
			assignment:       mv.Assignment,
		}
		if m.rebalanceTimeout < 0 {
			m.rebalanceTimeout = m.sessionTimeout
		}
		g.add(m)
	}
	g.leader = ""
	if v.Leader != nil {
		g.leader = *v.Leader
	}
	g.state = stateEmpty
	if len(g.members) > 0 {
		g.state = stateStable
	}
}

func (g *group) sortedOffsets() []topicPartition {
	tps := make([]topicPartition, 0, len(g.offsets))
	for tp := range g.offsets {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].topic != tps[j].topic {
			return tps[i].topic < tps[j].topic
		}
		return tps[i].partition < tps[j].partition
	})
	return tps
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
