package simrun

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/jepsen"
	"github.com/sluicemq/sluice/node"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/sluicemq/sluice/sim"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/simfs"
)

// A cluster run (Config.Nodes >= 3): N nodes n1..nN, each broker and
// controller of one static metadata quorum of all of them, or, with
// Config.BrokerOnly of K, the first N-K combined nodes the voters and the
// last K broker-only nodes following the log as learners; metadata
// clients m1..mK creating, deleting and describing topics through random
// nodes (cluster_clients.go), a nemesis of node and network faults that
// never takes down more than a minority of the voters at once unless the
// seed is of the power-loss kind (cluster_nemesis.go), and an observer
// that samples every node's quorum state between events (its leader and
// term, its applied index and a digest of its image). At the end:
// jepsen.CheckMeta over the metadata history, CheckLeaders and
// CheckAppliedLogs over the samples, CheckConverged over the images of
// every node once the liveness phase has brought them together.
//
// The data workload runs too, simpler than a single broker's
// (cluster_data.go): one-record produces and one-partition fetches, each
// sent to the partition's leader, judged by jepsen.Check.

// ClusterOptions is what a seed chooses for a cluster run.
type ClusterOptions struct {
	Nodes int
	// BrokerOnly is how many of the nodes (the last) are broker-only.
	BrokerOnly int
	// MetaOnly says the metadata clients run alone (Config.MetaOnly).
	MetaOnly bool
	Clients  int
	// Faults are the faults this seed mixes, one every FaultEvery on
	// average; PowerLoss says the seed is of the power-loss kind (every
	// node loses power at once, now and then).
	Faults     []Fault
	FaultEvery time.Duration
	// The data workload: the topic's partitions, its producers and
	// consumers (cluster_data.go).
	Partitions, Producers, Consumers int
	// SnapshotBytes and SnapshotInterval are every node's
	// metadata.log.max.record.bytes.between.snapshots and
	// metadata.log.max.snapshot.interval.ms: small, so that runs take
	// snapshots, compact behind them and send them to nodes left behind.
	SnapshotBytes    int64
	SnapshotInterval time.Duration
	// Replication: the data topic's replication factor and
	// min.insync.replicas, the share of produces sent with acks=1 (the
	// rest acks=all), and every broker's replica.lag.time.max.ms, short
	// so that followers leave and rejoin ISRs within a run.
	ReplicationFactor, MinInSync int
	LeaderAcks                   float64
	ReplicaLagTime               time.Duration
	// Racks puts node i in rack r(i mod Racks) with the rack-aware replica
	// selector, and consumers in racks too, so that they read from
	// followers (KIP-392); 0: no racks.
	Racks int
	// RebalanceEvery is leader.imbalance.check.interval.seconds, short, so
	// that leaderships move back to preferred replicas (a live leader
	// replaced) within a run.
	RebalanceEvery time.Duration
	// Moves says an operator reassigns the data topic's partitions every
	// few seconds (cluster_data.go's mover).
	Moves bool
	// VoterChanges says an operator takes voters out of the metadata
	// quorum and puts them back every few seconds (cluster_voters.go).
	VoterChanges bool
	// PageCache gives the data topic Kafka's flush policy
	// (flush.messages=2^63-1): an acknowledgement promises the records
	// are in every ISR member's page cache, not on its disk. Such a seed
	// injects no machine crash or power loss, which may lose acknowledged
	// records by that contract (the simulated disk never writes back
	// unsynced pages on its own, as a kernel would within seconds), so
	// that its acks=all records are held to the same durability as the
	// default mode's, through kills, restarts, pauses, partitions, clock
	// jumps and disk errors.
	PageCache bool
	// Groups is the seed's group workload (cluster_groups.go), none in
	// about half the seeds.
	Groups []GroupOptions
	// Think is the data clients' mean pause between two operations (0: up
	// to 100 ms, mean 50 ms): a knob for the operation rate, no seed
	// draws it.
	Think time.Duration
	// SendSmallChunks sends every chunk of a fetch response from its file
	// (node.Config.FetchCopyMax 0), as Options.SendSmallChunks does: the
	// replicated commits' and small batches' file path is then simulated
	// too.
	SendSmallChunks bool
	// IdempotentProducers is how many of the producers (the first ones)
	// are idempotent (cluster_idempotent.go): they retry the very same
	// batch across leader changes, and no value of theirs may land twice.
	// The others send plain one-record produces. Clamped to Producers.
	IdempotentProducers int
}

