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
	"sort"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/sluicemq/sluice/wire"
)

// Broker is one Kafka node: a broker, a controller, or both (KRaft's
// process.roles). Its metadata image is applied from the metadata quorum's
// log (metadata.go).
type Broker struct {
	env      env.Env
	cfg      Config
	table    *wire.Table
	handlers map[int16]func(*request)

	// lock is the data directory's lock (lockName), held from the start of
	// Start until Shutdown has closed every file, so that two brokers never
	// write one log.dirs.
	lock io.Closer
	// metaLock is metadata.log.dir's lock, when the metadata log has a
	// directory of its own (env.MetadataFS).
	metaLock io.Closer
	image    *raftmeta.Image
	// meta is this node's member of the metadata quorum, whose committed
	// entries the image applies (metadata.go).
	meta metaPlane
	// metaErr is why the quorum member stopped, if it did; onFatal hears
	// of it.
	metaErr error
	onFatal func(error)
	// ctl is the controller while this node is the active one
	// (controller.go), ctlTimer its next Tick; mono times its sessions.
	ctl      *raftmeta.Controller
	ctlTimer env.Timer
	mono     monoClock
	// proposals are the controller's proposals in flight, which an
	// answer that writes nothing waits for (propose).
	proposals proposalTracker
	// incarnation identifies this process to the controller, brokerEpoch
	// is the epoch its registration got, and hb its heartbeats.
	incarnation raftmeta.IncarnationID
	brokerEpoch int64
	hb          heartbeats
	// lastRegistrationProblem is the last reason a registration was
	// retried, so each reason is logged once.
	lastRegistrationProblem string
	// creating holds the topics whose creation is being committed, so a
	// second request for the same name waits for the first's outcome
	// (creatingDone) instead of reaching the log.
	creating map[string]bool
	// creatingDone holds the requests for a name whose creation is in
	// flight, waiting for its outcome (topics.go).
	creatingDone map[string]*waiters
	// autoCreates rate-limits the logging of failed auto-creations.
	autoCreates autoCreateFailures
	// producerIDs hands out idempotent producers' ids.
	producerIDs producerIDAllocator

	partitions map[partitionKey]*partition
	// removing holds the directories of deleted partitions being removed,
	// each with what waits to reuse its name (metadata_apply.go).
	removing map[string]*waiters
	// offline holds partitions this broker leads whose logs failed to open.
	offline       map[partitionKey]error
	fetchSessions *fetchSessionCache
	// fetchers replicate the partitions this broker follows, one per
	// leader broker (fetcher.go); replicaTicker lets leaders find lagging
	// followers (replication.go).
	fetchers      map[int32]*fetcher
	replicaTicker env.Timer
	replStats     ReplicationView
	// leaderThrottle limits the bytes this broker's leaders serve to
	// throttled followers (throttle.go); nil until first used.
	leaderThrottle *tokenBucket

	listeners []env.Listener
	// controllerListener is the CONTROLLER listener of a controller node:
	// raft's connections and the Kafka requests of other nodes arrive there.
	controllerListener env.Listener
	// ctlConn is this node's connection to the active controller (node
	// ctlConnTo), for the requests it forwards.
	ctlConn   *wire.Client
	ctlConnTo int32
	// ctlProbe picks the next voter a broker that knows no controller asks.
	ctlProbe int
	conns    map[uint64]*conn
	connSeq  uint64
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

	// coord runs the group coordinator shards of the __consumer_offsets
	// partitions this broker leads (coordinator.go).
	coord coordinator
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
	if cfg.separateMetadataLogDir() && e.MetadataFS == nil {
		return nil, fmt.Errorf("node: config metadata.log.dir=%s is not log.dirs (%s), but the environment gives the node no file system for it",
			cfg.MetadataLogDir, cfg.LogDir)
	}
	b := &Broker{
		env:           e,
		cfg:           cfg,
		conns:         map[uint64]*conn{},
		creating:      map[string]bool{},
		creatingDone:  map[string]*waiters{},
		partitions:    map[partitionKey]*partition{},
		removing:      map[string]*waiters{},
		offline:       map[partitionKey]error{},
		fetchers:      map[int32]*fetcher{},
		fetchSessions: newFetchSessionCache(e.Rand),
		warnings:      newWarnLimiter(e.Clock, e.Log),
		coord:         coordinator{shards: map[int32]*coordShard{}},
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

// Start locks the data directory, recovers the node's metadata from its
// quorum log, joins the quorum, registers the broker with the active
// controller, opens the partitions it leads and starts listening; ready
// runs on the loop once clients can connect, or with the error that stopped
// the start. A directory another broker holds is refused before anything in
// it is read. A start that fails before the quorum log is open releases the
// lock; one that fails later keeps it, with the files it opened, until the
// process ends, since nothing closes those yet.
func (b *Broker) Start(ready func(error)) {
	if b.state != stateNew {
		b.env.Loop.Post(func() { ready(errors.New("node: broker already started")) })
		return
	}
	b.state = stateStarting
	err := b.lockDir()
	if err == nil {
		if err = b.openMetadata(); err != nil {
			b.unlockDir()
		}
	}
	if err == nil {
		err = b.joinQuorum()
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
	if !b.cfg.Roles().IsBroker() {
		// A controller-only node serves the quorum and nothing else.
		b.state = stateRunning
		b.env.Log.Info("controller started", "node", b.cfg.NodeID)
		b.env.Loop.Post(func() { ready(nil) })
		return
	}
	b.register(func(err error) {
		if err != nil {
			fail(err)
			return
		}
		// Serve once the controller has unfenced this broker: its image has
		// caught up with the log to its registration.
		b.whenUnfenced(func(error) {
			b.serve(ready, fail)
		})
	})
}

// serve opens the partitions this broker leads and its listeners.
func (b *Broker) serve(ready func(error), fail func(error)) {
	{
		err := b.openPartitions()
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
			// What was applied while starting is served now.
			b.reconcilePartitions()
			b.scheduleMaintenance()
			b.tickReplicas()
			b.syncShards()
			b.env.Log.Info("broker started", "node", b.cfg.NodeID, "cluster", b.image.ClusterID,
				"listeners", fmt.Sprint(b.cfg.Listeners), "topics", len(b.image.Topics), "partitions", b.image.PartitionCount(),
				"metadata_records_applied", b.meta.recordsApplied, "metadata_apply_seconds", b.meta.applyTime.Seconds())
			ready(nil)
		})
	}
}

// lockDir takes the data directory's lock, and metadata.log.dir's when
// it is a directory of its own.
func (b *Broker) lockDir() error {
	lock, err := lockOne(b.env.FS, "log.dirs", b.cfg.LogDir)
	if err != nil {
		return err
	}
	b.lock = lock
	if b.env.MetadataFS != nil {
		if b.metaLock, err = lockOne(b.env.MetadataFS, "metadata.log.dir", b.cfg.MetadataLogDir); err != nil {
			b.unlockDir()
			return err
		}
	}
	return nil
}

// lockOne takes the lock of one directory, which key names.
func lockOne(fsys env.FS, key, dir string) (io.Closer, error) {
	lock, err := fsys.Lock(lockName)
	if errors.Is(err, env.ErrLocked) {
		return nil, fmt.Errorf("node: %s %s is in use by another broker: %w", key, dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("node: lock %s %s: %w", key, dir, err)
	}
	return lock, nil
}

// unlockDir releases the directories' locks, once nothing of the broker
// touches them any more.
func (b *Broker) unlockDir() {
	b.release(&b.lock, b.cfg.LogDir)
	b.release(&b.metaLock, b.cfg.MetadataLogDir)
}

// release closes a directory's lock, if it is held.
func (b *Broker) release(lock *io.Closer, dir string) {
	if *lock == nil {
		return
	}
	if err := (*lock).Close(); err != nil {
		b.env.Log.Warn("releasing a data directory's lock failed", "dir", dir, "err", err)
	}
	*lock = nil
}

// listen opens every broker listener (the controller listener is the quorum's: joinQuorum).
func (b *Broker) listen() error {
	for _, l := range b.cfg.BrokerListeners() {
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
	if b.replicaTicker != nil {
		b.replicaTicker.Stop()
	}
	// Leaders move off this broker before it stops serving (KRaft's
	// controlled shutdown), so clients fail over at once.
	b.controlledShutdown(func() { b.stop(done) })
}

// stop closes everything once the leaderships have moved.
func (b *Broker) stop(done func(error)) {
	b.stopHeartbeats()
	b.stopFetchers()
	b.unloadShards("the broker is stopping")
	b.closeListeners()
	for _, id := range sortedKeys(b.conns) {
		b.conns[id].close()
	}
	b.warnings.flush()
	b.closePartitions(func(err error) {
		b.leaveQuorum(func(qerr error) {
			if err == nil {
				err = qerr
			}
			b.unlockDir()
			b.state = stateStopped
			b.env.Log.Info("broker stopped", "node", b.cfg.NodeID, "err", err)
			done(err)
		})
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
