package groups

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func commitReq(version int16, group string, gen int32, member string, topic string, partition int32, offset int64) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group, r.Generation, r.MemberID = version, group, gen, member
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = topic
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset = partition, offset
	t.Partitions = append(t.Partitions, p)
	r.Topics = append(r.Topics, t)
	return r
}

func commitCode(t *testing.T, resp kmsg.Response) int16 {
	r := resp.(*kmsg.OffsetCommitResponse)
	require.Len(t, r.Topics, 1)
	require.Len(t, r.Topics[0].Partitions, 1)
	return r.Topics[0].Partitions[0].ErrorCode
}

func fetchOne(h *harness, version int16, group, topic string, partition int32) kmsg.OffsetFetchResponseTopicPartition {
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version, r.Group = version, group
	r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{partition}}}
	resp := h.do(r).(*kmsg.OffsetFetchResponse)
	require.Len(h.t, resp.Topics, 1)
	require.Len(h.t, resp.Topics[0].Partitions, 1)
	return resp.Topics[0].Partitions[0]
}

// A commit's answer follows its Write in the effects, so the runtime sends
// it only once the offset is replicated; a fetch after it sees it.
func TestCommitIsAnsweredAfterItsWrite(t *testing.T) {
	h := newHarness(t, Config{})
	req := commitReq(6, "g", -1, "", "t", 3, 42)
	req.Topics[0].Partitions[0].LeaderEpoch = 7
	req.Topics[0].Partitions[0].Metadata = kmsg.StringPtr("meta")
	id := h.send("commit", req, Client{})
	rd := h.s.Ready()
	require.Len(t, rd.Effects, 2)
	require.Len(t, rd.Effects[0].Write, 1)
	require.Equal(t, id, rd.Effects[1].Respond.ID)
	require.Equal(t, int16(0), commitCode(t, rd.Effects[1].Respond.Resp))

	got := fetchOne(h, 5, "g", "t", 3)
	require.Equal(t, int64(42), got.Offset)
	require.Equal(t, int32(7), got.LeaderEpoch)
	require.Equal(t, "meta", *got.Metadata)
	require.Equal(t, int16(0), got.ErrorCode)
}

func TestCommitErrors(t *testing.T) {
	exists := func(topic string, partition int32) bool { return topic == "t" && partition < 4 }
	long := strings.Repeat("x", 4097)
	for _, tc := range []struct {
		name  string
		setup func(h *harness) (gen int32, member string)
		req   func(gen int32, member string) *kmsg.OffsetCommitRequest
		want  int16
	}{
		{"v0 simple commit", nil, func(int32, string) *kmsg.OffsetCommitRequest {
			return commitReq(0, "g", -1, "", "t", 0, 1)
		}, 0},
		{"empty group id is allowed", nil, func(int32, string) *kmsg.OffsetCommitRequest {
			return commitReq(2, "", -1, "", "t", 0, 1)
		}, 0},
		{"missing topic", nil, func(int32, string) *kmsg.OffsetCommitRequest {
			return commitReq(2, "g", -1, "", "nope", 0, 1)
		}, kerr.UnknownTopicOrPartition.Code},
		{"missing partition", nil, func(int32, string) *kmsg.OffsetCommitRequest {
			return commitReq(2, "g", -1, "", "t", 4, 1)
		}, kerr.UnknownTopicOrPartition.Code},
		{"metadata too large", nil, func(int32, string) *kmsg.OffsetCommitRequest {
			r := commitReq(2, "g", -1, "", "t", 0, 1)
			r.Topics[0].Partitions[0].Metadata = &long
			return r
		}, kerr.OffsetMetadataTooLarge.Code},
		{"metadata at the limit", nil, func(int32, string) *kmsg.OffsetCommitRequest {
			r := commitReq(2, "g", -1, "", "t", 0, 1)
			r.Topics[0].Partitions[0].Metadata = kmsg.StringPtr(long[:4096])
			return r
		}, 0},
		{"generation on a missing group before v9", nil, func(int32, string) *kmsg.OffsetCommitRequest {
			return commitReq(8, "g", 1, "m", "t", 0, 1)
		}, kerr.IllegalGeneration.Code},
		{"generation on a missing group from v9", nil, func(int32, string) *kmsg.OffsetCommitRequest {
			return commitReq(9, "g", 1, "m", "t", 0, 1)
		}, kerr.GroupIDNotFound.Code},
		{"member commit", stableGroup1, func(gen int32, m string) *kmsg.OffsetCommitRequest {
			return commitReq(8, "g", gen, m, "t", 0, 1)
		}, 0},
		{"simple commit to a group with members", stableGroup1, func(int32, string) *kmsg.OffsetCommitRequest {
			return commitReq(8, "g", -1, "", "t", 0, 1)
		}, kerr.UnknownMemberID.Code},
		{"old generation", stableGroup1, func(gen int32, m string) *kmsg.OffsetCommitRequest {
			return commitReq(8, "g", gen-1, m, "t", 0, 1)
		}, kerr.IllegalGeneration.Code},
		{"unknown member", stableGroup1, func(gen int32, _ string) *kmsg.OffsetCommitRequest {
			return commitReq(8, "g", gen, "who", "t", 0, 1)
		}, kerr.UnknownMemberID.Code},
		{"fenced instance", stableGroup1, func(gen int32, m string) *kmsg.OffsetCommitRequest {
			r := commitReq(8, "g", gen, "other", "t", 0, 1)
			r.InstanceID = kmsg.StringPtr("i")
			return r
		}, kerr.FencedInstanceID.Code},
		{"completing rebalance", joinedGroup1, func(gen int32, m string) *kmsg.OffsetCommitRequest {
			return commitReq(8, "g", gen, m, "t", 0, 1)
		}, kerr.RebalanceInProgress.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{TopicExists: exists, InitialRebalanceDelay: -1})
			var gen int32
			var m string
			if tc.setup != nil {
				gen, m = tc.setup(h)
			}
			before := len(h.log)
			got := commitCode(t, h.do(tc.req(gen, m)))
			require.Equal(t, errName(tc.want), errName(got))
			if tc.want != 0 {
				require.Len(t, h.log, before, "a refused commit writes nothing")
			} else {
				require.Len(t, h.log, before+1)
			}
		})
	}
}