func (o ClusterOptions) String() string {
	names := make([]string, len(o.Faults))
	for i, f := range o.Faults {
		names[i] = string(f)
	}
	shape := fmt.Sprintf("nodes=%d", o.Nodes)
	if o.BrokerOnly > 0 {
		shape += fmt.Sprintf(" broker_only=%d", o.BrokerOnly)
	}
	if o.MetaOnly {
		shape += " meta_only=true"
	}
	flush := "sync"
	if o.PageCache {
		flush = "pagecache"
	}
	if len(o.Groups) > 0 {
		flush += " groups=" + groupsString(o.Groups)
	}
	if o.SendSmallChunks {
		flush += " fetchpath=sendfile-all"
	}
	if o.Think > 0 {
		flush += fmt.Sprintf(" think=%s", o.Think)
	}
	if o.VoterChanges {
		flush += " voterchanges=true"
	}
	if o.IdempotentProducers > 0 {
		flush += fmt.Sprintf(" idempotent=%d", o.IdempotentProducers)
	}
	return fmt.Sprintf("%s clients=%d partitions=%d rf=%d min_isr=%d acks1=%.2f flush=%s lag=%s racks=%d rebalance=%s moves=%t producers=%d consumers=%d snapshots=%dB/%s faults=%s every=%s",
		shape, o.Clients, o.Partitions, o.ReplicationFactor, o.MinInSync, o.LeaderAcks, flush, o.ReplicaLagTime, o.Racks, o.RebalanceEvery, o.Moves, o.Producers, o.Consumers,
		o.SnapshotBytes, o.SnapshotInterval, strings.Join(names, ","), o.FaultEvery)
}

// clusterFaults are the faults a cluster run may mix; FaultPowerLoss only
// in a run of the power-loss kind.
var clusterFaults = []Fault{FaultCrash, FaultKill, FaultRestart, FaultPause, FaultPartition, FaultClock, FaultDisk}

// ChooseClusterOptions draws a cluster run's options from its seed.
func ChooseClusterOptions(seed uint64, nodes int) ClusterOptions {
	r := rng.New(seed).Fork("cluster-options")
	o := ClusterOptions{Nodes: nodes, Clients: 2 + r.Intn(3)}
	for _, f := range clusterFaults {
		if r.Chance(0.5) {
			o.Faults = append(o.Faults, f)
		}
	}
	if r.Chance(0.2) {
		o.Faults = append(o.Faults, FaultPowerLoss)
	}
	o.FaultEvery = time.Duration(300+r.Intn(2000)) * time.Millisecond
	o.Partitions, o.Producers, o.Consumers = 1+r.Intn(4), 1+r.Intn(2), 1+r.Intn(2)
	o.SnapshotBytes = int64(math.Exp(math.Log(2<<10) + r.Float64()*math.Log(32))) // 2 KiB to 64 KiB
	o.SnapshotInterval = time.Duration(1+r.Intn(20)) * time.Second
	// Replication factor 3 in half the seeds, 2 in a fifth, 1 in the rest;
	// min.insync.replicas 2 in most replicated seeds.
	switch x := r.Float64(); {
	case x < 0.5:
		o.ReplicationFactor = 3
	case x < 0.7:
		o.ReplicationFactor = 2
	default:
		o.ReplicationFactor = 1
	}
	o.MinInSync = 1
	if o.ReplicationFactor > 1 && r.Chance(0.7) {
		o.MinInSync = 2
	}
	if r.Chance(0.4) {
		o.LeaderAcks = 0.2 + 0.6*r.Float64()
	}
	o.ReplicaLagTime = time.Duration(1000+r.Intn(9000)) * time.Millisecond
	if o.ReplicationFactor > 1 && r.Chance(0.4) {
		o.Racks = 2 + r.Intn(2)
	}
	o.RebalanceEvery = time.Duration(2+r.Intn(28)) * time.Second
	o.Moves = o.ReplicationFactor > 1 && r.Chance(0.4)
	// Drawn last, so that the draws above stay what they were before it.
	if o.ReplicationFactor > 1 && r.Chance(0.2) {
		o.PageCache = true
		o.Faults = slices.DeleteFunc(o.Faults, func(f Fault) bool { return f == FaultCrash || f == FaultPowerLoss })
	}
	// Drawn after everything else, for the same reason.
	o.Groups = chooseGroups(r)
	o.SendSmallChunks = r.Chance(0.5)
	// Drawn last, so that every draw above stays what it was.
	o.VoterChanges = r.Chance(0.3)
	o.IdempotentProducers = chooseIdempotent(r.Fork("idempotent"), o.Producers)
	return o
}

