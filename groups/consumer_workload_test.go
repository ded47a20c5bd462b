package groups

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/groups/assign"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// wconsumer is a KIP-848 member of the replay workload: it follows the
// answers as a real consumer does (owning what it is told, rejoining when
// fenced), and sometimes not (slow revocations, stale epochs, silence).
type wconsumer struct {
	name     string
	group    string
	instance *string
	gen      int // member id generation: v1 clients make their own ids
	cgClient
}

type cgSent struct {
	c    *wconsumer
	req  *kmsg.ConsumerGroupHeartbeatRequest
	hold bool
	// classic says the group was a classic one when the request was sent.
	classic bool
}

// addConsumers adds four KIP-848 members: three in g2 (one static), and
// one that tries g0, a classic group, which it may convert when Empty.
func (w *workload) addConsumers() {
	w.cgPending = map[RequestID]cgSent{}
	w.h.topics["t"], w.h.topics["u"] = 3, 2
	for i, group := range []string{"g2", "g2", "g2", "g0"} {
		c := &wconsumer{name: fmt.Sprintf("k%d", i), group: group}
		if i == 1 {
			c.instance = kmsg.StringPtr("static-k1")
		}
		w.consumers = append(w.consumers, c)
	}
}

func (w *workload) consumerStep() {
	c := w.consumers[w.rng.Intn(len(w.consumers))]
	switch op := w.rng.Intn(20); {
	case op < 3 || c.epoch == 0 && op < 8:
		w.cgJoin(c)
	case op < 14:
		w.cgHeartbeat(c)
	case op < 15:
		epoch := int32(epochLeave)
		if c.instance != nil && w.rng.Intn(2) == 0 {
			epoch = epochStaticLeave
		}
		w.cgSend(c, w.cgRequest(c, epoch), false)
	case op < 17:
		r := commitReq(9, c.group, c.epoch, c.memberID, "t", int32(w.rng.Intn(3)), int64(w.rng.Intn(1000)))
		w.send(&wclient{name: c.name}, r)
	case op < 18:
		// The cluster changes: a topic grows or appears.
		if w.rng.Intn(2) == 0 {
			w.h.topics["u"]++
		} else {
			w.h.topics[fmt.Sprintf("t%d", w.rng.Intn(3))] = int32(1 + w.rng.Intn(3))
		}
	default:
		r := kmsg.NewPtrConsumerGroupDescribeRequest()
		r.Groups = []string{c.group}
		w.send(&wclient{name: c.name}, r)
	}
}

func (w *workload) cgRequest(c *wconsumer, epoch int32) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.InstanceID, r.MemberEpoch = 1, c.group, c.instance, epoch
	if c.memberID == "" {
		c.gen++
		c.memberID = fmt.Sprintf("%s-%d", c.name, c.gen)
	}
	r.MemberID = c.memberID
	return r
}

func (w *workload) cgJoin(c *wconsumer) {
	if c.epoch != 0 || w.rng.Intn(3) == 0 {
		c.memberID = "" // a new process, or a client that lost its id
	}
	c.epoch, c.owned, c.held = 0, nil, nil
	r := w.cgRequest(c, epochJoin)
	r.RebalanceTimeoutMillis = int32(5000 + w.rng.Intn(30000))
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	switch w.rng.Intn(3) {
	case 0:
		r.SubscribedTopicNames = []string{"t"}
	case 1:
		r.SubscribedTopicNames = []string{"t", "u"}
	default:
		r.SubscribedTopicRegex = kmsg.StringPtr("t.*")
	}
	if n := w.rng.Intn(4); n < 2 {
		r.ServerAssignor = kmsg.StringPtr(assign.All()[n].Name())
	}
	w.cgSend(c, r, false)
}

func (w *workload) cgHeartbeat(c *wconsumer) {
	hold := w.rng.Intn(4) == 0
	if c.held != nil && !hold {
		c.owned, c.held = *c.held, nil
	}
	epoch := c.epoch
	if w.rng.Intn(15) == 0 {
		epoch += int32(w.rng.Intn(3)) - 1 // a stale or future epoch
	}
	r := w.cgRequest(c, epoch)
	r.Topics = ownedTopics(c.owned)
	if w.rng.Intn(10) == 0 {
		r.Topics = nil // owned partitions not said
	}
	w.cgSend(c, r, hold)
}

