package raftmeta

import (
	"fmt"
	"testing"

	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/sched"
	"github.com/sluicemq/sluice/sim/simfs"
	"github.com/stretchr/testify/require"
)

// loop runs posted functions on the scheduler, as a node's loop would.
type loop struct{ s *sched.Scheduler }

func (l loop) Post(f func()) { l.s.After(0, sched.Label{Kind: "post"}, f) }

func topicRecord(name string, id byte) CreateTopicRecord {
	return CreateTopicRecord{Topic: Topic{Name: name, ID: TopicID{id}, Partitions: []Partition{{Index: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}}}}
}

func TestJournalReplaysDurableRecordsAfterCrash(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s := sched.New()
			disk := simfs.New(rng.New(seed), sched.Direct(s, "n1"))
			j, records, err := OpenJournal(loop{s}, disk)
			require.NoError(t, err)
			require.Empty(t, records)
			durable := 0
			for i := 0; i < 10; i++ {
				i := i
				j.Append([]Record{topicRecord(fmt.Sprintf("t%d", i), byte(i+1))}, func(err error) {
					require.NoError(t, err)
					durable = i + 1
				})
				if i%3 == 0 {
					for s.Step() {
					}
				}
			}
			// Crash with some appends possibly unsynced.
			for n := int(seed % 7); n > 0 && s.Step(); n-- {
			}
			disk.Crash()
			j2, replayed, err := OpenJournal(loop{s}, disk)
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(replayed), durable, "an acknowledged record was lost")
			image := NewImage()
			for i, r := range replayed {
				require.NoError(t, image.Apply(r))
				require.Equal(t, fmt.Sprintf("t%d", i), r.(CreateTopicRecord).Topic.Name, "records replay in order, with no gap")
			}
			// The journal goes on after its replayed tail.
			done := false
			j2.Append([]Record{topicRecord("after", 99)}, func(err error) { require.NoError(t, err); done = true })
			for s.Step() {
			}
			require.True(t, done)
			disk.Crash()
			_, again, err := OpenJournal(loop{s}, disk)
			require.NoError(t, err)
			require.Equal(t, len(replayed)+1, len(again))
		})
	}
}

func TestJournalCutsCorruptTail(t *testing.T) {
	s := sched.New()
	disk := simfs.New(rng.New(1), sched.Direct(s, "n1"))
	j, _, err := OpenJournal(loop{s}, disk)
	require.NoError(t, err)
	j.Append([]Record{ClusterIDRecord{ClusterID: "c"}, topicRecord("a", 1)}, func(err error) { require.NoError(t, err) })
	for s.Step() {
	}
	f, err := disk.Open(journalName)
	require.NoError(t, err)
	size, _ := f.Size()
	_, err = f.WriteAt([]byte{0, 0, 0, 9, 1, 2, 3}, size) // a torn frame header
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, records, err := OpenJournal(loop{s}, disk)
	require.NoError(t, err)
	require.Len(t, records, 2)
	f, _ = disk.Open(journalName)
	after, _ := f.Size()
	require.Equal(t, size, after, "the torn tail is cut off")
}

func TestImageApplyRejectsWhatDoesNotFit(t *testing.T) {
	im := NewImage()
	require.NoError(t, im.Apply(ClusterIDRecord{ClusterID: "x"}))
	require.Error(t, im.Apply(ClusterIDRecord{ClusterID: "y"}))
	require.NoError(t, im.Apply(RegisterBrokerRecord{Broker: Broker{ID: 1, Epoch: 1}}))
	require.Error(t, im.Apply(RegisterBrokerRecord{Broker: Broker{ID: 1, Epoch: 1}}), "epoch must grow")
	require.NoError(t, im.Apply(topicRecord("a", 1)))
	require.Error(t, im.Apply(topicRecord("a", 2)), "name taken")
	require.Error(t, im.Apply(topicRecord("b", 1)), "id taken")
	v := "1000"
	require.NoError(t, im.Apply(ConfigRecord{Resource: ConfigTopic, Name: "a", Key: "retention.ms", Value: &v}))
	require.Equal(t, "1000", im.TopicByName("a").Configs["retention.ms"])
	require.NoError(t, im.Apply(ConfigRecord{Resource: ConfigTopic, Name: "a", Key: "retention.ms"}))
	require.Empty(t, im.TopicByName("a").Configs)
	require.Error(t, im.Apply(ProducerIDsRecord{First: 5, Count: 10}), "blocks must be contiguous")
	require.NoError(t, im.Apply(ProducerIDsRecord{First: 0, Count: 10}))
	require.Equal(t, int64(10), im.NextProducerID)
	require.NoError(t, im.Apply(DeleteTopicRecord{ID: TopicID{1}}))
	require.Nil(t, im.TopicByName("a"))
	require.Error(t, im.Apply(DeleteTopicRecord{ID: TopicID{1}}))
}

