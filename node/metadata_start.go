package node

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/sluicemq/sluice/raftmeta/quorum"
	"go.etcd.io/raft/v3/raftpb"
)

// metadataDir is the quorum log's directory in log.dirs: Kafka's name for
// the metadata topic's partition.
const metadataDir = "__cluster_metadata-0"

// openMetadata opens this node's quorum log, which restores the image from
// its latest snapshot (the entries after it are applied as raft re-delivers
// them), and reads a single-node journal left by an older Sluice, to be
// migrated into the log (see migrateJournal).
func (b *Broker) openMetadata() error {
	b.image = raftmeta.NewImage()
	if err := b.readOldJournal(); err != nil {
		return err
	}
	self := raftIDOf(b.cfg.NodeID)
	var voters []uint64
	for _, v := range b.cfg.Voters() {
		voters = append(voters, raftIDOf(v.ID))
	}
	b.meta.self = self
	b.meta.transport = quorum.NewTransport(b.env, self, quorumReceiver{b}, b.env.Log.With("quorum", "transport"))
	node, err := quorum.Open(b.metadataEnv(), quorum.Config{
		ID:            self,
		Dir:           metadataDir,
		Voters:        voters,
		ElectionTicks: electionTicks(b.cfg.ControllerQuorumElectionTimeout),
		SnapshotBytes: b.cfg.MetadataLogMaxRecordBytesBetweenSnapshots,
		// Kafka's 0 is "never by time", as is the quorum's.
		SnapshotInterval: b.cfg.MetadataLogMaxSnapshotInterval,
		Logger:           b.env.Log.With("quorum", "raft"),
		OnFailure:        b.metadataFailed,
	}, metaState{b}, b.meta.transport)
	var corrupt *quorum.CorruptError
	if errors.As(err, &corrupt) {
		dir := path.Join(b.cfg.MetadataDir(), metadataDir)
		return fmt.Errorf("node: open the metadata log in %s: %w. The node will not start on a damaged metadata log: "+
			"restore %s from a backup. Do not move the log aside on a controller (a voter): starting on an empty log "+
			"it would forget the votes it cast, and could help elect two controllers in one term; a broker-only node "+
			"may move %s aside and copy the log from the controller again. A single-node cluster has no other copy: "+
			"without its log it starts as a new, empty cluster", dir, err, b.cfg.MetadataDir(), dir)
	}
	if err != nil {
		return fmt.Errorf("node: open the metadata log in %s: %w", path.Join(b.cfg.MetadataDir(), metadataDir), err)
	}
	b.meta.node = node
	if b.meta.journal != nil && (len(voters) != 1 || voters[0] != self) {
		return fmt.Errorf("node: log.dirs %s holds the metadata journal of a single-node Sluice (%s), which only a single-node "+
			"configuration can take over: start this node once with its old configuration (no process.roles, no controller.quorum.voters), "+
			"which migrates the journal into the metadata log, then add voters", b.cfg.LogDir, b.journalFile())
	}
	return nil
}

// metadataEnv is the environment of the metadata log: the node's, with
// metadata.log.dir's file system when it has one of its own.
func (b *Broker) metadataEnv() env.Env {
	e := b.env
	if e.MetadataFS != nil {
		e.FS = e.MetadataFS
	}
	return e
}

// quorumTick is the quorum's tick; elections take ElectionTicks of them.
const quorumTick = 50 * time.Millisecond

// electionTicks turns controller.quorum.election.timeout.ms into ticks.
func electionTicks(timeout time.Duration) int { return max(int(timeout/quorumTick), 2) }

// quorumReceiver hands the transport's deliveries to the quorum member,
// which is made after the transport it sends through.
type quorumReceiver struct{ b *Broker }

func (q quorumReceiver) Step(m *raftpb.Message) {
	if n := q.b.meta.node; n != nil {
		n.Step(m)
	}
}

func (q quorumReceiver) ReportUnreachable(id uint64) {
	if n := q.b.meta.node; n != nil {
		n.ReportUnreachable(id)
	}
}

