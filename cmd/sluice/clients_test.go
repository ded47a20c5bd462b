package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The real-client tests run clients other than franz-go (kcat, kafkajs,
// confluent-kafka-python, kafka-python) as subprocesses against `sluice
// serve`. A client that is not installed skips its test, unless
// SLUICE_REQUIRE_CLIENTS=1 (set by .ci/run, which installs them all) makes
// it a failure. README.md says how to install them.

// clientsDir holds the client scripts, relative to this package.
const clientsDir = "../../internal/clients"

// missingClient skips t for a client that is not installed, or fails it
// when SLUICE_REQUIRE_CLIENTS=1.
func missingClient(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("SLUICE_REQUIRE_CLIENTS") == "1" {
		t.Fatalf("%s; SLUICE_REQUIRE_CLIENTS=1 requires every real client (.ci/run installs them)", msg)
	}
	t.Skip(msg)
}

// kafkajsCommand returns node and the kafkajs consumer script, checking
// that `npm ci` has installed kafkajs beside it.
func kafkajsCommand(t *testing.T) (node, script string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		missingClient(t, "node is not installed (apt-get install nodejs npm)")
	}
	dir, err := filepath.Abs(filepath.Join(clientsDir, "kafkajs"))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "kafkajs", "package.json")); err != nil {
		missingClient(t, "kafkajs is not installed (npm ci --prefix internal/clients/kafkajs)")
	}
	return node, filepath.Join(dir, "consumer.js")
}

// pythonWith returns a python3 that imports module: the one on PATH, or
// Debian's /usr/bin/python3, where apt-get installs python3-* packages
// (PATH's may be another installation, a pyenv shim for one).
func pythonWith(t *testing.T, module, debianPackage string) string {
	t.Helper()
	var tried []string
	for _, name := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		tried = append(tried, path)
		if exec.Command(path, "-c", "import "+module).Run() == nil {
			return path
		}
	}
	missingClient(t, "no python3 imports %s (tried %v; apt-get install %s)", module, tried, debianPackage)
	return ""
}

// pythonScript returns the command line of script, a file of
// internal/clients/python, run by a python3 that imports module.
func pythonScript(t *testing.T, module, debianPackage, script string) []string {
	t.Helper()
	python := pythonWith(t, module, debianPackage)
	path, err := filepath.Abs(filepath.Join(clientsDir, "python", script))
	require.NoError(t, err)
	return []string{python, path}
}

// scriptRecordAt is where franz-go acknowledged a value.
type scriptRecordAt struct {
	partition int32
	offset    int64
}

// produceForScript produces n records valued tag-i, round-robin over
// topic's partitions, acks=all, in batches compressed by codec, and adds
// where each was acknowledged to at.
func produceForScript(ctx context.Context, t *testing.T, addrs []string, topic, tag string, n int, codec kgo.CompressionCodec, at map[string]scriptRecordAt) {
	t.Helper()
	pr, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(codec),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(t, err)
	defer pr.Close()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "%s-%d", tag, i)})
	}
	results := pr.ProduceSync(ctx, recs...)
	require.NoError(t, results.FirstErr())
	for _, r := range results {
		at[string(r.Record.Value)] = scriptRecordAt{r.Record.Partition, r.Record.Offset}
	}
}

// scriptEvent is one JSON line of a client script (see
// internal/clients/kafkajs/consumer.js for the format all scripts share).
type scriptEvent struct {
	Member    string   `json:"member"`
	Assigned  *[]int32 `json:"assigned"`
	Partition *int32   `json:"partition"`
	Offset    *int64   `json:"offset"`
	Value     *string  `json:"value"`
	Committed *int64   `json:"committed"`
	Left      bool     `json:"left"`
	Done      bool     `json:"done"`
}

// holdsAll reports whether ev assigns m0 every one of partitions.
func (ev scriptEvent) holdsAll(partitions int32) bool {
	if ev.Member != "m0" || ev.Assigned == nil || len(*ev.Assigned) != int(partitions) {
		return false
	}
	for i, p := range *ev.Assigned {
		if p != int32(i) {
			return false
		}
	}
	return true
}

