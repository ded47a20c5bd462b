// Package log is a partition's log: Kafka record batches stored verbatim in
// segment files, with the indexes, checkpoints and producer state Kafka
// keeps beside them, written only through env.FS.
//
// # Layout
//
// A partition lives in its own directory, named <topic>-<partition> by the
// caller, laid out as Kafka lays it out:
//
//	orders-3/
//	  00000000000000000000.log        batches, back to back, as produced
//	  00000000000000000000.index      sparse offset index
//	  00000000000000000000.timeindex  sparse time index
//	  00000000000000004096.log        the next segment, named by its base offset
//	  00000000000000004096.index
//	  00000000000000004096.timeindex
//	  00000000000000004096.snapshot   producer state as of offset 4096
//	  leader-epoch-checkpoint         epoch -> first offset
//	  recovery-point-checkpoint       recovery point, log start offset, clean flag
//
// A segment holds whole batches with contiguous offsets, the first of which
// is the segment's base offset; each segment begins where the previous one
// ends. The batch format and what the log rewrites in it are in batch.go,
// the index formats in index.go, the checkpoint formats in checkpoint.go
// and epoch.go, the snapshot format in producer.go.
//
// # Operations
//
// Every method runs on the node's loop; nothing blocks. Appends write to the
// page cache at once (AppendLeader for a producer's batch, AppendFollower for
// a leader's batches); Flush says when an offset is durable; Read returns
// byte ranges of segment files holding whole batches, which the caller
// copies (Records.AppendTo) or sends before it gives the loop back.
// Truncation (TruncateTo, TruncateFullyAndStartAt), retention
// (EnforceRetention) and DeleteRecords move the ends of the log; after a
// truncation, and after an Open whose recovery changed the disk, the log
// accepts appends only once Ready reports. Durability, checkpoints and that
// barrier are described in flush.go and truncate.go; what Open does after a
// crash in recover.go.
//
// # Trust
//
// Bytes read back are checked before they are believed. Whole batches and
// their CRCs are checked when scanning after a crash, when copying for a
// reader, and wherever a field inside the CRC decides an answer (producer
// sequences, record timestamps). A batch header read alone, to walk a
// segment, is checked for shape (magic, length, offsets in sequence) and
// confirmed by the header that follows it. The leader epoch, which lies
// outside the CRC, is checked against the leader-epoch cache. Checkpoint and
// snapshot files carry checksums, and index entries are checked against the
// batch they point at. A check that fails is retried (a bit flipped on the
// read path is gone on the next read); one that keeps failing is an error
// wrapping ErrCorrupt, never data. Recovery cuts the log at the first bad
// batch after the recovery point; below it, the disk is trusted.
//
// A segment's max timestamp (for retention.ms, and for which segments a
// timestamp lookup skips) read from its time index file is checked against
// the batch the entry names before either relies on it (confirmMaxTs).
//
// What is not checked: a max timestamp recovery found in a batch header
// read alone (a flip on the way can mistime the segment); a flip on the
// medium that raises the leader epoch of the log's very last batch.
//
// # Decisions
//
// Where Kafka left room, or where this log departs from it:
//
//   - Exactly one batch per producer append, nothing after it (Kafka trims
//     a trailing partial batch silently; Produce v3+ allows one batch).
//     Magic 0 and 1 are INVALID_RECORD, as ProduceRequest v3+ validation
//     answers; UNSUPPORTED_FOR_MESSAGE_FORMAT is never returned, because the
//     log only ever stores magic 2.
//   - No decompression and no per-record decode on the append path, unless
//     the topic's compression.type names a codec other than the batch's
//     (compression.go: then the records are decompressed, their framing
//     checked, and compressed again): the
//     record count is checked against the offset delta, an uncompressed
//     batch's record length prefixes are walked, and timestamps are checked
//     at the batch level (base and max), not per record. The producer's max
//     timestamp is trusted (Kafka recomputes it from the records).
//   - Records are decoded (and decompressed) only for ListOffsets by
//     timestamp and MAX_TIMESTAMP, which need a record-level answer.
//   - Recovery trusts a segment's index files whole (no walk of its
//     batches) only when the recovery point lies past the segment's end,
//     not at it: a flush round begun while the segment was active makes its
//     end durable without syncing its index files, which rounds leave alone
//     for the active segment and which its roll completes. For the same
//     reason a checkpoint's recovery point stops at the end of the first
//     rolled segment whose index files are not durable yet, and a roll asks
//     for a round of its own. (Kafka flushes a segment's indexes with it.)
//   - Follower batches must continue the log exactly (no gaps, which only
//     compaction makes, and compaction is not supported).
//   - A truncation, and a recovery that changed the disk, put the log behind
//     a barrier: appends get ErrNotReady until a checkpoint with the lowered
//     recovery point is durable, the files are cut, and everything is
//     synced (Ready reports it). Kafka cuts the files at once and lets the
//     checkpoint follow lazily, which a crash can turn into a segment below
//     the recovery point that is shorter than it claims.
//   - Follower batches may not go back to an older leader epoch than the
//     log's latest (the follower truncates first); Kafka would accept them
//     and cut its epoch cache. Every batch's leader epoch, which its CRC does
//     not cover, is checked against the cache when it is read back, and
//     epochs found by recovery must not go down.
//   - A leader append is all or nothing; a follower append that fails may
//     have appended a prefix of its batches (LogEndOffset says how far).
//   - A failed sync fails the log until it is reopened (Kafka takes the
//     whole log directory offline).
//   - A barrier whose checkpoint the disk refuses (ENOSPC) retries every
//     second without failing the log, but not under Close: Close waits for
//     the attempt in flight only, then gives up on the truncation and
//     reports the error. Close always calls back; whatever it could not
//     make durable is left to the next Open's recovery.
//   - The recovery point and log start offset share one per-partition file,
//     recovery-point-checkpoint, written with the leader-epoch checkpoint and
//     holding that file's checksum, so that a crash between the two renames
//     is noticed (the log is then scanned whole). Both files, and the
//     producer snapshots, carry checksums (Kafka's do not, or only the
//     snapshots). Snapshots keep all five batches of a producer.
//   - A removal that fails is never left behind silently where the file
//     could rejoin the log: retention stops at it, a truncation fails the
//     log, recovery fails Open (which may be retried). Empty segment files
//     a failed roll left behind are dropped by recovery.
//   - Reads may span segments, and return whole batches only.
//   - Time-based retention never deletes the active segment (Kafka rolls it
//     first when it has expired).
//   - Transactions are not tracked: transactional batches are stored, but
//     no last stable offset or aborted-transaction index is kept.
package log
