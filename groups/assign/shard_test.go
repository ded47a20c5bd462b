package assign

import (
	"math"
	"testing"
)

// shardCases are worked by hand with Java's rules: hashCode is
// h = 31*h + c over UTF-16 code units in wrapping int32 arithmetic, and
// Kafka's Utils.abs maps Integer.MIN_VALUE to 0.
var shardCases = []struct {
	name       string
	groupID    string
	hash       int32
	partitions int32
	shard      int32
}{
	{"empty", "", 0, 50, 0},
	{"one ASCII char", "a", 97, 50, 47},
	// Kafka's own GroupCoordinatorServiceTest checks "foo" on 10 partitions.
	{"Kafka's test", "foo", 102*31*31 + 111*31 + 111, 10, 4},
	{"ASCII word", "group", 98629247, 50, 47},
	// é is U+00E9, one UTF-16 unit (233) but two UTF-8 bytes.
	{"non-ASCII BMP", "café", ((99*31+97)*31+102)*31 + 233, 50, 21},
	{"CJK", "日本", 0x65E5*31 + 0x672C, 50, 47},
	// U+1F600 is the surrogate pair D83D DE00 in UTF-16.
	{"surrogate pair", "😀", 0xD83D*31 + 0xDE00, 50, 49},
	{"surrogate pair then ASCII", "🎉party", 549930041, 50, 41},
	// A negative hash: the shard is its absolute value modulo, not a
	// negative remainder.
	{"negative hash", "orders-consumer", -1204742690, 50, 40},
	{"negative hash, 7 partitions", "analytics", -1693017210, 7, 1693017210 % 7},
	// The classic strings whose Java hashCode is Integer.MIN_VALUE: Math.abs
	// would leave it negative; Utils.abs makes it 0.
	{"MinInt32 hash", "polygenelubricants", math.MinInt32, 50, 0},
	{"MinInt32 hash, 2", "GydZG_", math.MinInt32, 7, 0},
	{"MinInt32 hash, 3", "DESIGNING WORKHOUSES", math.MinInt32, 3, 0},
	{"one partition", "anything", javaHashCode("anything"), 1, 0},
}

func TestShardForMatchesKafka(t *testing.T) {
	for _, c := range shardCases {
		t.Run(c.name, func(t *testing.T) {
			if got := javaHashCode(c.groupID); got != c.hash {
				t.Errorf("javaHashCode(%q) = %d, want %d", c.groupID, got, c.hash)
			}
			if got := ShardFor(c.groupID, c.partitions); got != c.shard {
				t.Errorf("ShardFor(%q, %d) = %d, want %d", c.groupID, c.partitions, got, c.shard)
			}
		})
	}
}

func TestShardForRefusesNoPartitions(t *testing.T) {
	for _, n := range []int32{0, -1, math.MinInt32} {
		if got := ShardFor("g", n); got != -1 {
			t.Errorf("ShardFor(g, %d) = %d, want -1", n, got)
		}
	}
}

// TestShardCasesCatchTheUsualMistakes runs the table against the ways a
// port of Kafka's hash goes wrong; each must fail some case, or the table
// cannot tell it from the real thing.
func TestShardCasesCatchTheUsualMistakes(t *testing.T) {
	mistakes := map[string]func(string, int32) int32{
		"Math.abs instead of Utils.abs": func(s string, n int32) int32 {
			h := javaHashCode(s)
			if h < 0 {
				h = -h // -MinInt32 is MinInt32, as in Java
			}
			return h % n
		},
		"hash of code points, not UTF-16 units": func(s string, n int32) int32 {
			var h int32
			for _, r := range s {
				h = 31*h + r
			}
			return kafkaAbs(h) % n
		},
		"hash of UTF-8 bytes": func(s string, n int32) int32 {
			var h int32
			for i := 0; i < len(s); i++ {
				h = 31*h + int32(s[i])
			}
			return kafkaAbs(h) % n
		},
		"sign kept": func(s string, n int32) int32 { return javaHashCode(s) % n },
	}
	for name, shard := range mistakes {
		caught := false
		for _, c := range shardCases {
			if shard(c.groupID, c.partitions) != c.shard {
				caught = true
				break
			}
		}
		if !caught {
			t.Errorf("the shard cases do not catch %q", name)
		}
	}
}
