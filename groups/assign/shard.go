package assign

import (
	"math"
	"unicode/utf16"
)

// ShardFor is the partition of __consumer_offsets that holds the group:
// Kafka's Utils.abs(groupId.hashCode()) % partitions, so that a group lands
// where Kafka would put it. partitions must be positive; ShardFor returns
// -1 otherwise rather than dividing by zero.
func ShardFor(groupID string, partitions int32) int32 {
	if partitions <= 0 {
		return -1
	}
	return kafkaAbs(javaHashCode(groupID)) % partitions
}

// javaHashCode is Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1] in
// wrapping 32-bit arithmetic, over the string's UTF-16 code units, so a
// character above U+FFFF counts as its two surrogates. A Go string is UTF-8
// bytes, and every byte of it that is not valid UTF-8 counts as U+FFFD.
// Kafka decodes the id with Java's UTF-8 decoder, which also substitutes
// U+FFFD but sometimes one for a whole malformed sequence, so an id that is
// not UTF-8 (no client sends one) may hash differently than in Kafka.
func javaHashCode(s string) int32 {
	var h int32
	for _, r := range s {
		if r > 0xFFFF {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + int32(hi)
			h = 31*h + int32(lo)
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// kafkaAbs is Kafka's Utils.abs: the absolute value, except that
// math.MinInt32, whose absolute value does not fit, maps to 0 (Java's
// Math.abs returns it unchanged, still negative).
func kafkaAbs(n int32) int32 {
	if n == math.MinInt32 {
		return 0
	}
	if n < 0 {
		return -n
	}
	return n
}
