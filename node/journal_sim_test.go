package node

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/sluicemq/sluice/sim"
	"github.com/stretchr/testify/require"
)

// A data directory written by a single-node Sluice from before the metadata
// quorum keeps its metadata in a journal (raftmeta/journal.go). A node
// configured as a single node migrates it into the quorum's log on its first
// start; a cluster configuration refuses it. These tests write such a
// journal with the journal's own code, as the old broker did.

// oldJournalWorld is a world whose node n1 first runs as an old Sluice that
// writes records to its journal, then boots the broker built by newBroker.
type oldJournalWorld struct {
	t       *testing.T
	world   *sim.World
	written bool
	broker  *Broker
	err     error
	started bool
	cfg     Config
}

func newOldJournalWorld(t *testing.T, seed uint64, cfg Config, records []raftmeta.Record) *oldJournalWorld {
	t.Helper()
	o := &oldJournalWorld{t: t, world: sim.New(seed), cfg: cfg}
	o.world.AddNode("n1", func(e env.Env) {
		if !o.written {
			j, _, err := raftmeta.OpenJournal(e.Loop, e.FS)
			require.NoError(t, err)
			j.Append(records, func(err error) {
				require.NoError(t, err)
				o.written = true
			})
			return
		}
		b, err := New(e, o.cfg)
		require.NoError(t, err)
		o.broker = b
		b.Start(func(err error) { o.err, o.started = err, true })
	})
	require.True(t, o.world.RunUntil(func() bool { return o.written }, time.Minute))
	return o
}

// boot restarts n1 as the broker and runs until its start ends.
func (o *oldJournalWorld) boot() error {
	o.t.Helper()
	o.started, o.broker = false, nil
	n := o.world.Node("n1")
	n.Kill()
	n.Restart()
	require.True(o.t, o.world.RunUntil(func() bool { return o.started }, time.Minute), "start did not finish")
	return o.err
}

// journalFrames returns the offset of each frame of the journal on disk,
// and the file's size.
func (o *oldJournalWorld) journalFrames() ([]int64, int64) {
	o.t.Helper()
	f, err := o.world.Node("n1").Disk().Open(raftmeta.JournalPath)
	require.NoError(o.t, err)
	defer f.Close()
	size, err := f.Size()
	require.NoError(o.t, err)
	var offsets []int64
	for off := int64(0); off < size; {
		var header [8]byte
		_, err := f.ReadAt(header[:], off)
		require.NoError(o.t, err)
		offsets = append(offsets, off)
		off += 8 + int64(binary.BigEndian.Uint32(header[:4]))
	}
	return offsets, size
}

func oldRecords(topics ...string) []raftmeta.Record {
	records := []raftmeta.Record{
		raftmeta.ClusterIDRecord{ClusterID: "old-cluster-id"},
		raftmeta.RegisterBrokerRecord{Broker: raftmeta.Broker{ID: 1, Host: "n1", Port: 9092, Epoch: 3}},
	}
	for i, name := range topics {
		id := raftmeta.TopicID{byte(i + 1), 0x40}
		records = append(records, raftmeta.CreateTopicRecord{Topic: raftmeta.Topic{Name: name, ID: id,
			Partitions: []raftmeta.Partition{{Index: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}}}})
	}
	return append(records, raftmeta.ProducerIDsRecord{First: 0, Count: 1000})
}

func singleNodeConfig() Config {
	cfg := DefaultConfig()
	cfg.Listeners = []Listener{{Name: "PLAINTEXT", Host: "n1", Port: 9092}}
	return cfg
}

func TestOldJournalIsMigratedIntoTheMetadataLog(t *testing.T) {
	o := newOldJournalWorld(t, 60, singleNodeConfig(), oldRecords("a", "b"))
	require.NoError(t, o.boot())
	im := o.broker.image
	require.Equal(t, "old-cluster-id", im.ClusterID, "the cluster keeps its id")
	require.Equal(t, []string{"a", "b"}, im.TopicNames())
	require.Equal(t, int64(1000), im.NextProducerID, "no producer id is handed out twice")
	require.Greater(t, im.Brokers[1].Epoch, int64(3), "the registration follows the journal's")
	_, err := o.world.Node("n1").Disk().Open(raftmeta.JournalPath)
	require.Error(t, err, "the journal is removed once migrated")
	require.Len(t, o.broker.partitions, 2)

	// And again from the log alone.
	require.NoError(t, o.boot())
	require.Equal(t, "old-cluster-id", o.broker.image.ClusterID)
	require.Equal(t, []string{"a", "b"}, o.broker.image.TopicNames())
}

func TestOldJournalIsRefusedByAClusterConfiguration(t *testing.T) {
	cfg := singleNodeConfig()
	cfg.ProcessRoles = Roles{Broker: true, Controller: true}
	cfg.ControllerListenerNames = []string{"CONTROLLER"}
	cfg.Listeners = append(cfg.Listeners, Listener{Name: "CONTROLLER", Host: "n1", Port: 9093})
	cfg.ControllerQuorumVoters = []Voter{{ID: 1, Host: "n1", Port: 9093}, {ID: 2, Host: "n2", Port: 9093}, {ID: 3, Host: "n3", Port: 9093}}
	cfg.DefaultReplicationFactor = 1
	require.NoError(t, cfg.Validate())
	o := newOldJournalWorld(t, 61, cfg, oldRecords("a"))
	err := o.boot()
	require.ErrorContains(t, err, "holds the metadata journal of a single-node Sluice")
	require.ErrorContains(t, err, "start this node once with its old configuration")
}

// A metadata journal damaged in the middle (here, as when a second broker
// wrote to the same directory) stops the broker with an error naming the
// journal's path under log.dirs and the offset, and saying what the operator
// can do and what each way out loses.
func TestCorruptOldJournalStopsTheBrokerAndSaysWhatToDo(t *testing.T) {
	o := newOldJournalWorld(t, 62, singleNodeConfig(), oldRecords("a", "b", "c"))
	offsets, _ := o.journalFrames()
	at := offsets[len(offsets)-3] // topic b's frame, with more after it
	require.NoError(t, o.world.Node("n1").Disk().FlipBit(raftmeta.JournalPath, at+20))
	err := o.boot()
	require.Error(t, err)
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

// A torn tail (an append a crash cut short) is cut with a warning, and what
// precedes it is migrated.
func TestTornOldJournalTailIsCut(t *testing.T) {
	o := newOldJournalWorld(t, 63, singleNodeConfig(), oldRecords("a"))
	var logs bytes.Buffer
	o.world.SetLog(&logs, slog.LevelWarn)
	offsets, size := o.journalFrames()
	f, err := o.world.Node("n1").Disk().Open(raftmeta.JournalPath)
	require.NoError(t, err)
	torn := make([]byte, 20)
	_, err = f.ReadAt(torn, offsets[len(offsets)-1])
	require.NoError(t, err)
	_, err = f.WriteAt(torn, size)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, o.boot())
	require.Equal(t, []string{"a"}, o.broker.image.TopicNames())
	require.Contains(t, logs.String(), "cut the torn tail of the metadata journal")
	require.Contains(t, logs.String(), fmt.Sprintf("offset=%d bytes=20", size))
}
