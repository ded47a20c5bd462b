package simrun

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/jepsen"
	"github.com/sluicemq/sluice/sim/simfs"
)

// The durability oracle. The simulator knows, at every moment, which bytes
// of the broker's disk are durable: what a power loss now would keep at the
// least (simfs resolves names through durable directory entries only). The
// broker promises that what it serves a consumer and what it acknowledges
// at acks=all is durable (its high watermark is its durable end; DESIGN.md
// section 6). The oracle checks that promise at every answer a client
// takes: each batch a fetch served, each batch a produce acknowledged, and
// every high watermark or offset the broker reported, against the
// partition's durable log at that moment. A high watermark that runs ahead
// of durability is caught at once, instead of waiting for a crash at the
// right microsecond to lose what it exposed.
//
// It reads segment files by Kafka's layout (<topic>-<partition>/<20-digit
// base offset>.log, batches verbatim), which the broker's storage promises,
// and only batch headers, so a check costs little: a partition's durable
// view is rebuilt only when the disk's durable state changed, and then only
// from where each segment's durable contents grew.
//
// An acknowledged DeleteRecords is held to the same promise: its low
// watermark is the log start a crash now would leave, which the oracle
// reads from the partition's durable recovery-point-checkpoint (the text
// format log/checkpoint.go documents, trusted only whole, as recovery
// trusts it) and the first durable segment's base, as recovery does.

// batchRef names a batch as a client saw it: where it sits and its CRC,
// which covers everything but the base offset and leader epoch.
type batchRef struct {
	base, last int64
	crc        uint32
}

// durableBatch is one batch found in a segment's durable contents.
type durableBatch struct {
	batchRef
	pos int64 // in its segment file
}

// durableSegment is what the oracle knows of one segment file.
type durableSegment struct {
	base    int64
	info    simfs.DurableInfo
	parsed  int64 // durable bytes parsed into batches
	batches []durableBatch
}

// durableView is one partition's durable log at one disk generation.
type durableView struct {
	gen      uint64
	valid    bool
	segments map[string]*durableSegment
	// end is the end of the durable batches that follow one another from
	// the first segment's base: the durable end offset. chained are the
	// segments that hold them, in offset order.
	end     int64
	chained []*durableSegment
}

// oracle checks answers against the broker's durable disk.
type oracle struct {
	disk  *simfs.Disk
	views map[string]*durableView // by partition directory
	// segmentsGone counts the segments seen durable that left the durable
	// directory since: the segments DeleteRecords deleted, below the log
	// start, which the durable end's chain no longer begins with.
	segmentsGone int
}

func newOracle(disk *simfs.Disk) *oracle {
	return &oracle{disk: disk, views: make(map[string]*durableView)}
}

// view returns the partition's durable log as the disk holds it now.
func (o *oracle) view(dir string) (*durableView, error) {
	v := o.views[dir]
	if v == nil {
		v = &durableView{segments: make(map[string]*durableSegment)}
		o.views[dir] = v
	}
	gen := o.disk.DurableGeneration()
	if v.valid && v.gen == gen {
		return v, nil
	}
	if err := o.refresh(dir, v); err != nil {
		v.valid = false
		return nil, err
	}
	v.gen, v.valid = gen, true
	return v, nil
}

// refresh brings v up to the disk's durable state.
func (o *oracle) refresh(dir string, v *durableView) error {
	names, err := o.disk.ListDurable(dir)
	if errors.Is(err, fs.ErrNotExist) {
		names, err = nil, nil // the partition's directory is not durable yet
	}
	if err != nil {
		return err
	}
	var segs []*durableSegment
	live := make(map[string]bool)
	for _, name := range names {
		base, ok := segmentBase(name)
		if !ok {
			continue
		}
		path := dir + "/" + name
		live[path] = true
		info, err := o.disk.DurableStat(path)
		if err != nil {
			return err
		}
		s := v.segments[path]
		if s == nil || s.info.ID != info.ID || info.Size < s.parsed || info.Rewrites != s.info.Rewrites {
			s = &durableSegment{base: base}
			v.segments[path] = s
		}
		if s.info != info {
			if err := o.parse(path, s, info); err != nil {
				return err
			}
		}
		segs = append(segs, s)
	}
	for path := range v.segments {
		if !live[path] {
			delete(v.segments, path)
			o.segmentsGone++
		}
	}
	slices.SortFunc(segs, func(x, y *durableSegment) int { return cmp.Compare(x.base, y.base) })
	v.chain(segs)
	return nil
}

// parse reads the batch headers of s's durable contents past what it has
// parsed. (A segment whose durable bytes changed, DurableInfo.Rewrites, is
// given a fresh s by refresh, and parsed from the start.)
func (o *oracle) parse(path string, s *durableSegment, info simfs.DurableInfo) error {
	s.info = info
	for s.parsed+batchHeaderSize <= info.Size {
		ref, size, err := o.readHeader(path, s.parsed)
		if err != nil {
			return err
		}
		if size < batchHeaderSize || s.parsed+size > info.Size {
			break // a batch not yet durable whole (or bytes that are none)
		}
		s.batches = append(s.batches, durableBatch{batchRef: ref, pos: s.parsed})
		s.parsed += size
	}
	return nil
}