// chooseIdempotent draws how many producers are idempotent: none in half
// the seeds, else some or all of them. It draws from a stream of its own
// (a fork does not depend on the draws made before it), so that no other
// choice of a seed moves, whatever is drawn before or after it.
func chooseIdempotent(r *rng.Rand, producers int) int {
	if !r.Chance(0.5) {
		return 0
	}
	return 1 + r.Intn(producers)
}

// rackOf is the rack of node (or consumer) i in a run with racks.
func rackOf(i, racks int) string { return fmt.Sprintf("r%d", i%racks) }

// clusterRun is one seeded cluster run in progress.
// dataSteer sends the data clients' operations on one partition to chosen
// nodes (the lagging-image aim).
type dataSteer struct {
	part         int32
	stale, fresh int32 // the node whose image lags, its successor as leader
	// staleEpoch is the leader epoch at which stale leads in its image:
	// the reads sent to it carry it, as from a consumer whose metadata
	// came from there (once stale follows at a newer epoch, they are
	// fenced, not served as a follower's).
	staleEpoch int32
}

type clusterRun struct {
	// steer, while set, sends half of the data clients' operations to
	// one partition at chosen nodes.
	steer   *dataSteer
	cfg     Config
	opts    ClusterOptions
	w       *sim.World
	mh      *jepsen.MetaHistory
	h       *jepsen.History
	nodes   []*clusterNode
	clients []*metaClient
	data    []*dataClient
	// partitions and topicID are the data topic's.
	partitions int
	topicID    [16]byte
	nemesis    *clusterNemesis
	// groups is the group workload, nil in a seed without one.
	groups *groupRun
	// reconfig takes voters out and back in (cluster_voters.go), nil in
	// a seed without voter changes.
	reconfig *reconfigurer

	raftSamples    []jepsen.RaftSample
	appliedSamples []jepsen.AppliedSample
	finals         []jepsen.FinalImage

	// rec draws the timeline (nil unless Config.Timeline); until stops
	// the run at Config.Until (nil without).
	rec   *recorder
	until *untilStop

	stopping bool
	// comparing counts the follower reads compareReplicas has under way.
	comparing int
	probes    probes
	failures  []string
	// sabotaged is set once a data client's sabotage has struck.
	sabotaged bool
}

// clusterNode is one combined node and what is known of its process.
type clusterNode struct {
	id   int32
	name string
	// voter says the node is a controller (a voter of the quorum); a
	// broker-only node is a learner.
	voter   bool
	node    *sim.Node
	cfg     node.Config
	b       *node.Broker // of the current incarnation
	bootInc int          // the incarnation b belongs to
	// diskErrs is the disk's injected-error count when the current
	// incarnation booted.
	diskErrs int
	// oracle knows what is durable on the node's disk: the answers of the
	// partitions it leads are held against it (durable.go).
	oracle *oracle
	// The last sample taken, to sample only changes.
	seenInc             int
	seenTerm            uint64
	seenLeader          int32
	seenApplied         uint64
	sampledRaft, sample bool
	// seenSnapshots and seenRestores are the incarnation's counts at the
	// last sample, for the snapshot probes; seenRepl its replication
	// counts.
	seenSnapshots, seenRestores int
	seenRepl                    node.ReplicationView
}

func (n *clusterNode) broker() *node.Broker {
	if !n.node.Up() || n.b == nil || n.bootInc != n.node.Incarnation() {
		return nil
	}
	return n.b
}

func (n *clusterNode) running() bool {
	b := n.broker()
	return b != nil && b.MetadataView().Running
}

// observeEvery is how often, in virtual time, the observer samples the
// nodes' quorum state.
const observeEvery = 5 * time.Millisecond

