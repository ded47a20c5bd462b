package simrun

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/jepsen"
	"github.com/sluicemq/sluice/node"
	"github.com/sluicemq/sluice/sim"
	"github.com/sluicemq/sluice/sim/sched"
	"github.com/sluicemq/sluice/sim/simfs"
)

const (
	brokerName = "broker"
	brokerAddr = "broker:9092"
	readerName = "reader"
	topicName  = "jepsen"

	// DefaultDuration is the safety phase of a run that names none.
	DefaultDuration = 20 * time.Second
	// livenessLimit bounds each step of the liveness phase in virtual
	// time: pending operations completing, the produces that must
	// succeed, the final reads.
	livenessLimit = 2 * time.Minute
	// DefaultCheckTimeout is porcupine's budget per partition: far beyond
	// what a run's history needs, so that it never decides a verdict.
	DefaultCheckTimeout = 10 * time.Minute
)

// Sabotage makes the clients lie, for tests that the check catches a
// broken broker; runs leave it at SabotageNone.
type Sabotage int

const (
	SabotageNone Sabotage = iota
	// SabotageShiftOffset reports one acknowledged produce one offset
	// further than the broker said.
	SabotageShiftOffset
	// SabotageDropFromFinal drops the last record of every final read, as
	// if the broker had lost the latest acknowledged write.
	SabotageDropFromFinal
	// SabotageReorderPipeline makes a pipelined producer, once, send a new
	// batch ahead of an older one it has not sent yet, so that the log
	// holds them in another order than the history says they were sent,
	// as if the broker had appended pipelined batches out of order.
	SabotageReorderPipeline
	// SabotageLookupNext reports one ListOffsets by timestamp that found
	// a record one offset further than the broker said, as if the broker
	// had skipped the first match.
	SabotageLookupNext
	// SabotageDeleteShort makes one DeleteRecords ask the broker to delete
	// one record fewer than the history says, and report the low
	// watermark as if all had gone, as if the broker had acknowledged a
	// deletion it then lost: the log start comes back below it.
	SabotageDeleteShort
	// SabotageImageDigest (cluster runs) reports node 2's image digest
	// wrong at one applied index, as if it had skipped applying a record.
	SabotageImageDigest
	// SabotageDescribeAbsent (cluster runs) records one describe that
	// found its topic as having found it absent, as if the node had
	// answered from an image that lost the topic.
	SabotageDescribeAbsent
	// SabotageGroupEarlyAck (cluster runs with groups) makes every node's
	// group coordinator answer before the high watermark passes what it
	// wrote (node.Config.SabotageCoordinatorEarlyAck): acknowledged
	// commits a failover or a power loss then loses.
	SabotageGroupEarlyAck
	// SabotageGroupFetchAhead (cluster runs with groups) makes every
	// node's OffsetFetch answer one past each committed offset
	// (node.Config.SabotageCoordinatorFetchAhead): a member that takes a
	// partition over skips a record.
	SabotageGroupFetchAhead
	// SabotagePipelineSkipsValue makes a pipelined producer (in-flight
	// above 1), once, skip a value's number: its history is consistent
	// and every single run passes, but its acknowledgements differ from
	// the same seed's with one produce in flight (Compare).
	SabotagePipelineSkipsValue
	// SabotageIdempotentFreshRetry (cluster runs with idempotent
	// producers) makes one retry of a batch whose first attempts' outcome
	// is unknown go out as a fresh batch, under a bumped epoch from
	// sequence 0: where the earlier attempt landed, its values land twice.
	SabotageIdempotentFreshRetry
)

