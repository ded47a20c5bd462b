package isr

import "testing"

func TestTruncationPoint(t *testing.T) {
	for _, tc := range []struct {
		name   string
		a      EpochAnswer
		to     int64
		isDone bool
	}{
		{"leader has the epoch, ends first", EpochAnswer{Asked: 3, LeaderEpoch: 3, LeaderEnd: 9, LogEnd: 12}, 9, true},
		{"leader has the epoch, ends later", EpochAnswer{Asked: 3, LeaderEpoch: 3, LeaderEnd: 15, LogEnd: 12}, 12, true},
		{"older epoch both have", EpochAnswer{Asked: 5, LeaderEpoch: 3, LeaderEnd: 10, LocalEpoch: 3, LocalEnd: 11, LogEnd: 14}, 10, true},
		{"older epoch, follower ends first", EpochAnswer{Asked: 5, LeaderEpoch: 3, LeaderEnd: 10, LocalEpoch: 3, LocalEnd: 7, LogEnd: 14}, 7, true},
		{"older epoch the follower lacks", EpochAnswer{Asked: 5, LeaderEpoch: 4, LeaderEnd: 12, LocalEpoch: 2, LocalEnd: 8, LogEnd: 14}, 8, false},
		{"leader has no such epoch", EpochAnswer{Asked: 1, LeaderEpoch: -1, LeaderEnd: -1, LogEnd: 14, HighWatermark: 5}, 5, true},
		{"undefined, high watermark past the end", EpochAnswer{Asked: 1, LeaderEpoch: -1, LeaderEnd: -1, LogEnd: 4, HighWatermark: 5}, 4, true},
	} {
		to, done := TruncationPoint(tc.a)
		if to != tc.to || done != tc.isDone {
			t.Errorf("%s: TruncationPoint(%+v) = %d, %v; want %d, %v", tc.name, tc.a, to, done, tc.to, tc.isDone)
		}
	}
}
