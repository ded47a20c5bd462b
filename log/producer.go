package log

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Idempotent producers (KIP-98). For each producer id the log remembers the
// producer's epoch and the sequence ranges and offsets of its last five
// batches, which is what a producer may have in flight. A batch that repeats
// one of them exactly is a retry: it is answered with the offsets it got the
// first time and not written again. Otherwise its first sequence must follow
// the last one (sequences wrap at MaxInt32), or be 0 under a new epoch.
//
// The state is a function of the log: it is rebuilt by replaying batch
// headers from a snapshot (or from the log start) up to the log end.

// producerBatchesRetained is how many batches per producer are remembered,
// Kafka's NUM_BATCHES_TO_RETAIN (and max.in.flight.requests for idempotence).
const producerBatchesRetained = 5

// batchMeta is what is remembered of one batch of a producer.
type batchMeta struct {
	FirstSeq    int32
	LastSeq     int32
	FirstOffset int64
	LastOffset  int64
	// Timestamp is the batch's max timestamp as stored (the append time
	// under LogAppendTime).
	Timestamp int64
}

// producerEntry is one producer's state.
type producerEntry struct {
	ID    int64
	Epoch int16 // -1 until a batch is seen
	// Batches are the producer's latest batches under Epoch, oldest first.
	Batches []batchMeta
	// LastTimestamp is the timestamp of the producer's latest batch, from
	// which its expiration is counted (as Kafka counts it).
	LastTimestamp int64
}

func (e *producerEntry) lastSeq() int32 {
	if len(e.Batches) == 0 {
		return noSequence
	}
	return e.Batches[len(e.Batches)-1].LastSeq
}

// producerState maps producer ids to their state.
type producerState struct {
	byID map[int64]*producerEntry
}

func newProducerState() producerState {
	return producerState{byID: make(map[int64]*producerEntry)}
}

// checkClient decides what to do with a producer's batch before it is
// written: (nil, nil) to append it, (meta, nil) when it repeats a batch
// already in the log (meta says where), or an error: INVALID_PRODUCER_EPOCH
// for an epoch older than the producer's, OUT_OF_ORDER_SEQUENCE_NUMBER for a
// sequence that does not follow. A producer the log does not know (never
// seen, expired, or lost with old segments) may start at any sequence.
func (s *producerState) checkClient(h *header) (*batchMeta, error) {
	if !h.hasProducerID() {
		return nil, nil
	}
	e := s.byID[h.ProducerID]
	current := int16(-1)
	if e != nil {
		current = e.Epoch
		if h.ProducerEpoch == e.Epoch {
			first, last := h.BaseSequence, h.lastSequence()
			for i := range e.Batches {
				if e.Batches[i].FirstSeq == first && e.Batches[i].LastSeq == last {
					return &e.Batches[i], nil
				}
			}
		}
	}
	if h.ProducerEpoch < current {
		return nil, newError(kerr.InvalidProducerEpoch, "epoch of producer %d is %d, which is smaller than the last seen epoch %d", h.ProducerID, h.ProducerEpoch, current)
	}
	if h.ProducerEpoch != current {
		if h.BaseSequence != 0 && current != -1 {
			return nil, newError(kerr.OutOfOrderSequenceNumber, "invalid sequence number for new epoch of producer %d: %d (request epoch), %d (seq. number), %d (current producer epoch)", h.ProducerID, h.ProducerEpoch, h.BaseSequence, current)
		}
		return nil, nil
	}
	if current == -1 || inSequence(e.lastSeq(), h.BaseSequence) {
		return nil, nil
	}
	return nil, newError(kerr.OutOfOrderSequenceNumber, "out of order sequence number for producer %d: %d (incoming seq. number), %d (current end sequence number)", h.ProducerID, h.BaseSequence, e.lastSeq())
}

func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == math.MaxInt32)
}

// apply records a batch that is now in the log, whoever wrote it (a
// producer through the leader, a leader through replication, recovery).
func (s *producerState) apply(h *header) {
	if !h.hasProducerID() {
		return
	}
	e := s.byID[h.ProducerID]
	if e == nil {
		e = &producerEntry{ID: h.ProducerID, Epoch: -1}
		s.byID[h.ProducerID] = e
	}
	if e.Epoch != h.ProducerEpoch {
		e.Epoch = h.ProducerEpoch
		e.Batches = e.Batches[:0]
	}
	e.LastTimestamp = h.MaxTimestamp
	if h.control() {
		return // a transaction marker moves the epoch only
	}
	if len(e.Batches) == producerBatchesRetained {
		copy(e.Batches, e.Batches[1:])
		e.Batches = e.Batches[:producerBatchesRetained-1]
	}
	e.Batches = append(e.Batches, batchMeta{
		FirstSeq:    h.BaseSequence,
		LastSeq:     h.lastSequence(),
		FirstOffset: h.BaseOffset,
		LastOffset:  h.lastOffset(),
		Timestamp:   h.MaxTimestamp,
	})
}