// Config says what to run.
type Config struct {
	Seed uint64
	// Nodes is the number of nodes: 0 or 1 runs one broker with the data
	// workload; 3 or more a KRaft cluster of combined nodes with the
	// metadata workload (cluster.go).
	Nodes int
	// BrokerOnly (cluster runs) makes the last BrokerOnly of the nodes
	// broker-only (process.roles=broker): they follow the metadata log as
	// raft learners, and the others are the voters.
	BrokerOnly int
	// MetaOnly (cluster runs) leaves the data workload out: the metadata
	// clients alone.
	MetaOnly bool
	// Swarm lets the seed choose the shape too (ChooseShape): Nodes,
	// BrokerOnly and MetaOnly are then ignored.
	Swarm bool
	// Set overrides the seed's choices, key=value each, applied in order
	// after them (see Choose and SettingKeys): how a failing run is
	// narrowed down, by hand or by Minimize.
	Set []string
	// SkipFaults are fault draws that inject nothing: the draws are the
	// faults the nemesis's schedule draws and the strikes of its armed
	// moments, counted from 0 in the order they come. How Minimize takes
	// single faults out of a failing schedule; Summary.FaultDraws counts
	// the draws.
	SkipFaults []int
	// noFaults (cluster runs) injects nothing, for tests.
	noFaults bool
	// Duration is the safety phase, in virtual time; zero means
	// DefaultDuration. The liveness phase follows it.
	Duration time.Duration
	// Options overrides what the seed would choose (nil: ChooseOptions).
	Options *Options
	// CheckTimeout is porcupine's budget per partition; zero means
	// DefaultCheckTimeout.
	CheckTimeout time.Duration
	// Log, if set, receives every node's logs at LogLevel and above.
	Log      io.Writer
	LogLevel slog.Level
	// Until, if positive, stops the run just before its first event past
	// this virtual time and dumps every node's state (Summary.State):
	// image, replicas with high watermark, log end, epoch and ISR,
	// groups. The history is then left unchecked.
	Until time.Duration
	// Workloads are the user's own clients, run beside the run's (see
	// Workload); Checkers the user's own checks of the finished run.
	Workloads []Workload
	Checkers  []Checker
	// Timeline has the run draw its timeline (Summary.Timeline): what
	// --out writes as timeline.html.
	Timeline bool
	// Trace, if set, receives every entry of the trace the hash covers,
	// one line each (sched.TraceEntry.String), as the run folds it.
	Trace    io.Writer
	Sabotage Sabotage
	// NoOracle turns the durability oracle off (durable.go), for tests
	// that show what the other checks catch without it.
	NoOracle bool
	// DiskSabotage makes the broker's disk break its contract (see
	// simfs.Sabotage), as a broker relying on what the contract forbids
	// would: for tests that the simulation catches it.
	DiskSabotage simfs.Sabotage
}

// checkConfig is how the run's histories are checked. Once the run has
// failed (a liveness failure, a violation the clients saw), the verdict is
// decided and porcupine gets the short budget of a history already found
// invalid: a run that never healed has no final reads to bound what its
// unanswered produces may have written, and porcupine's search of such a
// history grows without bound in memory (swarm seed 2523 of an older
// build: 14 GB in a minute of its ten).
func (cfg Config) checkConfig(failed bool) jepsen.Config {
	c := jepsen.Config{Timeout: cfg.CheckTimeout}
	if failed {
		c.Timeout = min(c.Timeout, jepsen.DefaultTimeoutOnceInvalid)
	}
	return c
}

// newWorld makes the run's world, printing its trace to cfg.Trace if set,
// showing it to rec, the timeline's recorder, if there is one, and
// stopping it at until's time, if there is one.
func newWorld(cfg Config, rec *recorder, until *untilStop) *sim.World {
	if cfg.Trace == nil && rec == nil && until == nil {
		return sim.New(cfg.Seed)
	}
	out := cfg.Trace
	w := sim.NewTraced(cfg.Seed, func(e sched.TraceEntry) {
		until.check(e.At)
		if out != nil {
			fmt.Fprintln(out, e.String())
		}
		if rec != nil {
			rec.observe(e)
		}
	})
	if rec != nil {
		rec.now = w.Now
	}
	return w
}