func (q quorumReceiver) ReportSnapshot(id uint64, failed bool) {
	if n := q.b.meta.node; n != nil {
		n.ReportSnapshot(id, failed)
	}
}

// joinQuorum tells the transport where the other voters listen, opens the
// controller listener, and starts the quorum member.
func (b *Broker) joinQuorum() error {
	for _, v := range b.cfg.Voters() {
		if id := raftIDOf(v.ID); id != b.meta.self {
			b.meta.transport.SetPeer(id, v.Addr())
		}
	}
	if l, ok := b.cfg.ControllerListener(); ok && b.cfg.Roles().IsController() {
		ln, err := b.env.Net.Listen(l.Addr(), quorum.Demux(b.meta.transport.Accept, b.acceptController))
		if err != nil {
			return fmt.Errorf("node: listen on the controller listener %s: %w", l, err)
		}
		b.controllerListener = ln
	}
	b.startMonoClock()
	b.meta.node.Start()
	return nil
}

// leaveQuorum stops the quorum member and its connections.
func (b *Broker) leaveQuorum(done func(error)) {
	if b.controllerListener != nil {
		b.controllerListener.Close()
		b.controllerListener = nil
	}
	b.deactivateController()
	b.stopMonoClock()
	b.meta.node.Close(func(err error) {
		b.meta.transport.Close()
		done(err)
	})
}

// activateController makes this node the active controller for term: it
// has applied every earlier entry, so it decides from the whole image. A
// cluster's first controller names the cluster; a node migrating a
// single-node journal proposes its records instead.
func (b *Broker) activateController(term uint64) {
	if !b.cfg.Roles().IsController() {
		return
	}
	b.meta.activeTerm = term
	b.newController()
	b.env.Log.Info("active controller", "node", b.cfg.NodeID, "term", term)
	if b.meta.journal != nil {
		b.migrateJournal()
		return
	}
	if b.image.ClusterID == "" {
		_, records := b.ctl.Bootstrap(newClusterID(b.env.Rand))
		b.propose(records, func(err error) {
			if err != nil {
				b.env.Log.Warn("naming the cluster failed; the next controller will", "err", err)
			}
			b.meta.leaderWaiters.wake(nil)
		})
		return
	}
	b.meta.leaderWaiters.wake(nil)
}

// deactivateController stops deciding: proposals in flight fail in the
// quorum (their outcome unknown), and requests for the controller go to the
// new one.
func (b *Broker) deactivateController() {
	if b.meta.activeTerm == 0 {
		return
	}
	b.env.Log.Info("no longer the active controller", "node", b.cfg.NodeID, "term", b.meta.activeTerm)
	b.meta.activeTerm = 0
	b.dropController()
}

// readOldJournal reads the metadata journal of a single-node Sluice, if
// log.dirs holds one, to be migrated once this node controls the quorum.
func (b *Broker) readOldJournal() error {
	f, err := b.env.FS.Open(raftmeta.JournalPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("node: open the metadata journal %s: %w", b.journalFile(), err)
	}
	f.Close()
	journal, records, err := raftmeta.OpenJournal(b.env.Loop, b.env.FS)
	var corrupt *raftmeta.CorruptJournalError
	if errors.As(err, &corrupt) {
		return b.corruptJournal(corrupt)
	}
	if err != nil {
		return fmt.Errorf("node: read the metadata journal %s: %w", b.journalFile(), err)
	}
	journal.Close()
	if at, n := journal.TornTail(); n > 0 {
		b.env.Log.Warn("cut the torn tail of the metadata journal: an append that a crash cut short, never acknowledged",
			"file", b.journalFile(), "offset", at, "bytes", n)
	}
	// Replayed here first, so a journal the image refuses stops the start
	// before anything is proposed.
	check := raftmeta.NewImage()
	for i, r := range records {
		if err := check.Apply(r); err != nil {
			return fmt.Errorf("node: recover metadata from %s: record %d: %w", b.journalFile(), i, err)
		}
	}
	b.meta.journal = &oldJournal{records: records, clusterID: check.ClusterID}
	return nil
}

