// Package simrun runs a Sluice broker and deterministic Kafka clients in one
// simulated world, through seeded faults, and checks what the clients saw.
//
// # A run
//
// One seed decides everything (swarm testing: ChooseOptions draws the
// topic's partition count, the number of producers and consumers, batch
// sizes, request versions, segment size, and which faults this seed mixes).
// A run has two phases, as DESIGN.md section 3 describes:
//
//	safety     Duration of virtual time: the clients work while the nemesis
//	           injects the seed's faults, each undone after a seeded while.
//	liveness   every fault undone at once (links healed, nodes resumed and
//	           restarted, a broker that saw its disk fail restarted by the
//	           operator); then every pending operation must complete, one
//	           produce round to every partition per producer must succeed,
//	           and every partition must be read whole (the final reads).
//
// The history is then judged by jepsen.Check (porcupine per partition and
// Kafka's invariants), and the verdict is folded into the trace hash, so
// that two runs of a seed print the same line only if they did the same
// things and reached the same judgement.
//
//	       +--------+   Produce (acks=-1, idempotent)   +--------+
//	p1..p3 | client | --------------------------------> |        |
//	       +--------+                                   | broker |  node.Broker
//	c1..c2 | client | <-------------------------------- |        |  on its own
//	       +--------+   Fetch, ListOffsets, Metadata,   +--------+  sim.Node
//	                    DeleteRecords
//	reader   final reads from the log start, once the cluster is quiet
//
// # The clients
//
// Every client speaks the real wire protocol (package wire, kmsg bodies)
// over a simulated connection from its own node, and builds and reads
// record batches itself (batch.go), checking each CRC. A producer sends one
// batch per partition per request, to one partition or a few, with a
// producer id and sequence numbers, and retries the very same batches after
// a lost connection, a timeout or a retriable error, so the broker can tell
// retries apart; once a batch's fate is unknown it starts over with a new
// producer id, as a Kafka producer bumps its epoch. With Options.InFlight
// above 1 the producer pipelines instead, as franz-go does (pipeline.go):
// up to five requests in flight, per-partition queues of batches numbered
// in order, resent in order with their numbering after any failure. A
// consumer fetches one partition at a time from its position, follows what
// it got, now and then seeks back or resets its position by ListOffsets,
// and with Options.DeleteRecords deletes, a few times a run, records it has
// read (a position below the log start is then out of range, and resets to
// ListOffsets earliest). Each call is an operation in the history, recorded as jepsen classifies its answer: a
// timeout or a lost connection leaves it unknown (info).
//
// The clients' own state that would survive a Kafka client's crash in a
// Jepsen test (the value counter, the operation in progress) lives outside
// the simulated node; a power loss that kills a client's node records its
// pending operations as unknown, and the node boots a fresh client.
//
// # A cluster run
//
// With Config.Nodes of 3 or more (sluice sim run --nodes N), the world
// holds N combined nodes n1..nN (process.roles=broker,controller, a static
// quorum of all of them) instead of one broker; with Config.BrokerOnly of K
// (--broker-only K) the last K are broker-only nodes that follow the log
// as raft learners and the first N-K the voters. The seed's options are
// ChooseClusterOptions' (cluster.go). The data topic is made first and
// noted as existing in the metadata history; then metadata clients m1..mK
// create, delete and describe a few topic names each, every attempt sent
// to a random node and recorded in a jepsen.MetaHistory with that node,
// retried elsewhere after NOT_CONTROLLER, a timeout or a lost connection
// (cluster_clients.go); producers and consumers follow each partition's
// leader (cluster_data.go). The nemesis (cluster_nemesis.go) crashes,
// kills, restarts and pauses nodes, cuts links between nodes (both ways or
// one way) or to clients, jumps clocks and fails disks, never holding more
// than a minority of the voters at once (broker-only nodes freely); a seed of the power-loss kind
// also cuts the power of every node at once. An observer samples each
// node's quorum state every few milliseconds of virtual time
// (node.Broker.MetadataView: leader, term, applied index; and a digest of
// its image). The liveness phase heals everything; every pending
// operation must end, each metadata client's create of a fresh name and
// each producer's produce to every partition must succeed, and every node
// must run and agree on the applied index. Then jepsen.CheckMeta,
// CheckLeaders, CheckAppliedLogs and CheckConverged (over every node's
// final image) judge the metadata, and jepsen.Check the data. The
// durability oracle holds every acknowledged produce and every fetch
// answer against the disk of the node that gave it (with one replica per
// partition, the leader's disk is the partition's). Config.MetaOnly leaves the
// data workload out. About half the data seeds add consumer groups
// (cluster_groups.go): classic and KIP-848 members that join, leave,
// crash and stall, judged by jepsen.CheckGroups.
//
// # What a run reports
//
// Summary.Line is one line: the seed, virtual time, events, operations,
// the result, the trace, the options and the faults injected. Probes count
// faults and rare paths (a retried produce that succeeded, a failed broker
// start, an EIO that struck); a sweep reports those that never fired.
// Sabotage makes the clients lie about what the broker said, for the tests
// that prove the check would catch a broken broker.
package simrun