// Summary is what a run did and what the check found.
type Summary struct {
	Seed     uint64
	Duration time.Duration // the safety phase asked for
	Options  Options
	// Time is the virtual time the run took, both phases; Events the
	// events delivered; Ops the operations invoked.
	Time   time.Duration
	Events uint64
	Ops    int
	// Trace is the world's trace hash with the check's verdict folded in:
	// the same seed and code always give the same trace.
	Trace string
	// Check is the history's judgement; Failures what the run itself saw
	// go wrong (a produce that failed after healing, a final read that
	// never completed, a panic).
	Check    jepsen.Result
	Failures []string
	// FaultDraws is how many faults the nemesis drew (Config.SkipFaults
	// names some of them to skip).
	FaultDraws int
	// Probes counts faults injected ("fault.crash") and rare paths taken
	// ("produce.retry", "disk.eio", ...).
	Probes  []Count
	History []jepsen.Event
	// Nodes is the run's node count (0 for one broker); a cluster run
	// fills Cluster, Meta (the metadata history's judgement, the quorum
	// checks' violations among it) and MetaHistory.
	Nodes   int
	Cluster ClusterOptions
	Meta    jepsen.MetaResult
	// GroupHistory is what a cluster run's group members saw, judged by
	// jepsen.CheckGroups into Failures (nil without a group workload).
	GroupHistory []jepsen.GroupEvent
	MetaHistory  []jepsen.MetaEvent
	// Timeline is the run drawn over time (with Config.Timeline, else nil).
	Timeline *jepsen.Timeline
	// Stopped is Config.Until for a run that stopped there (its history
	// is left unchecked), and State each node's state at that moment.
	Stopped time.Duration
	State   string
}

// OK reports whether the run passed: the history checks out and the
// cluster recovered.
func (s Summary) OK() bool {
	if s.Stopped > 0 {
		return len(s.Failures) == 0 // nothing was checked
	}
	return s.Check.OK() && len(s.Failures) == 0 && (s.Nodes <= 1 || s.Meta.OK())
}

// Result is "ok" or "violation", or "stopped" for a run stopped at
// Config.Until that failed nothing on the way.
func (s Summary) Result() string {
	switch {
	case !s.OK():
		return "violation"
	case s.Stopped > 0:
		return "stopped"
	}
	return "ok"
}

// Line is the one-line summary: seed, virtual time, events, operations,
// result, trace, then the options the seed chose and the faults injected.
func (s Summary) Line() string {
	var faults []Count
	for _, c := range s.Probes {
		if name, ok := strings.CutPrefix(c.Name, "fault."); ok {
			faults = append(faults, Count{Name: name, Count: c.Count})
		}
	}
	opts := s.Options.String()
	if s.Nodes > 1 {
		opts = s.Cluster.String()
	}
	return fmt.Sprintf("seed=%d time=%s events=%d ops=%d result=%s trace=%s %s injected=%s",
		s.Seed, s.Time.Truncate(time.Millisecond), s.Events, s.Ops, s.Result(), s.Trace, opts, formatCounts(faults))
}

// Details explains a failed run: the run's own failures, then the check's
// report.
func (s Summary) Details() string {
	var b strings.Builder
	for _, f := range s.Failures {
		fmt.Fprintf(&b, "failure: %s\n", f)
	}
	if s.Nodes > 1 {
		b.WriteString("metadata: " + s.Meta.String() + "\ndata: ")
	}
	b.WriteString(s.Check.String())
	return b.String()
}