// runCluster runs cfg with the options chosen for it (Choose), or fails
// at once with the error choosing them gave.
func runCluster(cfg Config, opts ClusterOptions, chooseErr error) Summary {
	if cfg.Duration <= 0 {
		cfg.Duration = DefaultDuration
	}
	if cfg.CheckTimeout <= 0 {
		cfg.CheckTimeout = DefaultCheckTimeout
	}
	rec, until := newRecorder(cfg), newUntil(cfg)
	r := &clusterRun{cfg: cfg, opts: opts, w: newWorld(cfg, rec, until), mh: jepsen.NewMetaHistory(), h: jepsen.NewHistory(), rec: rec, until: until}
	if until != nil {
		until.dump = r.dumpState
	}
	r.h.SetClock(r.w.Now)
	r.partitions = r.opts.Partitions
	if chooseErr != nil {
		r.fail("%v", chooseErr)
		return r.summarize()
	}
	if cfg.Nodes < 3 {
		r.fail("a cluster run needs at least 3 nodes, not %d", cfg.Nodes)
		return r.summarize()
	}
	if cfg.BrokerOnly < 0 || cfg.Nodes-cfg.BrokerOnly < 3 {
		r.fail("a cluster run needs at least 3 voters: %d nodes with %d broker-only leave %d", cfg.Nodes, cfg.BrokerOnly, cfg.Nodes-cfg.BrokerOnly)
		return r.summarize()
	}
	if cfg.Log != nil {
		r.w.SetLog(cfg.Log, cfg.LogLevel)
	}
	r.execute()
	return r.summarize()
}

func (r *clusterRun) execute() {
	defer func() {
		if p := recover(); p != nil && !stopped(p) {
			r.fail("panic at %s: %v", r.w.Now(), p)
		}
	}()
	r.setup()
	r.observe()
	if !r.cfg.MetaOnly && !r.makeTopic() {
		return
	}
	r.addClients()
	if !r.cfg.MetaOnly {
		var brokers []string
		for _, n := range r.nodes {
			brokers = append(brokers, n.name+":9092")
		}
		r.cfg.startWorkloads(WorkloadContext{World: r.w, Brokers: brokers, Topic: clusterTopic, Partitions: r.partitions,
			History: r.h, Stopping: func() bool { return r.stopping }})
	}
	r.startMover()
	r.startReconfigurer()
	r.nemesis.start()
	r.w.Run(r.cfg.Duration)
	r.liveness()
}

// controllerPort is every voter's CONTROLLER listener (the raft quorum and
// the brokers' controller requests); the data listener is 9092.
const controllerPort = 9093

func (r *clusterRun) setup() {
	w := r.w
	w.Net().SetTimeouts(5*time.Second, 5*time.Second)
	r.nemesis = &clusterNemesis{r: r, rand: w.Rand("nemesis"), faulted: make(map[int]int)}
	var voters []node.Voter
	voterCount := r.cfg.Nodes - r.cfg.BrokerOnly
	for i := range voterCount {
		voters = append(voters, node.Voter{ID: int32(i + 1), Host: nodeName(i), Port: controllerPort})
	}
	for i := range r.cfg.Nodes {
		voter := i < voterCount
		cfg := node.DefaultConfig()
		cfg.NodeID = int32(i + 1)
		if r.opts.SendSmallChunks {
			cfg.FetchCopyMax = 0
		}
		cfg.ProcessRoles = node.Roles{Broker: true, Controller: voter}
		cfg.ControllerQuorumVoters = voters
		cfg.ControllerListenerNames = []string{"CONTROLLER"}
		cfg.Listeners = []node.Listener{{Name: "PLAINTEXT", Host: nodeName(i), Port: 9092}}
		if voter {
			cfg.Listeners = append(cfg.Listeners, node.Listener{Name: "CONTROLLER", Host: nodeName(i), Port: controllerPort})
		}
		cfg.AutoCreateTopics = false // a describe is a read
		cfg.LogRetentionMs = node.Unlimited
		cfg.LogRetentionBytes = node.Unlimited
		cfg.MetadataLogMaxRecordBytesBetweenSnapshots = r.opts.SnapshotBytes
		cfg.MetadataLogMaxSnapshotInterval = r.opts.SnapshotInterval
		cfg.ReplicaLagTimeMax = r.opts.ReplicaLagTime
		cfg.LeaderImbalanceCheckInterval = r.opts.RebalanceEvery
		if len(r.opts.Groups) > 0 && !r.cfg.MetaOnly {
			cfg.OffsetsTopicNumPartitions = 3
			cfg.OffsetsTopicReplicationFactor = int16(r.opts.ReplicationFactor)
			cfg.GroupInitialRebalanceDelay = groupRebalanceDelay
			cfg.GroupConsumerSessionTimeout = r.opts.Groups[0].Session
			cfg.GroupConsumerMinSessionTimeout = 6 * time.Second
			cfg.SabotageCoordinatorEarlyAck = r.cfg.Sabotage == SabotageGroupEarlyAck
			cfg.SabotageCoordinatorFetchAhead = r.cfg.Sabotage == SabotageGroupFetchAhead
		}
		if r.opts.Racks > 0 {
			cfg.BrokerRack = rackOf(i, r.opts.Racks)
			cfg.ReplicaSelectorClass = node.RackAwareSelectorClass
		}
		if err := cfg.Validate(); err != nil {
			panic(fmt.Sprintf("simrun: cluster node config refused: %v", err))
		}
		n := &clusterNode{id: int32(i + 1), name: nodeName(i), voter: voter, cfg: cfg, seenLeader: jepsen.NoLeader}
		r.nodes = append(r.nodes, n)
		n.node = w.AddNode(n.name, func(e env.Env) { r.bootNode(n, e) })
		n.node.Disk().SetSabotage(r.cfg.DiskSabotage)
		n.oracle = newOracle(n.node.Disk())
	}
}

