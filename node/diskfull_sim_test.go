package node

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/simfs"
	"github.com/sluicemq/sluice/wire"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newFullDiskBroker is newSimBroker, with the broker's simulated disk, which
// SetFull fills: allocations fail with ENOSPC while syncs succeed, as on a
// real full disk (simfs's ENOSPC rate fails syncs too, which fails a log at
// once). A small append to the metadata journal still fits in its last
// block; a checkpoint's new file does not.
func newFullDiskBroker(t *testing.T, seed uint64) (*simBroker, *simfs.Disk) {
	t.Helper()
	s := newSimBroker(t, seed, nil)
	return s, s.world.Node("n1").Disk()
}

// shutdownWithin shuts the broker down as SIGTERM does and requires it to
// finish within limit of simulated time; it returns Shutdown's error.
func (s *simBroker) shutdownWithin(limit time.Duration) error {
	s.t.Helper()
	done := false
	var err error
	s.world.Node("n1").Post(func() {
		s.broker.Shutdown(func(e error) { done, err = true, e })
	})
	require.True(s.t, s.world.RunUntil(func() bool { return done }, limit), "shutdown did not finish within %v", limit)
	return err
}

// produceValues produces one batch per value with acks=all and returns the
// values acknowledged, by offset.
func (s *simBroker) produceValues(topic string, partition int32, values ...string) map[int64]string {
	s.t.Helper()
	acked := map[int64]string{}
	for _, v := range values {
		got := s.produce(topic, partition, -1, valueBatch(wire.NoProducer, 1000, v))
		if got.ErrorCode == 0 {
			acked[got.BaseOffset] = v
		}
	}
	return acked
}

// requireRecords requires every acknowledged value at its offset.
func (s *simBroker) requireRecords(topic string, partition int32, acked map[int64]string, context string) {
	s.t.Helper()
	got := map[int64]string{}
	for offset := int64(0); ; {
		p, recs := s.fetch(topic, partition, offset)
		require.Zero(s.t, p.ErrorCode, "%s: fetch %s-%d at %d: %v", context, topic, partition, offset, kerr.ErrorForCode(p.ErrorCode))
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			got[r.Offset] = string(r.Value)
			offset = r.Offset + 1
		}
	}
	for _, offset := range slices.Sorted(maps.Keys(acked)) {
		require.Equal(s.t, acked[offset], got[offset], "%s: acknowledged record at offset %d of %s-%d", context, offset, topic, partition)
	}
}

// TestDeleteTopicsAnswersWhileFullDiskHoldsATruncation: a partition whose
// log was truncated (as a follower's is) stays behind the truncation's
// barrier while the disk is full, since the barrier's checkpoint cannot be
// written. Deleting its topic closes the log; the close must not wait for
// space, so the client gets its answer (success: the files are removed,
// which frees space) within bounded time. Shutdown then completes on the
// same full disk, and a restart with space back finds every acknowledged
// record of the other topic.
func TestDeleteTopicsAnswersWhileFullDiskHoldsATruncation(t *testing.T) {
	s, disk := newFullDiskBroker(t, 40)
	doomed := s.createTopic("doomed", 1)
	s.createTopic("kept", 1)
	s.produceValues("doomed", 0, "d0", "d1", "d2")
	acked := s.produceValues("kept", 0, "k0", "k1", "k2", "k3")
	require.Len(t, acked, 4)

	disk.SetFull(true)
	p := s.broker.partitions[partitionKey{doomed, 0}]
	require.NoError(t, p.log.TruncateTo(1))
	ready := false
	p.log.Ready(func(error) { ready = true })
	s.world.Run(3 * time.Second)
	require.False(t, ready, "the truncation's barrier completed on a full disk")

	del := s.send(s.client, deleteByName(6, "doomed"))
	require.True(t, s.world.RunUntil(answered(del), time.Minute), "DeleteTopics was not answered")
	res := (*del).(*kmsg.DeleteTopicsResponse).Topics[0]
	require.Contains(t, []int16{0, kerr.KafkaStorageError.Code}, res.ErrorCode, "%v", res.ErrorMessage)
	names, err := disk.List(".")
	require.NoError(t, err)
	require.NotContains(t, names, "doomed-0", "the deleted partition's files are removed")

	s.requireRecords("kept", 0, acked, "before shutdown")
	_ = s.shutdownWithin(time.Minute) // an error is expected: no checkpoint fits on the disk

	disk.SetFull(false)
	s.restart()
	require.Equal(t, []string{"kept"}, s.topicNames())
	s.requireRecords("kept", 0, acked, "after restart")
	s.createTopic("doomed", 1)
	_, recs := s.fetch("doomed", 0, 0)
	require.Empty(t, recs, "a deleted topic's records never come back under its name")
}