// run is one seeded run in progress.
type run struct {
	cfg   Config
	opts  Options
	w     *sim.World
	h     *jepsen.History
	topic string
	// sabotaged is set once a sabotage that lies once has lied.
	sabotaged bool

	broker    brokerHost
	producers []*producer
	consumers []*consumer
	reader    *finalReader
	nemesis   *nemesis
	// rec draws the timeline (nil unless Config.Timeline); until stops
	// the run at Config.Until (nil without).
	rec   *recorder
	until *untilStop
	// clientNames are the client nodes, the targets of network faults.
	clientNames []string

	// stopping is set when the safety phase ends: clients start nothing
	// new except the liveness phase's produces.
	stopping bool
	probes   probes
	failures []string
	// clusterID is the first cluster id a client was told.
	clusterID string
	// oracle knows what is durable on the broker's disk (durable.go).
	oracle *oracle
	// timestamps are the latest batch timestamps producers stamped, for
	// consumers to look up by time.
	timestamps []int64
}

// brokerHost is the broker's node and what is known of its process.
type brokerHost struct {
	node    *sim.Node
	cfg     node.Config
	b       *node.Broker // of the current incarnation
	running bool         // Start succeeded in the current incarnation
	// diskErrs is the disk's injected-error count when the current
	// incarnation booted: more now means the broker saw a disk fail.
	diskErrs int
}

// Run runs one seed: the safety phase with faults, the liveness phase
// without, the final reads, and the check.
func Run(cfg Config) Summary {
	c, err := Choose(cfg)
	cfg.Nodes, cfg.BrokerOnly, cfg.MetaOnly = c.Shape.Nodes, c.Shape.BrokerOnly, c.Shape.MetaOnly
	if cfg.Nodes > 1 {
		return runCluster(cfg, c.Cluster, err)
	}
	if cfg.Duration <= 0 {
		cfg.Duration = DefaultDuration
	}
	if cfg.CheckTimeout <= 0 {
		cfg.CheckTimeout = DefaultCheckTimeout
	}
	opts := c.Options
	rec, until := newRecorder(cfg), newUntil(cfg)
	r := &run{cfg: cfg, opts: opts, w: newWorld(cfg, rec, until), h: jepsen.NewHistory(), topic: topicName, rec: rec, until: until}
	if until != nil {
		until.dump = r.dumpState
	}
	r.h.SetClock(r.w.Now)
	if err == nil {
		err = opts.validate()
	}
	if err != nil {
		r.fail("%v", err)
		return r.summarize()
	}
	if cfg.Log != nil {
		r.w.SetLog(cfg.Log, cfg.LogLevel)
	}
	r.w.Net().SetSendFile(!opts.CopyFetch)
	r.execute()
	return r.summarize()
}

// execute runs both phases; a panic anywhere in the simulated world (the
// broker's code, most likely) ends the run as a failure.
func (r *run) execute() {
	defer func() {
		if p := recover(); p != nil && !stopped(p) {
			r.fail("panic at %s: %v", r.w.Now(), p)
		}
	}()
	r.setup()
	r.cfg.startWorkloads(WorkloadContext{World: r.w, Brokers: []string{brokerAddr}, Topic: r.topic, Partitions: r.opts.Partitions,
		History: r.h, Stopping: func() bool { return r.stopping }})
	r.nemesis.start()
	r.w.Run(r.cfg.Duration)
	r.liveness()
}

