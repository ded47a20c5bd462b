package quorum

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// File names in the quorum's directory (the package documentation shows the
// layout).
const (
	segmentSuffix    = ".log"
	checkpointSuffix = ".checkpoint"
	// partSuffix marks a checkpoint being written: it is renamed to its
	// final name once synced, and a leftover is removed on open (Kafka's
	// name for the same thing).
	partSuffix    = ".part"
	hardStateName = "hardstate"
)

// segmentName is a segment's file name: its first entry's index in 20
// digits, as Kafka names a log segment by its base offset.
func segmentName(first uint64) string { return fmt.Sprintf("%020d%s", first, segmentSuffix) }

// checkpointName is a snapshot's file name, Kafka's for a metadata
// snapshot: <20-digit index>-<10-digit term>.checkpoint.
func checkpointName(index, term uint64) string {
	return fmt.Sprintf("%020d-%010d%s", index, term, checkpointSuffix)
}

// parseSegmentName returns the first index a segment's name gives.
func parseSegmentName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	first, err := strconv.ParseUint(digits, 10, 64)
	return first, err == nil
}

// parseCheckpointName returns the index and term a checkpoint's name gives.
func parseCheckpointName(name string) (index, term uint64, ok bool) {
	rest, ok := strings.CutSuffix(name, checkpointSuffix)
	if !ok || len(rest) != 31 || rest[20] != '-' {
		return 0, 0, false
	}
	index, err1 := strconv.ParseUint(rest[:20], 10, 64)
	term, err2 := strconv.ParseUint(rest[21:], 10, 64)
	return index, term, err1 == nil && err2 == nil
}

// segmentHeader is the first frame of every segment. gen ties the segment to
// the log it belongs to: installing a snapshot received from the leader
// starts a new log with a new generation (written in that snapshot's
// checkpoint), so whatever segments of an older generation a crash leaves
// behind are known to be stale, whatever order their removals reached the
// disk in. prevTerm is the term of the entry before the first, so the log
// can be checked to continue the one before it (or the snapshot) and raft
// can ask the term of the entry before its first.
type segmentHeader struct {
	gen, first, prevTerm uint64
}

const (
	formatVersion     = 1
	segmentHeaderBody = 2 + 3*8
)

func (h segmentHeader) encode() []byte {
	body := make([]byte, 2, segmentHeaderBody)
	body[0], body[1] = kindSegmentHeader, formatVersion
	body = binary.BigEndian.AppendUint64(body, h.gen)
	body = binary.BigEndian.AppendUint64(body, h.first)
	return binary.BigEndian.AppendUint64(body, h.prevTerm)
}

func decodeSegmentHeader(body []byte) (segmentHeader, error) {
	if len(body) != segmentHeaderBody || body[0] != kindSegmentHeader {
		return segmentHeader{}, fmt.Errorf("its first frame is not a segment header")
	}
	if body[1] != formatVersion {
		return segmentHeader{}, fmt.Errorf("its header has format version %d, this version reads %d", body[1], formatVersion)
	}
	return segmentHeader{
		gen:      binary.BigEndian.Uint64(body[2:10]),
		first:    binary.BigEndian.Uint64(body[10:18]),
		prevTerm: binary.BigEndian.Uint64(body[18:26]),
	}, nil
}

// encodeEntry returns the body of an entry's frame.
func encodeEntry(e *pb.Entry) ([]byte, error) {
	body := []byte{kindEntry}
	return proto.MarshalOptions{Deterministic: true}.MarshalAppend(body, e)
}

func decodeEntry(body []byte) (*pb.Entry, error) {
	if len(body) == 0 || body[0] != kindEntry {
		return nil, fmt.Errorf("the frame holds no entry")
	}
	e := &pb.Entry{}
	if err := proto.Unmarshal(body[1:], e); err != nil {
		return nil, fmt.Errorf("the entry does not decode: %v", err)
	}
	if e.Index == nil || e.Term == nil {
		return nil, fmt.Errorf("the entry has no index or term")
	}
	return e, nil
}

// encodeCheckpoint returns the body of a checkpoint's frame: the generation
// of the log the snapshot starts (see segmentHeader) and the snapshot.
func encodeCheckpoint(gen uint64, snap *pb.Snapshot) ([]byte, error) {
	body := []byte{kindCheckpoint, formatVersion}
	body = binary.BigEndian.AppendUint64(body, gen)
	return proto.MarshalOptions{Deterministic: true}.MarshalAppend(body, snap)
}

func decodeCheckpoint(body []byte) (gen uint64, snap *pb.Snapshot, err error) {
	if len(body) < 10 || body[0] != kindCheckpoint {
		return 0, nil, fmt.Errorf("the frame holds no checkpoint")
	}
	if body[1] != formatVersion {
		return 0, nil, fmt.Errorf("format version %d, this version reads %d", body[1], formatVersion)
	}
	snap = &pb.Snapshot{}
	if err := proto.Unmarshal(body[10:], snap); err != nil {
		return 0, nil, fmt.Errorf("the snapshot does not decode: %v", err)
	}
	return binary.BigEndian.Uint64(body[2:10]), pb.EnsureSnapshot(snap), nil
}

// A hard state slot: the file holds two, at offsets 0 and hardStateSlotBytes.
const hardStateSlotBytes = 64

// encodeHardStateSlot returns a slot's bytes: a frame holding seq (which
// orders the slots' writes) and the hard state, padded with zeros.
func encodeHardStateSlot(seq uint64, hs *pb.HardState) ([]byte, error) {
	body := binary.BigEndian.AppendUint64([]byte{kindHardState}, seq)
	body, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend(body, hs)
	if err != nil {
		return nil, err
	}
	slot := appendStorageFrame(make([]byte, 0, hardStateSlotBytes), body)
	if len(slot) > hardStateSlotBytes {
		return nil, fmt.Errorf("hard state of %d bytes does not fit a %d-byte slot", len(slot), hardStateSlotBytes)
	}
	return slot[:hardStateSlotBytes], nil
}

func decodeHardStateSlot(slot []byte) (seq uint64, hs *pb.HardState, why string) {
	body, why := frameAt(slot, 0, hardStateSlotBytes-frameHeaderBytes)
	if why != "" {
		return 0, nil, why
	}
	if len(body) < 9 || body[0] != kindHardState {
		return 0, nil, "the slot holds no hard state"
	}
	hs = &pb.HardState{}
	if err := proto.Unmarshal(body[9:], hs); err != nil {
		return 0, nil, fmt.Sprintf("the hard state does not decode: %v", err)
	}
	return binary.BigEndian.Uint64(body[1:9]), hs, ""
}