// oldJournal is a single-node journal awaiting migration.
type oldJournal struct {
	records   []raftmeta.Record
	clusterID string
}

// migrateJournal moves a single-node journal into the quorum log: its
// records become the log's first change, applied as one, and the journal
// is removed once that is committed. A crash in between finds the cluster
// id already in the image and only removes the journal.
func (b *Broker) migrateJournal() {
	j := b.meta.journal
	remove := func() {
		if err := b.env.FS.Remove(raftmeta.JournalPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			b.env.Log.Warn("removing the migrated metadata journal failed", "file", b.journalFile(), "err", err)
			return
		}
		b.meta.journal = nil
		b.env.Log.Info("migrated the single-node metadata journal into the metadata log", "file", b.journalFile(), "records", len(j.records))
		b.meta.leaderWaiters.wake(nil)
	}
	switch b.image.ClusterID {
	case j.clusterID:
		remove()
		return
	case "":
	default:
		b.env.Log.Error("the metadata journal names another cluster than the metadata log; it is left in place and ignored",
			"file", b.journalFile(), "journal_cluster", j.clusterID, "cluster", b.image.ClusterID)
		b.meta.journal = nil
		b.meta.leaderWaiters.wake(nil)
		return
	}
	// A journal's records are taken as they are, broker registrations
	// included: the next registration of this node follows on from them.
	b.commit(j.records, func(err error) {
		if err != nil {
			b.env.Log.Warn("migrating the metadata journal failed; retried when this node controls the quorum again", "err", err)
			return
		}
		remove()
	})
}

// journalFile is the old metadata journal's path as the operator knows it.
func (b *Broker) journalFile() string { return path.Join(b.cfg.LogDir, raftmeta.JournalPath) }

// corruptJournal is the error a broker stops with when the metadata journal
// of an older single-node Sluice is damaged by something other than a
// crash: where, what, and what the operator can do, with what each way out
// loses. Starting without the journal loses more than metadata: every
// partition directory then belongs to no topic, and removeOrphanDirs
// deletes it.
func (b *Broker) corruptJournal(e *raftmeta.CorruptJournalError) error {
	file, dir := b.journalFile(), b.cfg.LogDir
	return fmt.Errorf("node: the metadata journal %s is damaged at byte offset %d, after %d whole records: %s. "+
		"It holds the cluster id, every topic, topic config and producer id block; the broker cannot serve without it and will not start. "+
		"Stop every process that uses %s, then either restore %s from a backup, "+
		"or move %s aside and start again: the broker then starts a new, empty cluster "+
		"(a new cluster id; no topics, topic configs or producer ids), "+
		"and deletes every partition directory in %s at start, records and all, since no topic owns them; "+
		"move those directories aside too to keep their files",
		file, e.Offset, e.Records, e.Reason, dir, dir, file, dir)
}

// metadataFailed is the quorum member stopping on an error (a write that
// failed, an entry the image refuses): this node can no longer follow the
// metadata log. It stops serving, since everything it would answer could be
// stale, and says why; a restart recovers from what is durable.
func (b *Broker) metadataFailed(err error) {
	b.env.Log.Error("the metadata log failed: the node stops serving until it is restarted", "node", b.cfg.NodeID, "err", err)
	b.metaErr = err
	b.deactivateController()
	if b.state == stateRunning {
		b.closeListeners()
		for _, id := range sortedKeys(b.conns) {
			b.conns[id].close()
		}
	}
	if b.onFatal != nil {
		b.onFatal(err)
	}
}

// OnFatal sets what runs (on the loop) when the node can no longer serve:
// its metadata log failed. sluice serve exits; without it, the node only
// stops serving.
func (b *Broker) OnFatal(f func(error)) { b.onFatal = f }
