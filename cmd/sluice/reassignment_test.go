package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
)

// TestServeReassignsAPartitionWithKadm: four real processes; kadm's
// AlterPartitionAssignments moves one replica of a three-replica partition
// to the fourth node; ListPartitionReassignments shows it until the new
// replica is in the ISR, the old one's directory goes, and every record
// is still read.
func TestServeReassignsAPartitionWithKadm(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	c := newCluster(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	adm := c.adminClient()
	createReplicatedTopic(ctx, t, adm, "moved", 1)
	var before kadm.PartitionDetail
	require.Eventually(t, func() bool {
		topics, merr := adm.ListTopics(ctx, "moved")
		if merr != nil || topics["moved"].Err != nil || len(topics["moved"].Partitions) != 1 {
			return false
		}
		before = topics["moved"].Partitions[0]
		return before.Leader > 0 && len(before.ISR) == 3
	}, 60*time.Second, 200*time.Millisecond, "the topic never had a leader and a full ISR")
	produceConsume(ctx, t, c.addrs(), "moved", "before", 30)

	var added, removed int32
	for id := int32(1); id <= 4; id++ {
		if !slices.Contains(before.Replicas, id) {
			added = id
		}
	}
	target := []int32{added}
	for _, r := range before.Replicas {
		if r != before.Leader && removed == 0 {
			removed = r
			continue
		}
		target = append(target, r)
	}
	req := kadm.AlterPartitionAssignmentsReq{}
	req.Assign("moved", 0, target)
	resps, err := adm.AlterPartitionAssignments(ctx, req)
	require.NoError(t, err)
	for _, r := range resps.Sorted() {
		require.NoError(t, r.Err, r.ErrMessage)
	}
	require.Eventually(t, func() bool {
		listed, lerr := adm.ListPartitionReassignments(ctx, nil)
		if lerr != nil || len(listed) != 0 {
			return false
		}
		topics, merr := adm.ListTopics(ctx, "moved")
		if merr != nil || len(topics["moved"].Partitions) != 1 {
			return false
		}
		p := topics["moved"].Partitions[0]
		return slices.Equal(p.Replicas, target) && len(p.ISR) == 3 && slices.Contains(p.ISR, added)
	}, 60*time.Second, 200*time.Millisecond, "the reassignment to %v never completed", target)
	dir := filepath.Join(c.nodes[removed-1].dir, "moved-0")
	require.Eventually(t, func() bool {
		_, err := os.Stat(dir)
		return os.IsNotExist(err)
	}, 30*time.Second, 200*time.Millisecond, "node %d kept %s", removed, dir)
	produceConsume(ctx, t, c.addrs(), "moved", "after", 30)
}
