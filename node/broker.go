// Package node composes a Sluice broker: its event loop, client connections,
// request routing, and one handler per Kafka API.
//
// A Broker lives on its node's loop (package env): every method runs there,
// every effect leaves through the environment, and every result comes back as
// a loop event. That is what lets the simulator run the very same broker
// through crashes, partitions and disk faults, one event at a time.
//
// Handlers live one file per API, named by key (00_produce.go, 01_fetch.go,
// ...), each opening with the versions it serves and how it treats edge
// cases.
package node

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/sluicemq/sluice/wire"
)

// Broker is one Kafka broker with, for now, its own metadata: the image is
// kept in the shape the metadata quorum will replicate (package raftmeta),
// persisted in a local journal until then.
type Broker struct {
	env      env.Env
	cfg      Config
	table    *wire.Table
	handlers map[int16]func(*request)

	// lock is the data directory's lock (lockName), held from the start of
	// Start until Shutdown has closed every file, so that two brokers never
	// write one log.dirs.
	lock    io.Closer
	image   *raftmeta.Image
	journal *raftmeta.Journal
	// creating holds the topics whose creation is being committed, so a
	// second request for the same name is refused before it reaches the log.
	creating map[string]bool
	// autoCreates rate-limits the logging of failed auto-creations.
	autoCreates autoCreateFailures
	// producerIDs hands out idempotent producers' ids.
	producerIDs producerIDAllocator

	partitions map[partitionKey]*partition
	// offline holds partitions this broker leads whose logs failed to open.
	offline       map[partitionKey]error
	fetchSessions *fetchSessionCache

	listeners []env.Listener
	conns     map[uint64]*conn
	connSeq   uint64
	// warnings limits the warnings logged about clients (warnings.go).
	warnings *warnLimiter

	state brokerState
	// maintenance is the timer of the next retention pass.
	maintenance env.Timer

	// deleting and altering track the topic deletions and config changes
	// in flight, so that a request that depends on one waits for it
	// (20_delete_topics.go, alterconfigs.go).
	deleting inFlight[raftmeta.TopicID]
	altering inFlight[string]
}

type brokerState int

const (
	stateNew brokerState = iota
	stateStarting
	stateRunning
	stateStopping
	stateStopped
)

// New returns a broker that will run on e with cfg. Nothing happens until
// Start.
func New(e env.Env, cfg Config) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	b := &Broker{
		env:           e,
		cfg:           cfg,
		conns:         map[uint64]*conn{},
		creating:      map[string]bool{},
		partitions:    map[partitionKey]*partition{},
		offline:       map[partitionKey]error{},
		fetchSessions: newFetchSessionCache(e.Rand),
		warnings:      newWarnLimiter(e.Clock, e.Log),
	}
	b.handlers = map[int16]func(*request){}
	var served []wire.APIRange
	for _, h := range b.apiHandlers() {
		served = append(served, wire.APIRange{Key: h.key, Min: h.min, Max: h.max})
		b.handlers[h.key] = h.handle
	}
	table, err := wire.NewTable(served)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	b.table = table
	return b, nil
}

// apiHandler is one served API: its versions and its handler.
type apiHandler struct {
	key, min, max int16
	handle        func(*request)
}

// lockName is the file in log.dirs whose lock (env.FS.Lock) a broker holds
// while it uses the directory, as Kafka's .lock.
const lockName = ".lock"

// Start locks the data directory, recovers the broker's state from it,
// registers the broker, and starts listening; ready runs on the loop once
// clients can connect, or with the error that stopped the start. A
// directory another broker holds is refused before anything in it is read.
// A start that fails before the journal is open releases the lock; one
// that fails later keeps it, with the files it opened, until the process
// ends, since nothing closes those yet.
func (b *Broker) Start(ready func(error)) {
	if b.state != stateNew {
		b.env.Loop.Post(func() { ready(errors.New("node: broker already started")) })
		return
	}
	b.state = stateStarting
	err := b.lockDir()
	if err == nil {
		if err = b.recoverMetadata(); err != nil {
			b.unlockDir()
		}
	}
	if err != nil {
		b.state = stateStopped
		b.env.Loop.Post(func() { ready(err) })
		return
	}
	fail := func(err error) {
		b.state = stateStopped
		ready(err)
	}
	b.register(func(err error) {
		if err == nil {
			err = b.openPartitions()
		}
		if err != nil {
			fail(err)
			return
		}
		// Clients connect only once every partition's recovered tail is
		// durable, so the first fetch after a restart sees every
		// acknowledged record.
		b.awaitPartitionsDurable(func(err error) {
			if err == nil {
				err = b.listen()
			}
			if err != nil {
				fail(err)
				return
			}
			b.state = stateRunning
			b.scheduleMaintenance()
			b.env.Log.Info("broker started", "node", b.cfg.NodeID, "cluster", b.image.ClusterID,
				"listeners", fmt.Sprint(b.cfg.Listeners), "topics", len(b.image.Topics))
			ready(nil)
		})
	})
}

// lockDir takes the data directory's lock.
func (b *Broker) lockDir() error {
	lock, err := b.env.FS.Lock(lockName)
	if errors.Is(err, env.ErrLocked) {
		return fmt.Errorf("node: log.dirs %s is in use by another broker: %w", b.cfg.LogDir, err)
	}
	if err != nil {
		return fmt.Errorf("node: lock log.dirs %s: %w", b.cfg.LogDir, err)
	}
	b.lock = lock
	return nil
}

// unlockDir releases the data directory's lock, once nothing of the broker
// touches the directory any more.
func (b *Broker) unlockDir() {
	if err := b.lock.Close(); err != nil {
		b.env.Log.Warn("releasing the data directory's lock failed", "dir", b.cfg.LogDir, "err", err)
	}
	b.lock = nil
}