// joinedGroup1 leaves group g with one static member (instance "i") that
// has joined (CompletingRebalance) but not synced.
func joinedGroup1(h *harness) (int32, string) {
	j := kmsg.NewPtrJoinGroupRequest()
	session := int32(10000)
	if h.cfg.SessionTimeoutMax > time.Hour {
		session = int32(time.Hour.Milliseconds())
	}
	j.Version, j.Group, j.SessionTimeoutMillis, j.RebalanceTimeoutMillis = 5, "g", session, 10000
	j.InstanceID, j.ProtocolType = kmsg.StringPtr("i"), "consumer"
	j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: consumerMeta("t")}}
	h.send("join", j, Client{ID: "c"})
	h.advance(0)
	for id, resp := range h.answers {
		if jr, ok := resp.(*kmsg.JoinGroupResponse); ok && h.reqs[id] == "join" {
			require.Equal(h.t, int16(0), jr.ErrorCode)
			return jr.Generation, jr.MemberID
		}
	}
	h.t.Fatal("no join answer")
	return 0, ""
}

// stableGroup1 is joinedGroup1 then the member's SyncGroup: Stable.
func stableGroup1(h *harness) (int32, string) {
	gen, m := joinedGroup1(h)
	s := kmsg.NewPtrSyncGroupRequest()
	s.Version, s.Group, s.Generation, s.MemberID, s.InstanceID = 3, "g", gen, m, kmsg.StringPtr("i")
	s.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: m, MemberAssignment: []byte("a")}}
	require.Equal(h.t, int16(0), h.do(s).(*kmsg.SyncGroupResponse).ErrorCode)
	return gen, m
}

// consumerMeta is a ConsumerProtocol subscription to topics.
func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version, m.Topics = 0, topics
	return m.AppendTo(nil)
}

