package quorum

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/sluicemq/sluice/env"
)

// Frames are the unit of every file this package writes (see the package
// documentation for the layout): a big-endian length and CRC32C (Castagnoli)
// of the body, then the body, whose first byte says what it holds.
const (
	frameHeaderBytes = 8
	// frameMax bounds a log or hard state frame, far above any entry
	// (maxEntryBytes), so that a damaged length cannot make recovery
	// allocate gigabytes.
	frameMax = 16 << 20
	// checkpointFrameMax bounds a checkpoint's one frame: the state
	// machine's whole snapshot.
	checkpointFrameMax = 512 << 20
)

// Record kinds, the first byte of a frame's body.
const (
	kindSegmentHeader byte = 1 // the first frame of a segment
	kindEntry         byte = 2 // one raftpb.Entry
	kindCheckpoint    byte = 3 // a checkpoint's only frame
	kindHardState     byte = 4 // a hard state slot
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendStorageFrame appends the frame holding body to buf.
func appendStorageFrame(buf, body []byte) []byte {
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(body)))
	buf = binary.BigEndian.AppendUint32(buf, crc32.Checksum(body, castagnoli))
	return append(buf, body...)
}

// frameAt decodes the frame at off in data. A frame that is damaged (cut
// short by the end of data, of an impossible length, or failing its
// checksum) returns why, and no body.
func frameAt(data []byte, off int64, max int) (body []byte, why string) {
	total := int64(len(data))
	if off+frameHeaderBytes > total {
		return nil, fmt.Sprintf("the file ends %d bytes into a frame's %d-byte header", total-off, frameHeaderBytes)
	}
	length := int64(binary.BigEndian.Uint32(data[off : off+4]))
	switch {
	case length == 0:
		// No record encodes to zero bytes; zeroes are what a file grown
		// but never written shows after a crash (and their checksum,
		// that of nothing, would pass).
		return nil, "the frame's length is zero"
	case length > int64(max):
		return nil, fmt.Sprintf("the frame's length %d is above the limit of %d", length, max)
	case off+frameHeaderBytes+length > total:
		return nil, fmt.Sprintf("the frame's length %d reaches past the end of the file", length)
	}
	body = data[off+frameHeaderBytes : off+frameHeaderBytes+length]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(data[off+4:off+8]) {
		return nil, "the frame fails its checksum"
	}
	return body, ""
}

// findFrame returns the position of the first whole frame with a matching
// checksum in p whose body opens with a record kind of ours. The kind byte
// is checked before the checksum is computed, which keeps the scan linear in
// practice.
func findFrame(p []byte) (int, bool) {
	for i := 0; i+frameHeaderBytes < len(p); i++ {
		length := int(binary.BigEndian.Uint32(p[i : i+4]))
		if length == 0 || length > frameMax || i+frameHeaderBytes+length > len(p) {
			continue
		}
		body := p[i+frameHeaderBytes : i+frameHeaderBytes+length]
		if k := body[0]; k < kindSegmentHeader || k > kindHardState {
			continue
		}
		if crc32.Checksum(body, castagnoli) == binary.BigEndian.Uint32(p[i+4:i+8]) {
			return i, true
		}
	}
	return 0, false
}

// readAttempts is how often recovery reads a file before it believes damage
// it sees: a bit can flip on the way from the disk and not on it.
const readAttempts = 3

// readAll reads the whole file, which the caller has open.
func readAll(f env.File) ([]byte, error) {
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	data := make([]byte, size)
	n, err := f.ReadAt(data, 0)
	if err != nil && !(errors.Is(err, io.EOF) && int64(n) == size) {
		return nil, err
	}
	return data, nil
}

// readFile opens, reads and closes the named file.
func readFile(fsys env.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	data, err := readAll(f)
	f.Close()
	return data, err
}
