package groups

import (
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func joinReq(version int16, group, member string, session, rebalance time.Duration) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version, r.Group, r.MemberID = version, group, member
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = int32(session.Milliseconds()), int32(rebalance.Milliseconds())
	r.ProtocolType = "consumer"
	r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("m")}}
	return r
}

func heartbeatReq(group, member string, gen int32) *kmsg.HeartbeatRequest {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.Generation = 3, group, member, gen
	return r
}

// A member that joins during a rebalance cannot heartbeat (it has no
// generation yet), so its parked JoinGroup is bounded by Kafka's 5-minute
// new-member timeout, not by its session, and not held forever by a join
// phase that waits for someone else.
func TestNewMemberJoinIsBoundedByFiveMinutes(t *testing.T) {
	h := newHarness(t, Config{InitialRebalanceDelay: -1})
	a := h.send("join a", joinReq(3, "g", "", 10*time.Second, 10*time.Minute), Client{ID: "a"})
	h.advance(0)
	ja := h.answers[a].(*kmsg.JoinGroupResponse)
	require.Equal(t, int16(0), ja.ErrorCode)
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = "g", ja.MemberID, ja.Generation
	require.Equal(t, int16(0), h.do(sync).(*kmsg.SyncGroupResponse).ErrorCode)

	b := h.send("join b", joinReq(3, "g", "", 10*time.Second, 10*time.Minute), Client{ID: "b"})
	h.ready()
	// a keeps its session but does not rejoin; the join phase waits for it
	// up to the rebalance timeout (10 minutes).
	elapsed := time.Duration(0)
	for ; elapsed+9*time.Second < 5*time.Minute; elapsed += 9 * time.Second {
		h.advance(9 * time.Second)
		require.Equal(t, kerr.RebalanceInProgress.Code, h.do(heartbeatReq("g", ja.MemberID, ja.Generation)).(*kmsg.HeartbeatResponse).ErrorCode)
		require.NotContains(t, h.answers, b)
	}
	h.advance(5*time.Minute - elapsed)
	require.Contains(t, h.answers, b)
	require.Equal(t, errName(kerr.UnknownMemberID.Code), errName(h.answers[b].(*kmsg.JoinGroupResponse).ErrorCode))
	require.Len(t, h.s.groups["g"].members, 1)
}

// The initial delay is extended while members arrive, but never past the
// rebalance timeout.
func TestInitialDelayIsCappedByTheRebalanceTimeout(t *testing.T) {
	h := newHarness(t, Config{InitialRebalanceDelay: 3 * time.Second})
	ids := []RequestID{h.send("a", joinReq(3, "g", "", 10*time.Second, 5*time.Second), Client{ID: "a"})}
	rd := h.ready()
	require.Equal(t, 3*time.Second, rd.Deadline.Sub(h.now))
	h.advance(2 * time.Second)
	ids = append(ids, h.send("b", joinReq(3, "g", "", 10*time.Second, 5*time.Second), Client{ID: "b"}))
	h.ready()
	rd = h.advance(time.Second) // 3 s: b arrived, 2 s of the 5 s left
	require.Equal(t, 2*time.Second, rd.Deadline.Sub(h.now))
	h.advance(time.Second)
	ids = append(ids, h.send("c", joinReq(3, "g", "", 10*time.Second, 5*time.Second), Client{ID: "c"}))
	h.ready()
	h.advance(time.Second) // 5 s: nothing left of the rebalance timeout
	for _, id := range ids {
		require.Contains(t, h.answers, id)
		require.Equal(t, int16(0), h.answers[id].(*kmsg.JoinGroupResponse).ErrorCode)
	}
	require.Equal(t, int32(1), h.answers[ids[2]].(*kmsg.JoinGroupResponse).Generation)
}

// group.max.size counts the members parked in JoinGroup while a rebalance
// collects them, and the members otherwise.
func TestGroupMaxSize(t *testing.T) {
	h := newHarness(t, Config{InitialRebalanceDelay: 3 * time.Second, GroupMaxSize: 2})
	for i, want := range []int16{0, 0, kerr.GroupMaxSizeReached.Code} {
		id := h.send("join", joinReq(3, "g", "", 10*time.Second, 30*time.Second), Client{ID: string(rune('a' + i))})
		h.ready()
		if want != 0 {
			require.Equal(t, errName(want), errName(h.answers[id].(*kmsg.JoinGroupResponse).ErrorCode))
			require.Equal(t, "", h.answers[id].(*kmsg.JoinGroupResponse).MemberID)
		} else {
			require.NotContains(t, h.answers, id)
		}
	}
	h.advance(10 * time.Second)
	id := h.send("join", joinReq(4, "g", "", 10*time.Second, 30*time.Second), Client{ID: "d"})
	h.ready()
	require.Equal(t, errName(kerr.GroupMaxSizeReached.Code), errName(h.answers[id].(*kmsg.JoinGroupResponse).ErrorCode))
}