func TestOffsetFetchVersions(t *testing.T) {
	h := newHarness(t, Config{})
	for p := int32(0); p < 2; p++ {
		req := commitReq(7, "g", -1, "", "t", p, 10+int64(p))
		req.Topics[0].Partitions[0].LeaderEpoch = 3
		h.do(req)
	}
	h.do(commitReq(7, "g", -1, "", "u", 0, 5))

	// v0/v1: no leader epoch on the wire, no top-level error.
	got := fetchOne(h, 0, "g", "t", 1)
	require.Equal(t, int64(11), got.Offset)
	// A partition, group or topic without an offset: -1, "", no error.
	for _, c := range []struct{ group, topic string }{{"g", "nope"}, {"none", "t"}} {
		got = fetchOne(h, 5, c.group, c.topic, 0)
		require.Equal(t, int64(-1), got.Offset)
		require.Equal(t, int32(-1), got.LeaderEpoch)
		require.Equal(t, "", *got.Metadata)
		require.Equal(t, int16(0), got.ErrorCode)
	}

	// v2+: null topics fetch everything, sorted; require_stable (v7)
	// changes nothing without transactions.
	all := kmsg.NewPtrOffsetFetchRequest()
	all.Version, all.Group, all.RequireStable = 7, "g", true
	resp := h.do(all).(*kmsg.OffsetFetchResponse)
	require.Equal(t, int16(0), resp.ErrorCode)
	require.Len(t, resp.Topics, 2)
	require.Equal(t, "t", resp.Topics[0].Topic)
	require.Len(t, resp.Topics[0].Partitions, 2)
	require.Equal(t, int32(3), resp.Topics[0].Partitions[1].LeaderEpoch)
	require.Equal(t, "u", resp.Topics[1].Topic)

	// v1 with an empty topic list asks for nothing (no "all" before v2).
	v1 := kmsg.NewPtrOffsetFetchRequest()
	v1.Version, v1.Group, v1.Topics = 1, "g", []kmsg.OffsetFetchRequestTopic{}
	require.Empty(t, h.do(v1).(*kmsg.OffsetFetchResponse).Topics)

	// v8+: batched groups, each answered on its own.
	b := kmsg.NewPtrOffsetFetchRequest()
	b.Version = 8
	b.Groups = []kmsg.OffsetFetchRequestGroup{
		{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "u", Partitions: []int32{0, 9}}}},
		{Group: "none"},
		{Group: "g"},
	}
	br := h.do(b).(*kmsg.OffsetFetchResponse)
	require.Len(t, br.Groups, 3)
	require.Equal(t, int64(5), br.Groups[0].Topics[0].Partitions[0].Offset)
	require.Equal(t, int64(-1), br.Groups[0].Topics[0].Partitions[1].Offset)
	require.Empty(t, br.Groups[1].Topics)
	require.Len(t, br.Groups[2].Topics, 2)

	// A topic asked with no partitions is answered with none.
	e := kmsg.NewPtrOffsetFetchRequest()
	e.Version, e.Group, e.Topics = 3, "g", []kmsg.OffsetFetchRequestTopic{{Topic: "t"}}
	er := h.do(e).(*kmsg.OffsetFetchResponse)
	require.Len(t, er.Topics, 1)
	require.Empty(t, er.Topics[0].Partitions)
}

func TestOffsetDelete(t *testing.T) {
	del := func(group, topic string) *kmsg.OffsetDeleteRequest {
		r := kmsg.NewPtrOffsetDeleteRequest()
		r.Group = group
		r.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}, {Partition: 1}}}}
		return r
	}
	h := newHarness(t, Config{InitialRebalanceDelay: -1, TopicExists: func(topic string, _ int32) bool { return topic != "gone" }})
	require.Equal(t, kerr.InvalidGroupID.Code, h.do(del("", "t")).(*kmsg.OffsetDeleteResponse).ErrorCode)
	require.Equal(t, kerr.GroupIDNotFound.Code, h.do(del("g", "t")).(*kmsg.OffsetDeleteResponse).ErrorCode)

	h.do(commitReq(2, "g", -1, "", "t", 0, 1))
	h.do(commitReq(2, "g", -1, "", "other", 0, 1))
	before := len(h.log)
	r := h.do(del("g", "t")).(*kmsg.OffsetDeleteResponse)
	require.Equal(t, int16(0), r.ErrorCode)
	require.Equal(t, []int16{0, 0}, []int16{r.Topics[0].Partitions[0].ErrorCode, r.Topics[0].Partitions[1].ErrorCode})
	require.Len(t, h.log, before+1, "one tombstone: the partition without an offset writes none")
	require.Nil(t, h.log[before].Value)
	require.Equal(t, int64(-1), fetchOne(h, 5, "g", "t", 0).Offset)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, h.do(del("g", "gone")).(*kmsg.OffsetDeleteResponse).Topics[0].Partitions[0].ErrorCode)

	// A consumer group with members: topics it subscribes to are refused.
	h2 := newHarness(t, Config{InitialRebalanceDelay: -1})
	gen, m := stableGroup1(h2)
	h2.do(commitReq(8, "g", gen, m, "t", 0, 1))
	h2.do(commitReq(8, "g", gen, m, "x", 0, 1))
	r = h2.do(del("g", "t")).(*kmsg.OffsetDeleteResponse)
	require.Equal(t, kerr.GroupSubscribedToTopic.Code, r.Topics[0].Partitions[0].ErrorCode)
	r = h2.do(del("g", "x")).(*kmsg.OffsetDeleteResponse)
	require.Equal(t, int16(0), r.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, int64(-1), fetchOne(h2, 5, "g", "x", 0).Offset)
}

