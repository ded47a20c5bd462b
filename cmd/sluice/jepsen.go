package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/sluicemq/sluice/jepsen"
	"github.com/sluicemq/sluice/jepsen/simrun"
)

// sluice jepsen: the simulator's checks against real processes. N sluice
// serve processes of this binary (each in a network namespace of its own
// as root, or on 127.0.0.1 behind a fault-injecting TCP proxy in the
// runner, jepsen_proxy.go), real franz-go producers and consumers through
// kill -9, SIGSTOP/SIGCONT, clean restarts, partitions, latency, loss
// (proxy only) and full disks of one node at a time, then every fault
// healed, every partition read whole, and the history judged by the same
// checker as a simulated run's (jepsen.Check), with the same summary line
// and --out files; real franz-go consumer groups beside them, judged by
// the simulator's group checker (jepsen_groups.go).

// dataTopic is the topic the producers and consumers use.
const dataTopic = "jepsen"

// realFaults are the faults the runner injects, in the order it names them.
var realFaults = []string{"kill", "stop", "restart", "partition", "latency", "loss", "diskfull"}

// proxyFaults are the faults only the proxy network makes.
var proxyFaults = []string{"latency", "loss"}

type jepsenOptions struct {
	seed       uint64
	nodes      int
	partitions int
	producers  int
	consumers  int
	// metaClients is how many metadata clients (jepsen_meta.go) run.
	metaClients int
	duration    time.Duration
	faultEvery  time.Duration
	faults      []string
	out         string
	keep        bool
	// network is "netns" (each node in a namespace of its own, partitions
	// possible), "proxy" (127.0.0.1 behind the runner's proxy: partitions,
	// latency, loss), "loopback" (127.0.0.1, no network faults) or "auto".
	network string
	// autoNetwork says --network was auto: namespaces that cannot be made
	// (root in a container without the right) fall back to the proxy.
	autoNetwork bool
	// defaultFaults says --faults was not given: a fallback to the proxy
	// takes the proxy's default mix.
	defaultFaults bool
	// sabotage makes the final read drop its last record, for a test
	// that the check sees a lost write; sabotageMeta drops the data topic
	// from the first node's final image, for a test that the metadata
	// check sees it.
	sabotage, sabotageMeta bool
	// groups is --groups, read into groupSpecs by validate.
	groups     string
	groupSpecs []groupSpec
	// sabotageGroupSkip makes the group members leave the first record
	// of every poll unprocessed, for a test that the group check sees a
	// skipped record.
	sabotageGroupSkip bool
}