// With the default floor, the 1001st record since the last snapshot brings
// one: here the whole live state is one offset, restated on its own.
func TestSnapshotAfterTheFloor(t *testing.T) {
	h := newHarness(t, Config{})
	commit := func(offset int64) Ready {
		h.send("commit", commitReq(2, "g", -1, "", "t", 0, offset), Client{})
		return h.ready()
	}
	for i := range 1000 {
		require.False(t, commit(int64(i)).Snapshot)
	}
	rd := commit(1000)
	require.True(t, rd.Snapshot)
	last := rd.Effects[len(rd.Effects)-1]
	require.True(t, last.SnapshotStart)
	require.Len(t, last.Write, 1)
	from := len(h.log) - 1
	require.Equal(t, h.view(h.replayed(0)), h.view(h.replayed(from)))
	require.Equal(t, h.view(h.s), h.view(h.replayed(from)))
	// The count starts again from the snapshot's size.
	for i := range 999 {
		require.False(t, commit(int64(i)).Snapshot)
	}
	require.True(t, commit(1).Snapshot)
}

// A shard loaded from a log counts the replayed records toward its next
// snapshot, so a long history is bounded after a failover too.
func TestReplayedRecordsCountTowardTheSnapshot(t *testing.T) {
	s := NewShard(Config{SnapshotMinRecords: 10})
	for i := range 11 {
		o := offsetValue{offset: int64(i), leaderEpoch: -1, expireMs: -1}
		require.NoError(t, s.Replay(int64(i), offsetKey("g", "t", 0), encodeOffsetValue(o)))
	}
	s.Loaded(epoch)
	require.True(t, s.Ready().Snapshot)
}

// Requests with odd field values never panic and are each answered once:
// by now, or by the time the groups settle.
func TestOddRequestsAreAnswered(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	long := strings.Repeat("x", 40000)
	strs := []string{"", "g", "x", long}
	str := func() string { return strs[rng.Intn(len(strs))] }
	pstr := func() *string {
		if rng.Intn(3) == 0 {
			return nil
		}
		s := str()
		return &s
	}
	n := func() int32 { return []int32{-1, 0, 1, 2, 1 << 30, -1 << 31}[rng.Intn(6)] }
	ms := func() time.Duration {
		return time.Duration([]int32{-1, 0, 6000, 10000, 10000, 1 << 30}[rng.Intn(6)]) * time.Millisecond
	}
	h := newHarness(t, Config{})
	var ids []RequestID
	for range 3000 {
		var req kmsg.Request
		switch rng.Intn(10) {
		case 0:
			r := joinReq(int16(rng.Intn(10)), str(), str(), ms(), ms())
			r.InstanceID, r.ProtocolType = pstr(), str()
			if rng.Intn(3) == 0 {
				r.Protocols = nil
			}
			req = r
		case 1:
			r := kmsg.NewPtrSyncGroupRequest()
			r.Version, r.Group, r.MemberID, r.Generation, r.InstanceID = int16(rng.Intn(6)), str(), str(), n(), pstr()
			r.ProtocolType, r.Protocol = pstr(), pstr()
			r.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: str()}}
			req = r
		case 2:
			r := heartbeatReq(str(), str(), n())
			r.InstanceID = pstr()
			req = r
		case 3:
			r := kmsg.NewPtrLeaveGroupRequest()
			r.Version, r.Group, r.MemberID = int16(rng.Intn(6)), str(), str()
			r.Members = []kmsg.LeaveGroupRequestMember{{MemberID: str(), InstanceID: pstr()}}
			req = r
		case 4:
			r := commitReq(int16(rng.Intn(10)), str(), n(), str(), str(), n(), int64(n()))
			r.Topics[0].Partitions[0].Metadata, r.InstanceID = pstr(), pstr()
			req = r
		case 5:
			r := kmsg.NewPtrOffsetFetchRequest()
			r.Version, r.Group = int16(rng.Intn(10)), str()
			r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: str()}}
			req = r
		case 6:
			r := kmsg.NewPtrOffsetDeleteRequest()
			r.Group = str()
			r.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: str(), Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: n()}}}}
			req = r
		case 7:
			r := kmsg.NewPtrDescribeGroupsRequest()
			r.Groups = []string{str(), str()}
			req = r
		case 8:
			r := kmsg.NewPtrDeleteGroupsRequest()
			r.Groups = []string{str()}
			req = r
		default:
			h.advance(time.Duration(rng.Intn(20)) * time.Second)
			continue
		}
		client := str()
		ids = append(ids, h.send("odd", req, Client{ID: client[:min(3, len(client))]}))
		h.ready()
	}
	for range 60 {
		h.advance(time.Minute)
	}
	joined := 0
	for _, id := range ids {
		require.Contains(t, h.answers, id)
		if j, ok := h.answers[id].(*kmsg.JoinGroupResponse); ok && j.ErrorCode == 0 {
			joined++
		}
	}
	require.Positive(t, joined, "some odd requests are fine ones")
	for _, r := range h.log {
		_, err := decodeKey(r.Key)
		require.NoError(t, err)
	}
	require.Equal(t, h.view(h.s), h.view(h.replayed(0)))
}

// An API the shard does not serve is the runtime's routing error, said as
// an error in the response rather than a panic.
func TestUnservedAPI(t *testing.T) {
	h := newHarness(t, Config{})
	h.send("produce", kmsg.NewPtrProduceRequest(), Client{})
	rd := h.s.Ready()
	require.Len(t, rd.Effects, 1)
	require.Error(t, rd.Effects[0].Respond.Err)
	require.Nil(t, rd.Effects[0].Respond.Resp)
}