// A group of another protocol type with members cannot say what it
// subscribes to: NON_EMPTY_GROUP.
func TestOffsetDeleteNonConsumerGroupWithMembers(t *testing.T) {
	h := newHarness(t, Config{InitialRebalanceDelay: -1})
	j := kmsg.NewPtrJoinGroupRequest()
	j.Version, j.Group, j.SessionTimeoutMillis, j.ProtocolType = 3, "g", 10000, "connect"
	j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "default", Metadata: []byte("x")}}
	id := h.send("join", j, Client{ID: "c"})
	h.advance(0)
	require.Equal(t, int16(0), h.answers[id].(*kmsg.JoinGroupResponse).ErrorCode)
	r := kmsg.NewPtrOffsetDeleteRequest()
	r.Group = "g"
	require.Equal(t, kerr.NonEmptyGroup.Code, h.do(r).(*kmsg.OffsetDeleteResponse).ErrorCode)
}

func TestOffsetsExpire(t *testing.T) {
	h := newHarness(t, Config{OffsetsRetention: time.Hour, OffsetsRetentionCheckInterval: time.Minute,
		InitialRebalanceDelay: -1, SessionTimeoutMax: 2 * time.Hour})
	h.do(commitReq(2, "simple", -1, "", "t", 0, 1))
	// Retention asked by the commit (v2-v4) overrides the configuration.
	kept := commitReq(2, "kept", -1, "", "t", 0, 1)
	kept.RetentionTimeMillis = (3 * time.Hour).Milliseconds()
	h.do(kept)

	// A consumer group that commits, then empties: its retention counts
	// from when it became Empty, not from the commit.
	gen, m := stableGroup1(h)
	h.do(commitReq(8, "g", gen, m, "t", 0, 7))
	h.advance(50 * time.Minute)
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group = 3, "g"
	leave.Members = []kmsg.LeaveGroupRequestMember{{InstanceID: kmsg.StringPtr("i")}}
	require.Equal(t, int16(0), h.do(leave).(*kmsg.LeaveGroupResponse).Members[0].ErrorCode)

	h.advance(9*time.Minute + 59*time.Second)
	require.Equal(t, int64(1), fetchOne(h, 5, "simple", "t", 0).Offset)
	h.advance(time.Minute)
	require.Equal(t, int64(-1), fetchOne(h, 5, "simple", "t", 0).Offset, "simple group: an hour after the commit")
	require.Equal(t, int64(7), fetchOne(h, 5, "g", "t", 0).Offset, "empty group: counted from Empty")
	require.NotContains(t, h.s.groups, "simple", "a simple group with no offsets left is gone")

	h.advance(51 * time.Minute)
	require.Equal(t, int64(-1), fetchOne(h, 5, "g", "t", 0).Offset)
	require.NotContains(t, h.s.groups, "g", "the empty group is deleted with its last offset")
	last := h.log[len(h.log)-1]
	k, err := decodeKey(last.Key)
	require.NoError(t, err)
	require.Equal(t, keyGroup, k.kind)
	require.Nil(t, last.Value, "the group's metadata is tombstoned")

	require.Equal(t, int64(1), fetchOne(h, 5, "kept", "t", 0).Offset, "kept for the 3 hours its commit asked")
	h.advance(70 * time.Minute)
	require.Equal(t, int64(-1), fetchOne(h, 5, "kept", "t", 0).Offset)
	require.Equal(t, h.view(h.s), h.view(h.replayed(0)))
}

// Kafka's own byte layout, by hand: a tool reading __consumer_offsets must
// find the fields where Kafka puts them.
func TestRecordLayout(t *testing.T) {
	require.Equal(t, "0001"+"0001"+"67"+"0001"+"74"+"00000003", hex.EncodeToString(offsetKey("g", "t", 3)))
	require.Equal(t, "0002"+"0001"+"67", hex.EncodeToString(groupKey("g")))
	v := encodeOffsetValue(offsetValue{offset: 5, leaderEpoch: 2, metadata: "m", commitMs: 9, expireMs: -1})
	require.Equal(t, "0003"+"0000000000000005"+"00000002"+"0001"+"6d"+"0000000000000009", hex.EncodeToString(v))
}