func (w *workload) cgSend(c *wconsumer, r *kmsg.ConsumerGroupHeartbeatRequest, hold bool) {
	g := w.h.s.groups[r.Group]
	classic := g != nil && g.consumer == nil
	id := w.h.send(c.name+" heartbeat", r, Client{ID: c.name, Host: "/10.0.0.2"})
	w.cgPending[id] = cgSent{c, r, hold, classic}
}

// learnConsumer follows a KIP-848 answer; false for any other.
func (w *workload) learnConsumer(rs *Response) bool {
	sent, ok := w.cgPending[rs.ID]
	if !ok {
		return false
	}
	delete(w.cgPending, rs.ID)
	resp := rs.Resp.(*kmsg.ConsumerGroupHeartbeatResponse)
	w.h.cgLearn(&sent.c.cgClient, sent.req, resp, sent.hold)
	if sent.classic && resp.ErrorCode == 0 {
		w.conversions++
	}
	if resp.ErrorCode == kerr.UnknownMemberID.Code || resp.ErrorCode == kerr.FencedInstanceID.Code {
		sent.c.memberID = ""
	}
	return true
}

// The workload reaches what KIP-848's replay must cover: revocations
// waited for, members fenced by their timers, static members replaced,
// regex subscriptions resolved, and an Empty classic group converted.
func TestConsumerWorkloadReachesReconciliation(t *testing.T) {
	var unrevoked, unreleased, tombstones, regex, conversions int
	for seed := int64(1); seed <= 40; seed++ {
		w := newWorkload(t, seed, Config{SnapshotMinRecords: 25})
		for range 400 {
			w.step()
		}
		w.settle()
		for _, r := range w.h.log {
			k, err := decodeKey(r.Key)
			require.NoError(t, err)
			if k.kind != keyConsumer {
				continue
			}
			switch {
			case r.Value == nil:
				tombstones += b2i(k.version == keyCGMember)
			case k.version == keyCGCurrent:
				a, err := decodeMemberAssignment(r.Value)
				require.NoError(t, err)
				unrevoked += b2i(a.state == memberUnrevoked)
				unreleased += b2i(a.state == memberUnreleased)
			case k.version == keyCGMember:
				sub, err := decodeMemberSubscription(r.Value)
				require.NoError(t, err)
				regex += b2i(sub.regex != nil)
			}
		}
		conversions += w.conversions
	}
	t.Logf("unrevoked %d, unreleased %d, removed %d, regex %d, conversions %d", unrevoked, unreleased, tombstones, regex, conversions)
	require.Greater(t, unrevoked, 40, "members told to revoke")
	require.Greater(t, unreleased, 40, "members waiting for partitions")
	require.Greater(t, tombstones, 40, "members removed")
	require.Greater(t, regex, 40, "regex subscriptions")
	require.Positive(t, conversions, "an Empty classic group converted")
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Sabotage: the invariant that no partition has two owners fails when two
// members hold one partition, counting one pending revocation as held.
func TestInvariantSeesAPartitionWithTwoOwners(t *testing.T) {
	h := newHarness(t, Config{})
	h.topics["t"] = 2
	join := func(name string) {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Version, r.Group, r.MemberID, r.RebalanceTimeoutMillis = 1, "g", name, 30000
		r.SubscribedTopicNames, r.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		h.do(r)
	}
	join("a")
	join("b")
	g := h.s.groups["g"]
	a, b := g.consumer.members["a"], g.consumer.members["b"]
	require.Equal(t, 2, a.assigned.Count())
	// b is given a's partition 1 while a still holds it: the invariant must
	// see it, whether a holds it as assigned or pending revocation.
	for _, revoking := range []bool{false, true} {
		saved := a.memberAssignment
		if revoking {
			a.assigned, a.revoking, a.state = a.assigned[:0:0], a.assigned, memberUnrevoked
		}
		b.assigned = assign.Assignment{{Topic: topicID("t"), Partitions: []int32{1}}}
		require.Panics(t, func() { g.checkConsumerInvariants(0) }, "revoking=%v", revoking)
		a.memberAssignment, b.assigned = saved, nil
	}
	require.NotPanics(t, func() { g.checkConsumerInvariants(0) })
	_ = time.Second
}
