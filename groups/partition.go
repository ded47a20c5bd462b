package groups

import "unicode/utf16"

// PartitionFor is the __consumer_offsets partition that coordinates
// groupID: Kafka's Utils.abs(groupId.hashCode()) % partitions, with Java's
// String.hashCode over UTF-16 code units, so that a group lands on the
// partition Kafka would give it (and tools that compute it agree).
// partitions must be positive.
func PartitionFor(groupID string, partitions int32) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(groupID)) {
		h = 31*h + int32(u)
	}
	// Kafka's Utils.abs maps MinInt32, which has no positive, to 0.
	switch {
	case h == -1<<31:
		h = 0
	case h < 0:
		h = -h
	}
	return h % partitions
}