// addClients adds the client nodes, which start at once.
func (r *clusterRun) addClients() {
	w := r.w
	for i := range r.opts.Clients {
		c := newMetaClient(r, i)
		r.clients = append(r.clients, c)
		c.node = w.AddNode(c.name, c.boot)
	}
	for i := range r.opts.Producers {
		d := r.newDataClient(1+i, fmt.Sprintf("p%d", 1+i), true)
		r.data = append(r.data, d)
		d.node = w.AddNode(d.name, d.boot)
	}
	for i := range r.opts.Consumers {
		d := r.newDataClient(101+i, fmt.Sprintf("c%d", 1+i), false)
		r.data = append(r.data, d)
		d.node = w.AddNode(d.name, d.boot)
	}
	r.addGroups()
}

func nodeName(i int) string { return fmt.Sprintf("n%d", i+1) }

// restartProcess restarts a running node's broker process, as systemd or
// an operator does. In a page-cache seed that is the process alone, whose
// page cache survives it (sim.Node.Kill); in the others, a machine crash
// (Node.Restart of a running node), harsher than a real restart, which
// the power-loss-safe mode must survive anyway.
func (r *clusterRun) restartProcess(n *sim.Node) {
	if r.opts.PageCache && n.Up() {
		n.Kill()
	}
	n.Restart()
}

// bootNode starts a node over its disk; a start that fails, or a node
// whose metadata log fails later, is restarted by a supervisor, as
// systemd restarts a Kafka process that exited.
func (r *clusterRun) bootNode(n *clusterNode, e env.Env) {
	n.diskErrs = diskErrors(n.node.Disk())
	b, err := node.New(e, n.cfg)
	if err != nil {
		panic(fmt.Sprintf("simrun: node config refused: %v", err))
	}
	inc := n.node.Incarnation()
	n.b, n.bootInc = b, inc
	supervise := func(probe string) {
		r.probes.add(probe)
		r.w.After(time.Second, "supervisor.restart", func() {
			if n.node.Incarnation() == inc && n.node.Up() {
				r.restartProcess(n.node)
			}
		})
	}
	b.OnFatal(func(error) { supervise("node.fatal") })
	b.Start(func(err error) {
		if err != nil {
			supervise("node.start_failed")
		}
	})
}

// observe samples every node's quorum state, and keeps doing so.
func (r *clusterRun) observe() {
	r.sampleAll()
	r.w.After(observeEvery, "observe", r.observe)
}

