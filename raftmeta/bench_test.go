package raftmeta

import (
	"runtime"
	"testing"
	"time"

	"github.com/sluicemq/sluice/sim/rng"
	"github.com/stretchr/testify/require"
)

const bigTopicPartitions = 100_000

// bigImage is an image with six brokers and one topic of n partitions of
// three replicas each, placed by the controller.
func bigImage(tb testing.TB, n int) *Image {
	h := newHarness(tb, ControllerConfig{SessionTimeout: time.Hour}, 1)
	h.startBrokers(6, "a", "b", "c")
	res, records := h.c.CreateTopics([]TopicSpec{{Name: "big", Partitions: int32(n), ReplicationFactor: 3}})
	require.Nil(tb, res[0].Err)
	require.NoError(tb, h.committed.Apply(records[0]))
	return h.committed
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestImageMemoryPerPartition measures what a 100,000-partition topic
// costs the image, once the record that created it is gone, and holds it
// under 2 KiB per partition.
func TestImageMemoryPerPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 100,000-partition image")
	}
	before := heapInUse()
	im := bigImage(t, bigTopicPartitions)
	after := heapInUse()
	perPartition := float64(after-before) / bigTopicPartitions
	t.Logf("image of %d partitions: %.0f bytes per partition", bigTopicPartitions, perPartition)
	require.Less(t, perPartition, 2048.0)
	// The snapshot's load gives a compact image too (its lists share slabs).
	snap := im.EncodeSnapshot()
	runtime.KeepAlive(im)
	im = nil
	before = heapInUse()
	loaded, err := DecodeSnapshot(snap)
	require.NoError(t, err)
	after = heapInUse()
	t.Logf("loaded from a snapshot: %.0f bytes per partition", float64(after-before)/bigTopicPartitions)
	require.Less(t, float64(after-before)/bigTopicPartitions, 2048.0)
	runtime.KeepAlive(loaded)
}

// changeDriver writes partition change records that each follow the last
// one, leadership moving round the ISR of every partition in turn.
type changeDriver struct {
	im *Image
	t  *Topic
	i  int
}

func (d *changeDriver) next() PartitionChangeRecord {
	p := &d.t.Partitions[d.i]
	d.i = (d.i + 1) % len(d.t.Partitions)
	leader := p.ISR[(indexOf(p.ISR, p.Leader)+1)%len(p.ISR)]
	return PartitionChangeRecord{Topic: d.t.ID, Partition: p.Index, Leader: leader,
		LeaderEpoch: p.LeaderEpoch + 1, PartitionEpoch: p.PartitionEpoch + 1}
}

// BenchmarkApplyPartitionChange applies leader changes to a
// 100,000-partition image (target: 200,000 records/s).
func BenchmarkApplyPartitionChange(b *testing.B) {
	im := bigImage(b, bigTopicPartitions)
	d := &changeDriver{im: im, t: im.TopicByName("big")}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := im.Apply(d.next()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkDecodeApplyPartitionChange decodes each record from its binary
// form first, as a broker applying the quorum's log does; the JSON
// variant is the journal's encoding, for comparison.
func BenchmarkDecodeApplyPartitionChange(b *testing.B) {
	for _, enc := range []struct {
		name   string
		encode func(Record) ([]byte, error)
	}{{"binary", EncodeBinaryRecord}, {"json", EncodeRecord}} {
		b.Run(enc.name, func(b *testing.B) {
			im := bigImage(b, bigTopicPartitions)
			d := &changeDriver{im: im, t: im.TopicByName("big")}
			b.ReportAllocs()
			b.ResetTimer()
			size := 0
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				p, err := enc.encode(d.next())
				if err != nil {
					b.Fatal(err)
				}
				size = len(p)
				b.StartTimer()
				r, err := DecodeRecord(p)
				if err != nil {
					b.Fatal(err)
				}
				if err := im.Apply(r); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(size), "bytes/record")
		})
	}
}

// BenchmarkSnapshot100k encodes and loads the snapshot of a
// 100,000-partition image (target: load under 1 s).
func BenchmarkSnapshot100k(b *testing.B) {
	im := bigImage(b, bigTopicPartitions)
	snap := im.EncodeSnapshot()
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			snap = im.EncodeSnapshot()
		}
		b.ReportMetric(float64(len(snap)), "bytes")
	})
	b.Run("load", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := DecodeSnapshot(snap); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("digest", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			im.Digest()
		}
	})
	b.Run("clone", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			im.Clone()
		}
	})
	b.Run("json", func(b *testing.B) {
		var size int
		for i := 0; i < b.N; i++ {
			p, err := EncodeRecord(CreateTopicRecord{Topic: *im.TopicByName("big")})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := DecodeRecord(p); err != nil {
				b.Fatal(err)
			}
			size = len(p)
		}
		b.ReportMetric(float64(size), "bytes")
	})
}

// BenchmarkControllerFenceBroker measures a fencing on a 100,000-partition
// image: a third of the partitions change leader and all lose it from the
// ISR where it is a member.
func BenchmarkControllerFenceBroker(b *testing.B) {
	im := bigImage(b, bigTopicPartitions)
	now := harnessEpoch
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		c := NewController(im, ControllerConfig{}, now, rng.New(1))
		b.StartTimer()
		br := c.View().Brokers[1]
		_, records := c.Heartbeat(now, BrokerHeartbeat{BrokerID: 1, BrokerEpoch: br.Epoch, MetadataOffset: im.Applied, WantFence: true})
		if len(records) == 0 {
			b.Fatal("no records")
		}
	}
}
