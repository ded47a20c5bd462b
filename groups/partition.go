package groups

import "github.com/sluicemq/sluice/groups/assign"

// PartitionFor is the __consumer_offsets partition that coordinates
// groupID: Kafka's Utils.abs(groupId.hashCode()) % partitions, so that a
// group lands on the partition Kafka would give it (assign.ShardFor, which
// has the Java details). partitions must be positive.
func PartitionFor(groupID string, partitions int32) int32 {
	return assign.ShardFor(groupID, partitions)
}
