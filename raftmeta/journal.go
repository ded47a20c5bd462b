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
// in big-endian, the checksum (Castagnoli) covering the record bytes. A torn
// or corrupt frame can only be the tail that a crash cut short, since frames
// are appended and each append is synced before it is acknowledged; replay
// stops there and the file is cut back to the last whole frame.
type Journal struct {
	loop   env.Loop
	fs     env.FS
	file   env.File
	size   int64 // bytes of whole frames written
	failed error // once a write fails, the journal refuses further appends
}

const (
	journalDir  = "__cluster_metadata-0"
	journalName = journalDir + "/journal.log"
	// frameMax bounds one record, far above any real one, so a corrupt
	// length cannot make replay allocate gigabytes.
	frameMax = 16 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// OpenJournal opens (creating if needed) the journal on the node's disk and
// returns it with every record it holds, in order. A new journal's directory
// entries become durable with its first Append.
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

// replay reads every whole, valid frame and cuts off a torn tail.
//
// Appends only ever extend the file, and a crash keeps a prefix of what was
// written, so a frame that is cut short by the end of the file, or whose
// checksum fails and that reaches the end, is a torn tail: it was never
// acknowledged, and it is cut. A frame whose checksum fails even when read
// again, with whole frames after it, is corruption of acknowledged records:
// replay stops with an error rather than silently dropping them.
func (j *Journal) replay() ([]Record, error) {
	total, err := j.file.Size()
	if err != nil {
		return nil, fmt.Errorf("replay metadata journal: %w", err)
	}
	var records []Record
	var off int64
	for off+8 <= total {
		body, ok, err := j.readFrame(off, total)
		if err != nil {
			return nil, err
		}
		if !ok {
			break // torn tail
		}
		r, err := DecodeRecord(body)
		if err != nil {
			return nil, fmt.Errorf("replay metadata journal at %d: %w", off, err)
		}
		records = append(records, r)
		off += 8 + int64(len(body))
	}
	if off < total {
		if err := j.file.Truncate(off); err != nil {
			return nil, fmt.Errorf("cut metadata journal's torn tail at %d: %w", off, err)
		}
	}
	j.size = off
	return records, nil
}

// readAttempts is how often a frame is read before its checksum failure is
// believed: a bit can flip on the way from the disk and not on it.
const readAttempts = 3

// readFrame reads the frame at off. ok is false for a torn tail.
func (j *Journal) readFrame(off, total int64) (body []byte, ok bool, err error) {
	var header [8]byte
	for attempt := 0; attempt < readAttempts; attempt++ {
		if _, err := j.file.ReadAt(header[:], off); err != nil {
			return nil, false, fmt.Errorf("replay metadata journal at %d: %w", off, err)
		}
		length := int64(binary.BigEndian.Uint32(header[0:4]))
		if length == 0 || length > frameMax || off+8+length > total {
			// A short frame, or a length read wrongly: read again. No
			// record encodes to zero bytes; a zero length is a tail of
			// zeroes that a file grown but never written shows after a
			// crash (and whose checksum, that of nothing, would pass).
			continue
		}
		body = make([]byte, length)
		if _, err := j.file.ReadAt(body, off+8); err != nil && !errors.Is(err, io.EOF) {
			return nil, false, fmt.Errorf("replay metadata journal at %d: %w", off, err)
		}
		if crc32.Checksum(body, castagnoli) == binary.BigEndian.Uint32(header[4:8]) {
			return body, true, nil
		}
		// Even a frame that seems to be the torn last one is read again: a
		// flipped length bit can make any frame look like the last.
	}
	length := int64(binary.BigEndian.Uint32(header[0:4]))
	if length == 0 || length > frameMax || off+8+length >= total {
		return nil, false, nil // torn tail
	}
	return nil, false, fmt.Errorf("replay metadata journal: the frame at %d fails its checksum with %d bytes after it: the journal is corrupt", off, total-off-8-length)
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
	first := j.size == int64(len(buf)) // the file's first frame: its entry is not yet durable
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
		if !first {
			done(nil)
			return
		}
		// The journal's own directory entry must be durable too, once.
		j.fs.SyncDir(journalDir, func(err error) {
			if err == nil {
				j.fs.SyncDir(".", done)
				return
			}
			done(fmt.Errorf("sync metadata journal directory: %w", err))
		})
	})
}

// fail reports err to done on a later loop turn, never from inside Append.
func (j *Journal) fail(done func(error), err error) {
	j.loop.Post(func() { done(err) })
}

// Close closes the journal's file.
func (j *Journal) Close() error { return j.file.Close() }
