package node

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups v6 is advertised and served through the broker: a group
// that does not exist gets GROUP_ID_NOT_FOUND with Kafka's message, where
// v5 says "Dead" without an error.
func TestDescribeGroupsV6SaysWhyAGroupIsNotDescribed(t *testing.T) {
	s := newGroupsBroker(t, 96, "")
	av := s.do(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	var served int16 = -1
	for _, k := range av.ApiKeys {
		if k.ApiKey == 15 {
			served = k.MaxVersion
		}
	}
	require.Equal(t, int16(6), served, "DescribeGroups' highest version")
	require.Zero(t, commitCode(s.doCoordinated(simpleCommit("g", "t", 1, 5), commitCode)))

	describe := func(v int16) *kmsg.DescribeGroupsResponse {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version, req.Groups = v, []string{"g", "missing"}
		return s.doCoordinated(req, func(r kmsg.Response) int16 {
			return r.(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode
		}).(*kmsg.DescribeGroupsResponse)
	}
	v6 := describe(6)
	require.Equal(t, "Empty", v6.Groups[0].State)
	require.Zero(t, v6.Groups[0].ErrorCode)
	require.Nil(t, v6.Groups[0].ErrorMessage)
	missing := v6.Groups[1]
	require.Equal(t, "missing", missing.Group)
	require.Equal(t, "Dead", missing.State)
	require.Equal(t, errName(kerr.GroupIDNotFound.Code), errName(missing.ErrorCode))
	require.NotNil(t, missing.ErrorMessage)
	require.Equal(t, "Group missing not found.", *missing.ErrorMessage)

	v5 := describe(5).Groups[1]
	require.Equal(t, "Dead", v5.State)
	require.Zero(t, v5.ErrorCode, "GROUP_ID_NOT_FOUND is v6's answer")
	require.Nil(t, v5.ErrorMessage)
}
