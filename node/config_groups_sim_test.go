package node

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newGroupsBroker starts a single broker with one coordinator shard, no
// initial rebalance delay and topic "t", with the group keys in props,
// once its coordinator is up.
func newGroupsBroker(t *testing.T, seed uint64, props string) *simBroker {
	t.Helper()
	s := newSimBroker(t, seed, func(c *Config) {
		cfg, _, err := ParseProperties(props, *c)
		require.NoError(t, err)
		require.NoError(t, cfg.Validate())
		cfg.OffsetsTopicNumPartitions, cfg.GroupInitialRebalanceDelay = 1, 0
		*c = cfg
	})
	s.mustCreate("t")
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.CoordinatorKey = "g" // creates __consumer_offsets
	require.True(t, s.world.RunUntil(func() bool { return s.do(find).(*kmsg.FindCoordinatorResponse).ErrorCode == 0 }, time.Minute))
	return s
}

// classicJoin is a new member's JoinGroup v3 (no KIP-394 second join)
// asking for a session timeout of sessionMs.
func classicJoin(group string, sessionMs int32) *kmsg.JoinGroupRequest {
	req := joinRequest(group, "")
	req.Version, req.SessionTimeoutMillis = 3, sessionMs
	return req
}

func joinCode(r kmsg.Response) int16 { return r.(*kmsg.JoinGroupResponse).ErrorCode }

func TestGroupMaxSizeRefusesTheJoinPastIt(t *testing.T) {
	s := newGroupsBroker(t, 91, "group.max.size=1")
	first := s.doCoordinated(classicJoin("g", 10000), joinCode).(*kmsg.JoinGroupResponse)
	require.Zero(t, first.ErrorCode, "%v", kerr.ErrorForCode(first.ErrorCode))
	require.Equal(t, first.MemberID, first.LeaderID)
	second := s.do(classicJoin("g", 10000)).(*kmsg.JoinGroupResponse)
	require.Equal(t, kerr.GroupMaxSizeReached.Code, second.ErrorCode, "%v", kerr.ErrorForCode(second.ErrorCode))
}

// The session timeouts a member may ask for are the broker's, not
// Kafka's default [6 s, 30 min]: 3 s is accepted under
// group.min.session.timeout.ms=2000.
func TestGroupSessionTimeoutBoundsAreTheBrokers(t *testing.T) {
	s := newGroupsBroker(t, 92, "group.min.session.timeout.ms=2000\ngroup.max.session.timeout.ms=4000")
	for _, tc := range []struct {
		sessionMs int32
		want      int16
	}{
		{1999, kerr.InvalidSessionTimeout.Code},
		{4001, kerr.InvalidSessionTimeout.Code},
		{3000, 0},
	} {
		got := s.doCoordinated(classicJoin("g", tc.sessionMs), joinCode).(*kmsg.JoinGroupResponse)
		require.Equal(t, errName(tc.want), errName(got.ErrorCode), "session %d ms", tc.sessionMs)
	}
}

func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(code).Error()
}

func TestOffsetMetadataMaxBytesRefusesLongerMetadata(t *testing.T) {
	s := newGroupsBroker(t, 93, "offset.metadata.max.bytes=8")
	commit := func(metadata string) int16 {
		req := simpleCommit("g", "t", 1, 5)
		req.Topics[0].Partitions[0].Metadata = kmsg.StringPtr(metadata)
		return commitCode(s.doCoordinated(req, commitCode))
	}
	require.Equal(t, errName(kerr.OffsetMetadataTooLarge.Code), errName(commit("123456789")))
	require.Equal(t, "NONE", errName(commit("12345678")))
	require.Equal(t, map[string]int64{"t-0": 5}, s.fetchAll("g"), "only the commit that fits is kept")
}

// The KIP-848 keys: the heartbeat interval members are told, the group's
// size and the assignors they may ask for.
func TestConsumerGroupKeysReachTheHeartbeat(t *testing.T) {
	s := newGroupsBroker(t, 94, "group.consumer.heartbeat.interval.ms=3000\n"+
		"group.consumer.min.heartbeat.interval.ms=1000\ngroup.consumer.max.size=1\ngroup.consumer.assignors=range")
	code := func(r kmsg.Response) int16 { return r.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode }
	beat := func(group, member string) *kmsg.ConsumerGroupHeartbeatResponse {
		return s.doCoordinated(consumerHeartbeat(group, member, 0, []string{"t"}, nil), code).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	a := beat("g", "member-a")
	require.Zero(t, a.ErrorCode, "%v %v", kerr.ErrorForCode(a.ErrorCode), a.ErrorMessage)
	require.Equal(t, int32(3000), a.HeartbeatIntervalMillis)
	b := beat("g", "member-b")
	require.Equal(t, errName(kerr.GroupMaxSizeReached.Code), errName(b.ErrorCode))

	req := consumerHeartbeat("h", "member-c", 0, []string{"t"}, nil)
	req.ServerAssignor = kmsg.StringPtr("uniform")
	c := s.doCoordinated(req, code).(*kmsg.ConsumerGroupHeartbeatResponse)
	require.Equal(t, errName(kerr.UnsupportedAssignor.Code), errName(c.ErrorCode), "uniform is not in group.consumer.assignors")
	req.ServerAssignor = kmsg.StringPtr("range")
	c = s.doCoordinated(req, code).(*kmsg.ConsumerGroupHeartbeatResponse)
	require.Zero(t, c.ErrorCode)
}

// DescribeConfigs of the broker lists the group keys as the file set
// them, documented.
func TestDescribeBrokerConfigsShowsTheGroupKeys(t *testing.T) {
	s := newGroupsBroker(t, 95, "group.max.size=5\noffsets.retention.minutes=30")
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version, req.IncludeSynonyms, req.IncludeDocumentation = 4, true, true
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	req.Resources = append(req.Resources, r)
	resp := s.do(req).(*kmsg.DescribeConfigsResponse)
	got := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		got[c.Name] = c
	}
	for name, want := range map[string]string{
		"group.max.size":            "5",
		"offsets.retention.minutes": "30",
	} {
		require.Equal(t, want, *got[name].Value, name)
		require.Equal(t, kmsg.ConfigSourceStaticBrokerConfig, got[name].Source, name)
		require.NotEmpty(t, *got[name].Documentation, name)
	}
	for name, want := range map[string]string{
		"group.min.session.timeout.ms": "6000",
		"group.consumer.assignors":     "uniform,range",
		"offset.metadata.max.bytes":    "4096",
	} {
		require.Equal(t, want, *got[name].Value, name)
		require.Equal(t, kmsg.ConfigSourceDefaultConfig, got[name].Source, name)
	}
}
