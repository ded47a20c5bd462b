package quorum

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/sluicemq/sluice/env"
)

// Recovery says what OpenStorage found and did.
type Recovery struct {
	// TornFile is the segment whose torn tail was cut (a crash cut its last
	// writes short), TornOffset where the cut is and TornBytes how many
	// bytes went; TornFile is empty when there was none. A segment whose
	// very header was torn is removed whole (TornOffset 0).
	TornFile              string
	TornOffset, TornBytes int64
	// Removed lists the leftovers removed: checkpoints never finished
	// (.part), segments of a log that a snapshot from the leader replaced,
	// segments wholly below the snapshot that a compaction had removed
	// before a crash undid it.
	Removed []string
	// SkippedCheckpoint is the newest checkpoint, when it could not be read
	// (SkippedReason says why) and an older one covered the log.
	SkippedCheckpoint, SkippedReason string
	// Snapshot is the index of the snapshot recovered (0 for none);
	// FirstIndex and LastIndex bound the log after it.
	Snapshot, FirstIndex, LastIndex uint64
	// Fresh says the directory held no quorum state.
	Fresh bool
}

// CorruptError is damage recovery cannot take for a crash's doing: it names
// the file and where in it, and OpenStorage changed nothing.
type CorruptError struct {
	Dir, File string
	Offset    int64
	Reason    string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("metadata quorum file %s is corrupt at offset %d: %s", path.Join(e.Dir, e.File), e.Offset, e.Reason)
}

// OpenStorage recovers the storage in cfg.Dir (creating the directory if it
// is missing): the latest snapshot that checks out, the log after it with a
// torn tail cut, and the hard state. Damage that is not a crash's doing
// (a bad frame with a whole one after it, a damaged segment other than the
// last, entries missing between segments, a newest snapshot that fails its
// checksum when no older one covers the log) is a *CorruptError, and the
// directory is left as it was. What it read may be only in the page cache
// (the process that wrote it was killed): call Sync before relying on it.
func OpenStorage(e env.Env, cfg StorageConfig) (*Storage, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := e.FS.MkdirAll(cfg.Dir); err != nil {
		return nil, fmt.Errorf("open metadata quorum storage: %w", err)
	}
	names, err := e.FS.List(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("open metadata quorum storage: %w", err)
	}
	r := &recoverer{fs: e.FS, dir: cfg.Dir}
	if err := r.classify(names); err != nil {
		return nil, err
	}
	if err := r.readHardState(); err != nil {
		return nil, err
	}
	c, err := r.choose()
	if err != nil {
		return nil, err
	}
	s := &Storage{loop: e.Loop, fs: e.FS, cfg: cfg, log: cfg.Logger.With("dir", cfg.Dir)}
	if err := r.apply(s, c); err != nil {
		s.Close()
		return nil, err
	}
	rec := s.recovery
	s.log.Info("metadata quorum storage recovered", "snapshot", rec.Snapshot, "first", rec.FirstIndex, "last", rec.LastIndex,
		"term", s.hs.GetTerm(), "vote", s.hs.GetVote(), "commit", s.hs.GetCommit(), "fresh", rec.Fresh)
	if rec.TornFile != "" {
		s.log.Warn("metadata log torn tail cut", "file", rec.TornFile, "offset", rec.TornOffset, "bytes", rec.TornBytes)
	}
	if rec.SkippedCheckpoint != "" {
		s.log.Warn("newest metadata checkpoint unreadable, an older one used", "checkpoint", rec.SkippedCheckpoint, "reason", rec.SkippedReason)
	}
	return s, nil
}

// recoverer gathers what the directory holds before anything is changed.
type recoverer struct {
	fs  env.FS
	dir string

	segments    []*scannedSegment // by first index
	checkpoints []checkpointFile  // by (index, term)
	parts       []string
	// The hard state: hsFound says a slot checked out; hsExists that the
	// file is there at all.
	hsExists, hsFound bool
	hs                *pb.HardState
	hsSeq             uint64
	hsSlot            int
}

func (r *recoverer) path(name string) string { return path.Join(r.dir, name) }

func (r *recoverer) corrupt(file string, off int64, format string, args ...any) error {
	return &CorruptError{Dir: r.dir, File: file, Offset: off, Reason: fmt.Sprintf(format, args...)}
}

