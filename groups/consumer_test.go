package groups

import (
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/groups/assign"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func tps(topic string, ps ...int32) assign.TopicPartitions {
	return assign.TopicPartitions{Topic: topicID(topic), Partitions: ps}
}

// Every KIP-848 record decodes to what was encoded.
func TestConsumerRecordsRoundTrip(t *testing.T) {
	for _, k := range []recordKey{
		{kind: keyConsumer, version: keyCGMetadata, group: "g"},
		{kind: keyConsumer, version: keyCGPartitions, group: "g"},
		{kind: keyConsumer, version: keyCGMember, group: "g", member: "m"},
		{kind: keyConsumer, version: keyCGTargetMetadata, group: "g"},
		{kind: keyConsumer, version: keyCGTargetMember, group: "g", member: "m"},
		{kind: keyConsumer, version: keyCGCurrent, group: "g", member: "m"},
	} {
		got, err := decodeKey(cgKey(k.version, k.group, k.member))
		require.NoError(t, err)
		require.Equal(t, k, got)
	}

	epoch, err := decodeEpochValue("x", encodeEpochValue(42))
	require.NoError(t, err)
	require.Equal(t, int32(42), epoch)

	topics := []topicMeta{{id: topicID("a"), name: "a", partitions: 3}, {id: topicID("b"), name: "b", partitions: 1}}
	gotTopics, err := decodePartitionMetadata(encodePartitionMetadata(topics))
	require.NoError(t, err)
	require.Equal(t, topics, gotTopics)

	sub := memberSubscription{instanceID: kmsg.StringPtr("i"), clientID: "c", clientHost: "/h", topicNames: []string{"a", "b"},
		regex: kmsg.StringPtr("x.*"), rebalanceTimeoutMs: 30000, assignor: kmsg.StringPtr("range")}
	gotSub, err := decodeMemberSubscription(encodeMemberSubscription(sub))
	require.NoError(t, err)
	require.Equal(t, sub, gotSub)

	a := assign.Assignment{tps("a", 0, 2), tps("b", 0)}
	gotTarget, err := decodeTargetMember(encodeTargetMember(a))
	require.NoError(t, err)
	require.Equal(t, a, gotTarget)

	cur := memberAssignment{epoch: 5, previousEpoch: 4, state: memberUnrevoked, assigned: a, revoking: assign.Assignment{tps("a", 1)}}
	gotCur, err := decodeMemberAssignment(encodeMemberAssignment(cur))
	require.NoError(t, err)
	require.Equal(t, cur, gotCur)
}

// The bytes are Kafka's, field by field from the JSON schemas: a
// non-flexible key, a flexible value ending in an empty tag buffer.
func TestConsumerRecordsAreKafkasBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		// ConsumerGroupMetadataKey v3: version, GroupId int16 length.
		{"metadata key", cgKey(keyCGMetadata, "g", ""), "0003" + "0001" + "67"},
		// ConsumerGroupCurrentMemberAssignmentKey v8: GroupId, MemberId.
		{"current key", cgKey(keyCGCurrent, "g", "m"), "0008" + "0001" + "67" + "0001" + "6d"},
		// ConsumerGroupMetadataValue v0: Epoch, tags.
		{"epoch value", encodeEpochValue(7), "0000" + "00000007" + "00"},
		// ConsumerGroupTargetAssignmentMemberValue v0: compact array of
		// (uuid, compact int32 array, tags), tags.
		{"target value", encodeTargetMember(assign.Assignment{tps("t", 1)}),
			"0000" + "02" + hex.EncodeToString([]byte("t\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")) + "02" + "00000001" + "00" + "00"},
		// ConsumerGroupMemberMetadataValue v0: InstanceId null, RackId
		// null, ClientId "c", ClientHost "h", topics ["t"], regex null,
		// RebalanceTimeoutMs, ServerAssignor null, tags.
		{"member value", encodeMemberSubscription(memberSubscription{clientID: "c", clientHost: "h", topicNames: []string{"t"}, rebalanceTimeoutMs: 1}),
			"0000" + "00" + "00" + "0263" + "0268" + "02" + "0274" + "00" + "00000001" + "00" + "00"},
	} {
		require.Equal(t, tc.want, hex.EncodeToString(tc.got), tc.name)
	}
}

