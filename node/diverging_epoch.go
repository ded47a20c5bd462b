package node

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A consumer's diverging epoch (KIP-320, Fetch v12+).
//
// A consumer that sends LastFetchedEpoch, the epoch of the last batch it
// read, with its fetch offset asks whether that (epoch, offset) is still on
// this replica's log: a leader elected without the records the consumer
// read truncates them on the other replicas, and the consumer must learn
// where its log and the partition's part. As Kafka's Partition.readRecords
// checks it, on the leader and on a follower serving the consumer alike:
//
//   - the end of LastFetchedEpoch on this log (leaderEpochEnd, which on the
//     leader also knows its own epoch before its first batch) is UNDEFINED:
//     OFFSET_OUT_OF_RANGE;
//   - the fetch offset is below the log start: OFFSET_OUT_OF_RANGE, diverging
//     or not;
//   - that end's epoch is older than LastFetchedEpoch, or the end is below
//     the fetch offset: no records, and DivergingEpoch (a tagged field,
//     which only kmsg's encoder writes) names that epoch and end offset, to
//     which the consumer truncates its position;
//   - else the records are read as without it.
//
// Followers of Sluice send LastFetchedEpoch too, but reconcile by
// OffsetForLeaderEpoch before they fetch (fetcher.go), so their fetches are
// not checked here (Kafka checks them alike).

// divergingEpoch checks sp's LastFetchedEpoch against p's log: diverged
// with the epoch to answer, or the error, or neither.
func (b *Broker) divergingEpoch(req *kmsg.FetchRequest, p *partition, sp *sessionPartition) (div kmsg.FetchResponseTopicPartitionDivergingEpoch, diverged bool, code *kerr.Error) {
	div = kmsg.NewFetchResponseTopicPartitionDivergingEpoch()
	if req.Version < 12 || fetchReplicaID(req) >= 0 || sp.lastFetchedEpoch < 0 {
		return div, false, nil
	}
	leaderEpoch := int32(-1) // a follower's log knows only the epochs of its batches
	if p.serving() {
		leaderEpoch = p.leaderEpoch
	}
	endEpoch, endOffset := leaderEpochEnd(p.log, leaderEpoch, sp.lastFetchedEpoch)
	switch {
	case endEpoch < 0 || endOffset < 0:
		return div, false, kerr.OffsetOutOfRange
	case sp.fetchOffset < p.log.LogStartOffset():
		return div, false, kerr.OffsetOutOfRange
	case endEpoch < sp.lastFetchedEpoch || endOffset < sp.fetchOffset:
		div.Epoch, div.EndOffset = endEpoch, endOffset
		return div, true, nil
	}
	return div, false, nil
}