// readHeader reads the batch header at pos: its reference and whole size.
func (o *oracle) readHeader(path string, pos int64) (batchRef, int64, error) {
	var h [batchHeaderSize]byte
	if _, err := o.disk.ReadDurableAt(path, h[:], pos); err != nil && !errors.Is(err, io.EOF) {
		return batchRef{}, 0, err
	}
	be := binary.BigEndian
	base := int64(be.Uint64(h[0:]))
	ref := batchRef{base: base, last: base + int64(int32(be.Uint32(h[23:]))), crc: be.Uint32(h[offCRC:])}
	return ref, 12 + int64(int32(be.Uint32(h[8:]))), nil
}

// chain computes the durable end: batches that follow one another from the
// first segment, across segments.
func (v *durableView) chain(segs []*durableSegment) {
	v.end, v.chained = 0, v.chained[:0]
	if len(segs) == 0 {
		return
	}
	v.end = segs[0].base
	for _, s := range segs {
		if s.base != v.end {
			return // a gap: what follows is not reachable in order
		}
		v.chained = append(v.chained, s)
		for _, b := range s.batches {
			if b.base != v.end {
				return
			}
			v.end = b.last + 1
		}
	}
}

// find returns the chained batch that begins at base, if there is one.
func (v *durableView) find(base int64) (batchRef, bool) {
	if base >= v.end {
		return batchRef{}, false
	}
	i := sort.Search(len(v.chained), func(i int) bool { return v.chained[i].base > base }) - 1
	if i < 0 {
		return batchRef{}, false
	}
	bs := v.chained[i].batches
	j := sort.Search(len(bs), func(j int) bool { return bs[j].base >= base })
	if j == len(bs) || bs[j].base != base {
		return batchRef{}, false
	}
	return bs[j].batchRef, true
}

// segmentBase reads a segment file's base offset from its name.
func segmentBase(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, ".log")
	if !ok || len(digits) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(digits, 10, 64)
	return base, err == nil
}

// durableEnd returns the partition's durable end offset.
func (o *oracle) durableEnd(dir string) (int64, error) {
	v, err := o.view(dir)
	if err != nil {
		return 0, err
	}
	return v.end, nil
}

// missing returns why batch b is not durable in the partition, or "".
func (o *oracle) missing(dir string, b batchRef) (string, error) {
	v, err := o.view(dir)
	if err != nil {
		return "", err
	}
	got, ok := v.find(b.base)
	switch {
	case !ok && len(v.chained) > 0 && b.last < v.chained[0].base:
		// Below the first durable segment: deleted (DeleteRecords, or
		// retention) since it was served or acknowledged, as Kafka may;
		// a deletion nothing asked for is the history's lost write.
		return "", nil
	case !ok:
		return fmt.Sprintf("no durable batch begins at %d (the durable log ends at %d)", b.base, v.end), nil
	case got != b:
		return fmt.Sprintf("the durable batch at %d is another (offsets %d-%d, crc %08x; served %d-%d, crc %08x)",
			b.base, got.base, got.last, got.crc, b.base, b.last, b.crc), nil
	}
	return "", nil
}

// partitionDirOf is the broker's directory for tp, by Kafka's layout.
func partitionDirOf(tp jepsen.TopicPartition) string {
	return tp.Topic + "-" + strconv.Itoa(int(tp.Partition))
}

// The checks below return why an answer breaks the promise ("" when it
// keeps it), for the single broker's run (run) and the cluster's, which
// holds each answer against the disk of the node that gave it.

// servedProblem holds a fetch answer against the disk: every batch it
// served is durable, and so is everything below the high watermark it
// reported.
func (o *oracle) servedProblem(tp jepsen.TopicPartition, fp fetchedPartition) (string, error) {
	dir := partitionDirOf(tp)
	for _, b := range fp.batches {
		why, err := o.missing(dir, b)
		if err != nil {
			return "", fmt.Errorf("%s: %w", tp, err)
		}
		if why != "" {
			return fmt.Sprintf("a fetch of %s was served the batch at offsets %d-%d, which is not durable: %s", tp, b.base, b.last, why), nil
		}
	}
	return o.belowProblem(tp, "a fetch's high watermark", fp.marks.HighWatermark)
}

// ackedProblem holds an acks=all acknowledgement of batch ref against the
// disk: the batch sits durably where the broker said.
func (o *oracle) ackedProblem(tp jepsen.TopicPartition, ref batchRef) (string, error) {
	why, err := o.missing(partitionDirOf(tp), ref)
	if err != nil {
		return "", fmt.Errorf("%s: %w", tp, err)
	}
	if why == "" {
		return "", nil
	}
	return fmt.Sprintf("a produce to %s was acknowledged (acks=all) at offsets %d-%d, which are not durable: %s", tp, ref.base, ref.last, why), nil
}