func TestRecordsRoundTrip(t *testing.T) {
	v := "x"
	for _, r := range []Record{
		ClusterIDRecord{ClusterID: "c"},
		RegisterBrokerRecord{Broker: Broker{ID: 3, Host: "h", Port: 9092, Epoch: 2}},
		topicRecord("t", 7),
		DeleteTopicRecord{ID: TopicID{7, 1}},
		ConfigRecord{Resource: ConfigBroker, Name: "", Key: "k", Value: &v},
		ProducerIDsRecord{First: 1000, Count: 1000},
	} {
		p, err := EncodeRecord(r)
		require.NoError(t, err)
		back, err := DecodeRecord(p)
		require.NoError(t, err)
		require.Equal(t, r, back)
	}
	_, err := DecodeRecord([]byte(`{"type":"nope","body":{}}`))
	require.Error(t, err)
	id, err := ParseTopicID(TopicID{0xde, 0xad, 0xbe, 0xef}.String())
	require.NoError(t, err)
	require.Equal(t, TopicID{0xde, 0xad, 0xbe, 0xef}, id)
	_, err = ParseTopicID("not-a-uuid")
	require.Error(t, err)
}

func TestJournalSurvivesBitFlipsOnReadAndRefusesCorruptMiddle(t *testing.T) {
	s := sched.New()
	disk := simfs.New(rng.New(2), sched.Direct(s, "n1"))
	j, _, err := OpenJournal(loop{s}, disk)
	require.NoError(t, err)
	j.Append([]Record{ClusterIDRecord{ClusterID: "c"}, topicRecord("a", 1), topicRecord("b", 2)}, func(err error) { require.NoError(t, err) })
	for s.Step() {
	}
	// A bit flipped on the way from the disk is read again, not believed.
	disk.FlipNextRead()
	_, records, err := OpenJournal(loop{s}, disk)
	require.NoError(t, err)
	require.Len(t, records, 3)
	// A bit flipped on the medium in the middle is corruption: an error,
	// never a silently shorter journal.
	require.NoError(t, disk.FlipBit(journalName, 20))
	_, _, err = OpenJournal(loop{s}, disk)
	require.ErrorContains(t, err, "corrupt")
}

func TestJournalRefusesOversizedRecordsAndCutsZeroTail(t *testing.T) {
	s := sched.New()
	disk := simfs.New(rng.New(3), sched.Direct(s, "n1"))
	j, _, err := OpenJournal(loop{s}, disk)
	require.NoError(t, err)
	j.Append([]Record{ClusterIDRecord{ClusterID: "c"}}, func(err error) { require.NoError(t, err) })
	huge := string(make([]byte, frameMax))
	var bigErr error
	j.Append([]Record{ConfigRecord{Resource: ConfigBroker, Key: "k", Value: &huge}}, func(err error) { bigErr = err })
	j.Append([]Record{topicRecord("after", 1)}, func(err error) { require.NoError(t, err) })
	for s.Step() {
	}
	require.ErrorContains(t, bigErr, "exceeds the limit")

	// Zeroes after the last frame (a file grown but never written) are a
	// torn tail, not an empty record.
	f, err := disk.Open(journalName)
	require.NoError(t, err)
	size, _ := f.Size()
	require.NoError(t, f.Truncate(size+64))
	require.NoError(t, f.Close())
	_, records, err := OpenJournal(loop{s}, disk)
	require.NoError(t, err)
	require.Len(t, records, 2)
}

// fourFrames writes four records as four appends and returns the disk and
// each frame's offset, with the file's size last.
func fourFrames(t *testing.T, seed uint64) (*sched.Scheduler, *simfs.Disk, []int64) {
	t.Helper()
	s := sched.New()
	disk := simfs.New(rng.New(seed), sched.Direct(s, "n1"))
	j, _, err := OpenJournal(loop{s}, disk)
	require.NoError(t, err)
	offsets := []int64{0}
	for _, r := range []Record{ClusterIDRecord{ClusterID: "c"}, topicRecord("a", 1), topicRecord("b", 2), topicRecord("c", 3)} {
		j.Append([]Record{r}, func(err error) { require.NoError(t, err) })
		for s.Step() {
		}
		offsets = append(offsets, j.size)
	}
	require.NoError(t, j.Close())
	return s, disk, offsets
}