// scriptRun is how a client script is run: argv, then BROKERS TOPIC GROUP
// MEMBERS BEFORE AFTER TIMEOUT_MS.
type scriptRun struct {
	name          string
	argv          []string
	addrs         []string
	topic, group  string
	partitions    int32
	members       int
	before, after int
	timeout       time.Duration
	takeover      func() // produces the after records
}

// run runs the script and returns its events, reading them as they come:
// once a member has left and m0 holds every partition, it calls takeover.
// The script must exit 0 within the timeout (its own, then a context's,
// which kills it) and print only JSON lines, the last one "done".
func (s *scriptRun) run(t *testing.T) []scriptEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout+5*time.Second)
	defer cancel()
	args := append(s.argv[1:len(s.argv):len(s.argv)], strings.Join(s.addrs, ","), s.topic, s.group,
		strconv.Itoa(s.members), strconv.Itoa(s.before), strconv.Itoa(s.after), strconv.Itoa(int(s.timeout.Milliseconds())))
	cmd := exec.CommandContext(ctx, s.argv[0], args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	var events []scriptEvent
	var lines []string
	var bad error
	left, tookOver := false, false
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		var ev scriptEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			bad = fmt.Errorf("%s printed a line that is not an event: %q: %w", s.name, sc.Text(), err)
			continue
		}
		events = append(events, ev)
		left = left || ev.Left
		if left && !tookOver && ev.holdsAll(s.partitions) {
			tookOver = true
			s.takeover()
		}
	}
	err = cmd.Wait()
	last := strings.Join(lines[max(0, len(lines)-40):], "\n")
	require.NoError(t, err, "%s %v (context: %v; a member left: %v; m0 took over: %v)\nstdout (last 40 lines):\n%s\nstderr (last 16 KiB):\n%s",
		s.name, args, ctx.Err(), left, tookOver, last, tail(stderr.Bytes(), 16<<10))
	// Shown when the checks that follow fail, and with -v.
	t.Logf("%s's stderr (last 16 KiB):\n%s", s.name, tail(stderr.Bytes(), 16<<10))
	require.NoError(t, bad)
	require.NotEmpty(t, events, "%s printed nothing", s.name)
	require.True(t, events[len(events)-1].Done, "%s's last line is not done", s.name)
	return events
}

// checkScriptEvents checks what a client's group consumed and committed,
// as its script printed it. Before a member left: the members' last
// assignments split the topic's partitions between all of them. After:
// m0 held them all, and consumed only values produced after it took over
// (all before them were committed, so none is consumed again). Every
// produced value was consumed, each where it was acknowledged, and the
// last commit acknowledged on each partition is the partition's end (one
// past its last produced offset). It returns those ends.
func checkScriptEvents(tb testing.TB, events []scriptEvent, want map[string]scriptRecordAt, before map[string]bool, partitions int32, members int) map[int32]int64 {
	tb.Helper()
	leftAt := slices.IndexFunc(events, func(ev scriptEvent) bool { return ev.Left })
	require.GreaterOrEqual(tb, leftAt, 0, "no member left")
	checkSplit(tb, events[:leftAt], partitions, members)
	takeoverAt := slices.IndexFunc(events[leftAt:], func(ev scriptEvent) bool { return ev.holdsAll(partitions) })
	require.GreaterOrEqual(tb, takeoverAt, 0, "m0 never held every partition after a member left")

	consumed := map[string]int{}
	committed := map[int32]int64{}
	for i, ev := range events {
		switch {
		case ev.Assigned != nil && i > leftAt:
			require.Equal(tb, "m0", ev.Member, "%s was assigned %v after a member left", ev.Member, *ev.Assigned)
		case ev.Value != nil:
			require.NotNil(tb, ev.Partition, "record event without a partition: %+v", ev)
			require.NotNil(tb, ev.Offset, "record event without an offset: %+v", ev)
			at, ok := want[*ev.Value]
			require.True(tb, ok, "%s consumed %q, which was never produced", ev.Member, *ev.Value)
			require.Equal(tb, at, scriptRecordAt{*ev.Partition, *ev.Offset}, "%s consumed %q elsewhere than it was acknowledged", ev.Member, *ev.Value)
			if i > leftAt {
				require.False(tb, before[*ev.Value], "%s consumed %q again after a member left, though it was committed", ev.Member, *ev.Value)
				require.Equal(tb, "m0", ev.Member, "%s consumed %q after it left", ev.Member, *ev.Value)
			}
			consumed[*ev.Value]++
		case ev.Committed != nil:
			require.NotNil(tb, ev.Partition, "commit event without a partition: %+v", ev)
			committed[*ev.Partition] = max(committed[*ev.Partition], *ev.Committed)
		}
	}
	var missing []string
	ends := map[int32]int64{}
	for v, at := range want {
		ends[at.partition] = max(ends[at.partition], at.offset+1)
		if consumed[v] == 0 {
			missing = append(missing, v)
		}
	}
	sort.Strings(missing)
	require.Empty(tb, missing, "%d of %d produced values were never consumed", len(missing), len(want))
	for p := range partitions {
		require.Equal(tb, ends[p], committed[p], "partition %d: the last commit the client saw acknowledged", p)
	}
	return ends
}

