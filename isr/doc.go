// Package isr decides one partition's replication, as Kafka's Partition
// class does, without doing any of it: a Replica is a pure state machine
// that takes the committed metadata of its partition, its own log's
// positions, its followers' fetch positions, the controller's answers and
// the clock's now, and hands back what should happen as data (Ready): a
// high watermark that moved, an ISR change to propose, a leader epoch to
// ask the leader about, a truncation to perform. The node applies the
// effects; parked requests stay in the node, which learns from Ready that
// the high watermark moved.
//
// The role is a step function, as in etcd raft (stepLeader,
// stepFollower): the committed metadata decides it, and a change of leader
// or leader epoch starts the role afresh.
//
// # Leader
//
// The high watermark is the smallest position of the maximal ISR (the
// committed ISR, plus a member whose addition is in flight): the leader's
// own position and each follower's last fetch offset. It never goes back,
// and it does not move while the committed ISR is smaller than the
// effective min.insync.replicas (min(min.insync.replicas, replicas)), as
// with KIP-966's eligible leader replicas: a replica that left the ISR
// then still holds everything below the high watermark, so the controller
// may elect it. What "position" means is the node's choice (its flush
// policy): the leader's durable end and a follower that fetches only what
// it has synced make the high watermark survive a power loss of every
// node; the log end and followers that report unsynced data make it
// Kafka's page-cache watermark.
//
// A follower is caught up when its fetch offset reaches the leader's log
// end as it was at that fetch, or at the follower's previous fetch (Kafka's
// lastCaughtUpTime); one not caught up for ReplicaLagTimeMax leaves the
// ISR. A follower out of the ISR joins it when its fetch offset reaches
// the high watermark and the offset at which this leader's epoch began.
// One ISR change is in flight at a time, against the partition epoch the
// leader knows; the controller refuses a stale one, and the leader then
// waits for the metadata that made it stale.
//
// # Follower
//
// A follower that takes a new leader or leader epoch first asks the
// leader for the end offset of its own latest epoch (OffsetForLeaderEpoch,
// KIP-101/KIP-279), truncates to what the answer proves the two logs
// share, and only then fetches. Its high watermark is the leader's, capped
// at its own log end, and never goes back.
package isr