// classify reads every segment and sorts out the other files. List returns
// names sorted, and the padded numbers sort as the numbers do.
func (r *recoverer) classify(names []string) error {
	for _, name := range names {
		switch {
		case name == hardStateName:
			r.hsExists = true
		case strings.HasSuffix(name, partSuffix):
			r.parts = append(r.parts, name)
		case strings.HasSuffix(name, segmentSuffix):
			first, ok := parseSegmentName(name)
			if !ok {
				continue // not ours (the old single-node journal.log lives here too)
			}
			sc, err := scanSegment(r.fs, r.path(name), name, first)
			if err != nil {
				return err
			}
			r.segments = append(r.segments, sc)
		case strings.HasSuffix(name, checkpointSuffix):
			index, term, ok := parseCheckpointName(name)
			if ok {
				r.checkpoints = append(r.checkpoints, checkpointFile{index: index, term: term, name: name})
			}
		}
	}
	return nil
}

// readHardState reads both slots; a slot that fails is read again, as a
// frame is, before it is believed damaged.
func (r *recoverer) readHardState() error {
	if !r.hsExists {
		return nil
	}
	var valid [2]bool
	var seqs [2]uint64
	var states [2]*pb.HardState
	var why [2]string
	for attempt := 0; attempt < readAttempts && !(valid[0] && valid[1]); attempt++ {
		data, err := readFile(r.fs, r.path(hardStateName))
		if err != nil {
			return fmt.Errorf("read metadata hard state: %w", err)
		}
		for slot := range 2 {
			if valid[slot] {
				continue
			}
			lo := slot * hardStateSlotBytes
			if len(data) < lo+hardStateSlotBytes {
				why[slot] = fmt.Sprintf("the file is %d bytes, too short for slot %d", len(data), slot)
				continue
			}
			seqs[slot], states[slot], why[slot] = decodeHardStateSlot(data[lo : lo+hardStateSlotBytes])
			valid[slot] = why[slot] == ""
		}
	}
	for slot := range 2 {
		if valid[slot] && (!r.hsFound || seqs[slot] > r.hsSeq) {
			r.hsFound, r.hsSeq, r.hs, r.hsSlot = true, seqs[slot], states[slot], slot
		}
	}
	if !r.hsFound && r.holdsLog() {
		return r.corrupt(hardStateName, 0, "neither slot holds a valid hard state (slot 0: %s; slot 1: %s)", why[0], why[1])
	}
	return nil
}

// holdsLog says whether the directory holds segments or checkpoints.
func (r *recoverer) holdsLog() bool { return len(r.segments) > 0 || len(r.checkpoints) > 0 }

// candidate is a snapshot recovery may start from, with the log that
// continues it.
type candidate struct {
	file     string // "" for no snapshot at all
	snap     *pb.Snapshot
	gen      uint64
	live     []*scannedSegment // the log's segments, the last possibly torn
	tornHead *scannedSegment   // a last segment whose header was torn
	remove   []string
	skipped  string
	skipWhy  string
}

// choose picks the newest checkpoint that reads back whole, then checks that
// the log continues it. An unreadable newest checkpoint is passed over only
// if an older one (or none, for a log that was never compacted) is
// continued by the log; otherwise its damage is the error.
func (r *recoverer) choose() (*candidate, error) {
	if !r.hsExists && r.holdsLog() {
		return nil, r.corrupt(hardStateName, 0, "the hard state file is missing beside a log")
	}
	var firstBad error
	var badName, badWhy string
	for i := len(r.checkpoints); i >= 0; i-- {
		c := &candidate{snap: emptySnapshot()}
		if i > 0 {
			cf := r.checkpoints[i-1]
			gen, snap, err := r.readCheckpoint(cf)
			if err != nil {
				if firstBad == nil {
					firstBad, badName = err, cf.name
					var ce *CorruptError
					if errors.As(err, &ce) {
						badWhy = ce.Reason
					}
				}
				var ce *CorruptError
				if !errors.As(err, &ce) {
					return nil, err // an I/O error: nothing to decide on
				}
				continue
			}
			c.file, c.snap, c.gen = cf.name, snap, gen
		}
		if err := r.chain(c); err != nil {
			if firstBad != nil {
				return nil, firstBad
			}
			return nil, err
		}
		if firstBad != nil {
			c.skipped, c.skipWhy = badName, badWhy
		}
		return c, nil
	}
	return nil, firstBad // unreachable: the last candidate returns
}

func emptySnapshot() *pb.Snapshot { return pb.EnsureSnapshot(nil) }