// recoverMetadata replays the journal into a fresh image.
func (b *Broker) recoverMetadata() error {
	journal, records, err := raftmeta.OpenJournal(b.env.Loop, b.env.FS)
	var corrupt *raftmeta.CorruptJournalError
	if errors.As(err, &corrupt) {
		return b.corruptJournal(corrupt)
	}
	if err != nil {
		return fmt.Errorf("node: recover metadata: %w", err)
	}
	if at, n := journal.TornTail(); n > 0 {
		b.env.Log.Warn("cut the torn tail of the metadata journal: an append that a crash cut short, never acknowledged",
			"file", b.journalFile(), "offset", at, "bytes", n)
	}
	image := raftmeta.NewImage()
	for i, r := range records {
		if err := image.Apply(r); err != nil {
			journal.Close()
			return fmt.Errorf("node: recover metadata from %s: record %d: %w", b.journalFile(), i, err)
		}
	}
	b.journal, b.image = journal, image
	return nil
}

// journalFile is the metadata journal's path as the operator knows it.
func (b *Broker) journalFile() string { return path.Join(b.cfg.LogDir, raftmeta.JournalPath) }

// corruptJournal is the error a broker stops with when its metadata journal
// is damaged by something other than a crash: where, what, and what the
// operator can do, with what each way out loses. Starting without the
// journal loses more than metadata: every partition directory then belongs
// to no topic, and removeOrphanDirs deletes it.
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

// register writes the records that make this incarnation known: the cluster
// id on first start, and the broker with a new epoch on every start.
func (b *Broker) register(done func(error)) {
	// Until the metadata quorum exists, a data directory belongs to the one
	// broker that registered in it: starting it as another node.id would
	// orphan every partition the old id leads.
	if ids := b.image.BrokerIDs(); len(ids) > 0 && b.image.Brokers[b.cfg.NodeID].ID != b.cfg.NodeID {
		err := fmt.Errorf("node: log.dirs %s holds the metadata of node.id %d, not the configured node.id %d", b.cfg.LogDir, ids[0], b.cfg.NodeID)
		b.env.Loop.Post(func() { done(err) })
		return
	}
	var records []raftmeta.Record
	if b.image.ClusterID == "" {
		records = append(records, raftmeta.ClusterIDRecord{ClusterID: newClusterID(b.env.Rand)})
	}
	epoch := int64(1)
	if old, ok := b.image.Brokers[b.cfg.NodeID]; ok {
		epoch = old.Epoch + 1
	}
	adv := b.cfg.Advertised()[0]
	records = append(records, raftmeta.RegisterBrokerRecord{Broker: raftmeta.Broker{
		ID: b.cfg.NodeID, Host: adv.Host, Port: adv.Port, Epoch: epoch,
	}})
	b.commit(records, done)
}

// commit makes records durable, then applies them to the image, then calls
// done. It is the one way metadata changes.
func (b *Broker) commit(records []raftmeta.Record, done func(error)) {
	b.journal.Append(records, func(err error) {
		if err != nil {
			done(fmt.Errorf("node: commit metadata: %w", err))
			return
		}
		for _, r := range records {
			if err := b.image.Apply(r); err != nil {
				// The records were validated before they were written; an
				// image that refuses one has diverged from its journal.
				panic(fmt.Sprintf("node: metadata record refused after commit: %v", err))
			}
		}
		done(nil)
	})
}

// listen opens every configured listener.
func (b *Broker) listen() error {
	for _, l := range b.cfg.Listeners {
		ln, err := b.env.Net.Listen(l.Addr(), b.accept)
		if err != nil {
			b.closeListeners()
			return fmt.Errorf("node: listen on %s: %w", l, err)
		}
		b.listeners = append(b.listeners, ln)
	}
	return nil
}

// Addrs returns the addresses actually bound (with ports chosen for port 0).
func (b *Broker) Addrs() []string {
	addrs := make([]string, len(b.listeners))
	for i, ln := range b.listeners {
		addrs[i] = ln.Addr()
	}
	return addrs
}

func (b *Broker) closeListeners() {
	for _, ln := range b.listeners {
		ln.Close()
	}
	b.listeners = nil
}

// Shutdown stops accepting, closes every connection, makes every partition
// durable and checkpointed, closes the disk state and releases the data
// directory's lock; done runs on the loop when the broker can exit. A
// restart finds every acknowledged record.
func (b *Broker) Shutdown(done func(error)) {
	if b.state != stateRunning {
		b.env.Loop.Post(func() { done(nil) })
		return
	}
	b.state = stateStopping
	if b.maintenance != nil {
		b.maintenance.Stop()
	}
	b.closeListeners()
	for _, id := range sortedKeys(b.conns) {
		b.conns[id].close()
	}
	b.warnings.flush()
	b.closePartitions(func(err error) {
		if cerr := b.journal.Close(); err == nil {
			err = cerr
		}
		b.unlockDir()
		b.state = stateStopped
		b.env.Log.Info("broker stopped", "node", b.cfg.NodeID, "err", err)
		done(err)
	})
}

// dispatch runs the handler for r. The table only lets through requests it
// serves, so a missing handler is a bug.
func (b *Broker) dispatch(r *request) {
	h, ok := b.handlers[r.header.Key]
	if !ok {
		panic(fmt.Sprintf("node: no handler for served request %s", r.header))
	}
	h(r)
}

// newClusterID draws a cluster id: 16 random bytes in URL-safe base64
// without padding, the form Kafka's tools generate.
func newClusterID(r env.Rand) string {
	var id [16]byte
	env.Fill(r, id[:])
	return base64.RawURLEncoding.EncodeToString(id[:])
}

func sortedKeys[K ~int32 | ~int64 | ~uint64 | ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
