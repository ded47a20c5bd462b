package raftmeta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"

	"github.com/sluicemq/sluice/env"
)

// Journal is a single node's durable log of metadata records: until the
// metadata quorum replicates records, a node appends each change here and
// applies it once it is durable, and replays the journal on start.
//
// File format: a sequence of frames, each
//
//	+------------+------------+-----------------+
//	| length u32 | crc32c u32 | record (length) |
//	+------------+------------+-----------------+
//
// in big-endian, the checksum (Castagnoli) covering the record bytes.
//
// Frames are only ever appended, each append is synced before it is
// acknowledged, and a crash keeps a prefix of what was written (the last
// write possibly torn). So a crash can damage only the end of the file: the
// frames after the last completed sync, with nothing whole after the damage.
// Replay cuts such a torn tail, and reports it (TornTail). Damage with a
// whole, valid frame anywhere after it cannot be a crash's doing (a second
// writer, a bad disk, an edit): frames past it were written later, and may
// have been acknowledged. Replay then stops with a CorruptJournalError and
// changes nothing, rather than silently drop acknowledged metadata. (Real
// writeback may persist a file's unsynced pages out of order; a hole it
// leaves before a whole frame is refused too, which is the safe side.)
//
// One case cannot be told apart: the last frame damaged on the medium after
// it was acknowledged looks like a torn tail, and is cut.
type Journal struct {
	loop   env.Loop
	fs     env.FS
	file   env.File
	size   int64 // bytes of whole frames written
	failed error // once a write fails, the journal refuses further appends
	// entriesDurable is set once this process has synced the journal's
	// directory entries. A journal opened after a kill -9 of the process
	// that created it may exist only in the page cache, entries and all,
	// so it starts false on every open, not only for a new file.
	entriesDurable bool
	// tornAt and torn are where replay cut a torn tail, and how many bytes.
	tornAt, torn int64
}

// JournalPath is the journal's file, relative to the node's data directory.
const JournalPath = journalName

const (
	journalDir  = "__cluster_metadata-0"
	journalName = journalDir + "/journal.log"
	// frameMax bounds one record, far above any real one, so a corrupt
	// length cannot make replay allocate gigabytes.
	frameMax = 16 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CorruptJournalError is damage replay cannot take for a torn tail: the
// journal is left as it was, and the node cannot know its metadata.
type CorruptJournalError struct {
	// Path is the journal, relative to the data directory (JournalPath).
	Path string
	// Offset is where the damaged frame starts, in bytes from the start of
	// the file.
	Offset int64
	// Records is how many whole records precede it.
	Records int
	// Reason says what is wrong there.
	Reason string
}

func (e *CorruptJournalError) Error() string {
	return fmt.Sprintf("metadata journal %s is corrupt at offset %d, after %d whole records: %s", e.Path, e.Offset, e.Records, e.Reason)
}

// OpenJournal opens (creating if needed) the journal on the node's disk and
// returns it with every record it holds, in order. What it read may be only
// in the page cache (the process that wrote it was killed before its sync
// completed): the first Append syncs the file and its directory entries,
// so a caller relies on the records replayed only once an Append has
// completed. Damage that is not a torn tail is a *CorruptJournalError.
func OpenJournal(loop env.Loop, fsys env.FS) (j *Journal, records []Record, err error) {
	if err := fsys.MkdirAll(journalDir); err != nil {
		return nil, nil, fmt.Errorf("open metadata journal: %w", err)
	}
	f, err := fsys.Open(journalName)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = fsys.Create(journalName)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open metadata journal: %w", err)
	}
	j = &Journal{loop: loop, fs: fsys, file: f}
	records, err = j.replay()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return j, records, nil
}

// TornTail reports where replay cut a torn tail off the journal, and how
// many bytes; zero bytes when there was none.
func (j *Journal) TornTail() (offset, bytes int64) { return j.tornAt, j.torn }

// replay reads every whole, valid frame and cuts off a torn tail.
func (j *Journal) replay() ([]Record, error) {
	total, err := j.file.Size()
	if err != nil {
		return nil, fmt.Errorf("replay metadata journal: %w", err)
	}
	var records []Record
	var off int64
	for off < total {
		body, why, err := j.readFrame(off, total)
		if err != nil {
			return nil, err
		}
		if why != "" {
			if err := j.checkTornTail(off, total, len(records), why); err != nil {
				return nil, err
			}
			break
		}
		r, err := DecodeRecord(body)
		if err != nil {
			return nil, &CorruptJournalError{Path: journalName, Offset: off, Records: len(records),
				Reason: fmt.Sprintf("its frame is whole but holds no record this version can read (%v)", err)}
		}
		records = append(records, r)
		off += 8 + int64(len(body))
	}
	if off < total {
		if err := j.file.Truncate(off); err != nil {
			return nil, fmt.Errorf("cut metadata journal's torn tail at %d: %w", off, err)
		}
		j.tornAt, j.torn = off, total-off
	}
	j.size = off
	return records, nil
}

// readAttempts is how often a frame is read before its damage is believed:
// a bit can flip on the way from the disk and not on it.
const readAttempts = 3