// readCheckpoint reads a checkpoint, reading again before it believes a
// failed checksum.
func (r *recoverer) readCheckpoint(cf checkpointFile) (uint64, *pb.Snapshot, error) {
	var why string
	for attempt := 0; attempt < readAttempts; attempt++ {
		data, err := readFile(r.fs, r.path(cf.name))
		if err != nil {
			return 0, nil, fmt.Errorf("read metadata checkpoint %s: %w", cf.name, err)
		}
		var body []byte
		body, why = frameAt(data, 0, checkpointFrameMax)
		if why != "" {
			continue
		}
		if extra := int64(len(data)) - frameHeaderBytes - int64(len(body)); extra != 0 {
			return 0, nil, r.corrupt(cf.name, int64(len(data))-extra, "%d bytes follow the checkpoint's frame", extra)
		}
		gen, snap, err := decodeCheckpoint(body)
		if err != nil {
			return 0, nil, r.corrupt(cf.name, 0, "its frame is whole but %v", err)
		}
		if md := snap.GetMetadata(); md.GetIndex() != cf.index || md.GetTerm() != cf.term {
			return 0, nil, r.corrupt(cf.name, 0, "it holds the snapshot at index %d term %d, not the one its name gives", md.GetIndex(), md.GetTerm())
		}
		return gen, snap, nil
	}
	return 0, nil, r.corrupt(cf.name, 0, "%s", why)
}

// chain finds the log that continues c's snapshot: the segments of its
// generation, contiguous, the last one alone possibly torn, starting at or
// before the entry after the snapshot.
func (r *recoverer) chain(c *candidate) error {
	md := c.snap.GetMetadata()
	s, t := md.GetIndex(), md.GetTerm()
	for i, sc := range r.segments {
		if sc.headerErr == "" {
			continue
		}
		if i != len(r.segments)-1 || sc.semantic || sc.wholeAfter >= 0 {
			return r.damaged(sc)
		}
		c.tornHead = sc // never synced: the crash came before its first entries were durable
	}
	for _, sc := range r.segments {
		switch {
		case sc.headerErr != "":
		case sc.header.gen < c.gen:
			c.remove = append(c.remove, sc.name) // replaced by a snapshot from the leader
		case sc.header.gen > c.gen:
			return r.corrupt(sc.name, 0, "it belongs to log generation %d, newer than the snapshot's %d", sc.header.gen, c.gen)
		default:
			c.live = append(c.live, sc)
		}
	}
	for i, sc := range c.live {
		if sc.damage == "" {
			continue
		}
		if sc.semantic || sc.wholeAfter >= 0 {
			return r.damaged(sc)
		}
		if i != len(c.live)-1 {
			return r.corrupt(sc.name, sc.end, "%s, in a segment that is not the last, so not the tail of an append a crash cut short", sc.damage)
		}
	}
	if len(c.live) == 0 {
		return nil
	}
	j := len(c.live) - 1
	for ; j > 0 && c.live[j-1].last()+1 == c.live[j].first; j-- {
		prev, cur := c.live[j-1], c.live[j]
		if prev.lastTerm() != cur.header.prevTerm {
			return r.corrupt(cur.name, 0, "its header says the entry before it has term %d, but %s ends with term %d", cur.header.prevTerm, prev.name, prev.lastTerm())
		}
	}
	run := c.live[j:]
	first := run[0].first
	if first > s+1 {
		if j > 0 {
			return r.corrupt(run[0].name, 0, "entries %d to %d are missing: no segment holds them (is a segment missing after %s?)", c.live[j-1].last()+1, first-1, c.live[j-1].name)
		}
		return r.corrupt(run[0].name, 0, "the log starts at %d but the snapshot (%s) ends at %d: entries %d to %d are missing", first, orNone(c.file), s, s+1, first-1)
	}
	for _, sc := range c.live[:j] {
		c.remove = append(c.remove, sc.name) // wholly below the snapshot: a compaction a crash undid
	}
	c.live = run
	last := run[len(run)-1].last()
	switch {
	case last < s:
		return r.corrupt(run[len(run)-1].name, run[len(run)-1].end, "the log ends at %d, before the snapshot's index %d", last, s)
	case first == s+1 && run[0].header.prevTerm != t:
		return r.corrupt(run[0].name, 0, "its header says entry %d has term %d, but the snapshot ends there with term %d", s, run[0].header.prevTerm, t)
	case first <= s:
		if got := termIn(run, s); got != t {
			return r.corrupt(run[0].name, 0, "entry %d has term %d in the log but term %d in the snapshot", s, got, t)
		}
	}
	return nil
}