func (r *clusterRun) sampleAll() {
	now := int64(r.w.Now())
	for _, n := range r.nodes {
		b := n.broker()
		if b == nil {
			continue
		}
		v := b.MetadataView()
		if r.rec != nil && v.Leader == n.id && !r.cfg.MetaOnly {
			// The quorum leader's image: the partitions as the controller
			// has them.
			if im := b.MetadataImage(); im != nil {
				r.rec.partitionsAt(im.TopicByName(clusterTopic))
			}
		}
		inc := n.node.Incarnation()
		if v.Term != 0 && (!n.sampledRaft || n.seenInc != inc || v.Term != n.seenTerm || v.Leader != n.seenLeader) {
			r.raftSamples = append(r.raftSamples, jepsen.RaftSample{Node: n.id, Term: v.Term, Leader: v.Leader, Time: now})
			n.seenTerm, n.seenLeader, n.sampledRaft = v.Term, v.Leader, true
		}
		if v.Applied != 0 && (!n.sample || n.seenInc != inc || v.Applied != n.seenApplied) {
			r.appliedSamples = append(r.appliedSamples, jepsen.AppliedSample{
				Node: n.id, Incarnation: inc, Index: v.Applied, Hash: r.imageDigest(n, b), Time: now})
			n.seenApplied, n.sample = v.Applied, true
		}
		if n.seenInc != inc {
			n.seenSnapshots, n.seenRestores, n.seenRepl = 0, 0, node.ReplicationView{}
		}
		r.replicationProbes(n, b)
		if v.Snapshots > n.seenSnapshots {
			r.probes.add("meta.snapshot_taken")
		}
		if v.Restores > n.seenRestores {
			r.probes.add("meta.snapshot_restored")
		}
		n.seenSnapshots, n.seenRestores = v.Snapshots, v.Restores
		if v.Unconfirmed > 0 {
			r.probes.add("meta.controller_unconfirmed")
		}
		if v.LeaseWithheld > 0 {
			r.probes.add("meta.lease_withheld")
		}
		n.seenInc = inc
	}
}

// replicationProbes fires the probes of the replication paths a node's
// counts show it took since the last sample.
func (r *clusterRun) replicationProbes(n *clusterNode, b *node.Broker) {
	v := b.ReplicationView()
	seen := n.seenRepl
	for _, c := range []struct {
		now, then int
		probe     string
	}{
		{v.Truncations, seen.Truncations, "repl.truncation"},
		{v.ShrinksProposed, seen.ShrinksProposed, "repl.isr_shrink"},
		{v.ExpandsProposed, seen.ExpandsProposed, "repl.isr_expand"},
		{v.ISRRefused, seen.ISRRefused, "repl.isr_refused"},
		{v.ISRStale, seen.ISRStale, "repl.isr_stale_partition_epoch"},
		{v.FencedFetches, seen.FencedFetches, "repl.fenced_epoch"},
		{v.RetriesDeduped, seen.RetriesDeduped, "repl.retry_deduped"},
		{v.RetriesDedupedAcrossEpochs, seen.RetriesDedupedAcrossEpochs, "repl.retry_deduped_across_epochs"},
	} {
		if c.now > c.then {
			r.probes.add(c.probe)
		}
	}
	n.seenRepl = v
	if im := b.MetadataImage(); im == nil || !n.voter {
		return
	}
	if t := b.MetadataImage().TopicByName(clusterTopic); t != nil {
		for _, p := range t.Partitions {
			if p.Leader == jepsen.NoLeader && len(p.Replicas) > 1 && len(p.ISR) == 0 && len(p.ELR) == 0 {
				// No replica may be elected cleanly: unclean election is
				// off, and the partition waits for its last leader.
				r.probes.add("repl.unclean_refused")
			}
		}
	}
}

// imageDigest is a digest of a node's image: a pure function of the
// applied prefix of the log, so nodes at one applied index must agree.
func (r *clusterRun) imageDigest(n *clusterNode, b *node.Broker) uint64 {
	h := fnv.New64a()
	h.Write(b.MetadataImage().EncodeSnapshot())
	d := h.Sum64()
	if r.cfg.Sabotage == SabotageImageDigest && n.id == 2 && n.seenApplied > 10 && !r.nemesis.sabotaged {
		// As if node 2 had skipped applying a record.
		r.nemesis.sabotaged = true
		d ^= 1
	}
	return d
}

