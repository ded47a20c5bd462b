package log

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// Checkpoint files are small text files in Kafka's style, each ending with a
// checksum line, and always replaced whole: written to <name>.tmp, synced,
// renamed over <name>, and the directory synced.

// appendChecksumLine appends "crc32c <hex>\n" over p.
func appendChecksumLine(p []byte) []byte {
	return fmt.Appendf(p, "crc32c %08x\n", crc32.Checksum(p, castagnoli))
}

// checkedLines verifies the checksum line and returns the lines before it.
func checkedLines(p []byte) ([]string, error) {
	if len(p) == 0 || p[len(p)-1] != '\n' {
		return nil, fmt.Errorf("does not end with a newline")
	}
	i := bytes.LastIndexByte(p[:len(p)-1], '\n') + 1
	last := string(p[i : len(p)-1])
	hex, ok := strings.CutPrefix(last, "crc32c ")
	if !ok {
		return nil, fmt.Errorf("no checksum line")
	}
	want, err := strconv.ParseUint(hex, 16, 32)
	if err != nil {
		return nil, fmt.Errorf("checksum line %q: %v", last, err)
	}
	if got := crc32.Checksum(p[:i], castagnoli); uint32(want) != got {
		return nil, fmt.Errorf("checksum %08x, computed %08x", want, got)
	}
	body := strings.TrimSuffix(string(p[:i]), "\n")
	if body == "" {
		return nil, nil
	}
	return strings.Split(body, "\n"), nil
}

// partitionCheckpoint is the content of the recovery-point-checkpoint file.
//
//	1
//	recovery-point <offset>
//	log-start-offset <offset>
//	clean <0|1>
//	epochs-crc32c <8 hex digits>
//	crc32c <8 hex digits>
//
// The recovery point is the offset below which everything is durable and
// needs no scan on open. Clean is written only by Close: it says that the
// index files of the segment holding the recovery point are complete up to
// it (they were trimmed and synced), so even that segment is not walked.
// Epochs-crc32c is the checksum of the leader-epoch checkpoint written with
// it: the two files are renamed one after the other, a crash may keep one
// rename and lose the other, and a pair that does not match is not trusted.
type partitionCheckpoint struct {
	RecoveryPoint  int64
	LogStartOffset int64
	Clean          bool
	EpochsCRC      uint32
}

const partitionCheckpointVersion = 1

func (c partitionCheckpoint) encode() []byte {
	clean := 0
	if c.Clean {
		clean = 1
	}
	p := fmt.Appendf(nil, "%d\nrecovery-point %d\nlog-start-offset %d\nclean %d\nepochs-crc32c %08x\n",
		partitionCheckpointVersion, c.RecoveryPoint, c.LogStartOffset, clean, c.EpochsCRC)
	return appendChecksumLine(p)
}

func decodePartitionCheckpoint(p []byte) (partitionCheckpoint, error) {
	var c partitionCheckpoint
	lines, err := checkedLines(p)
	if err != nil {
		return c, fmt.Errorf("recovery-point checkpoint: %w", err)
	}
	if len(lines) != 5 || lines[0] != strconv.Itoa(partitionCheckpointVersion) {
		return c, fmt.Errorf("recovery-point checkpoint: unexpected layout (%d lines)", len(lines))
	}
	var clean int
	_, err1 := fmt.Sscanf(lines[1], "recovery-point %d", &c.RecoveryPoint)
	_, err2 := fmt.Sscanf(lines[2], "log-start-offset %d", &c.LogStartOffset)
	_, err3 := fmt.Sscanf(lines[3], "clean %d", &clean)
	_, err4 := fmt.Sscanf(lines[4], "epochs-crc32c %08x", &c.EpochsCRC)
	switch {
	case err1 != nil || err2 != nil || err3 != nil || err4 != nil:
		return c, fmt.Errorf("recovery-point checkpoint: unreadable fields")
	case c.RecoveryPoint < 0 || c.LogStartOffset < 0 || clean < 0 || clean > 1:
		return c, fmt.Errorf("recovery-point checkpoint: values out of range")
	}
	c.Clean = clean == 1
	return c, nil
}
