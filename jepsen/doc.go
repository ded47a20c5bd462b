// Package jepsen records what Kafka clients saw and judges it.
//
// A workload (the simulator's deterministic clients, or the real-process
// runner driving franz-go) records a History: every call a client makes is
// an invoke event, and its answer is an ok, fail or info event. One counter
// stamps every event, bumped at each call and each return, so no two events
// tie and the order of events is the order in which things were seen.
//
//	time  kind    op  client  what
//	1     invoke  0   0       produce t-0 ["a"]
//	2     invoke  1   1       produce t-0 ["b"]
//	3     ok      1   1       produce t-0 -> offset 0
//	4     info    0   0       produce t-0: request timed out   (may or may not have landed)
//	5     invoke  2   2       fetch t-0 from 0
//	6     ok      2   2       fetch t-0 -> [0:"b" 1:"a"]
//	7     invoke  3   1       delete records t-0 below 1
//	8     ok      3   1       delete records t-0 -> low watermark 1
//	9     fail    4   2       fetch t-0 from 0: OFFSET_OUT_OF_RANGE
//
// # Outcomes
//
// ok means the operation took effect and the answer is what it returned.
// fail means it definitely did not take effect. info means nobody knows:
// the request may have landed (a timeout after the broker appended, a lost
// connection, NOT_ENOUGH_REPLICAS_AFTER_APPEND). Classify turns a Kafka
// error code or a transport failure into fail or info, in one place; when in
// doubt the answer is info, because calling a landed write "failed" turns a
// correct broker into a false alarm, never the reverse.
//
// # Checks
//
// Check judges a history in two ways.
//
// Linearizability (porcupine): each partition is one log, offset -> value.
// A produce appends its values at the end of the log, and the offset it
// returned must be where they landed; a fetch from offset o returns a prefix
// of the log from o (consecutive offsets, the values the log holds there,
// possibly fewer than exist, as a consumer that reads only up to the high
// watermark does) or OFFSET_OUT_OF_RANGE when o is past the end (or below
// the log start, see below). A final read returns the whole log from its
// log start. An info produce has no return time: it may land at any point
// after its call, or never, which an open return time expresses
// (porcupine may place it after every other operation, where it changes
// nothing anyone saw). Before checking, every info produce whose
// value some read returned is resolved to the offset where it was seen, and
// with a final read present, every info produce that no read returned is
// dropped: it did not land (unless it may have landed below where the
// final read began, and been deleted since).
//
// DeleteRecords moves the log start up: records below it are gone. An
// acknowledged one moves it to the offset it asked for (for good: the
// broker answers once the new start is durable) and answers the low
// watermark, the log start when it answered; a fetch from below the log
// start answers OFFSET_OUT_OF_RANGE, nothing else, and one at or above it
// never does. One whose outcome is unknown may have moved the start for a
// while: the broker moves it in memory before it is durable, and a crash
// between the two brings the old start back. So the model keeps two
// bounds (see logState): the start acknowledged DeleteRecords set, below
// which a fetch is out of range and nothing else, and the furthest any
// DeleteRecords may have moved it, from which a fetch is never out of
// range; between the two, either answer is right.
//
// Kafka invariants, each reported with the events that show it: no
// acknowledged (or read) write missing from the final read (unless it sat
// below where the final read began and a DeleteRecords covered its offset:
// one acknowledged with a low watermark above it, or one of unknown outcome
// that asked for more); no offset holding two values; no value at two
// offsets when its producer was idempotent; an idempotent producer's
// acknowledged values in the final read in the order it sent them, even
// when its produces overlapped (pipelined, up to five in flight, where
// porcupine may order them either way); every read well formed
// (consecutive offsets from where it began, never a value nobody produced
// to that partition); no consumer position moving backwards between two
// assignments; one owner per partition per group generation. The offsets
// check (offsets.go) holds what the broker said about offsets (ListOffsets,
// the watermarks of Fetch, the low watermarks of DeleteRecords) against
// the log: among its rules, an acknowledged DeleteRecords is durable (no
// log start answered after it is below its low watermark, no read asked
// after it from below that is served) and the log start moves only as far
// as a DeleteRecords asked.
//
// # Assumptions
//
// Produce values are unique across the whole history (the workload draws
// them from a counter); that is how a read is tied to the write it returns.
// Records leave the front of the log only by DeleteRecords, each in the
// history (no retention); there is no compaction and no transaction: a gap
// in a read is a violation. Produces
// are assumed to be acks=all: with acks=1 Kafka itself may lose acknowledged
// writes on failover, and the checker will say so.
//
// # Metadata
//
// Topic creation, deletion and description have a history of their own
// (MetaHistory, meta_history.go), judged by CheckMeta against the promises
// written down in meta_model.go; the metadata quorum's safety and the
// cluster's convergence are judged from the simulator's observations by
// CheckLeaders, CheckAppliedLogs and CheckConverged (meta_quorum.go).
//
// A History is not safe for concurrent use: the simulator is one goroutine;
// the real-process runner serializes its calls (a mutex of its own around
// each record).
package jepsen