func (r *run) setup() {
	w := r.w
	w.Net().SetTimeouts(5*time.Second, 5*time.Second)
	r.nemesis = &nemesis{r: r, rand: w.Rand("nemesis"), follow: w.Rand("nemesis.follow")}
	cfg := node.DefaultConfig()
	cfg.Listeners = []node.Listener{{Name: "PLAINTEXT", Host: brokerName, Port: 9092}}
	cfg.NumPartitions = int32(r.opts.Partitions)
	cfg.LogSegmentBytes = r.opts.SegmentBytes
	if r.opts.SendSmallChunks {
		cfg.FetchCopyMax = 0
	}
	if o := r.opts; o.IndexIntervalBytes > 0 {
		cfg.LogIndexIntervalBytes = o.IndexIntervalBytes
	}
	if o := r.opts; o.IndexBytes > 0 {
		cfg.LogIndexSizeMaxBytes = o.IndexBytes
	}
	if o := r.opts; o.CheckpointInterval > 0 {
		cfg.LogFlushOffsetCheckpointInterval = o.CheckpointInterval
	}
	cfg.LogRetentionMs = node.Unlimited // the checker models no truncation from the front
	cfg.LogRetentionBytes = node.Unlimited
	r.broker.cfg = cfg
	r.broker.node = w.AddNode(brokerName, r.bootBroker)
	r.oracle = newOracle(r.broker.node.Disk())
	r.broker.node.Disk().SetObserver(r.nemesis.observe)
	r.broker.node.Disk().SetSabotage(r.cfg.DiskSabotage)
	for i := range r.opts.Producers {
		p := &producer{w: r.newWorker(1+i, fmt.Sprintf("p%d", 1+i))}
		r.producers = append(r.producers, p)
		w.AddNode(p.w.name, p.boot)
	}
	for i := range r.opts.Consumers {
		c := &consumer{w: r.newWorker(101+i, fmt.Sprintf("c%d", 1+i)), pos: make([]int64, r.opts.Partitions), read: make([]int64, r.opts.Partitions)}
		r.consumers = append(r.consumers, c)
		w.AddNode(c.w.name, c.boot)
	}
	r.reader = &finalReader{w: r.newWorker(200, readerName)}
	w.AddNode(readerName, nil)
}

func (r *run) newWorker(id int, name string) *worker {
	r.clientNames = append(r.clientNames, name)
	return &worker{r: r, id: id, name: name, rand: r.w.Rand("client/" + name)}
}

// bootBroker is the broker node's boot: it starts a broker over the disk;
// a start that fails (a disk error during recovery) is retried by a
// supervisor restarting the process.
func (r *run) bootBroker(e env.Env) {
	bh := &r.broker
	bh.running = false
	bh.diskErrs = diskErrors(bh.node.Disk())
	b, err := node.New(e, bh.cfg)
	if err != nil {
		panic(fmt.Sprintf("simrun: broker config refused: %v", err))
	}
	bh.b = b
	inc := bh.node.Incarnation()
	b.Start(func(err error) {
		if err == nil {
			bh.running = true
			return
		}
		r.probes.add("broker.start_failed")
		r.w.After(500*time.Millisecond, "supervisor.restart", func() {
			if bh.node.Incarnation() == inc && bh.node.Up() {
				bh.node.Restart()
			}
		})
	})
}

func diskErrors(d *simfs.Disk) int {
	st := d.Stats()
	return st.InjectedIO + st.InjectedNoSpace + st.InjectedOther + st.SyncsFailed
}

func (r *run) restartIfDown(n *sim.Node) {
	if !n.Up() {
		n.Restart()
	}
}

// clientsCrashed tells the clients their nodes died (a power loss).
func (r *run) clientsCrashed() {
	for _, p := range r.producers {
		p.crashed()
	}
	for _, c := range r.consumers {
		c.crashed()
	}
}

// liveness ends the faults and requires the cluster to converge: every
// pending operation completes, a produce to each partition from each
// producer succeeds, and each partition can be read whole.
func (r *run) liveness() {
	w := r.w
	r.stopping = true
	r.logf("safety phase over: healing")
	r.heal()
	if !w.RunUntil(r.idle, livenessLimit) {
		r.fail("liveness: operations still pending %s after healing: %s", livenessLimit, r.describeBusy())
		return
	}
	for _, p := range r.producers {
		p.probes = true
		node := w.Node(p.w.name)
		node.Post(func() {
			if p.sess != nil {
				p.sess.kick()
			}
		})
	}
	if !w.RunUntil(func() bool { return r.idle() && r.probesDone() }, livenessLimit) {
		r.fail("liveness: produces after healing did not complete in %s: %s", livenessLimit, r.describeBusy())
		return
	}
	reader := w.Node(readerName)
	reader.Post(func() { r.reader.start(reader.Env()) })
	if !w.RunUntil(func() bool { return r.reader.done }, livenessLimit) {
		r.fail("liveness: the final read of %s-%d did not complete in %s", r.topic, r.reader.next, livenessLimit)
	}
}

