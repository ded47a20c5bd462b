package node

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// coordErrorResponse is Kafka's answer to a group request that fails as a
// whole with code (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE, INVALID_GROUP_ID): each request's
// getErrorResponse, which puts the code on every group, topic partition or
// the top level, as the version has room for.
func coordErrorResponse(req kmsg.Request, code *kerr.Error) kmsg.Response {
	switch req := req.(type) {
	case *kmsg.JoinGroupRequest:
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = code.Code
		return resp
	case *kmsg.SyncGroupRequest:
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = code.Code
		return resp
	case *kmsg.HeartbeatRequest:
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = code.Code
		return resp
	case *kmsg.LeaveGroupRequest:
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = code.Code
		return resp
	case *kmsg.OffsetCommitRequest:
		return offsetCommitError(req, code)
	case *kmsg.OffsetFetchRequest:
		return offsetFetchError(req, code)
	case *kmsg.OffsetDeleteRequest:
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = code.Code
		return resp
	case *kmsg.DescribeGroupsRequest:
		resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, g := range req.Groups {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, code.Code
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	case *kmsg.DeleteGroupsRequest:
		resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
		for _, g := range req.Groups {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, code.Code
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	case *kmsg.ListGroupsRequest:
		resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
		resp.ErrorCode = code.Code
		return resp
	case *kmsg.ConsumerGroupHeartbeatRequest:
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = code.Code
		return resp
	case *kmsg.ConsumerGroupDescribeRequest:
		resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
		for _, g := range req.Groups {
			rg := kmsg.NewConsumerGroupDescribeResponseGroup()
			rg.Group, rg.ErrorCode = g, code.Code
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	}
	panic(fmt.Sprintf("node: no group error response for %T", req))
}

// offsetCommitError puts code on every partition of the commit.
func offsetCommitError(req *kmsg.OffsetCommitRequest, code *kerr.Error) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// offsetFetchError answers as Kafka's OffsetFetchRequest.getErrorResponse:
// v0 and v1 have no top-level code, so every partition asked gets it (with
// offset -1); v2 to v7 carry it at the top; v8+ on each group.
func offsetFetchError(req *kmsg.OffsetFetchRequest, code *kerr.Error) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	switch {
	case req.Version >= 8:
		for _, g := range req.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, code.Code
			resp.Groups = append(resp.Groups, rg)
		}
	case req.Version >= 2:
		resp.ErrorCode = code.Code
	default:
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, code.Code
				rp.Metadata = kmsg.StringPtr("")
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	return resp
}