// checkSplit checks that the members' last assignments in events split
// the topic's partitions between all of them.
func checkSplit(tb testing.TB, events []scriptEvent, partitions int32, members int) {
	tb.Helper()
	assigned := map[string][]int32{}
	for _, ev := range events {
		if ev.Assigned != nil {
			assigned[ev.Member] = *ev.Assigned
		}
	}
	require.Len(tb, assigned, members, "members that reported an assignment before one left: %v", assigned)
	owner := map[int32]string{}
	for m, ps := range assigned {
		require.NotEmpty(tb, ps, "%s's last assignment before a member left is empty: %v", m, assigned)
		for _, p := range ps {
			require.True(tb, p >= 0 && p < partitions, "%s was assigned partition %d of a topic of %d: %v", m, p, partitions, assigned)
			require.Empty(tb, owner[p], "partition %d assigned to both %s and %s: %v", p, owner[p], m, assigned)
			owner[p] = m
		}
	}
	require.Len(tb, owner, int(partitions), "the last assignments before a member left do not cover the topic's partitions: %v", assigned)
}

// checkGroupCommitted checks the broker's side once a client's members
// have left: the topic's end offsets are ends, the group's committed
// offsets (kadm.FetchOffsets) reach them, and the group is Empty.
func checkGroupCommitted(ctx context.Context, t *testing.T, adm *kadm.Client, group, topic string, ends map[int32]int64) {
	t.Helper()
	listed, err := adm.ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	offsets, err := adm.FetchOffsets(ctx, group)
	require.NoError(t, err)
	require.NoError(t, offsets.Error())
	for p, want := range ends {
		end, ok := listed.Lookup(topic, p)
		require.True(t, ok, "no end offset for partition %d", p)
		require.NoError(t, end.Err)
		require.Equal(t, want, end.Offset, "partition %d's end offset", p)
		got, ok := offsets.Lookup(topic, p)
		require.True(t, ok, "partition %d: the group committed nothing", p)
		require.Equal(t, want, got.At, "partition %d: the group's committed offset (FetchOffsets)", p)
	}
	described, err := adm.DescribeGroups(ctx, group)
	require.NoError(t, err)
	g := described[group]
	require.NoError(t, g.Err)
	require.Equal(t, "Empty", g.State, "the group after its members left")
	require.Empty(t, g.Members)
}