func newJepsenCommand() *cobra.Command {
	var o jepsenOptions
	cmd := &cobra.Command{
		Use:   "jepsen [--seed N] [--nodes N] [--duration D] [--faults kill,stop,restart,partition,latency,loss,diskfull] [--network netns|proxy|loopback] [--groups classic:3,consumer:2] [--out DIR]",
		Short: "Run a real cluster of this binary through process, network and disk faults with real clients, and check what they saw",
		Long: `jepsen starts --nodes sluice serve processes of this binary (a KRaft cluster
of combined nodes, in a temporary directory): with --network netns (root)
each in a network namespace of its own; with --network proxy on 127.0.0.1,
every connection between nodes and from the clients relayed by a TCP
proxy in the runner that knows each connection's two ends; with --network
loopback on 127.0.0.1 without network faults. The default, auto, is netns
where it can be made unless latency or loss is asked for, else proxy.

It creates a topic with replication factor 3 (or the node count, if less)
and min.insync.replicas 2; franz-go producers write to it (idempotent,
acks=all) and consumers fetch from the leaders; metadata clients create,
delete, grow, reconfigure and describe topics of their own through random
nodes (the simulator's metadata workload); while a nemesis, seeded by
--seed, does one of these to one node at a time:
  kill       kill -9, then a restart
  stop       SIGSTOP, then SIGCONT
  restart    SIGTERM, then a restart
  partition  from a peer, all of them or the clients, one way or both
             (netns: a blackhole route; proxy: the bytes held until it heals)
  latency    proxy: 20-200 ms added to every chunk of the node's links to
             one end or all of them, order kept
  loss       proxy: a TCP proxy cannot drop packets, so loss is what an
             application sees of it: 5-25% of chunks held 200 ms-1 s, as a
             retransmission timeout would, everything behind them waiting
  diskfull   root: the node's data directory (a small tmpfs) filled
Consumer groups of the topic (--groups, default classic:3) run beside
them: franz-go group members, classic (a balancer of --groups' naming or
the seed's choosing) or KIP-848 (consumer), each committing what it
processed, restarted now and then.
Then every fault is healed, each partition is read whole, and the history
is checked as a simulated run's is: porcupine and Kafka's invariants (no
acknowledged record lost), the metadata history against the metadata
model, with every node's final image, and the groups' history, once
their members are stable, by the simulator's group checker. It prints one summary line and exits 1 on a
violation; --out writes the history, porcupine's pages, the timeline and
the nodes' logs. Everything it started (processes, namespaces, mounts, the
proxy's listeners) is gone when it ends, on failure or Ctrl-C too.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			if err := o.resolveNetwork(); err != nil {
				return err
			}
			if err := checkWritable(o.out); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runJepsen(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().Uint64Var(&o.seed, "seed", 1, "the seed of the fault schedule and the workload's choices")
	cmd.Flags().IntVar(&o.nodes, "nodes", 3, "combined nodes (3 to 5)")
	cmd.Flags().IntVar(&o.partitions, "partitions", 3, "partitions of the topic")
	cmd.Flags().IntVar(&o.producers, "producers", 3, "producer clients")
	cmd.Flags().IntVar(&o.consumers, "consumers", 2, "consumer clients, fetching from the partitions' leaders at the epoch they know")
	cmd.Flags().IntVar(&o.metaClients, "meta-clients", 2, "metadata clients: topic creates, deletes, partition adds, config changes and describes through random nodes, checked by the metadata model")
	cmd.Flags().DurationVar(&o.duration, "duration", time.Minute, "the safety phase, with faults; healing and the final reads follow")
	cmd.Flags().DurationVar(&o.faultEvery, "fault-every", 4*time.Second, "the mean time between two faults")
	cmd.Flags().StringSliceVar(&o.faults, "faults", nil, "the faults to mix: kill, stop, restart, partition (netns, proxy), latency and loss (proxy), diskfull (root); default all the network allows")
	cmd.Flags().StringVar(&o.network, "network", "auto", "netns: each node in a network namespace of its own (root; partitions); proxy: 127.0.0.1 through the runner's proxy (partitions, latency, loss); loopback: 127.0.0.1, no network faults; auto: netns where it can unless latency or loss is asked for, else proxy")
	cmd.Flags().StringVar(&o.out, "out", "", "write the history, porcupine's pages, the timeline, the summary and the nodes' logs to this directory")
	cmd.Flags().BoolVar(&o.keep, "keep", false, "keep the cluster's directory (its path is printed)")
	cmd.Flags().BoolVar(&o.sabotage, "sabotage-drop-final", false, "internal: drop the last record of every final read, to show the check catches it")
	_ = cmd.Flags().MarkHidden("sabotage-drop-final")
	cmd.Flags().BoolVar(&o.sabotageMeta, "sabotage-meta-final", false, "internal: leave the data topic out of the first node's final image, to show the metadata check catches it")
	_ = cmd.Flags().MarkHidden("sabotage-meta-final")
	cmd.Flags().StringVar(&o.groups, "groups", "classic:3", "consumer groups of the topic, protocol:members separated by commas (classic, or consumer for KIP-848; a classic one may add +cooperative-sticky, +range, +sticky or +roundrobin, else the seed chooses), or none")
	cmd.Flags().BoolVar(&o.sabotageGroupSkip, "sabotage-group-skip", false, "internal: the group members leave the first record of every poll unprocessed and commit past it, to show the group check catches it")
	_ = cmd.Flags().MarkHidden("sabotage-group-skip")
	return cmd
}

func (o *jepsenOptions) validate() error {
	var err error
	if o.groupSpecs, err = parseGroups(o.groups); err != nil {
		return err
	}
	switch {
	case o.nodes < 3 || o.nodes > 5:
		return fmt.Errorf("--nodes %d: want 3 to 5 (a fault takes one node out, the rest must be a majority)", o.nodes)
	case o.partitions < 1 || o.partitions > 64:
		return fmt.Errorf("--partitions %d: want 1 to 64", o.partitions)
	case o.producers < 1 || o.producers > 32:
		return fmt.Errorf("--producers %d: want 1 to 32", o.producers)
	case o.consumers < 0 || o.consumers > 32:
		return fmt.Errorf("--consumers %d: want 0 to 32", o.consumers)
	case o.metaClients < 0 || o.metaClients > 8:
		return fmt.Errorf("--meta-clients %d: want 0 to 8", o.metaClients)
	case o.duration <= 0 || o.duration > 24*time.Hour:
		return fmt.Errorf("--duration %s: want above zero and at most 24h", o.duration)
	case o.faultEvery < 100*time.Millisecond:
		return fmt.Errorf("--fault-every %s: want at least 100ms", o.faultEvery)
	}
	for _, f := range o.faults {
		if !slices.Contains(realFaults, f) {
			return fmt.Errorf("--faults: %q is not one of %s", f, strings.Join(realFaults, ", "))
		}
	}
	if !slices.Contains([]string{"auto", "netns", "proxy", "loopback"}, o.network) {
		return fmt.Errorf("--network %q: want netns, proxy, loopback or auto", o.network)
	}
	return nil
}

// resolveNetwork settles --network auto and the default faults, and
// refuses what the network cannot do.
func (o *jepsenOptions) resolveNetwork() error {
	if o.network == "auto" {
		o.network, o.autoNetwork = "proxy", true
		wantsProxy := slices.ContainsFunc(o.faults, func(f string) bool { return slices.Contains(proxyFaults, f) })
		if !wantsProxy && netnsAvailable() == nil {
			o.network = "netns"
		}
	}
	if o.network == "netns" {
		if err := netnsAvailable(); err != nil {
			return fmt.Errorf("--network netns: %w", err)
		}
	}
	if len(o.faults) == 0 {
		o.faults, o.defaultFaults = defaultRealFaults(o.network), true
	}
	if slices.Contains(o.faults, "diskfull") && os.Geteuid() != 0 {
		return errors.New("--faults diskfull: needs root, to mount each node's small data filesystem")
	}
	for _, f := range proxyFaults {
		if o.network != "proxy" && slices.Contains(o.faults, f) {
			return fmt.Errorf("--faults %s: needs --network proxy (namespaces partition by routes; nothing on this kernel delays or drops packets, tc netem included)", f)
		}
	}
	if o.network == "loopback" && slices.Contains(o.faults, "partition") {
		return errors.New("--faults partition: needs --network netns (root and the ip command) or --network proxy")
	}
	return nil
}

// defaultRealFaults is every fault the network and the user allow.
func defaultRealFaults(network string) []string {
	faults := []string{"kill", "stop", "restart"}
	switch network {
	case "netns":
		faults = append(faults, "partition")
	case "proxy":
		faults = append(faults, "partition", "latency", "loss")
	}
	if os.Geteuid() == 0 {
		faults = append(faults, "diskfull")
	}
	return faults
}

// realNode is one sluice serve process and where it lives.
type realNode struct {
	id   int32
	name string
	// addr and ctrlAddr are the addresses it advertises (the proxy's, in
	// proxy mode); listen is where its broker listener is.
	addr, ctrlAddr string
	listen         string
	dir, conf, log string
	nodeProcess
	paused bool
}

// nodeProcess is a node's current process, if it was started.
type nodeProcess struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

func (p *nodeProcess) running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// realRun is one jepsen run in progress.
type realRun struct {
	o     jepsenOptions
	exe   string
	root  string
	nodes []*realNode
	start time.Time
	rand  *rand.Rand
	// netns is the run's namespaces (--network netns), proxy its proxy
	// (--network proxy), both nil on loopback; mounts the nodes' small
	// data filesystems (diskfull).
	netns  *netnsNet
	proxy  *proxyNet
	mounts []string
	// stderr hears what goes wrong on the way that is not a verdict.
	stderr io.Writer

	mu       sync.Mutex // guards h, timeline, injected
	h        *jepsen.History
	timeline jepsen.Timeline
	injected map[string]int
}

func (r *realRun) since() time.Duration { return time.Since(r.start) }

func (r *realRun) locked(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
}

func runJepsen(ctx context.Context, o jepsenOptions, stdout, stderr io.Writer) error {
	exe, err := sweepExecutable()
	if err != nil {
		return fmt.Errorf("find this program to start the nodes from: %w", err)
	}
	root, err := os.MkdirTemp("", "sluice-jepsen-")
	if err != nil {
		return err
	}
	var netns *netnsNet
	if o.network == "netns" {
		if netns, err = newNetnsNet(o.nodes); err != nil && !o.autoNetwork {
			os.RemoveAll(root)
			return err
		}
		if err != nil {
			fmt.Fprintf(stderr, "no network namespaces (%v): on 127.0.0.1 through the proxy\n", err)
			o.network = "proxy"
			if o.defaultFaults {
				o.faults = defaultRealFaults(o.network)
			}
		}
	}
	var proxy *proxyNet
	if o.network == "proxy" {
		if proxy, err = newProxyNet(o.nodes, o.seed); err != nil {
			os.RemoveAll(root)
			return err
		}
	}
	r := &realRun{o: o, exe: exe, root: root, netns: netns, proxy: proxy, stderr: stderr, start: time.Now(),
		rand: rand.New(rand.NewPCG(o.seed, 0x9e3779b97f4a7c15)), h: jepsen.NewHistory(), injected: map[string]int{}}
	r.h.SetClock(r.since)
	defer func() {
		r.killAll()
		if r.proxy != nil {
			r.proxy.close()
			if n, addr := r.proxy.strangers(); n > 0 {
				fmt.Fprintf(stderr, "proxy: closed %d connections from no end of the run's (the first from %s)\n", n, addr)
			}
		}
		for _, dir := range r.mounts {
			unix.Unmount(dir, unix.MNT_DETACH)
		}
		if r.netns != nil {
			r.netns.close()
		}
		if !o.keep {
			os.RemoveAll(root)
		} else {
			fmt.Fprintf(stderr, "the cluster's directory: %s\n", root)
		}
	}()
	if err := r.startCluster(ctx); err != nil {
		return err
	}
	topic := dataTopic
	if err := r.createTopic(ctx, topic); err != nil {
		return err
	}
	meta := newRealMeta(r)
	if err := meta.noteExisting(ctx, topic); err != nil {
		return err
	}
	groups := newRealGroups(r, topic, chooseBalancers(o.seed, o.groupSpecs), o.sabotageGroupSkip)
	defer groups.stopAll()
	// The safety phase: producers and the nemesis, until the duration is
	// up or the run is interrupted; the group members run on until their
	// groups settle.
	safety, endSafety := context.WithTimeout(ctx, o.duration)
	defer endSafety()
	groups.start(safety)
	var wg sync.WaitGroup
	for i := range o.producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.produce(safety, topic, i+1)
		}()
	}
	for i := range o.consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.consume(safety, topic, 101+i)
		}()
	}
	for i := range o.metaClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			meta.client(safety, i)
		}()
	}
	r.nemesis(safety)
	wg.Wait()
	groups.wait()
	if ctx.Err() != nil {
		return fmt.Errorf("jepsen run interrupted after %s: everything it started is stopped", r.since().Truncate(time.Millisecond))
	}
	// The liveness phase: heal, let the cluster converge, read it all.
	r.heal()
	for i := range o.metaClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			meta.live(ctx, i)
		}()
	}
	wg.Wait()
	if err := r.finalReads(ctx, topic); err != nil {
		return fmt.Errorf("liveness: %w", err)
	}
	if err := meta.settle(ctx); err != nil {
		meta.fail("liveness: %v", err)
	}
	groups.settle(ctx)
	check := jepsen.Check(r.h, jepsen.Config{})
	metaCheck := meta.check()
	groupViolations := groups.check()
	ops := 0
	for _, e := range r.h.Events() {
		if e.Kind == jepsen.KindInvoke {
			ops++
		}
	}
	failed := !check.OK() || !metaCheck.OK() || len(meta.failures) > 0 || len(groupViolations) > 0
	result := "ok"
	if failed {
		result = "violation"
	}
	var injected []string
	for _, f := range realFaults {
		if r.injected[f] > 0 {
			injected = append(injected, fmt.Sprintf("%s:%d", f, r.injected[f]))
		}
	}
	line := fmt.Sprintf("seed=%d time=%s ops=%d meta_ops=%d result=%s nodes=%d network=%s partitions=%d producers=%d consumers=%d meta_clients=%d groups=%s faults=%s every=%s injected=%s",
		o.seed, r.since().Truncate(time.Millisecond), ops, meta.ops(), result, o.nodes, o.network, o.partitions, o.producers, o.consumers, o.metaClients,
		groupsString(groups.specs), strings.Join(o.faults, ","), o.faultEvery, orNone(strings.Join(injected, ",")))
	fmt.Fprintln(stdout, line)
	var notes []string
	if r.proxy != nil {
		notes = append(notes, r.proxy.statsNow().String())
		fmt.Fprintln(stderr, notes[0])
	}
	if len(groups.specs) > 0 {
		notes = append(notes, groups.summary())
		fmt.Fprintln(stderr, notes[len(notes)-1])
	}
	notes = append(notes, "metadata: "+metaCheck.String())
	notes = append(notes, meta.failures...)
	notes = append(notes, groupViolations...)
	if o.out != "" {
		if err := r.writeArtifacts(line, notes, check, meta, groups); err != nil {
			return err
		}
	}
	if failed {
		fmt.Fprintln(stderr, check.String())
		fmt.Fprintln(stderr, "metadata:", metaCheck.String())
		for _, f := range meta.failures {
			fmt.Fprintln(stderr, f)
		}
		for _, v := range groupViolations {
			fmt.Fprintln(stderr, v)
		}
		return fmt.Errorf("jepsen seed %d: %w", o.seed, errSimFailed)
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// startCluster writes each node's configuration and starts them all.
func (r *realRun) startCluster(ctx context.Context) error {
	var voters []string
	var listeners []string
	var targets [][2]string
	for i := range r.o.nodes {
		var addrs []string
		if r.netns != nil {
			host := r.netns.nodeHost(i)
			addrs = []string{host + ":9092", host + ":9093"}
		} else {
			var err error
			if addrs, err = freeLocalAddrs(2); err != nil {
				return err
			}
		}
		n := &realNode{id: int32(i + 1), name: fmt.Sprintf("n%d", i+1), addr: addrs[0], ctrlAddr: addrs[1], listen: addrs[0]}
		listeners = append(listeners, fmt.Sprintf("listeners=PLAINTEXT://%s,CONTROLLER://%s", addrs[0], addrs[1]))
		if r.proxy != nil {
			// Everyone is told of the proxy's addresses, never the node's.
			n.addr, n.ctrlAddr = r.proxy.addr(i, 0), r.proxy.addr(i, 1)
			targets = append(targets, [2]string{addrs[0], addrs[1]})
		}
		n.dir = filepath.Join(r.root, n.name)
		n.conf = filepath.Join(r.root, n.name+".properties")
		n.log = filepath.Join(r.root, n.name+".log")
		voters = append(voters, fmt.Sprintf("%d@%s", n.id, n.ctrlAddr))
		r.nodes = append(r.nodes, n)
	}
	if r.proxy != nil {
		r.proxy.start(targets)
	}
	for i, n := range r.nodes {
		lines := []string{
			"process.roles=broker,controller",
			fmt.Sprintf("node.id=%d", n.id),
			"controller.quorum.voters=" + strings.Join(voters, ","),
			listeners[i],
			"inter.broker.listener.name=PLAINTEXT",
			"controller.listener.names=CONTROLLER",
			"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
			"log.dirs=" + n.dir,
			"auto.create.topics.enable=false",
			"broker.session.timeout.ms=3000",
			"broker.heartbeat.interval.ms=500",
			"replica.lag.time.max.ms=4000",
			// The group workload: a coordinator shard per node or so, and
			// a classic group's first generation without the 3 s wait.
			"offsets.topic.num.partitions=3",
			"group.initial.rebalance.delay.ms=300",
		}
		if r.proxy != nil {
			lines = append(lines,
				fmt.Sprintf("advertised.listeners=PLAINTEXT://%s,CONTROLLER://%s", n.addr, n.ctrlAddr),
				"sluice.outbound.local.address="+nodeSourceAddr(i).String())
		}
		if err := os.WriteFile(n.conf, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			return err
		}
		if slices.Contains(r.o.faults, "diskfull") {
			if err := mountSmallDisk(n.dir); err != nil {
				return err
			}
			r.mounts = append(r.mounts, n.dir)
		}
		if err := r.startNode(n); err != nil {
			return err
		}
		r.timeline.Lane("nodes", n.name)
	}
	return r.waitAll(ctx, 60*time.Second)
}

// freeLocalAddrs returns n ports on 127.0.0.1 free a moment ago.
func freeLocalAddrs(n int) ([]string, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

func (r *realRun) startNode(n *realNode) error {
	logf, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := exec.Command(r.exe, "serve", "--config", n.conf)
	if r.netns != nil {
		// ip execs the node in its namespace: the pid is the node's.
		cmd = exec.Command("ip", "netns", "exec", r.netns.nodeNS(int(n.id-1)), r.exe, "serve", "--config", n.conf)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// A node outlives nothing of the runner's: killed with it, however it
	// ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", n.name, err)
	}
	n.cmd, n.done, n.paused = cmd, make(chan struct{}), false
	go func() {
		cmd.Wait()
		close(n.done)
	}()
	return nil
}

// waitAll waits until every node accepts connections.
func (r *realRun) waitAll(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for _, n := range r.nodes {
		for {
			dialCtx, cancel := context.WithTimeout(ctx, time.Second)
			c, err := r.dial(dialCtx, "tcp", n.listen) // the proxy would accept for a node that is down
			cancel()
			if err == nil {
				c.Close()
				break
			}
			if ctx.Err() != nil || time.Now().After(deadline) {
				return fmt.Errorf("%s did not listen on %s within %s (its log: %s)", n.name, n.listen, limit, n.log)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// dial connects from where the clients live: the hub namespace, or here
// (from the clients' own address, by which the proxy knows them).
func (r *realRun) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	switch {
	case r.netns != nil:
		return r.netns.dial(ctx, network, addr)
	case r.proxy != nil:
		return (&net.Dialer{LocalAddr: &net.TCPAddr{IP: clientsAddr.AsSlice()}}).DialContext(ctx, network, addr)
	}
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

// client is a franz-go client of the cluster, dialing as r.dial does.
func (r *realRun) client(opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(r.addrs()...), kgo.Dialer(r.dial)}, opts...)...)
}

func (r *realRun) addrs() []string {
	var out []string
	for _, n := range r.nodes {
		out = append(out, n.addr)
	}
	return out
}

func (r *realRun) createTopic(ctx context.Context, topic string) error {
	cl, err := r.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	rf := int16(min(3, r.o.nodes))
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := adm.CreateTopic(ctx, int32(r.o.partitions), rf, map[string]*string{"min.insync.replicas": ptr("2")}, topic)
		if err == nil && resp.Err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("create topic %s: %v %v", topic, err, resp.Err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// Every partition has a leader before the clients start.
	for time.Now().Before(deadline) {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			t := md.Topics[topic]
			ready := len(t.Partitions) == r.o.partitions
			for _, p := range t.Partitions {
				ready = ready && p.Leader >= 0 && p.Err == nil
			}
			if ready {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("topic %s has no leader for every partition after 60 s", topic)
}

func ptr[T any](v T) *T { return &v }

// produce is one producer: one record at a time, to a partition of its
// choosing, recording each in the history; an error after kgo's own
// retries is an unknown outcome.
func (r *realRun) produce(ctx context.Context, topic string, id int) {
	cl, err := r.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(0), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(15*time.Second))
	if err != nil {
		return
	}
	defer cl.Close()
	// A stream of its own: the nemesis's draws from r.rand stay the
	// seed's, whatever the producers do.
	pick := rand.New(rand.NewPCG(r.o.seed, uint64(id)))
	for n := 1; ctx.Err() == nil; n++ {
		p := int32(pick.IntN(r.o.partitions))
		value := fmt.Sprintf("p%d-%d", id, n)
		tp := jepsen.TopicPartition{Topic: topic, Partition: p}
		var op jepsen.OpID
		r.locked(func() { op = r.h.InvokeProduce(id, tp, true, value) })
		// The produce runs to its end even past the safety phase: its
		// outcome is part of the history.
		res := cl.ProduceSync(context.WithoutCancel(ctx), &kgo.Record{Topic: topic, Partition: p, Value: []byte(value)})
		rec, err := res.First()
		r.locked(func() {
			if err != nil {
				r.h.Info(op, err)
			} else {
				// A produce answer names no leader epoch, so the client
				// cannot bound the acknowledging leader's: as the simulator
				// records a leader it cannot see, the ack is held by no
				// fetch of a known epoch to its high watermark (a stale
				// leader of an older epoch may answer below it, as Kafka
				// allows), and by the final reads and porcupine as any.
				r.h.ProduceOkAtEpoch(op, rec.Offset, math.MaxInt32)
			}
		})
		time.Sleep(time.Duration(pick.IntN(10)) * time.Millisecond)
	}
}

// consume is one consumer: Fetch requests of its own to a partition's
// leader, from where it last read, carrying the leader epoch its metadata
// gave (so an answer comes from a leader of that epoch, or is refused, and
// the checker holds it to what that epoch could know), each recorded with
// its records and watermarks.
func (r *realRun) consume(ctx context.Context, topic string, id int) {
	cl, err := r.client()
	if err != nil {
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	pick := rand.New(rand.NewPCG(r.o.seed, uint64(id)))
	pos := make([]int64, r.o.partitions)
	var leaders map[int32]kadm.PartitionDetail
	var topicID [16]byte
	for ctx.Err() == nil {
		if leaders == nil {
			md, err := adm.Metadata(ctx, topic)
			if err != nil || md.Topics[topic].Err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			leaders, topicID = md.Topics[topic].Partitions, md.Topics[topic].ID
		}
		p := int32(pick.IntN(r.o.partitions))
		part, ok := leaders[p]
		if !ok || part.Leader < 0 {
			leaders = nil
			continue
		}
		tp := jepsen.TopicPartition{Topic: topic, Partition: p}
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxWaitMillis, req.MaxBytes = 13, -1, 100, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = p, pos[p], 1<<20, part.LeaderEpoch, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		var op jepsen.OpID
		r.locked(func() { op = r.h.InvokeFetchAtEpoch(id, tp, pos[p], 0, part.LeaderEpoch) })
		fetchCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		resp, err := cl.Broker(int(part.Leader)).Request(fetchCtx, req)
		cancel()
		var records []jepsen.Record
		var marks jepsen.Watermarks
		if err == nil {
			records, marks, err = simrun.DecodeFetch(resp.(*kmsg.FetchResponse), topicID, tp, pos[p])
		}
		r.locked(func() {
			if err != nil {
				r.h.Fail(op, err) // a read changes nothing: its failure is definite
			} else {
				r.h.FetchOkWatermarks(op, records, marks)
			}
		})
		switch {
		case errors.Is(err, kerr.OffsetOutOfRange):
			pos[p] = 0
		case err != nil:
			leaders = nil // ask again where the leaders are
			time.Sleep(100 * time.Millisecond)
		case len(records) > 0:
			pos[p] = records[len(records)-1].Offset + 1
		}
		time.Sleep(time.Duration(pick.IntN(20)) * time.Millisecond)
	}
}

// nemesis injects the faults until ctx ends, one node at a time.
func (r *realRun) nemesis(ctx context.Context) {
	for {
		wait := time.Duration(r.rand.ExpFloat64() * float64(r.o.faultEvery))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		n := r.nodes[r.rand.IntN(len(r.nodes))]
		fault := r.o.faults[r.rand.IntN(len(r.o.faults))]
		hold := time.Duration(500+r.rand.IntN(3500)) * time.Millisecond
		if !n.running() {
			r.bringBack(n) // it died on its own: back first
			continue
		}
		from := r.since()
		detail, heal := r.inject(n, fault)
		r.locked(func() {
			r.injected[fault]++
			lane := r.timeline.Lane("nodes", n.name)
			lane.Points = append(lane.Points, jepsen.Point{At: from, Class: "fault", Label: "fault " + fault + detail})
		})
		select {
		case <-ctx.Done():
		case <-time.After(hold):
		}
		if heal != nil {
			heal()
		}
		r.undo(n, fault, from)
	}
}

// inject makes fault on node n. It says what it did (to follow the
// fault's name in the timeline) and returns what undoes it beyond
// bringBack, if anything.
func (r *realRun) inject(n *realNode, fault string) (string, func()) {
	i := int(n.id - 1)
	switch fault {
	case "kill":
		n.cmd.Process.Signal(syscall.SIGKILL)
		<-n.done
	case "stop":
		n.cmd.Process.Signal(syscall.SIGSTOP)
		n.paused = true
	case "restart":
		n.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-n.done:
		case <-time.After(30 * time.Second):
			n.cmd.Process.Signal(syscall.SIGKILL)
			<-n.done
		}
	case "diskfull":
		return ": " + fillDisk(n.dir), func() { os.Remove(filepath.Join(n.dir, diskFiller)) }
	case "partition", "latency", "loss":
		if r.proxy != nil {
			detail, heal := r.proxy.proxyFault(r.rand.IntN, fault, i)
			return " " + detail, heal
		}
		cuts := r.netns.partitionCuts(r.rand.IntN, i)
		for _, c := range cuts {
			if err := r.netns.apply(c); err != nil {
				fmt.Fprintf(r.stderr, "partition: %v\n", err)
			}
		}
		return fmt.Sprintf(" %v", cuts), func() {
			for _, c := range cuts {
				r.netns.undo(c)
			}
		}
	}
	return "", nil
}

// undo ends a node's fault (bringBack) and draws it.
func (r *realRun) undo(n *realNode, fault string, from time.Duration) {
	class := map[string]string{"kill": "killed", "stop": "paused", "restart": "down", "partition": "partition",
		"latency": "latency", "loss": "loss", "diskfull": "disk"}[fault]
	r.bringBack(n)
	to := r.since()
	r.locked(func() {
		lane := r.timeline.Lane("nodes", n.name)
		lane.Spans = append(lane.Spans, jepsen.Span{From: from, To: to, Class: class, Label: fault})
	})
}

// bringBack resumes a paused node, or starts one that is not running.
func (r *realRun) bringBack(n *realNode) {
	if n.paused {
		n.cmd.Process.Signal(syscall.SIGCONT)
		n.paused = false
	}
	if !n.running() {
		if err := r.startNode(n); err != nil {
			fmt.Fprintf(r.stderr, "%v\n", err)
		}
	}
}

// heal brings back whatever is still out.
func (r *realRun) heal() {
	if r.proxy != nil {
		r.proxy.healAll()
	}
	for _, n := range r.nodes {
		r.bringBack(n)
	}
}

// finalReads reads every partition whole once the cluster is back: from
// the log start to the high watermark, each one a final read.
func (r *realRun) finalReads(ctx context.Context, topic string) error {
	if err := r.waitAll(ctx, 60*time.Second); err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const reader = 1000
	deadline := time.Now().Add(2 * time.Minute)
	var ends kadm.ListedOffsets
	for {
		ends, err = adm.ListEndOffsets(ctx, topic)
		if err == nil && ends.Error() == nil && len(ends[topic]) == r.o.partitions {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the high watermarks of %s were not listed within 2 minutes after healing: %v", topic, errors.Join(err, ends.Error()))
		}
		time.Sleep(500 * time.Millisecond)
	}
	for p := range int32(r.o.partitions) {
		hw := ends[topic][p].Offset
		tp := jepsen.TopicPartition{Topic: topic, Partition: p}
		var op jepsen.OpID
		r.locked(func() { op = r.h.InvokeFinalRead(reader, tp, 0) })
		records, err := r.readPartition(ctx, topic, p, hw)
		if err != nil {
			return err
		}
		if r.o.sabotage && len(records) > 0 {
			records = records[:len(records)-1]
		}
		r.locked(func() { r.h.FetchOk(op, records) })
	}
	return nil
}

func (r *realRun) readPartition(ctx context.Context, topic string, p int32, hw int64) ([]jepsen.Record, error) {
	if hw == 0 {
		return nil, nil
	}
	cl, err := r.client(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(0)}}))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	read, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var out []jepsen.Record
	for {
		fs := cl.PollFetches(read)
		if err := read.Err(); err != nil {
			return nil, fmt.Errorf("the final read of %s-%d reached %d of its high watermark %d: %w", topic, p, len(out), hw, err)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			if rec.Offset < hw {
				out = append(out, jepsen.Record{Offset: rec.Offset, Value: string(rec.Value)})
			}
		})
		if len(out) > 0 && out[len(out)-1].Offset >= hw-1 {
			return out, nil
		}
	}
}

// killAll kills every node still running and waits for it.
func (r *realRun) killAll() {
	for _, n := range r.nodes {
		if n.running() {
			n.cmd.Process.Signal(syscall.SIGKILL)
			<-n.done
		}
	}
}

// writeArtifacts writes the run's files to --out, as sim run --out does.
func (r *realRun) writeArtifacts(line string, notes []string, check jepsen.Result, meta *realMeta, groups *realGroups) error {
	dir := r.o.out
	summary := strings.Join(append(append([]string{line}, notes...), check.String()), "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "summary.txt"), []byte(summary), 0o644); err != nil {
		return err
	}
	create := func(name string) (io.Writer, error) { return os.Create(filepath.Join(dir, name)) }
	if err := jepsen.WriteArtifacts(r.h.Events(), jepsen.Config{}, create); err != nil {
		return err
	}
	if err := jepsen.WriteMetaArtifacts(meta.h.Events(), jepsen.MetaConfig{}, create); err != nil {
		return err
	}
	if len(groups.specs) > 0 {
		if err := jepsen.WriteGroupArtifacts(groups.events(), create); err != nil {
			return err
		}
	}
	t := r.timeline
	t.Title, t.End, t.Notes = fmt.Sprintf("sluice jepsen: seed %d", r.o.seed), r.since(), append([]string{line}, notes...)
	groups.addTimeline(&t)
	t.AddHistory(r.h.Events(), check)
	for _, v := range groups.check() {
		t.Marks = append(t.Marks, jepsen.Mark{At: t.End, Label: v})
	}
	if err := jepsen.WriteTimelineArtifact(t, create); err != nil {
		return err
	}
	for _, n := range r.nodes {
		if log, err := os.ReadFile(n.log); err == nil {
			if err := os.WriteFile(filepath.Join(dir, n.name+".log"), log, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// The disk-full fault: each node's data directory is a small filesystem
// of its own (tmpfs), and the fault fills it with a file of zeros, then
// removes it. The node's writes, syncs and segment rolls then fail with
// ENOSPC, as they would on a full disk, until the file goes.

// smallDiskSize is each node's data filesystem: far more than a run
// writes, small enough to fill in a moment.
const smallDiskSize = "256m"

// diskFiller is the file that fills a node's disk.
const diskFiller = ".jepsen-filler"

func mountSmallDisk(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+smallDiskSize); err != nil {
		return fmt.Errorf("mount a %s tmpfs on %s for the disk-full fault: %w", smallDiskSize, dir, err)
	}
	return nil
}

// fillDisk writes zeros into dir's filesystem until it is full, and says
// how much it took.
func fillDisk(dir string) string {
	f, err := os.OpenFile(filepath.Join(dir, diskFiller), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return "cannot fill: " + err.Error()
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	written := 0
	for {
		n, err := f.Write(chunk)
		written += n
		if err != nil {
			return fmt.Sprintf("filled with %d MiB", written>>20)
		}
	}
}