// readFrame reads the frame at off. A damaged frame (cut short by the end of
// the file, or failing its checksum) returns why, and no error.
func (j *Journal) readFrame(off, total int64) (body []byte, why string, err error) {
	for attempt := 0; attempt < readAttempts; attempt++ {
		var header [8]byte
		n, err := j.file.ReadAt(header[:], off)
		if err != nil && !(errors.Is(err, io.EOF) && off+int64(n) == total) {
			return nil, "", fmt.Errorf("replay metadata journal at %d: %w", off, err)
		}
		length := int64(binary.BigEndian.Uint32(header[0:4]))
		switch {
		case off+8 > total:
			why = fmt.Sprintf("the file ends %d bytes into a frame's 8-byte header", total-off)
		case length == 0:
			// No record encodes to zero bytes; zeroes are what a file
			// grown but never written shows after a crash (and their
			// checksum, that of nothing, would pass).
			why = "the frame's length is zero"
		case length > frameMax:
			why = fmt.Sprintf("the frame's length %d is above the limit of %d", length, frameMax)
		case off+8+length > total:
			why = fmt.Sprintf("the frame's length %d reaches past the end of the file", length)
		default:
			body = make([]byte, length)
			if _, err := j.file.ReadAt(body, off+8); err != nil && !errors.Is(err, io.EOF) {
				return nil, "", fmt.Errorf("replay metadata journal at %d: %w", off, err)
			}
			if crc32.Checksum(body, castagnoli) == binary.BigEndian.Uint32(header[4:8]) {
				return body, "", nil
			}
			why = "the frame fails its checksum"
		}
		// Read again: a flipped bit can make any frame look damaged, or
		// like the last.
	}
	return nil, why, nil
}

// checkTornTail decides whether damage found at off is a torn tail: it is
// unless a whole, valid frame starts anywhere after it. The rest of the file
// is read again before it is believed to hold none, as a frame is.
func (j *Journal) checkTornTail(off, total int64, records int, why string) error {
	for attempt := 0; attempt < readAttempts; attempt++ {
		rest := make([]byte, total-off-1)
		if _, err := j.file.ReadAt(rest, off+1); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("replay metadata journal at %d: %w", off+1, err)
		}
		if at, ok := findFrame(rest); ok {
			return &CorruptJournalError{Path: journalName, Offset: off, Records: records,
				Reason: fmt.Sprintf("%s, and a whole frame starts at offset %d after it, so it is not the tail of an append a crash cut short", why, off+1+int64(at))}
		}
	}
	return nil
}

// findFrame returns the position of the first whole frame with a matching
// checksum in p. Records are JSON objects, so a body that does not open and
// close like one is skipped before its checksum is computed: that keeps the
// scan linear in practice.
func findFrame(p []byte) (int, bool) {
	for i := 0; i+8 < len(p); i++ {
		length := int(binary.BigEndian.Uint32(p[i : i+4]))
		if length == 0 || length > frameMax || i+8+length > len(p) {
			continue
		}
		body := p[i+8 : i+8+length]
		if body[0] != '{' || body[length-1] != '}' {
			continue
		}
		if crc32.Checksum(body, castagnoli) == binary.BigEndian.Uint32(p[i+4:i+8]) {
			return i, true
		}
	}
	return 0, false
}

// Append writes records and calls done on the loop once they are durable (or
// failed). Appends complete in the order they were made. After a failed
// write the journal refuses every later append: the caller must restart from
// what replay finds.
func (j *Journal) Append(records []Record, done func(error)) {
	if j.failed != nil {
		j.fail(done, j.failed)
		return
	}
	var buf []byte
	for _, r := range records {
		body, err := EncodeRecord(r)
		if err == nil && len(body) > frameMax {
			// Replay would take such a frame for a torn tail and cut it,
			// with everything after it.
			err = fmt.Errorf("metadata record of %d bytes exceeds the limit of %d", len(body), frameMax)
		}
		if err != nil {
			j.fail(done, err)
			return
		}
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(body)))
		buf = binary.BigEndian.AppendUint32(buf, crc32.Checksum(body, castagnoli))
		buf = append(buf, body...)
	}
	if _, err := j.file.WriteAt(buf, j.size); err != nil {
		j.failed = fmt.Errorf("append to metadata journal: %w", err)
		j.fail(done, j.failed)
		return
	}
	j.size += int64(len(buf))
	j.file.Sync(func(err error) {
		if err != nil && j.failed == nil {
			j.failed = fmt.Errorf("sync metadata journal: %w", err)
		}
		if j.failed != nil {
			// This append, or an earlier one, did not reach the disk:
			// nothing after a lost record may be acknowledged.
			done(j.failed)
			return
		}
		if j.entriesDurable {
			done(nil)
			return
		}
		// The journal's own directory entries must be durable too, once per
		// process.
		j.fs.SyncDir(journalDir, func(err error) {
			if err != nil {
				done(fmt.Errorf("sync metadata journal directory: %w", err))
				return
			}
			j.fs.SyncDir(".", func(err error) {
				if err == nil {
					j.entriesDurable = true
				}
				done(err)
			})
		})
	})
}

// fail reports err to done on a later loop turn, never from inside Append.
func (j *Journal) fail(done func(error), err error) {
	j.loop.Post(func() { done(err) })
}

// Close closes the journal's file.
func (j *Journal) Close() error { return j.file.Close() }