// scriptGroupTest runs a client's group of two members over a replicated
// topic of four partitions on three nodes: franz-go produces 200 records,
// the members share and consume them and commit; m1 leaves, m0 takes every
// partition over, and consumes and commits 100 records produced then. It
// checks what was consumed and committed (checkScriptEvents,
// checkGroupCommitted). client finds the client (skipping or failing t if
// it is missing) and returns the script's command line.
func scriptGroupTest(t *testing.T, name string, client func() []string) {
	if testing.Short() {
		t.Skip("starts three sluice processes")
	}
	argv := client()
	// The initial rebalance delay (Kafka's default is 3 s) lets both
	// members, started together, join the first generation.
	c := newCluster(t, 3, "offsets.topic.num.partitions=5", "group.initial.rebalance.delay.ms=1000")
	// Bounds the setup, the client's run (whose own bound is shorter) and
	// the checks.
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	adm := c.adminClient()
	topic, group := name+"-topic", name+"-group"
	const partitions, members = 4, 2
	createReplicatedTopic(ctx, t, adm, topic, partitions)
	// Uncompressed and gzip batches: both codecs every client decodes.
	// Not franz-go's default, snappy, which kafkajs cannot read without a
	// codec package (KafkaJSNotImplemented: Snappy compression not
	// implemented), against Kafka as against Sluice.
	want := map[string]scriptRecordAt{}
	produceForScript(ctx, t, c.addrs(), topic, name+"-plain", 100, kgo.NoCompression(), want)
	produceForScript(ctx, t, c.addrs(), topic, name+"-gzip", 100, kgo.GzipCompression(), want)
	before := map[string]bool{}
	for v := range want {
		before[v] = true
	}

	s := &scriptRun{name: name, argv: argv, addrs: c.addrs(), topic: topic, group: group,
		partitions: partitions, members: members, before: len(want), after: 100, timeout: 25 * time.Second}
	s.takeover = func() { produceForScript(ctx, t, c.addrs(), topic, name+"-after", s.after, kgo.NoCompression(), want) }
	events := s.run(t)
	ends := checkScriptEvents(t, events, want, before, partitions, members)
	checkGroupCommitted(ctx, t, adm, group, topic, ends)
}

// TestKafkajsGroupConsumersConsumeCommitAndTakeOver: two kafkajs 2.x
// consumers of one group (internal/clients/kafkajs/consumer.js) consume a
// replicated topic's records and commit them; one leaves and the other
// takes its partitions over (scriptGroupTest).
func TestKafkajsGroupConsumersConsumeCommitAndTakeOver(t *testing.T) {
	scriptGroupTest(t, "kafkajs", func() []string {
		node, script := kafkajsCommand(t)
		return []string{node, script}
	})
}

// TestConfluentKafkaPythonGroupConsumersConsumeCommitAndTakeOver: two
// confluent-kafka-python (librdkafka) consumers of one group
// (internal/clients/python/confluent_consumer.py), as
// TestKafkajsGroupConsumersConsumeCommitAndTakeOver.
func TestConfluentKafkaPythonGroupConsumersConsumeCommitAndTakeOver(t *testing.T) {
	scriptGroupTest(t, "confluent", func() []string {
		return pythonScript(t, "confluent_kafka", "python3-confluent-kafka", "confluent_consumer.py")
	})
}

// TestKafkaPythonGroupConsumersConsumeCommitAndTakeOver: two kafka-python
// consumers of one group (internal/clients/python/kafka_python_consumer.py;
// FindCoordinator v0, JoinGroup v0-v2, OffsetCommit v2, OffsetFetch v1),
// as TestKafkajsGroupConsumersConsumeCommitAndTakeOver.
func TestKafkaPythonGroupConsumersConsumeCommitAndTakeOver(t *testing.T) {
	scriptGroupTest(t, "kafka-python", func() []string {
		return pythonScript(t, "kafka", "python3-kafka", "kafka_python_consumer.py")
	})
}

