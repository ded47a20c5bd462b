package node

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicemq/sluice/raftmeta"
	"github.com/stretchr/testify/require"
)

// journalFrames returns the offset of each frame of the broker's metadata
// journal, and the file's size.
func (s *simBroker) journalFrames() ([]int64, int64) {
	s.t.Helper()
	f, err := s.world.Node("n1").Disk().Open(raftmeta.JournalPath)
	require.NoError(s.t, err)
	defer f.Close()
	size, err := f.Size()
	require.NoError(s.t, err)
	var offsets []int64
	for off := int64(0); off < size; {
		var header [8]byte
		_, err := f.ReadAt(header[:], off)
		require.NoError(s.t, err)
		offsets = append(offsets, off)
		off += 8 + int64(binary.BigEndian.Uint32(header[:4]))
		require.LessOrEqual(s.t, off, size, "a frame reaches past the journal's end")
	}
	return offsets, size
}

// restartFails crashes the broker and boots it again, returning the error
// its start ends with.
func (s *simBroker) restartFails() error {
	s.t.Helper()
	var startErr error
	done := false
	s.onStart = func(err error) { startErr, done = err, true }
	s.world.Node("n1").Crash()
	s.broker = nil
	s.world.Node("n1").Restart()
	require.True(s.t, s.world.RunUntil(func() bool { return done }, time.Minute), "start did not finish")
	require.Error(s.t, startErr, "the broker started")
	return startErr
}

// A metadata journal damaged in the middle (here, as when a second broker
// wrote to the same directory) stops the broker with an error naming the
// journal's path under log.dirs and the offset, and saying what the operator
// can do and what each way out loses.
func TestCorruptJournalStopsTheBrokerAndSaysWhatToDo(t *testing.T) {
	s := newSimBroker(t, 60, nil)
	s.mustCreate("a")
	s.mustCreate("b")
	s.mustCreate("c")
	offsets, _ := s.journalFrames()
	at := offsets[len(offsets)-2] // topic b's frame, with c's after it
	require.NoError(t, s.world.Node("n1").Disk().FlipBit(raftmeta.JournalPath, at+20))
	err := s.restartFails()
	for _, want := range []string{
		"data/__cluster_metadata-0/journal.log",
		fmt.Sprintf("offset %d", at),
		"backup",
		"move data/__cluster_metadata-0/journal.log aside",
		"new, empty cluster",
		"deletes every partition directory in data",
	} {
		require.ErrorContains(t, err, want)
	}
}

// A torn tail (an append a crash cut short) is cut with a warning, and the
// broker starts with everything before it.
func TestTornJournalTailIsCut(t *testing.T) {
	s := newSimBroker(t, 61, nil)
	var logs bytes.Buffer
	s.world.SetLog(&logs, slog.LevelWarn)
	s.mustCreate("a")
	offsets, size := s.journalFrames()
	// The process dies; the page cache it leaves holds the first 20 bytes
	// of its next append: a copy of the last frame, torn.
	s.world.Node("n1").Kill()
	s.broker = nil
	f, err := s.world.Node("n1").Disk().Open(raftmeta.JournalPath)
	require.NoError(t, err)
	torn := make([]byte, 20)
	_, err = f.ReadAt(torn, offsets[len(offsets)-1])
	require.NoError(t, err)
	_, err = f.WriteAt(torn, size)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	s.world.Node("n1").Restart()
	s.waitRunning()
	s.connect()
	require.Equal(t, []string{"a"}, s.topicNames())
	require.Contains(t, logs.String(), "cut the torn tail of the metadata journal")
	require.Contains(t, logs.String(), fmt.Sprintf("offset=%d bytes=20", size))
	offsets, _ = s.journalFrames()
	require.Equal(t, size, offsets[len(offsets)-1], "the restart's registration follows the cut")
}