func TestConsumerRecordsRefuseBadBytes(t *testing.T) {
	good := encodeMemberAssignment(memberAssignment{epoch: 1, state: memberStable, assigned: assign.Assignment{tps("t", 0)}})
	for n := range len(good) {
		_, err := decodeMemberAssignment(good[:n])
		require.Error(t, err, "truncated to %d bytes", n)
	}
	bad := append([]byte(nil), good...)
	bad[1] = 1
	_, err := decodeMemberAssignment(bad)
	require.True(t, errors.Is(err, ErrUnknownRecord))
	state := encodeMemberAssignment(memberAssignment{state: 5})
	_, err = decodeMemberAssignment(state)
	require.Error(t, err, "an unknown member state")
	// A huge array length in few bytes is refused, not allocated.
	_, err = decodeTargetMember([]byte{0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	require.Error(t, err)
	s := NewShard(Config{})
	require.Error(t, s.Replay(0, cgKey(keyCGCurrent, "g", "m"), []byte{0, 0, 1}))
	require.Error(t, s.Replay(1, cgKey(keyCGCurrent, "g", "m")[:5], nil))
}

// reconcile is Kafka's CurrentAssignmentBuilder, state by state.
func TestReconcile(t *testing.T) {
	t0 := func(ps ...int32) assign.Assignment {
		if len(ps) == 0 {
			return nil
		}
		return assign.Assignment{tps("t", ps...)}
	}
	owned := func(ps ...int32) assignmentSet { return toSet(t0(ps...)) }
	free := func(partitionRef) bool { return false }
	heldBy := func(ps ...int32) func(partitionRef) bool {
		set := owned(ps...)
		return func(r partitionRef) bool { return set[r] }
	}
	for _, tc := range []struct {
		name   string
		m      memberAssignment
		target assign.Assignment
		owned  assignmentSet
		held   func(partitionRef) bool
		want   memberAssignment
	}{
		{"stable at the target epoch: nothing", memberAssignment{epoch: 3, previousEpoch: 2, assigned: t0(0)}, t0(0, 1), owned(0), free,
			memberAssignment{epoch: 3, previousEpoch: 2, assigned: t0(0)}},
		{"new partitions, free: the target epoch", memberAssignment{epoch: 2, previousEpoch: 1, assigned: t0(0)}, t0(0, 1), owned(0), free,
			memberAssignment{epoch: 4, previousEpoch: 2, assigned: t0(0, 1)}},
		{"new partitions held by another: unreleased", memberAssignment{epoch: 2, assigned: t0(0)}, t0(0, 1), owned(0), heldBy(1),
			memberAssignment{epoch: 4, previousEpoch: 2, state: memberUnreleased, assigned: t0(0)}},
		{"partitions to give up: unrevoked, same epoch", memberAssignment{epoch: 2, assigned: t0(0, 1)}, t0(0, 2), owned(0, 1), free,
			memberAssignment{epoch: 2, previousEpoch: 2, state: memberUnrevoked, assigned: t0(0), revoking: t0(1)}},
		{"partitions to give up, already not owned: straight on", memberAssignment{epoch: 2, assigned: t0(0, 1)}, t0(0, 2), owned(0), free,
			memberAssignment{epoch: 4, previousEpoch: 2, assigned: t0(0, 2)}},
		{"owned not said: still owns all", memberAssignment{epoch: 2, assigned: t0(0, 1)}, t0(0), nil, free,
			memberAssignment{epoch: 2, previousEpoch: 2, state: memberUnrevoked, assigned: t0(0), revoking: t0(1)}},
		{"unrevoked, still owning: waits", memberAssignment{epoch: 2, state: memberUnrevoked, assigned: t0(0), revoking: t0(1)}, t0(0, 2), owned(0, 1), free,
			memberAssignment{epoch: 2, state: memberUnrevoked, assigned: t0(0), revoking: t0(1)}},
		{"unrevoked, given up: epoch + 1, then the target", memberAssignment{epoch: 2, state: memberUnrevoked, assigned: t0(0), revoking: t0(1)}, t0(0, 2), owned(0), free,
			memberAssignment{epoch: 4, previousEpoch: 2, assigned: t0(0, 2)}},
		{"unreleased, now free: stable", memberAssignment{epoch: 4, state: memberUnreleased, assigned: t0(0)}, t0(0, 1), owned(0), free,
			memberAssignment{epoch: 4, previousEpoch: 4, assigned: t0(0, 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			targetEpoch := int32(4)
			if tc.name == "stable at the target epoch: nothing" {
				targetEpoch = 3
			}
			require.Equal(t, tc.want, reconcile(tc.m, targetEpoch, tc.target, tc.owned, tc.held))
		})
	}
}

func TestConsumerConfigValidate(t *testing.T) {
	require.ErrorContains(t, Config{ConsumerSessionTimeout: 10 * time.Second}.Validate(), "group.consumer.session.timeout.ms")
	require.NoError(t, Config{ConsumerSessionTimeout: 10 * time.Second, ConsumerSessionTimeoutMin: time.Second}.Validate())
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{ConsumerSessionTimeout: 50 * time.Second, ConsumerSessionTimeoutMin: 55 * time.Second}, "group.consumer.session.timeout.ms"},
		{Config{ConsumerHeartbeatInterval: 20 * time.Second}, "group.consumer.heartbeat.interval.ms"},
		{Config{ConsumerHeartbeatInterval: 50 * time.Second, ConsumerHeartbeatIntervalMax: time.Minute}, "below group.consumer.session.timeout.ms"},
		{Config{ConsumerGroupMaxSize: -1}, "group.consumer.max.size"},
		{Config{ConsumerAssignors: []string{"sticky"}}, "group.consumer.assignors"},
		{Config{ConsumerAssignors: []string{"range", "range"}}, "group.consumer.assignors"},
	} {
		err := tc.cfg.Validate()
		require.ErrorContains(t, err, tc.want)
	}
}

// The heartbeat interval and session timeout come from the config; a
// member's session is renewed by every heartbeat and only by heartbeats.
func TestConsumerHeartbeatIntervalAndSession(t *testing.T) {
	h := newHarness(t, Config{ConsumerSessionTimeout: 10 * time.Second, ConsumerSessionTimeoutMin: time.Second,
		ConsumerHeartbeatInterval: 2 * time.Second, ConsumerHeartbeatIntervalMin: time.Second})
	h.topics["t"] = 1
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.RebalanceTimeoutMillis = 1, "g", "m", 5000
	r.SubscribedTopicNames, r.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp := h.do(r).(*kmsg.ConsumerGroupHeartbeatResponse)
	require.Equal(t, int16(0), resp.ErrorCode)
	require.Equal(t, int32(2000), resp.HeartbeatIntervalMillis)
	for range 5 {
		h.advance(9 * time.Second)
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Version, hb.Group, hb.MemberID, hb.MemberEpoch = 1, "g", "m", resp.MemberEpoch
		require.Equal(t, int16(0), h.do(hb).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode)
	}
	h.advance(10 * time.Second)
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.MemberEpoch = 1, "g", "m", resp.MemberEpoch
	require.Equal(t, kerr.UnknownMemberID.Code, h.do(hb).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode)
}

// Sabotage: the replay comparison sees a lost KIP-848 record. Dropping
// the latest assignment record that still stands makes replay answer
// differently.
func TestReplayCheckSeesALostConsumerRecord(t *testing.T) {
	w := newWorkload(t, 11, Config{})
	for range 400 {
		w.step()
	}
	live := w.h.view(w.h.s)
	require.Equal(t, live, w.h.view(w.h.replayed(0)))
	for i := len(w.h.log) - 1; i >= 0; i-- {
		r := w.h.log[i]
		if k, _ := decodeKey(r.Key); k.kind != keyConsumer || k.version != keyCGCurrent || r.Value == nil {
			continue
		}
		saved := w.h.log
		w.h.log = append(append([]Record(nil), saved[:i]...), saved[i+1:]...)
		got := func() (view string) {
			defer func() {
				if recover() != nil {
					view = "replay failed"
				}
			}()
			return w.h.view(w.h.replayed(0))
		}()
		w.h.log = saved
		if got != live {
			return
		}
	}
	t.Fatal("no dropped assignment record changed what replay answers")
}

// Honest members that heartbeat in any order converge: the group becomes
// Stable, every partition of the subscribed topics is owned by exactly one
// member, and what each member owns is what the coordinator assigned.
// (The invariants build checks no partition has two holders at every
// Ready on the way.)
func TestConsumerGroupConverges(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		w := newWorkload(t, seed, Config{})
		h := w.h
		h.topics["t"], h.topics["u"] = 7, 3
		n := 1 + int(seed%5)
		clients := make([]*cgClient, n)
		heartbeat := func(i int) {
			c := clients[i]
			r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			r.Version, r.Group, r.MemberID, r.MemberEpoch = 1, "cg", fmt.Sprintf("m%d", i), c.epoch
			r.Topics = ownedTopics(c.owned)
			if c.epoch == 0 {
				r.RebalanceTimeoutMillis, r.SubscribedTopicNames = 30000, []string{"t", "u"}
			}
			resp := h.do(r).(*kmsg.ConsumerGroupHeartbeatResponse)
			require.Zero(t, resp.ErrorCode)
			h.cgLearn(c, r, resp, false)
		}
		for i := range clients {
			clients[i] = &cgClient{}
			heartbeat(i)
			for range w.rng.Intn(3) {
				heartbeat(w.rng.Intn(i + 1))
			}
		}
		cg := h.s.groups["cg"].consumer
		for round := 0; cg.state() != "Stable"; round++ {
			require.Less(t, round, 10*n, "seed %d: %d members do not converge", seed, n)
			for _, i := range w.rng.Perm(n) {
				heartbeat(i)
			}
		}
		owned := map[partitionRef]int{}
		for i, c := range clients {
			require.True(t, sameAssignment(c.owned, cg.members[fmt.Sprintf("m%d", i)].assigned))
			for _, r := range refsOf(c.owned) {
				owned[r]++
			}
		}
		require.Len(t, owned, 10, "seed %d: every partition is owned", seed)
		for r, k := range owned {
			require.Equal(t, 1, k, "partition %v", r)
		}
	}
}