// overwrite writes p at off in the journal, as a process that is not the
// journal's writer (or a failing disk) would.
func overwrite(t *testing.T, disk *simfs.Disk, off int64, p []byte) {
	t.Helper()
	f, err := disk.Open(journalName)
	require.NoError(t, err)
	_, err = f.WriteAt(p, off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func journalSize(t *testing.T, disk *simfs.Disk) int64 {
	t.Helper()
	f, err := disk.Open(journalName)
	require.NoError(t, err)
	defer f.Close()
	size, err := f.Size()
	require.NoError(t, err)
	return size
}

// Damage that reaches the end of the file, with no whole frame after it, is
// the tail of an append a crash cut short: it was never acknowledged, and
// replay cuts it and says where and how much.
func TestJournalCutsEveryKindOfTornTail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, disk *simfs.Disk, last, end int64)
	}{
		{"header cut short", func(t *testing.T, disk *simfs.Disk, last, end int64) {
			f, _ := disk.Open(journalName)
			require.NoError(t, f.Truncate(last+5))
			require.NoError(t, f.Close())
		}},
		{"body cut short", func(t *testing.T, disk *simfs.Disk, last, end int64) {
			f, _ := disk.Open(journalName)
			require.NoError(t, f.Truncate(end-3))
			require.NoError(t, f.Close())
		}},
		{"last frame fails its checksum", func(t *testing.T, disk *simfs.Disk, last, end int64) {
			overwrite(t, disk, end-2, []byte("xx"))
		}},
		{"zeroes where the last frame was", func(t *testing.T, disk *simfs.Disk, last, end int64) {
			overwrite(t, disk, last, make([]byte, end-last))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, disk, offsets := fourFrames(t, 5)
			last, end := offsets[3], offsets[4]
			tc.damage(t, disk, last, end)
			size := journalSize(t, disk)
			j, records, err := OpenJournal(loop{s}, disk)
			require.NoError(t, err)
			require.Len(t, records, 3)
			require.Equal(t, last, journalSize(t, disk), "the torn tail is cut off")
			cutAt, cut := j.TornTail()
			require.Equal(t, last, cutAt)
			require.Equal(t, size-last, cut)
		})
	}
}

// Damage with a whole frame after it is not a torn tail: those frames were
// written after it, and a crash keeps a prefix of what was written. Replay
// refuses it, naming the journal and the offset, and leaves the file as it
// is; cutting there would silently drop acknowledged metadata.
func TestJournalRefusesDamageBeforeWholeFrames(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, disk *simfs.Disk, at int64)
	}{
		{"checksum fails", func(t *testing.T, disk *simfs.Disk, at int64) { overwrite(t, disk, at+12, []byte("!")) }},
		{"length zeroed", func(t *testing.T, disk *simfs.Disk, at int64) { overwrite(t, disk, at, []byte{0, 0, 0, 0}) }},
		{"length above the limit", func(t *testing.T, disk *simfs.Disk, at int64) { overwrite(t, disk, at, []byte{0x80}) }},
		{"length past the end", func(t *testing.T, disk *simfs.Disk, at int64) { overwrite(t, disk, at+1, []byte{0x7f}) }},
		{"frame zeroed", func(t *testing.T, disk *simfs.Disk, at int64) { overwrite(t, disk, at, make([]byte, 40)) }},
		{"overwritten by another writer", func(t *testing.T, disk *simfs.Disk, at int64) {
			body, err := EncodeRecord(topicRecord("other", 9))
			require.NoError(t, err)
			overwrite(t, disk, at, body)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, disk, offsets := fourFrames(t, 6)
			at := offsets[1]
			tc.damage(t, disk, at)
			size := journalSize(t, disk)
			_, records, err := OpenJournal(loop{s}, disk)
			require.Error(t, err, "replay cut acknowledged records: %d records left", len(records))
			require.ErrorContains(t, err, journalName)
			require.ErrorContains(t, err, fmt.Sprintf("offset %d", at))
			var corrupt *CorruptJournalError
			require.ErrorAs(t, err, &corrupt)
			require.Equal(t, JournalPath, corrupt.Path)
			require.Equal(t, at, corrupt.Offset)
			require.Equal(t, 1, corrupt.Records, "whole records before the damage")
			require.Equal(t, size, journalSize(t, disk), "the journal is left as it was")
		})
	}
}

// A process killed before its journal's first sync completes leaves the
// journal only in the page cache, directory entries and all. The next
// process replays it from there; its first acknowledged append must make
// the replayed records durable with it, entries included, so that a power
// loss afterwards keeps what it acknowledged and what it served from the
// replay. (Found by a crash armed for a sync in flight: the cluster id of
// a killed first start vanished in a later power loss, and the broker came
// back as a new cluster.)
func TestJournalReplayedAfterAKillBecomesDurableWithTheNextAppend(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		s := sched.New()
		disk := simfs.New(rng.New(seed), sched.Direct(s, "n1"))
		j, _, err := OpenJournal(loop{s}, disk)
		require.NoError(t, err)
		j.Append([]Record{ClusterIDRecord{ClusterID: "first"}}, func(error) { t.Fatal("the killed process's append completed") })
		disk.CrashProcess() // kill -9 before the sync completes: the page cache stays

		j2, replayed, err := OpenJournal(loop{s}, disk)
		require.NoError(t, err)
		require.Len(t, replayed, 1, "the page cache holds the killed process's record")
		acked := false
		j2.Append([]Record{topicRecord("t", 1)}, func(err error) { require.NoError(t, err); acked = true })
		for !acked && s.Step() {
		}
		require.True(t, acked)
		disk.Crash()

		_, after, err := OpenJournal(loop{s}, disk)
		require.NoError(t, err)
		require.Len(t, after, 2, "seed %d: a power loss after an acknowledged append took the journal", seed)
		require.Equal(t, ClusterIDRecord{ClusterID: "first"}, after[0])
	}
}
