package node

import (
	"fmt"
	"testing"

	"github.com/sluicemq/sluice/log"
)

// fakeEpochLog is an epoch cache and a log end; its EndOffsetForEpoch is
// Kafka's LeaderEpochFileCache.endOffsetFor, as log.Log's is (checked in
// package log).
type fakeEpochLog struct {
	entries []log.EpochEntry
	end     int64
}

func (f fakeEpochLog) LatestEpoch() (int32, bool) {
	if len(f.entries) == 0 {
		return -1, false
	}
	return f.entries[len(f.entries)-1].Epoch, true
}

func (f fakeEpochLog) EndOffsetForEpoch(epoch int32) (int32, int64, bool) {
	e, off := kafkaEndOffsetFor(f.entries, epoch, f.end)
	return e, off, off >= 0
}

func (f fakeEpochLog) LogEndOffset() int64 { return f.end }

// kafkaEndOffsetFor is Kafka's rule written out from its description:
// undefined for -1; the log end for the latest epoch; else the start of the
// first newer entry, paired with the newest entry not above epoch (or with
// epoch itself when there is none); undefined when no entry is newer.
func kafkaEndOffsetFor(entries []log.EpochEntry, epoch int32, end int64) (int32, int64) {
	if epoch == -1 || len(entries) == 0 {
		return -1, -1
	}
	if entries[len(entries)-1].Epoch == epoch {
		return epoch, end
	}
	floor, higher := -1, -1
	for i, e := range entries {
		if e.Epoch <= epoch {
			floor = i
		} else if higher < 0 {
			higher = i
		}
	}
	switch {
	case higher < 0:
		return -1, -1
	case floor < 0:
		return epoch, entries[higher].StartOffset
	}
	return entries[floor].Epoch, entries[higher].StartOffset
}

type epochEndFunc func(l epochLog, leaderEpoch, epoch int32) (int32, int64)

// bareLogAnswer is the broken variant: the log's answer alone, blind to a
// leader epoch with no batch yet.
func bareLogAnswer(l epochLog, _, epoch int32) (int32, int64) {
	if e, off, ok := l.EndOffsetForEpoch(epoch); ok {
		return e, off
	}
	return -1, -1
}

var leaderEpochEndCases = []struct {
	name        string
	log         fakeEpochLog
	leaderEpoch int32
	want        map[int32][2]int64 // asked epoch: answered epoch, end offset
}{
	{
		name:        "leader's epoch written",
		log:         fakeEpochLog{[]log.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 2}}, 5},
		leaderEpoch: 3,
		want:        map[int32][2]int64{-1: {-1, -1}, 0: {0, 0}, 1: {1, 2}, 2: {1, 2}, 3: {3, 5}, 4: {-1, -1}},
	},
	{
		name:        "leader's epoch not written yet",
		log:         fakeEpochLog{[]log.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 2}}, 5},
		leaderEpoch: 5,
		want:        map[int32][2]int64{-1: {-1, -1}, 0: {0, 0}, 2: {1, 2}, 3: {3, 5}, 4: {3, 5}, 5: {5, 5}, 6: {-1, -1}},
	},
	{
		name:        "empty log",
		log:         fakeEpochLog{nil, 0},
		leaderEpoch: 2,
		want:        map[int32][2]int64{-1: {-1, -1}, 0: {0, 0}, 1: {1, 0}, 2: {2, 0}, 3: {-1, -1}},
	},
	{
		name:        "log start past the first epochs",
		log:         fakeEpochLog{[]log.EpochEntry{{Epoch: 4, StartOffset: 10}, {Epoch: 6, StartOffset: 12}}, 12},
		leaderEpoch: 7,
		want:        map[int32][2]int64{0: {0, 10}, 4: {4, 12}, 5: {4, 12}, 6: {6, 12}, 7: {7, 12}, 8: {-1, -1}},
	},
}

// leaderEpochEndMismatches runs the table through answer and says where it
// differs.
func leaderEpochEndMismatches(answer epochEndFunc) []string {
	var out []string
	for _, c := range leaderEpochEndCases {
		for epoch := int32(-1); epoch <= 9; epoch++ {
			want, ok := c.want[epoch]
			if !ok {
				continue
			}
			e, off := answer(c.log, c.leaderEpoch, epoch)
			if e != int32(want[0]) || off != want[1] {
				out = append(out, fmt.Sprintf("%s: epoch %d answered (%d, %d), want (%d, %d)", c.name, epoch, e, off, want[0], want[1]))
			}
		}
	}
	return out
}

func TestLeaderEpochEndAnswersAsKafkasLeader(t *testing.T) {
	for _, m := range leaderEpochEndMismatches(leaderEpochEnd) {
		t.Error(m)
	}
}

// TestLeaderEpochEndTableCatchesTheBareLogAnswer: the log's answer alone is
// UNDEFINED for the leader's epoch before its first batch, and the table
// says so.
func TestLeaderEpochEndTableCatchesTheBareLogAnswer(t *testing.T) {
	if len(leaderEpochEndMismatches(bareLogAnswer)) == 0 {
		t.Fatal("the table passes the log's bare answer, which ignores the leader's unwritten epoch")
	}
}

// TestLeaderEpochEndIsKafkasCacheWithTheLeadersEntry checks every small
// cache exhaustively against Kafka's leader, whose cache holds its epoch
// from the log end at its election (Partition.makeLeader).
func TestLeaderEpochEndIsKafkasCacheWithTheLeadersEntry(t *testing.T) {
	const epochs = 5
	for set := 0; set < 1<<epochs; set++ {
		var entries []log.EpochEntry
		for e := int32(0); e < epochs; e++ {
			if set&(1<<e) != 0 {
				entries = append(entries, log.EpochEntry{Epoch: e, StartOffset: int64(3*len(entries) + 1)})
			}
		}
		l := fakeEpochLog{entries, int64(3*len(entries) + 1)}
		latest, _ := l.LatestEpoch()
		for leaderEpoch := max(latest, 0); leaderEpoch <= epochs+1; leaderEpoch++ {
			kafka := entries
			if latest < leaderEpoch {
				kafka = append(append([]log.EpochEntry(nil), entries...), log.EpochEntry{Epoch: leaderEpoch, StartOffset: l.end})
			}
			for epoch := int32(-1); epoch <= epochs+2; epoch++ {
				wantEpoch, wantEnd := kafkaEndOffsetFor(kafka, epoch, l.end)
				gotEpoch, gotEnd := leaderEpochEnd(l, leaderEpoch, epoch)
				if gotEpoch != wantEpoch || gotEnd != wantEnd {
					t.Errorf("cache %v, end %d, leader epoch %d, asked %d: got (%d, %d), Kafka (%d, %d)",
						entries, l.end, leaderEpoch, epoch, gotEpoch, gotEnd, wantEpoch, wantEnd)
				}
			}
		}
	}
}