// TestCheckScriptEventsCatchesLossRepeatsAndBadAssignments: the client
// tests' checker passes a run that consumed and committed everything, with
// the partitions split between both members and then taken over by m0,
// and fails each broken variant.
func TestCheckScriptEventsCatchesLossRepeatsAndBadAssignments(t *testing.T) {
	want := map[string]scriptRecordAt{"a": {0, 0}, "b": {1, 0}, "c": {0, 1}, "d": {1, 1}, "e": {0, 2}, "f": {1, 2}}
	before := map[string]bool{"a": true, "b": true, "c": true, "d": true}
	assigned := func(m string, ps ...int32) scriptEvent { return scriptEvent{Member: m, Assigned: &ps} }
	record := func(m string, p int32, o int64, v string) scriptEvent {
		return scriptEvent{Member: m, Partition: &p, Offset: &o, Value: &v}
	}
	committed := func(m string, p int32, o int64) scriptEvent {
		return scriptEvent{Member: m, Partition: &p, Committed: &o}
	}
	good := func() []scriptEvent {
		return []scriptEvent{
			assigned("m0", 0), assigned("m1", 1), // 0, 1
			record("m0", 0, 0, "a"), record("m0", 0, 1, "c"), committed("m0", 0, 2), // 2-4
			record("m1", 1, 0, "b"), committed("m1", 1, 1), record("m1", 1, 1, "d"), committed("m1", 1, 2), // 5-8
			{Member: "m1", Left: true}, assigned("m0"), assigned("m0", 0, 1), // 9-11
			record("m0", 0, 2, "e"), record("m0", 1, 2, "f"), committed("m0", 0, 3), committed("m0", 1, 3), // 12-15
			{Done: true},
		}
	}
	check := func(events []scriptEvent) func(tb testing.TB) {
		return func(tb testing.TB) { checkScriptEvents(tb, events, want, before, 2, 2) }
	}
	without := func(e []scriptEvent, i int) []scriptEvent { return append(e[:i:i], e[i+1:]...) }
	with := func(e []scriptEvent, i int, ev scriptEvent) []scriptEvent {
		return append(e[:i:i], append([]scriptEvent{ev}, e[i:]...)...)
	}
	failed, msg := checkFails(t, check(good()))
	require.False(t, failed, msg)
	// A repeat before a member left is allowed (at least once), and so is
	// one of a value produced after it.
	failed, msg = checkFails(t, check(with(good(), 8, record("m1", 1, 1, "d"))))
	require.False(t, failed, msg)
	failed, msg = checkFails(t, check(with(good(), 16, record("m0", 1, 2, "f"))))
	require.False(t, failed, msg)

	for _, tc := range []struct {
		name   string
		events []scriptEvent
		want   string
	}{
		{"a record never consumed", without(good(), 3), "never consumed"},
		{"a record at another offset", func() []scriptEvent { e := good(); e[3] = record("m0", 0, 2, "c"); return e }(), "elsewhere"},
		{"a value never produced", with(good(), 2, record("m0", 0, 5, "z")), "never produced"},
		{"a commit short of the end", without(good(), 15), "last commit"},
		{"no commit on a partition", without(without(good(), 15), 6), "last commit"},
		{"one member holding everything", func() []scriptEvent { e := good(); e[1] = assigned("m0", 0, 1); return e }(), "members that reported"},
		{"a partition held twice", func() []scriptEvent { e := good(); e[1] = assigned("m1", 0, 1); return e }(), "assigned to both"},
		{"a member left empty", func() []scriptEvent { e := good(); e[1] = assigned("m1"); return e }(), "is empty"},
		{"a partition the topic lacks", func() []scriptEvent { e := good(); e[1] = assigned("m1", 2); return e }(), "of a topic of 2"},
		{"nobody left", without(good(), 9), "no member left"},
		{"no takeover", without(good(), 11), "never held every partition"},
		{"a left member assigned", with(good(), 12, assigned("m1", 1)), "after a member left"},
		{"a committed record consumed again", with(good(), 12, record("m0", 1, 1, "d")), "again after a member left"},
		{"a record consumed by a member that left", func() []scriptEvent { e := good(); e[13] = record("m1", 1, 2, "f"); return e }(), "after it left"},
	} {
		failed, msg := checkFails(t, check(tc.events))
		require.True(t, failed, "%s: the checker passed it", tc.name)
		require.Contains(t, msg, tc.want, tc.name)
	}
	failed, msg = checkFails(t, func(tb testing.TB) { checkScriptEvents(tb, good(), want, before, 3, 2) })
	require.True(t, failed, "a partition nobody holds: the checker passed it")
	require.Contains(t, msg, "do not cover")
}
