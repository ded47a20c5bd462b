package simrun

import (
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkpointText is a recovery-point checkpoint as log/checkpoint.go
// writes it: a version, the fields, and a checksum line over them.
func checkpointText(logStart int64) string {
	body := fmt.Sprintf("1\nrecovery-point 40\nlog-start-offset %d\nclean 0\nepochs-crc32c 1a2b3c4d\n", logStart)
	return body + fmt.Sprintf("crc32c %08x\n", crc32.Checksum([]byte(body), crc32.MakeTable(crc32.Castagnoli)))
}

// The oracle trusts a checkpoint's log start only when the checkpoint is
// whole, as recovery does: a torn or empty one (a crash before its sync
// completed) leaves the log start to the segments.
func TestCheckpointLogStartOnlyFromAWholeCheckpoint(t *testing.T) {
	whole := checkpointText(17)
	start, ok := checkpointLogStart([]byte(whole))
	require.True(t, ok)
	require.Equal(t, int64(17), start)
	for _, torn := range []string{"", whole[:len(whole)-1], whole[:len(whole)/2], whole[:len(whole)-10] + "ffffffff\n"} {
		_, ok := checkpointLogStart([]byte(torn))
		require.False(t, ok, "trusted %q", torn)
	}
}
