package groups

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups v6 (KIP-1043) says why a group is not described, with
// Kafka's GroupMetadataManager messages; earlier versions answer those
// groups "Dead" with no error, and describe a KIP-848 group in classic
// terms.
func TestDescribeGroupsV6ErrorMessages(t *testing.T) {
	h := newHarness(t, Config{})
	h.topics["t"] = 1
	require.Zero(t, commitCode(t, h.do(commitReq(2, "classic", -1, "", "t", 0, 5))))
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = 1, "kip848", "m", 5000
	hb.SubscribedTopicNames, hb.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	require.Zero(t, h.do(hb).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode)

	type want struct {
		state string
		code  int16
		msg   *string
	}
	notFound := func(msg string) want { return want{"Dead", kerr.GroupIDNotFound.Code, &msg} }
	for v := int16(0); v <= 6; v++ {
		r := kmsg.NewPtrDescribeGroupsRequest()
		r.Version, r.Groups = v, []string{"classic", "kip848", "missing", ""}
		resp := h.do(r).(*kmsg.DescribeGroupsResponse)
		wants := []want{{"Empty", 0, nil}, {"Stable", 0, nil}, {"Dead", 0, nil}, {"Dead", 0, nil}}
		if v >= 6 {
			wants[1] = notFound("Group kip848 is not a classic group.")
			wants[2] = notFound("Group missing not found.")
			wants[3] = notFound("Group  not found.")
		}
		require.Len(t, resp.Groups, len(wants))
		for i, w := range wants {
			got := resp.Groups[i]
			require.Equal(t, r.Groups[i], got.Group, "v%d", v)
			require.Equal(t, w, want{got.State, got.ErrorCode, got.ErrorMessage}, "v%d %q", v, got.Group)
			if w.code != 0 {
				require.Empty(t, got.Members, "v%d %q", v, got.Group)
				require.Empty(t, got.ProtocolType, "v%d %q", v, got.Group)
			}
		}
		if v < 6 {
			require.Equal(t, "consumer", resp.Groups[1].ProtocolType, "v%d: a KIP-848 group in classic terms", v)
			require.Len(t, resp.Groups[1].Members, 1, "v%d", v)
		}
	}
}