// heal undoes every fault: links healed, disks well, nodes resumed and
// restarted, and a broker that saw its disk fail restarted, as an operator
// would restart a Kafka broker whose log directory went offline.
func (r *run) heal() {
	w := r.w
	r.nemesis.heal()
	w.Net().HealAll()
	bh := &r.broker
	mustSet(bh.node.Disk().SetFaults(simfs.Faults{}))
	for _, n := range w.Nodes() {
		n.Resume()
		r.restartIfDown(n)
	}
	if diskErrors(bh.node.Disk()) > bh.diskErrs {
		r.probes.add("broker.operator_restart")
		bh.node.Restart()
	}
}

func (r *run) idle() bool {
	if !r.cfg.workloadsIdle() {
		return false
	}
	for _, p := range r.producers {
		if p.busy() {
			return false
		}
	}
	for _, c := range r.consumers {
		if c.busy() {
			return false
		}
	}
	return true
}

func (r *run) probesDone() bool {
	for _, p := range r.producers {
		if p.probes {
			return false
		}
	}
	return true
}

func (r *run) describeBusy() string {
	var busy []string
	for _, p := range r.producers {
		if p.busy() || p.probes {
			busy = append(busy, fmt.Sprintf("%s (produce in progress: %v, liveness round to make: %v)", p.w.name, p.busy(), p.probes))
		}
	}
	for _, c := range r.consumers {
		if c.busy() {
			busy = append(busy, c.w.name+" (fetch or DeleteRecords in progress)")
		}
	}
	return fmt.Sprintf("%s; broker up=%v running=%v", strings.Join(busy, ", "), r.broker.node.Up(), r.broker.running)
}

// seeClusterID checks that the cluster id a client was told is the one
// every client was told before: Kafka's cluster id never changes.
func (r *run) seeClusterID(id string) {
	switch {
	case r.clusterID == "":
		r.clusterID = id
	case id != r.clusterID:
		r.violate("the cluster id changed from %q to %q: the broker forgot its metadata", r.clusterID, id)
	}
}

// opEnded hears how every produce ended; a liveness produce must succeed.
func (r *run) opEnded(mustSucceed bool, kind jepsen.Kind, tp jepsen.TopicPartition, err error) {
	if mustSucceed && kind != jepsen.KindOk {
		r.fail("liveness: a produce to %s after healing ended %s: %v", tp, kind, err)
	}
}

// recordFetch records how a consumer's fetch ended; a fetch that served
// records is first held against the disk.
func (r *run) recordFetch(id jepsen.OpID, tp jepsen.TopicPartition, fp fetchedPartition, err error) {
	switch {
	case err == nil:
		r.checkServedDurable(tp, fp)
		r.h.FetchOkWatermarks(id, fp.records, fp.marks)
	case errors.Is(err, errCorruptBatch):
		r.probes.add("consumer.corrupt_batch")
		r.corruptServed(tp, err)
		r.h.Info(id, err)
	default:
		r.h.Complete(id, err)
	}
}

// corruptServed hears of a batch a client refused. A bit flipped on the
// broker's disk explains it (the client's CRC check is what protects it
// then); with none flipped in the run, the broker served bytes it should
// never have: a torn tail that recovery kept, a batch read from the wrong
// place.
func (r *run) corruptServed(tp jepsen.TopicPartition, err error) {
	st := r.broker.node.Disk().Stats()
	if st.ReadFlips == 0 && st.MediumFlips == 0 {
		r.violate("the broker served %s a corrupt batch, and no bit of its disk was flipped: %v", tp, err)
	}
}

// noteTimestamp remembers a batch timestamp a producer stamped.
func (r *run) noteTimestamp(ts int64) {
	const kept = 64
	if len(r.timestamps) == kept {
		r.timestamps = r.timestamps[1:]
	}
	r.timestamps = append(r.timestamps, ts)
}