// TestShutdownCompletesWhileFullDiskHoldsATruncation: as above, with the
// broker shut down (SIGTERM) while the partition is behind its barrier: the
// shutdown finishes, reporting the error, and a restart with space back
// serves every acknowledged record below the truncation (the records above
// it were never cut on disk, and may come back).
func TestShutdownCompletesWhileFullDiskHoldsATruncation(t *testing.T) {
	s, disk := newFullDiskBroker(t, 41)
	id := s.createTopic("events", 2)
	acked := []map[int64]string{
		s.produceValues("events", 0, "a0", "a1", "a2"),
		s.produceValues("events", 1, "b0", "b1"),
	}
	disk.SetFull(true)
	require.NoError(t, s.broker.partitions[partitionKey{id, 0}].log.TruncateTo(1))
	s.world.Run(3 * time.Second)
	require.Error(t, s.shutdownWithin(time.Minute), "the truncation never reached the disk")

	disk.SetFull(false)
	s.restart()
	delete(acked[0], 1)
	delete(acked[0], 2)
	for part, a := range acked {
		s.requireRecords("events", int32(part), a, "after restart")
	}
}

// TestShutdownCompletesUnderDiskFaults sweeps seeds (SLUICE_SEEDS, default
// 4): records are produced while the disk fails syncs and allocations at
// seeded rates, then the broker shuts down on the failing disk, as on
// SIGTERM. The shutdown must finish (with an error or not), and a restart
// from what a power loss keeps must serve every acknowledged record.
func TestShutdownCompletesUnderDiskFaults(t *testing.T) {
	n := 4
	if v, err := strconv.Atoi(os.Getenv("SLUICE_SEEDS")); err == nil && v > 0 {
		n = v
	}
	for seed := 0; seed < n; seed++ {
		r := rng.New(uint64(seed)).Fork("shutdown under faults")
		s, disk := newFullDiskBroker(t, uint64(100+seed))
		s.createTopic("events", 2)
		faults := simfs.Faults{NoSpaceRate: []float64{0.05, 0.2, 1}[r.Intn(3)]}
		if r.Chance(0.5) {
			faults.EIORate = 0.05
		}
		acked := []map[int64]string{{}, {}}
		for i := 0; i < 20; i++ {
			if i == 10 {
				require.NoError(t, disk.SetFaults(faults))
			}
			part := r.Intn(2)
			maps.Copy(acked[part], s.produceValues("events", int32(part), fmt.Sprintf("s%d-v%d", seed, i)))
		}
		disk.SetFull(r.Chance(0.5))
		err := s.shutdownWithin(time.Minute)
		t.Logf("seed %d: faults %+v, full %v: shutdown: %v", seed, faults, disk.Full(), err)

		require.NoError(t, disk.SetFaults(simfs.Faults{}))
		disk.SetFull(false)
		s.restart() // a crash first: only what Shutdown made durable counts
		for part, a := range acked {
			s.requireRecords("events", int32(part), a, fmt.Sprintf("seed %d", seed))
		}
	}
}

// TestDeletedTopicLeftOnDiskNeverComesBack: when a deleted topic's
// partition directory cannot be removed (EIO), the deletion still succeeds
// and a new topic may take the name at once; the directory's
// partition.metadata names the old topic, so the new topic removes it
// before it opens its partition, and its records never come back, across a
// restart too.
func TestDeletedTopicLeftOnDiskNeverComesBack(t *testing.T) {
	s := newSimBroker(t, 42, nil)
	s.createTopic("x", 1)
	require.Len(t, s.produceValues("x", 0, "old0", "old1"), 2)
	require.NoError(t, s.world.Node("n1").Disk().FailNext(simfs.OpRemove, env.ErrIO))
	require.Zero(t, s.do(deleteByName(6, "x")).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode)
	names, err := s.world.Node("n1").Disk().List(".")
	require.NoError(t, err)
	require.Contains(t, names, "x-0", "the failed removal left the directory")

	s.createTopic("x", 1)
	_, recs := s.fetch("x", 0, 0)
	require.Empty(t, recs, "a deleted topic's records never come back under its name")
	require.Len(t, s.produceValues("x", 0, "new0"), 1)
	s.restart()
	_, recs = s.fetch("x", 0, 0)
	require.Len(t, recs, 1, "the new topic keeps its own records")
	require.Equal(t, "new0", string(recs[0].Value))
}