// damaged is the error for a segment's damage.
func (r *recoverer) damaged(sc *scannedSegment) error {
	why := sc.damage
	if sc.headerErr != "" {
		why = sc.headerErr
	}
	if sc.wholeAfter >= 0 && !sc.semantic {
		why = fmt.Sprintf("%s, and a whole frame starts at offset %d after it, so it is not the tail of an append a crash cut short", why, sc.wholeAfter)
	}
	return r.corrupt(sc.name, sc.end, "%s", why)
}

func orNone(file string) string {
	if file == "" {
		return "none"
	}
	return file
}

// termIn returns the term of entry i in the run of segments.
func termIn(run []*scannedSegment, i uint64) uint64 {
	for _, sc := range run {
		if sc.first <= i && i <= sc.last() {
			return sc.entries[i-sc.first].GetTerm()
		}
	}
	return 0
}

// apply makes the recovered state the storage's, and only then changes the
// directory: cuts the torn tail, removes the leftovers, opens the files.
func (r *recoverer) apply(s *Storage, c *candidate) error {
	md := c.snap.GetMetadata()
	rec := &s.recovery
	s.gen, s.snap = c.gen, c.snap
	s.ents = []*pb.Entry{{Index: new(md.GetIndex()), Term: new(md.GetTerm())}}
	if len(c.live) > 0 {
		s.ents = []*pb.Entry{{Index: new(c.live[0].first - 1), Term: new(c.live[0].header.prevTerm)}}
		for _, sc := range c.live {
			s.ents = append(s.ents, sc.entries...)
			s.segs = append(s.segs, &segment{name: sc.name, header: sc.header, size: sc.end, offsets: sc.offsets})
		}
	}
	for _, cf := range r.checkpoints {
		if cf.name != c.skipped {
			s.checkpoints = append(s.checkpoints, cf)
		}
	}
	rec.Snapshot, rec.FirstIndex, rec.LastIndex = md.GetIndex(), s.firstIndex(), s.lastIndex()
	rec.SkippedCheckpoint, rec.SkippedReason = c.skipped, c.skipWhy

	remove := slices.Concat(r.parts, c.remove)
	if c.skipped != "" {
		remove = append(remove, c.skipped)
	}
	if c.tornHead != nil {
		rec.TornFile, rec.TornOffset, rec.TornBytes = c.tornHead.name, 0, c.tornHead.size
		remove = append(remove, c.tornHead.name)
	}
	for _, name := range remove {
		if err := s.fs.Remove(r.path(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove metadata quorum leftover %s: %w", name, err)
		}
		if c.tornHead == nil || name != c.tornHead.name {
			rec.Removed = append(rec.Removed, name)
		}
	}
	if err := r.openActive(s, c); err != nil {
		return err
	}
	return r.openHardState(s)
}

// openActive opens the last segment for appends, cutting its torn tail.
func (r *recoverer) openActive(s *Storage, c *candidate) error {
	if len(c.live) == 0 {
		return nil
	}
	sc := c.live[len(c.live)-1]
	f, err := s.fs.Open(r.path(sc.name))
	if err != nil {
		return fmt.Errorf("open metadata segment %s: %w", sc.name, err)
	}
	s.active = f
	if sc.end < sc.size {
		if err := f.Truncate(sc.end); err != nil {
			return fmt.Errorf("cut torn tail of metadata segment %s at %d: %w", sc.name, sc.end, err)
		}
		s.recovery.TornFile, s.recovery.TornOffset, s.recovery.TornBytes = sc.name, sc.end, sc.size-sc.end
	}
	return nil
}

// openHardState opens the hard state file, or creates it with two empty
// slots in a fresh directory. A commit index past the log's end (the hard
// state and the entries of one Save are synced apart, and a crash may keep
// one without the other) is brought back to it: nothing past the durable
// end was applied, since a Save completes before its entries are applied.
func (r *recoverer) openHardState(s *Storage) error {
	name := r.path(hardStateName)
	if !r.hsFound {
		s.recovery.Fresh = !r.holdsLog()
		f, err := s.fs.Create(name)
		if err != nil {
			return fmt.Errorf("create metadata hard state: %w", err)
		}
		s.hsFile = f
		var slots []byte
		for range 2 {
			slot, err := encodeHardStateSlot(0, &pb.HardState{})
			if err != nil {
				return err
			}
			slots = append(slots, slot...)
		}
		if _, err := f.WriteAt(slots, 0); err != nil {
			return fmt.Errorf("write metadata hard state: %w", err)
		}
		s.hs = &pb.HardState{}
		return nil
	}
	f, err := s.fs.Open(name)
	if err != nil {
		return fmt.Errorf("open metadata hard state: %w", err)
	}
	s.hsFile, s.hsSeq, s.hsDurable, s.hsLatest = f, r.hsSeq, r.hsSlot, r.hsSlot
	hs := proto.Clone(r.hs).(*pb.HardState)
	commit := max(hs.GetCommit(), s.snap.GetMetadata().GetIndex())
	commit = min(commit, s.lastIndex())
	hs.Commit = new(commit)
	if hs.Term == nil {
		hs.Term = new(uint64(0))
	}
	if hs.Vote == nil {
		hs.Vote = new(uint64(0))
	}
	s.hs = hs
	return nil
}

// scannedSegment is what recovery read of one segment file.
type scannedSegment struct {
	name  string
	first uint64 // from the name
	size  int64  // the file's length

	header    segmentHeader
	headerErr string // why the header is unusable; "" when it is fine
	entries   []*pb.Entry
	offsets   []int64
	end       int64 // where the whole, valid frames end

	// damage says why reading stopped at end before the file's end ("" if
	// it did not); semantic that a whole frame held the wrong thing (never
	// a crash's doing); wholeAfter where a whole frame starts after the
	// damage, -1 if none does.
	damage     string
	semantic   bool
	wholeAfter int64
}

func (sc *scannedSegment) last() uint64 { return sc.first + uint64(len(sc.entries)) - 1 }

func (sc *scannedSegment) lastTerm() uint64 {
	if len(sc.entries) == 0 {
		return sc.header.prevTerm
	}
	return sc.entries[len(sc.entries)-1].GetTerm()
}

// scanSegment reads a segment, up to readAttempts times while it shows
// damage that is not semantic, keeping the read that got furthest; damage is
// taken for a torn tail only if no read shows a whole frame after it.
func scanSegment(fsys env.FS, file, name string, first uint64) (*scannedSegment, error) {
	var best *scannedSegment
	wholeAfter := int64(-1)
	for attempt := 0; attempt < readAttempts; attempt++ {
		data, err := readFile(fsys, file)
		if err != nil {
			return nil, fmt.Errorf("read metadata segment %s: %w", name, err)
		}
		sc := scanSegmentData(data, name, first)
		if sc.damage == "" && sc.headerErr == "" || sc.semantic {
			return sc, nil
		}
		if sc.end+1 < int64(len(data)) && wholeAfter < 0 {
			if at, ok := findFrame(data[sc.end+1:]); ok {
				wholeAfter = sc.end + 1 + int64(at)
			}
		}
		if best == nil || sc.end > best.end {
			best = sc
		}
	}
	best.wholeAfter = wholeAfter
	return best, nil
}

// scanSegmentData reads the frames of a segment: its header, then entries
// with consecutive indexes from the one its name gives, terms never going
// down.
func scanSegmentData(data []byte, name string, first uint64) *scannedSegment {
	sc := &scannedSegment{name: name, first: first, size: int64(len(data)), wholeAfter: -1}
	body, why := frameAt(data, 0, frameMax)
	if why != "" {
		sc.headerErr, sc.damage = "its header frame is damaged: "+why, why
		return sc
	}
	h, err := decodeSegmentHeader(body)
	if err == nil && h.first != first {
		err = fmt.Errorf("its header says it starts at %d, its name at %d", h.first, first)
	}
	if err != nil {
		sc.headerErr, sc.damage, sc.semantic = err.Error(), err.Error(), true
		return sc
	}
	sc.header = h
	off := int64(frameHeaderBytes + len(body))
	sc.end = off
	term := h.prevTerm
	for off < int64(len(data)) {
		body, why := frameAt(data, off, frameMax)
		if why != "" {
			sc.damage = why
			return sc
		}
		e, err := decodeEntry(body)
		switch {
		case err != nil:
		case e.GetIndex() != first+uint64(len(sc.entries)):
			err = fmt.Errorf("it holds entry %d where entry %d belongs", e.GetIndex(), first+uint64(len(sc.entries)))
		case e.GetTerm() < term:
			err = fmt.Errorf("entry %d has term %d, below the term %d before it", e.GetIndex(), e.GetTerm(), term)
		}
		if err != nil {
			sc.damage, sc.semantic = "the frame is whole but "+err.Error(), true
			return sc
		}
		term = e.GetTerm()
		sc.entries = append(sc.entries, e)
		sc.offsets = append(sc.offsets, off)
		off += frameHeaderBytes + int64(len(body))
		sc.end = off
	}
	return sc
}
