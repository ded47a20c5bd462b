// Package quorum is the metadata quorum's core: etcd raft (RawNode) driven
// by the node's loop, over durable storage on env.FS. It replicates opaque
// entries to a StateMachine and knows nothing of metadata records or the
// image; package raftmeta gives the entries their meaning.
//
// # Division of labour
//
//	Node        the driver: ticks, one Ready at a time, proposals, snapshots
//	Storage     raft.Storage served from memory, made durable on env.FS
//	Transport   carries raft's messages (transport.go, written apart)
//	StateMachine  applies committed entries, snapshots and restores state
//
// Every call is made on the node's loop (env.Loop) and none blocks: file
// syncs complete as loop events, ticks are env.Clock timers, messages leave
// through Sender.Send (the Transport, transport.go) and come back through Node.Step.
//
// # The driver
//
// raft's work is taken one Ready at a time, at most once per loop turn: a
// Step, Tick, Propose or report posts one turn if none is pending. A Ready's
// snapshot, entries and hard state are written and synced first; only when
// they are durable do its messages go out, its snapshot and committed
// entries reach the state machine, and raft hear Advance. Steps and ticks
// go on meanwhile (raft allows them between Ready and Advance); they wait
// for the next Ready.
//
// Storage writes are synchronous in raft's sense: AsyncStorageWrites is off.
// Async writes let raft hand out the next Ready while a write is in flight,
// which pays off when the write is a slow blocking call on another thread.
// Here a write is already asynchronous (a sync completes as a loop event)
// and the loop must never block, so the only gain would be overlapping two
// Readys' syncs; the price would be raft's local-message protocol, and its
// ABA subtleties (rawnode.go's long comment on MsgStorageAppendResp), in a
// component whose correctness everything else stands on. The metadata log's
// write rate does not need it: one sync per Ready already batches every
// proposal made while the previous Ready was being made durable.
//
// Proposals carry a header (proposer id, a nonce drawn from env.Rand at
// Open, a sequence number) that is stripped before StateMachine.Apply, so
// that the proposer recognizes its entry when it is applied, and an entry
// written by an earlier life of the node is never taken for a new one.
// Only the leader proposes (ErrNotLeader elsewhere, proposal forwarding
// off), so the entries of a term are its leader's, in proposal order: an
// entry applied completes its proposal and proves every earlier pending one
// dropped; an empty entry in mid-term is a membership change raft refused
// and replaced. Proposals still pending when leadership ends fail with
// ErrLeadershipLost: their outcome is unknown.
//
// ConfirmLeadership is raft's ReadIndex (ReadOnlySafe): it answers once a
// quorum has acknowledged a heartbeat of the leader's term sent after the
// call, so a leader deposed without knowing it (paused past the others'
// election timeout) learns it before it answers from its own state.
//
// A snapshot of the state machine is taken every Config.SnapshotEntries
// applied entries or Config.SnapshotBytes of applied data, made durable,
// and then the log is compacted behind it (keeping CompactionMargin entries
// so that a slightly lagging follower catches up from the log). A follower
// behind the leader's first index is sent a snapshot by raft itself; the
// driver replaces the one raft took from storage by a fresh one of the state
// as applied now (as etcd's server does), since the stored one may predate
// the follower's own addition to the configuration, and a learner refuses a
// snapshot whose configuration lacks it. One received is made durable,
// restored into the state machine, and the log starts after it. A restart restores the latest
// snapshot and raft re-delivers the committed entries after it.
//
// etcd raft draws its election timeouts from crypto/rand.Reader; the
// simulator swaps that reader for a seeded one while its world runs, so
// simulated elections replay with the seed.
//
// # Files
//
// In Config.Dir (Kafka's name: __cluster_metadata-0):
//
//	00000000000000000001.log                    segment: entries from index 1
//	00000000000000004097.log                    the active segment
//	00000000000000020000-0000000003.checkpoint  snapshot at index 20000, term 3
//	00000000000000020000-0000000003.checkpoint.part   one being written
//	hardstate                                   term, vote, commit: two slots
//
// Every file is made of frames, as the single-node journal's are:
//
//	+------------+------------+---------------------------+
//	| length u32 | crc32c u32 | kind u8 | body (length-1) |
//	+------------+------------+---------------------------+
//
// big-endian, the checksum (Castagnoli) covering kind and body. A segment is
// a header frame (format version, the log's generation, its first index,
// the term of the entry before it) and then one frame per entry (the
// raftpb.Entry, marshaled). A checkpoint is one frame: the generation and
// the raftpb.Snapshot. The hard state file holds two 64-byte slots, each a
// frame of (sequence number, raftpb.HardState).
//
// # Durability and recovery
//
// What each write waits for, and why a crash at any point leaves a state
// recovery can read:
//
//   - Appends: frames are written at the active segment's end and the
//     segment synced; a new segment's directory entry is synced too. A batch
//     never spans two segments, and a segment is started only once the
//     previous one's writes were synced, so only the last segment can have a
//     torn tail.
//   - Hard state: written to the slot not holding the latest durable one,
//     then synced, so a torn write leaves the other intact; the valid slot
//     with the higher sequence number wins. It is synced whenever it
//     changes, the commit index included (Storage.Save says why: a commit
//     index lost at a restart can make a node replay an outdated
//     configuration and win an election in it).
//   - Overwrites (a new leader's entries at an index the log holds): the
//     segments after the one holding that index are removed one at a time
//     from the last, each removal synced, then that segment is truncated and
//     synced, and only then are the new entries written. Every crash leaves
//     a prefix of the old log, never a log with a hole or old entries after
//     new ones.
//   - Snapshots: the checkpoint is written to a .part file, synced, renamed,
//     and the directory synced; only then are segments wholly below the
//     snapshot's index minus the margin, and checkpoints beyond the latest
//     two, removed (without a sync: one a crash brings back is recognized as
//     below the snapshot and removed again).
//   - A snapshot from the leader starts a new log of a new generation,
//     recorded in its checkpoint and in the header of every segment after
//     it: segments of an older generation are stale whatever order their
//     removals reached the disk in.
//
// Recovery (OpenStorage) takes the newest checkpoint that reads back whole,
// the segments of its generation, contiguous (indexes and terms), reaching
// back to the entry after the snapshot, and the hard state. It cuts a torn
// tail of the last segment (damage with no whole frame after it) and
// reports it (Recovery), and removes leftovers (.part files, stale
// segments, segments below the snapshot). Anything else is a *CorruptError
// naming the file and offset, and nothing is changed: a damaged frame with
// a whole one after it, a damaged segment other than the last, entries
// missing between segments or after the snapshot, a segment whose header
// contradicts its name, a newest checkpoint that fails its checksum when no
// older one is continued by the log, a hard state file with no valid slot.
// Every read that shows damage is repeated before it is believed, since a
// bit can flip on the way from the disk. The same limit as the journal's
// holds: the last frame damaged on the medium after it was acknowledged
// looks like a torn tail, and the newest hard state slot damaged on the
// medium looks like a torn write.
//
// A process killed with writes unsynced leaves them in the page cache,
// where the next process reads them and a power loss may still take them:
// Node.Start syncs everything recovery read (Storage.Sync) before the node
// sends a message or applies an entry.
package quorum