func TestRecordsRoundTrip(t *testing.T) {
	for _, o := range []offsetValue{
		{offset: 5, leaderEpoch: 2, metadata: "m", commitMs: 9, expireMs: -1},
		{offset: 0, leaderEpoch: -1, metadata: "", commitMs: 1, expireMs: 100},
	} {
		got, err := decodeOffsetValue(encodeOffsetValue(o))
		require.NoError(t, err)
		if o.expireMs >= 0 {
			o.leaderEpoch = -1 // v1 carries no epoch
		}
		require.Equal(t, o, got)
	}
	g := newGroup("g")
	g.protocolType, g.protocol, g.generation, g.stateMs = "consumer", "range", 4, 77
	g.add(&member{id: "m1", instanceID: kmsg.StringPtr("i"), clientID: "c", clientHost: "/h",
		rebalanceTimeout: time.Minute, sessionTimeout: 10 * time.Second,
		protocols: []protocol{{"range", []byte("sub")}}, assignment: []byte("asg")})
	v, err := decodeGroupValue(encodeGroupValue(g.metadataValue()))
	require.NoError(t, err)
	back := newGroup("g")
	back.loadMetadata(v)
	require.Equal(t, stateStable, back.state)
	require.Equal(t, g.metadataValue(), back.metadataValue())

	for _, k := range []recordKey{{kind: keyOffset, group: "g", topic: "t", partition: 1}, {kind: keyGroup, group: "g"}} {
		b := groupKey(k.group)
		if k.kind == keyOffset {
			b = offsetKey(k.group, k.topic, k.partition)
		}
		got, err := decodeKey(b)
		require.NoError(t, err)
		require.Equal(t, k, got)
	}
}

func TestReplayRefusesBadRecords(t *testing.T) {
	s := NewShard(Config{})
	err := s.Replay(0, []byte{0, 9, 0, 0}, nil) // 9: share groups, not served
	require.True(t, errors.Is(err, ErrUnknownRecord), "%v", err)
	require.Error(t, s.Replay(1, []byte{0}, nil))
	require.Error(t, s.Replay(2, offsetKey("g", "t", 0)[:5], nil))
	require.Error(t, s.Replay(3, offsetKey("g", "t", 0), []byte{0, 3, 1}))
	require.Error(t, s.Replay(4, groupKey("g"), []byte{0, 3, 0}))
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, Config{}.Validate())
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{SessionTimeoutMin: time.Minute, SessionTimeoutMax: time.Second}, "group.max.session.timeout.ms"},
		{Config{GroupMaxSize: -1}, "group.max.size"},
		{Config{OffsetsRetention: time.Second}, "offsets.retention.minutes"},
		{Config{OffsetMetadataMaxBytes: -1}, "offset.metadata.max.bytes"},
		{Config{OffsetMetadataMaxBytes: 40000}, "offset.metadata.max.bytes"},
		{Config{Partition: -1}, "partition"},
	} {
		err := tc.cfg.Validate()
		require.Error(t, err)
		require.Contains(t, err.Error(), tc.want)
	}
	c := Config{}.withDefaults()
	require.Equal(t, 3*time.Second, c.InitialRebalanceDelay)
	require.Equal(t, 6*time.Second, c.SessionTimeoutMin)
	require.Equal(t, 30*time.Minute, c.SessionTimeoutMax)
	require.Equal(t, 7*24*time.Hour, c.OffsetsRetention)
	require.Equal(t, int32(4096), c.OffsetMetadataMaxBytes)
}

func TestTopicsDeletedRemovesTheirOffsets(t *testing.T) {
	h := newHarness(t, Config{})
	for _, g := range []string{"a", "b"} {
		h.do(commitReq(2, g, -1, "", "gone", 0, 1))
		h.do(commitReq(2, g, -1, "", "kept", 0, 2))
	}
	before := len(h.log)
	h.s.TopicsDeleted([]string{"gone", "never"})
	rd := h.ready()
	require.Len(t, rd.Effects, 1)
	require.Len(t, h.log, before+2)
	for _, g := range []string{"a", "b"} {
		require.Equal(t, int64(-1), fetchOne(h, 5, g, "gone", 0).Offset)
		require.Equal(t, int64(2), fetchOne(h, 5, g, "kept", 0).Offset)
	}
	require.Equal(t, h.view(h.s), h.view(h.replayed(0)))
}