// liveness heals every fault and requires the cluster to converge: every
// pending metadata operation completes, each client's liveness create
// succeeds, every node runs and has applied the same prefix.
func (r *clusterRun) liveness() {
	w := r.w
	r.stopping = true
	r.logf("safety phase over: healing")
	r.heal()
	for _, c := range r.clients {
		c.startLiveness()
	}
	for _, d := range r.data {
		d.startLiveness()
	}
	if r.groups != nil {
		r.groups.startLiveness()
	}
	if r.reconfig != nil {
		r.reconfig.startLiveness()
	}
	if !w.RunUntil(func() bool { return r.clientsDone() && r.cfg.workloadsIdle() }, livenessLimit) {
		r.fail("liveness: operations still pending %s after healing: %s", livenessLimit, r.describeBusy())
		return
	}
	if r.groups != nil {
		// Before convergence: the final images are taken once the
		// nodes agree, and the world must not run on between.
		r.groups.settle()
	}
	if !w.RunUntil(r.converged, livenessLimit) {
		r.fail("liveness: the nodes did not converge in %s after healing: %s", livenessLimit, r.describeBusy())
		return
	}
	r.sampleAll()
	r.checkQuorumConfigs()
	if r.groups != nil {
		r.noteOffsetsTopic()
	}
	for _, n := range r.nodes {
		f := jepsen.SummarizeImage(n.id, n.broker().MetadataImage())
		r.finals = append(r.finals, f)
		r.mh.FinalImage(finalClient, f)
	}
	if !r.cfg.MetaOnly {
		r.finalReads()
		// The followers' reads compareReplicas started.
		r.w.RunUntil(func() bool { return r.comparing == 0 }, time.Minute)
	}
}

// finalClient is the client id of the final describes.
const finalClient = 1000

func (r *clusterRun) heal() {
	w := r.w
	r.nemesis.heal()
	w.Net().HealAll()
	for _, n := range r.nodes {
		mustSet(n.node.Disk().SetFaults(simfs.Faults{}))
	}
	for _, n := range w.Nodes() {
		n.Resume()
		if !n.Up() {
			n.Restart()
		}
	}
	for _, n := range r.nodes {
		if diskErrors(n.node.Disk()) > n.diskErrs {
			r.probes.add("node.operator_restart")
			r.restartProcess(n.node)
		}
	}
}

func (r *clusterRun) clientsDone() bool {
	for _, c := range r.clients {
		if !c.done() {
			return false
		}
	}
	for _, d := range r.data {
		if !d.done() {
			return false
		}
	}
	return r.reconfig == nil || r.reconfig.done()
}

// converged says every node runs, knows the same leader, and has applied
// the same index.
func (r *clusterRun) converged() bool {
	var applied uint64
	var leader int32
	for i, n := range r.nodes {
		if !n.running() {
			return false
		}
		v := n.broker().MetadataView()
		if i == 0 {
			applied, leader = v.Applied, v.Leader
		}
		if v.Applied != applied || v.Leader != leader || leader == jepsen.NoLeader {
			return false
		}
	}
	return true
}

func (r *clusterRun) describeBusy() string {
	var parts []string
	for _, c := range r.clients {
		if !c.done() {
			parts = append(parts, c.name+" busy")
		}
	}
	for _, d := range r.data {
		if !d.done() {
			parts = append(parts, fmt.Sprintf("%s busy (in flight %v, partitions to produce to %v)", d.name, d.flying, d.pending))
		}
	}
	if r.reconfig != nil && !r.reconfig.done() {
		parts = append(parts, fmt.Sprintf("reconfigurer busy (original voters %v)", r.reconfig.voters))
	}
	for _, n := range r.nodes {
		s := fmt.Sprintf("%s up=%v", n.name, n.node.Up())
		if b := n.broker(); b != nil {
			v := b.MetadataView()
			s += fmt.Sprintf(" running=%v leader=%d term=%d applied=%d", v.Running, v.Leader, v.Term, v.Applied)
			s += describeImage(b.MetadataImage(), r.data)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// describeImage is what a node's image says of the brokers and of the data
// topic's partitions that a busy producer still waits on, for a liveness
// failure's message.
func describeImage(im *raftmeta.Image, data []*dataClient) string {
	var s strings.Builder
	for _, id := range im.BrokerIDs() {
		br := im.Brokers[id]
		fmt.Fprintf(&s, " broker %d fenced=%v shutting=%v", id, br.Fenced, br.InControlledShutdown)
	}
	waited := map[int32]bool{}
	for _, d := range data {
		if !d.done() {
			for _, p := range d.pending {
				waited[p] = true
			}
		}
	}
	if t := im.TopicByName(clusterTopic); t != nil {
		for _, p := range t.Partitions {
			if waited[p.Index] {
				fmt.Fprintf(&s, " %s-%d leader=%d replicas=%v isr=%v", t.Name, p.Index, p.Leader, p.Replicas, p.ISR)
			}
		}
	}
	return s.String()
}

func (r *clusterRun) logf(format string, args ...any) {
	if r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, "vt=%s simrun: %s\n", r.w.Now(), fmt.Sprintf(format, args...))
	}
}

// judgeDurable reports a durability check of an answer from node n: a
// violation, or a failure of the oracle itself.
func (r *clusterRun) judgeDurable(n *clusterNode, why string, err error) {
	switch {
	case err != nil:
		r.fail("oracle: %s: %v", n.name, err)
	case why != "":
		r.fail("violation: durability: %s (on %s's disk)", why, n.name)
	}
}

func (r *clusterRun) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !slices.Contains(r.failures, msg) {
		r.failures = append(r.failures, msg)
	}
}

