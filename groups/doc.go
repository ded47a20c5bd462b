// Package groups is the group coordinator: one Shard per partition of
// __consumer_offsets, serving the groups whose ids hash to it
// (PartitionFor: Kafka's abs(javaHash(groupId)) % partitions; the runtime
// routes).
//
// # A shard is a pure state machine
//
// In the manner of etcd raft, a Shard does no I/O and owns no timers or
// goroutines. Inputs are calls:
//
//	Replay(offset, key, value)   the partition's records, from its log start, in order
//	Loaded(now)                  replay is done; serving starts
//	Handle(now, id, req)         one group API request (HandleFrom adds the client)
//	Tick(now)                    the clock reached Ready's Deadline
//	TopicsDeleted(topics)        the metadata image dropped topics: their offsets go
//
// and outputs leave as data, from Ready: Effects in order (records to
// append, responses to send) and the next Deadline.
//
// # The effect rule
//
//	effects:  Write w1 · Respond r1 · Write w2 · Respond r2 · Respond r3
//	                     ^ after w1 commits        ^ after w1 and w2 commit
//
// The runtime appends each Write (acks=all through the ISR) and sends a
// Respond only once every Write before it in the order is committed (the
// high watermark passed it). That one rule makes acknowledged commits and
// assignments durable and every read linearizable: an OffsetFetch is
// answered after every commit that was acknowledged before it. If a Write
// fails, the runtime unloads the shard (answering what it held with
// NOT_COORDINATOR) and reloads it by replay when it leads again, so the
// shard applies its own writes at once and never reverts state.
//
// # Records
//
// Kafka's own formats (see records.go and consumer_records.go), so that
// Kafka's tools read the topic: OffsetCommitKey v1 / OffsetCommitValue v3 (v1 with an expire
// time) for each committed offset, GroupMetadataKey v2 /
// GroupMetadataValue v3 for a group's membership and assignment. A nil
// value is a tombstone. A group's metadata is written when a group is
// created by JoinGroup (Empty, generation 0), when the leader's SyncGroup
// brings the assignment, when a static member is replaced without a
// rebalance, and when a rebalance leaves the group Empty. Replay rebuilds
// groups as Kafka loads them: Stable with the written members, or Empty.
// A KIP-848 consumer group is its records (key versions 3 to 8, see
// consumer_records.go): its epoch, subscription metadata and target
// epoch, and per member its subscription, target and current assignment.
// It changes only by writing them (the handlers compute records, and
// applying them is the change), so replay rebuilds it exactly.
//
// # Log bounding
//
// The shard counts records written since its last snapshot; past
// max(SnapshotMinRecords, 2 x live records) its Ready carries one Write
// flagged SnapshotStart that restates every group's latest metadata and
// every live offset. Once it commits, the runtime may move the log start
// to that Write's first offset: replay from there gives the same state as
// replay of the whole log.
//
// # Protocols
//
// The classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
// DescribeGroups, ListGroups, DeleteGroups) and offsets (OffsetCommit,
// OffsetFetch, OffsetDelete), one file per API named by key, each opening
// with the versions served and Kafka's answer to each bad case. Requests
// for groups of other shards are never handed to this one; batched
// requests (OffsetFetch v8+, DescribeGroups, DeleteGroups, ListGroups,
// ConsumerGroupDescribe) are split by the runtime and their answers merged.
//
// KIP-848 (68_consumer_group_heartbeat.go, 69_consumer_group_describe.go,
// consumer_group.go): members join with epoch 0 and heartbeat with their
// epoch and what they own; a changed subscription or subscription metadata
// bumps the group epoch, the target assignment is recomputed by the
// group's server-side assignor (package assign), and each member
// reconciles towards its target as Kafka's CurrentAssignmentBuilder does
// (STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS): a partition goes
// to a new owner only after its previous owner's heartbeat stopped listing
// it. Subscriptions (names or an RE2 regex) resolve against Config.Topics.
// A group uses one protocol at a time: an Empty group of either kind
// converts when a member of the other joins; otherwise the other
// protocol's requests get Kafka's errors. Under the invariants tag, every
// Ready checks that no partition is held by two members (a partition
// pending revocation counts as its old owner's).
//
// # Where Sluice chooses
//
// Kafka's group coordinator (GroupMetadataManager, OffsetMetadataManager
// and ClassicGroup in its group-coordinator module) is followed check for
// check; these are the places where it is silent or Sluice differs:
//
//   - A second JoinGroup or SyncGroup from a member whose first is still
//     parked (a retry on another connection) supersedes it, and the first
//     is answered REBALANCE_IN_PROGRESS; Kafka drops the first's future and
//     never answers it. A removed member's parked SyncGroup gets
//     UNKNOWN_MEMBER_ID, for the same reason.
//   - A member woken from a parked SyncGroup by a new rebalance gets a
//     new session, as Kafka's propagateAssignment gives one; without it a
//     static member that never rejoined was never expired (found by the
//     replay workload).
//   - The protocol vote's ties go to the lexically first name (Kafka's
//     are hash order).
//   - Member ids draw their UUID from Config.Rand (the node's env.Rand),
//     so the simulator replays them.
//   - Strings the records carry behind int16 lengths cannot be longer
//     than 32767 bytes; only flexible request versions could send longer
//     ones, and they get INVALID_GROUP_ID, UNKNOWN_TOPIC_OR_PARTITION or
//     INVALID_REQUEST instead of a record no tool could read.
//   - KIP-848: the subscription metadata is recomputed from Config.Topics
//     at every heartbeat (Kafka refreshes it on a timer), so a new topic
//     matching a regex or added partitions bump the epoch at once; the
//     preferred assignor's ties go to the first in group.consumer.assignors
//     (Kafka's are hash order); a live classic group is not upgraded
//     online (GROUP_ID_NOT_FOUND), and a classic member cannot join a
//     consumer group with members (INCONSISTENT_GROUP_PROTOCOL): Sluice
//     serves no mixed groups. As in Kafka, a member that still exists and
//     rejoins with epoch 0 and its old id is FENCED_MEMBER_EPOCH until its
//     session expires.
//   - A rebalance in flight is not in the log (as in Kafka): a shard loaded
//     after a failover has the last synced generation, Stable, and members
//     that were mid-rebalance find out by ILLEGAL_GENERATION and rejoin.
package groups