// expire forgets producers idle for at least expirationMs, as Kafka's
// producer.id.expiration.ms does, counted from their last batch's timestamp.
func (s *producerState) expire(nowMs, expirationMs int64) int {
	n := 0
	for id, e := range s.byID { // deleting needs no order
		if nowMs-e.LastTimestamp >= expirationMs {
			delete(s.byID, id)
			n++
		}
	}
	return n
}

// sortedIDs returns the producer ids in ascending order.
func (s *producerState) sortedIDs() []int64 {
	ids := make([]int64, 0, len(s.byID))
	for id := range s.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// A producer snapshot file (<20-digit offset>.snapshot) holds the state as
// of that offset, big-endian:
//
//	version int16 (1) | crc uint32 | count int32 | count × entry
//	entry: id int64 | epoch int16 | last timestamp int64 | n int8 | n × batch
//	batch: first seq int32 | last seq int32 | first offset int64 |
//	       last offset int64 | timestamp int64
//
// The CRC32C covers everything after the crc field. Unlike Kafka's snapshot,
// which keeps only each producer's last batch, all five are kept, so that a
// retry is recognized after a restart too.
const (
	snapshotVersion     = 1
	snapshotHeaderSize  = 10
	snapshotEntrySize   = 19
	snapshotBatchSize   = 32
	snapshotMaxProducer = 1 << 24 // refuses absurd counts before allocating
)

func (s *producerState) encode() []byte {
	ids := s.sortedIDs()
	n := snapshotHeaderSize
	for _, id := range ids {
		n += snapshotEntrySize + snapshotBatchSize*len(s.byID[id].Batches)
	}
	p := make([]byte, snapshotHeaderSize, n)
	binary.BigEndian.PutUint16(p, snapshotVersion)
	binary.BigEndian.PutUint32(p[6:], uint32(len(ids)))
	for _, id := range ids {
		e := s.byID[id]
		p = binary.BigEndian.AppendUint64(p, uint64(e.ID))
		p = binary.BigEndian.AppendUint16(p, uint16(e.Epoch))
		p = binary.BigEndian.AppendUint64(p, uint64(e.LastTimestamp))
		p = append(p, byte(len(e.Batches)))
		for _, b := range e.Batches {
			p = binary.BigEndian.AppendUint32(p, uint32(b.FirstSeq))
			p = binary.BigEndian.AppendUint32(p, uint32(b.LastSeq))
			p = binary.BigEndian.AppendUint64(p, uint64(b.FirstOffset))
			p = binary.BigEndian.AppendUint64(p, uint64(b.LastOffset))
			p = binary.BigEndian.AppendUint64(p, uint64(b.Timestamp))
		}
	}
	binary.BigEndian.PutUint32(p[2:], crc32.Checksum(p[6:], castagnoli))
	return p
}

func decodeProducerSnapshot(p []byte) (producerState, error) {
	s := newProducerState()
	if len(p) < snapshotHeaderSize {
		return s, fmt.Errorf("producer snapshot: %d bytes is too short", len(p))
	}
	if v := binary.BigEndian.Uint16(p); v != snapshotVersion {
		return s, fmt.Errorf("producer snapshot: version %d", v)
	}
	if crc := crc32.Checksum(p[6:], castagnoli); crc != binary.BigEndian.Uint32(p[2:]) {
		return s, fmt.Errorf("producer snapshot: crc %08x, computed %08x", binary.BigEndian.Uint32(p[2:]), crc)
	}
	count := binary.BigEndian.Uint32(p[6:])
	if count > snapshotMaxProducer {
		return s, fmt.Errorf("producer snapshot: %d producers", count)
	}
	rest := p[snapshotHeaderSize:]
	for i := uint32(0); i < count; i++ {
		if len(rest) < snapshotEntrySize {
			return s, fmt.Errorf("producer snapshot: entry %d is cut short", i)
		}
		e := &producerEntry{
			ID:            int64(binary.BigEndian.Uint64(rest)),
			Epoch:         int16(binary.BigEndian.Uint16(rest[8:])),
			LastTimestamp: int64(binary.BigEndian.Uint64(rest[10:])),
		}
		nb := int(rest[18])
		rest = rest[snapshotEntrySize:]
		if nb > producerBatchesRetained || len(rest) < nb*snapshotBatchSize {
			return s, fmt.Errorf("producer snapshot: entry %d has %d batches", i, nb)
		}
		for j := 0; j < nb; j++ {
			e.Batches = append(e.Batches, batchMeta{
				FirstSeq:    int32(binary.BigEndian.Uint32(rest)),
				LastSeq:     int32(binary.BigEndian.Uint32(rest[4:])),
				FirstOffset: int64(binary.BigEndian.Uint64(rest[8:])),
				LastOffset:  int64(binary.BigEndian.Uint64(rest[16:])),
				Timestamp:   int64(binary.BigEndian.Uint64(rest[24:])),
			})
			rest = rest[snapshotBatchSize:]
		}
		if _, dup := s.byID[e.ID]; dup {
			return s, fmt.Errorf("producer snapshot: producer %d appears twice", e.ID)
		}
		s.byID[e.ID] = e
	}
	if len(rest) != 0 {
		return s, fmt.Errorf("producer snapshot: %d bytes after the last entry", len(rest))
	}
	return s, nil
}
