// Package assign holds the pure pieces of KIP-848 group coordination that
// need no group state: where a group lives, which partitions each member of
// a consumer group should own, and which topics a regex subscription names.
//
// # Where a group lives
//
// A group's coordinator shard is the partition of __consumer_offsets that
// ShardFor gives: Kafka's Utils.abs(groupId.hashCode()) % partitions, with
// Java's String.hashCode over UTF-16 code units and Utils.abs mapping
// Integer.MIN_VALUE to 0, so a group id lands on the partition Kafka would
// choose ("polygenelubricants" hashes to MIN_VALUE and lands on 0).
//
// # Server-side assignors
//
// An Assignor computes a group's target assignment from a GroupSpec (each
// member's id, instance id, rack, subscribed topic ids and current
// assignment) and a TopicDescriber (partition counts), as Kafka's
// ConsumerGroupPartitionAssignor does. Two are served, under Kafka's names,
// with "uniform" the default (All lists them in the order of Kafka's
// group.consumer.assignors):
//
//   - Uniform: balance, then stickiness. With one subscription for all
//     members, every member gets total/n or total/n+1 partitions and keeps
//     as many of its current ones as that allows; with several, partitions
//     of topics a member still subscribes to stay, the rest go to the least
//     loaded subscribers, and partitions then move within each topic until
//     no move narrows a gap between its subscribers.
//   - Range: each topic cut into contiguous ranges over its subscribers in
//     member order (static members by instance id first), so members with
//     the same subscription of equally partitioned topics get the same
//     partition numbers of each (co-partitioning).
//
// Range on a topic of 7 partitions and members a, b and c:
//
//	a: 0 1 2   b: 3 4   c: 5 6
//
// Results are deterministic: members are numbered by id and topics by
// Kafka's Uuid order before anything is decided, every loop walks those
// numbers, and the GroupAssignment lists members by id with topics and
// partitions sorted. The order of the spec's slices cannot change the
// result, and no map is iterated.
//
// An assignment is a target: revoke-before-assign, member epochs and
// reconciliation belong to the group state machine in package groups.
//
// # Regex subscriptions
//
// CompileSubscription compiles a subscribed_topic_regex with Go's RE2 (Kafka
// uses RE2/J) anchored at both ends, because Kafka tests a topic with
// Pattern.matcher(name).matches(), a whole-name match; an invalid pattern is
// INVALID_REGULAR_EXPRESSION. MatchTopics resolves it against topic names,
// internal topics included, as Kafka's coordinator does.
package assign