// belowProblem reports an end offset that an answer says is readable but
// that the disk does not hold durably.
func (o *oracle) belowProblem(tp jepsen.TopicPartition, what string, end int64) (string, error) {
	durable, err := o.durableEnd(partitionDirOf(tp))
	if err != nil {
		return "", fmt.Errorf("%s: %w", tp, err)
	}
	if end <= durable {
		return "", nil
	}
	return fmt.Sprintf("%s of %s answered up to offset %d, beyond the durable end %d", what, tp, end, durable), nil
}

// ackedRef is the batch an acknowledged produce of batch wrote at base.
func ackedRef(batch []byte, records int, base int64) batchRef {
	return batchRef{base: base, last: base + int64(records) - 1, crc: binary.BigEndian.Uint32(batch[offCRC:])}
}

// checkServedDurable holds a fetch answer against the broker's disk.
func (r *run) checkServedDurable(tp jepsen.TopicPartition, fp fetchedPartition) {
	if r.cfg.NoOracle {
		return
	}
	r.probes.add("oracle.fetch")
	r.probes.add("oracle.offsets")
	r.judgeDurable(r.oracle.servedProblem(tp, fp))
}

// checkAckedDurable holds an acks=all acknowledgement against the disk.
func (r *run) checkAckedDurable(op *produceOp, base int64) {
	if r.cfg.NoOracle || base == jepsen.OffsetUnknown {
		return
	}
	r.probes.add("oracle.ack")
	r.judgeDurable(r.oracle.ackedProblem(op.tp, ackedRef(op.batch, len(op.values), base)))
}

// checkListedDurable holds a ListOffsets answer against the disk: latest
// (the high watermark) and earliest (the log start, never past the high
// watermark) are at most the durable end, and an offset found by timestamp
// lies below it.
func (r *run) checkListedDurable(tp jepsen.TopicPartition, target, offset int64) {
	if r.cfg.NoOracle {
		return
	}
	switch {
	case target == jepsen.TargetLatest:
		r.checkBelowDurable(tp, "ListOffsets latest", offset)
	case target == jepsen.TargetEarliest:
		r.checkBelowDurable(tp, "ListOffsets earliest", offset)
	case target >= 0 && offset >= 0:
		r.checkBelowDurable(tp, fmt.Sprintf("ListOffsets for timestamp %d", target), offset+1)
	}
}

func (r *run) checkBelowDurable(tp jepsen.TopicPartition, what string, end int64) {
	r.probes.add("oracle.offsets")
	r.judgeDurable(r.oracle.belowProblem(tp, what, end))
}

// judgeDurable reports a check's outcome: a violation, or a failure of the
// oracle itself.
func (r *run) judgeDurable(why string, err error) {
	switch {
	case err != nil:
		r.fail("oracle: %v", err)
	case why != "":
		r.violate("durability: %s (on the broker's disk)", why)
	}
}

// checkpointFile is the partition checkpoint that holds the log start
// offset (log/checkpoint.go).
const checkpointFile = "recovery-point-checkpoint"

// durableLogStart returns the log start offset a crash now would leave the
// partition with: the durable checkpoint's, if it is whole (its checksum
// line matches), and at least the first durable segment's base.
func (o *oracle) durableLogStart(dir string) (int64, error) {
	v, err := o.view(dir)
	if err != nil {
		return 0, err
	}
	start := int64(0)
	if len(v.chained) > 0 {
		start = v.chained[0].base
	}
	p, err := o.disk.ReadDurable(dir + "/" + checkpointFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return start, nil
	case err != nil:
		return 0, err
	}
	if ckpt, ok := checkpointLogStart(p); ok {
		start = max(start, ckpt)
	}
	return start, nil
}

// checkpointLogStart reads the log start offset from a recovery-point
// checkpoint, if the checkpoint is whole: its last line is "crc32c <hex>",
// the CRC-32C of everything before it.
func checkpointLogStart(p []byte) (int64, bool) {
	body, last, ok := strings.Cut(strings.TrimSuffix(string(p), "\n"), "\ncrc32c ")
	if !ok || !strings.HasSuffix(string(p), "\n") || strings.Contains(last, "\n") {
		return 0, false
	}
	sum, err := strconv.ParseUint(last, 16, 32)
	if err != nil || crc32.Checksum([]byte(body+"\n"), crc32.MakeTable(crc32.Castagnoli)) != uint32(sum) {
		return 0, false
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "log-start-offset "); ok {
			start, err := strconv.ParseInt(v, 10, 64)
			return start, err == nil
		}
	}
	return 0, false
}

// checkDeletedDurable holds an acknowledged DeleteRecords against the
// disk: a crash now would leave the log start at least at the low
// watermark answered (the broker answers once the new start is durable).
func (r *run) checkDeletedDurable(tp jepsen.TopicPartition, low int64) {
	if r.cfg.NoOracle {
		return
	}
	r.probes.add("oracle.delete_records")
	start, err := r.oracle.durableLogStart(partitionDirOf(tp))
	switch {
	case err != nil:
		r.fail("oracle: %s: %v", tp, err)
	case start < low:
		r.violate("durability: DeleteRecords of %s was acknowledged with low watermark %d, but a crash now would bring the log start back to %d (the durable checkpoint and segments of the broker's disk)", tp, low, start)
	}
}