// lookupTarget draws a timestamp to look up: one a producer stamped, or
// just before or after it, so that lookups land on batches, between them
// and past the end; with none stamped yet, the epoch. Half the lookups aim
// at the newest batch, which may not be below the high watermark yet: a
// broker that answers from beyond it is caught only there.
func (r *run) lookupTarget(rand interface{ Intn(int) int }) int64 {
	if len(r.timestamps) == 0 {
		return 0
	}
	ts := r.timestamps[len(r.timestamps)-1]
	if rand.Intn(2) == 0 {
		ts = r.timestamps[rand.Intn(len(r.timestamps))]
	}
	return max(0, ts+int64(rand.Intn(5))-2)
}

// logf writes a line about the run itself (a fault, a phase) to the log,
// stamped with virtual time.
func (r *run) logf(format string, args ...any) {
	if r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, "vt=%s simrun: %s\n", r.w.Now(), fmt.Sprintf(format, args...))
	}
}

func (r *run) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !slices.Contains(r.failures, msg) {
		r.failures = append(r.failures, msg)
	}
}

// violate records a broken promise the clients saw directly.
func (r *run) violate(format string, args ...any) { r.fail("violation: "+format, args...) }

func (r *run) summarize() Summary {
	w := r.w
	if r.broker.node != nil {
		r.diskProbes()
	}
	r.netProbes()
	var check jepsen.Result
	if !r.until.reached() {
		check = jepsen.Check(r.h, r.cfg.checkConfig(len(r.failures) > 0))
	}
	ops := 0
	for _, e := range r.h.Events() {
		if e.Kind == jepsen.KindInvoke {
			ops++
		}
	}
	s := Summary{
		Seed: r.cfg.Seed, Duration: r.cfg.Duration, Options: r.opts,
		Time: w.Now(), Events: w.Events(), Ops: ops,
		Check: check, Failures: r.failures, Probes: r.probes.sorted(), History: r.h.Events(),
	}
	if r.nemesis != nil {
		s.FaultDraws = r.nemesis.draws
	}
	r.cfg.check(&s)
	w.Scheduler().Fold("check.verdict", hashString(s.Result()+string(check.Verdict)))
	w.Scheduler().Fold("check.ops", uint64(ops))
	s.Trace = w.Trace()
	s.Timeline = r.rec.finish(s, w, nil, nil)
	return r.until.summarize(s)
}

// dumpState writes the broker's state and each client's.
func (r *run) dumpState() (string, []string) {
	var b strings.Builder
	fmt.Fprintf(&b, "state at %s:\n", r.w.Now())
	dumpNode(&b, r.broker.node, r.broker.b, true)
	return b.String(), slices.Clone(r.failures)
}

// diskProbes adds what the broker's disk went through to the probes.
func (r *run) diskProbes() {
	st := r.broker.node.Disk().Stats()
	r.probes.addN("disk.eio", st.InjectedIO)
	r.probes.addN("disk.enospc", st.InjectedNoSpace)
	r.probes.addN("disk.short_write", st.ShortWrites)
	r.probes.addN("disk.sync_failed", st.SyncsFailed)
	r.probes.addN("disk.sync_lost", st.SyncsLost)
	r.probes.addN("disk.write_torn", st.WritesTorn)
	r.probes.addN("disk.read_flip", st.ReadFlips)
	r.probes.addN("disk.segment_deleted", r.oracle.segmentsGone)
}

// netProbes adds how the broker's responses went out: file ranges sent
// with SendFile (Fetch's zero-copy path), and those whose read failed.
func (r *run) netProbes() {
	st := r.w.Net().Stats()
	r.probes.addN("net.sendfile", st.SendFiles)
	r.probes.addN("net.sendfile_failed", st.SendFilesFailed)
}

func hashString(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}