func (r *clusterRun) summarize() Summary {
	w := r.w
	// A history cut short (Config.Until) is not checked.
	checked := !r.until.reached()
	var meta jepsen.MetaResult
	if checked {
		meta = r.checkMeta()
	}
	for _, n := range r.nodes {
		st := n.node.Disk().Stats()
		r.probes.addN("disk.eio", st.InjectedIO)
		r.probes.addN("disk.sync_failed", st.SyncsFailed)
	}
	if r.groups != nil {
		r.groups.judge()
	}
	var check jepsen.Result
	if checked {
		check = jepsen.Check(r.h, r.cfg.checkConfig(len(r.failures) > 0 || meta.Verdict == jepsen.Invalid))
	}
	ops := 0
	for _, e := range r.mh.Events() {
		if e.Kind == jepsen.KindInvoke {
			ops++
		}
	}
	for _, e := range r.h.Events() {
		if e.Kind == jepsen.KindInvoke {
			ops++
		}
	}
	s := Summary{
		Seed: r.cfg.Seed, Duration: r.cfg.Duration, Nodes: r.cfg.Nodes, Cluster: r.opts,
		Time: w.Now(), Events: w.Events(), Ops: ops,
		Check: check, Meta: meta, Failures: r.failures, Probes: r.probes.sorted(),
		History: r.h.Events(), MetaHistory: r.mh.Events(),
	}
	if r.groups != nil {
		s.GroupHistory = r.groups.h.Events()
	}
	if r.nemesis != nil {
		s.FaultDraws = r.nemesis.draws
	}
	r.cfg.check(&s)
	w.Scheduler().Fold("check.verdict", hashString(s.Result()+string(meta.Verdict)+string(check.Verdict)))
	w.Scheduler().Fold("check.ops", uint64(ops))
	s.Trace = w.Trace()
	names := map[int32]string{}
	for _, n := range r.nodes {
		names[n.id] = n.name
	}
	s.Timeline = r.rec.finish(s, w, r.raftSamples, names)
	return r.until.summarize(s)
}

// checkMeta judges the metadata history and the quorum's samples.
func (r *clusterRun) checkMeta() jepsen.MetaResult {
	meta := jepsen.CheckMeta(r.mh, jepsen.MetaConfig{Config: r.cfg.checkConfig(len(r.failures) > 0)})
	quorum := append(jepsen.CheckLeaders(r.raftSamples), jepsen.CheckAppliedLogs(r.appliedSamples)...)
	if len(r.finals) > 0 {
		vs, err := jepsen.CheckConverged(r.mh.Events(), r.finals)
		if err != nil {
			r.fail("converged: %v", err)
		}
		quorum = append(quorum, vs...)
	}
	r.probes.addN("observe.raft_samples", len(r.raftSamples))
	r.probes.addN("observe.applied_samples", len(r.appliedSamples))
	if len(quorum) > 0 {
		meta.Violations = append(meta.Violations, quorum...)
		meta.Verdict = jepsen.Invalid
	}
	return meta
}

// dumpState writes every node's state.
func (r *clusterRun) dumpState() (string, []string) {
	var b strings.Builder
	fmt.Fprintf(&b, "state at %s:\n", r.w.Now())
	for _, n := range r.nodes {
		dumpNode(&b, n.node, n.broker(), n.voter)
	}
	return b.String(), slices.Clone(r.failures)
}
