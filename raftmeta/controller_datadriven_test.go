package raftmeta

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"
)

// TestControllerTranscripts runs the scripts of testdata/controller/*.txt (etcd raft's
// manner): each command drives the controller through the harness and
// prints its answer and the records it proposed. go test -rewrite
// regenerates the expected output.
//
// Commands:
//
//	init [session=9s] [auto-rebalance] [interval=300s] [imbalance=10] [seed=1]
//	register id=N [rack=R] [new-incarnation] [clean]
//	                          clean: after a clean shutdown (previous epoch = its epoch)
//	heartbeat id=N [epoch=E] [offset=O] [fence] [shutdown]
//	advance by=D              move the clock
//	tick                      Tick at the current time
//	create-topic name=T [partitions=P rf=F] [assign=(1 2,2 3)] [config=(k=v,...)]
//	create-partitions name=T count=C [assign=(...)]
//	delete-topic name=T
//	elect [unclean] [T/P ...] preferred (or unclean) election (no partitions: every one)
//	alter-isr T/P isr=(1 2) [from=N] [leader-epoch=E] [partition-epoch=E]
//	                          the leader's AlterPartition, at the current epochs by default
//	unregister id=N
//	reassign T/P replicas=(1 2 3) [keep-rf] | T/P cancel
//	                          AlterPartitionReassignments of one partition
//	list-reassignments [T/P ...]
//	                          ListPartitionReassignments (no partitions: every one)
//	producer-ids id=N [epoch=E]
//	alter-config topic=T|broker=N set=(k=v,...) delete=(k,...)
//	hold / commit             keep proposals pending / commit them
//	failover                  a new controller from the committed image
//	image                     print the committed image
//	spread name=T             leaders and replicas per broker, racks per partition
func TestControllerTranscripts(t *testing.T) {
	datadriven.Walk(t, "testdata/controller", func(t *testing.T, path string) {
		var h *harness
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			if td.Cmd == "init" {
				h = initHarness(t, td)
				return ""
			}
			require.NotNil(t, h, "%s: init first", td.Pos)
			h.t = t
			return runCommand(t, h, td)
		})
	})
}

func initHarness(t *testing.T, td *datadriven.TestData) *harness {
	cfg := ControllerConfig{}
	var seed uint64 = 1
	var s string
	if td.MaybeScanArgs(t, "session", &s) {
		cfg.SessionTimeout = mustDuration(t, s)
	}
	if td.MaybeScanArgs(t, "interval", &s) {
		cfg.RebalanceInterval = mustDuration(t, s)
	}
	td.MaybeScanArgs(t, "imbalance", &cfg.ImbalancePercent)
	td.MaybeScanArgs(t, "seed", &seed)
	cfg.AutoLeaderRebalance = td.HasArg("auto-rebalance")
	return newHarness(t, cfg, seed)
}

func mustDuration(t *testing.T, s string) time.Duration {
	d, err := time.ParseDuration(s)
	require.NoError(t, err)
	return d
}

func runCommand(t *testing.T, h *harness, td *datadriven.TestData) string {
	switch td.Cmd {
	case "register":
		return cmdRegister(t, h, td)
	case "heartbeat":
		return cmdHeartbeat(t, h, td)
	case "advance":
		var s string
		td.ScanArgs(t, "by", &s)
		h.now = h.now.Add(mustDuration(t, s))
		return fmt.Sprintf("now %s\n", h.now.Sub(harnessEpoch))
	case "tick":
		records, deadline := h.c.Tick(h.now)
		h.propose(records)
		return h.show(records) + formatDeadline(deadline)
	case "create-topic":
		return cmdCreateTopic(t, h, td)
	case "create-partitions":
		return cmdCreatePartitions(t, h, td)
	case "delete-topic":
		var name string
		td.ScanArgs(t, "name", &name)
		var id TopicID
		if topic := h.c.View().TopicByName(name); topic != nil {
			id = topic.ID
		}
		res, records := h.c.DeleteTopics([]TopicID{id})
		out := fmt.Sprintf("%s: %s\n", name, errName(res[0].Err)) + h.show(records)
		h.propose(records)
		return out
	case "elect":
		return cmdElect(t, h, td)
	case "alter-isr":
		return cmdAlterISR(t, h, td)
	case "reassign":
		return cmdReassign(t, h, td)
	case "list-reassignments":
		return cmdListReassignments(t, h, td)
	case "unregister":
		var id int32
		td.ScanArgs(t, "id", &id)
		err, records := h.c.UnregisterBroker(id)
		out := fmt.Sprintf("unregister %d: %s\n", id, errName(err)) + h.show(records)
		h.propose(records)
		return out
	case "producer-ids":
		var id int32
		td.ScanArgs(t, "id", &id)
		epoch := h.c.View().Brokers[id].Epoch
		td.MaybeScanArgs(t, "epoch", &epoch)
		reply, records := h.c.AllocateProducerIDs(id, epoch)
		h.propose(records)
		return fmt.Sprintf("producer ids %d: %s [%d, %d)\n", id, errName(reply.Err), reply.First, reply.First+reply.Count) + h.show(records)
	case "alter-config":
		return cmdAlterConfig(t, h, td)
	case "hold":
		h.holding = true
		return ""
	case "commit":
		h.holding = false
		n := len(h.held)
		h.commit()
		return fmt.Sprintf("committed %d batches\n", n)
	case "failover":
		require.Empty(t, h.held, "commit before a failover")
		h.c = NewController(h.committed, h.cfg, h.now, h.rand)
		return fmt.Sprintf("new controller at %s, next deadline %s\n", h.now.Sub(harnessEpoch), h.c.Deadline().Sub(harnessEpoch))
	case "image":
		return h.image()
	case "spread":
		var name string
		td.ScanArgs(t, "name", &name)
		return spread(h, name)
	}
	td.Fatalf(t, "unknown command %s", td.Cmd)
	return ""
}

func formatDeadline(d time.Time) string {
	if d.IsZero() {
		return "next deadline: none\n"
	}
	return fmt.Sprintf("next deadline %s\n", d.Sub(harnessEpoch))
}

func cmdRegister(t *testing.T, h *harness, td *datadriven.TestData) string {
	var id int32
	var rack string
	td.ScanArgs(t, "id", &id)
	td.MaybeScanArgs(t, "rack", &rack)
	if td.HasArg("new-incarnation") {
		h.incarnations[id]++
	}
	previous := int64(-1)
	if td.HasArg("clean") {
		previous = h.c.View().Brokers[id].Epoch
	}
	reply := h.registerAfter(id, rack, previous)
	out := fmt.Sprintf("register %d: %s", id, errName(reply.Err))
	if reply.Err == nil {
		out += fmt.Sprintf(" epoch=%d", reply.Epoch)
	}
	return out + "\n" + h.show(h.lastProposed())
}

// lastProposed is the last batch proposed, whether committed or held.
func (h *harness) lastProposed() []Record {
	return h.last
}

func cmdHeartbeat(t *testing.T, h *harness, td *datadriven.TestData) string {
	var id int32
	td.ScanArgs(t, "id", &id)
	hb := BrokerHeartbeat{BrokerID: id, BrokerEpoch: h.c.View().Brokers[id].Epoch, MetadataOffset: h.committed.Applied,
		WantFence: td.HasArg("fence"), WantShutDown: td.HasArg("shutdown")}
	td.MaybeScanArgs(t, "epoch", &hb.BrokerEpoch)
	td.MaybeScanArgs(t, "offset", &hb.MetadataOffset)
	reply, records := h.c.Heartbeat(h.now, hb)
	h.propose(records)
	var flags []string
	if reply.Err != nil {
		flags = append(flags, reply.Err.Message)
	} else {
		for _, f := range []struct {
			on   bool
			name string
		}{{reply.IsCaughtUp, "caught-up"}, {reply.IsFenced, "fenced"}, {reply.InControlledShutdown, "shutting-down"}, {reply.ShouldShutDown, "should-shut-down"}} {
			if f.on {
				flags = append(flags, f.name)
			}
		}
	}
	return fmt.Sprintf("heartbeat %d offset=%d: %s\n", id, hb.MetadataOffset, strings.Join(flags, " ")) + h.show(records)
}

// parseAssignment reads assign=(1 2,2 3) as [[1 2] [2 3]].
func parseAssignment(t *testing.T, td *datadriven.TestData) [][]int32 {
	arg, ok := td.Arg("assign")
	if !ok {
		return nil
	}
	out := [][]int32{}
	for _, v := range arg.Vals {
		var replicas []int32
		for _, f := range strings.Fields(v) {
			n, err := strconv.Atoi(f)
			require.NoError(t, err)
			replicas = append(replicas, int32(n))
		}
		out = append(out, replicas)
	}
	return out
}

func cmdCreateTopic(t *testing.T, h *harness, td *datadriven.TestData) string {
	spec := TopicSpec{}
	td.ScanArgs(t, "name", &spec.Name)
	td.MaybeScanArgs(t, "partitions", &spec.Partitions)
	td.MaybeScanArgs(t, "rf", &spec.ReplicationFactor)
	spec.Assignment = parseAssignment(t, td)
	if arg, ok := td.Arg("config"); ok {
		spec.Configs = map[string]string{}
		for _, kv := range arg.Vals {
			k, v, _ := strings.Cut(kv, "=")
			spec.Configs[k] = v
		}
	}
	res, records := h.c.CreateTopics([]TopicSpec{spec})
	h.propose(records)
	out := fmt.Sprintf("create %s: %s", spec.Name, errName(res[0].Err))
	if res[0].Err != nil {
		out += " (" + res[0].Message + ")"
	}
	return out + "\n" + h.show(records)
}

func cmdCreatePartitions(t *testing.T, h *harness, td *datadriven.TestData) string {
	spec := PartitionsSpec{}
	td.ScanArgs(t, "name", &spec.Topic)
	td.ScanArgs(t, "count", &spec.Count)
	spec.Assignment = parseAssignment(t, td)
	res, records := h.c.CreatePartitions([]PartitionsSpec{spec})
	h.propose(records)
	out := fmt.Sprintf("create partitions %s: %s", spec.Topic, errName(res[0].Err))
	if res[0].Err != nil {
		out += " (" + res[0].Message + ")"
	}
	return out + "\n" + h.show(records)
}

func cmdElect(t *testing.T, h *harness, td *datadriven.TestData) string {
	var req []TopicPartitions
	elect := h.c.ElectPreferredLeaders
	for _, arg := range td.CmdArgs {
		if arg.Key == "unclean" {
			elect = h.c.ElectUncleanLeaders
			continue
		}
		topic, part, ok := strings.Cut(arg.Key, "/")
		require.True(t, ok, "elect takes topic/partition arguments")
		n, err := strconv.Atoi(part)
		require.NoError(t, err)
		req = append(req, TopicPartitions{Topic: topic, Partitions: []int32{int32(n)}})
	}
	results, records := elect(req)
	h.propose(records)
	var b strings.Builder
	for _, r := range results {
		fmt.Fprintf(&b, "%s-%d: %s\n", r.Topic, r.Partition, errName(r.Err))
	}
	return b.String() + h.show(records)
}

func cmdAlterConfig(t *testing.T, h *harness, td *datadriven.TestData) string {
	alt := ConfigAlteration{}
	if td.MaybeScanArgs(t, "topic", &alt.Name) {
		alt.Resource = ConfigTopic
	} else {
		alt.Resource = ConfigBroker
		td.MaybeScanArgs(t, "broker", &alt.Name)
	}
	if arg, ok := td.Arg("set"); ok {
		for _, kv := range arg.Vals {
			k, v, _ := strings.Cut(kv, "=")
			alt.Changes = append(alt.Changes, ConfigEntry{Key: k, Value: &v})
		}
	}
	if arg, ok := td.Arg("delete"); ok {
		for _, k := range arg.Vals {
			alt.Changes = append(alt.Changes, ConfigEntry{Key: k})
		}
	}
	errs, records := h.c.AlterConfigs([]ConfigAlteration{alt})
	h.propose(records)
	return fmt.Sprintf("alter %s %q: %s\n", alt.Resource, alt.Name, errName(errs[0])) + h.show(records)
}

// spread summarizes a topic's placement: leaders and replicas per broker,
// and how many partitions have their replicas on distinct racks.
func spread(h *harness, name string) string {
	topic := h.committed.TopicByName(name)
	if topic == nil {
		return "no topic\n"
	}
	replicas := map[int32]int{}
	distinct := 0
	for _, p := range topic.Partitions {
		racks := map[string]bool{}
		for _, r := range p.Replicas {
			replicas[r]++
			racks[h.committed.Brokers[r].Rack] = true
		}
		if len(racks) == len(p.Replicas) {
			distinct++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "leaders: %s\nreplicas:", leaderSpread(topic))
	for _, id := range h.committed.BrokerIDs() {
		fmt.Fprintf(&b, " %d:%d", id, replicas[id])
	}
	fmt.Fprintf(&b, "\npartitions on distinct racks: %d of %d\n", distinct, len(topic.Partitions))
	return b.String()
}

func cmdAlterISR(t *testing.T, h *harness, td *datadriven.TestData) string {
	topicName, part, ok := strings.Cut(td.CmdArgs[0].Key, "/")
	require.True(t, ok, "alter-isr takes topic/partition first")
	n, err := strconv.Atoi(part)
	require.NoError(t, err)
	topic := h.c.View().TopicByName(topicName)
	require.NotNil(t, topic)
	p := topic.Partitions[n]
	req := AlterPartition{BrokerID: p.Leader, Topic: topic.ID, Partition: int32(n), LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch}
	td.MaybeScanArgs(t, "from", &req.BrokerID)
	td.MaybeScanArgs(t, "leader-epoch", &req.LeaderEpoch)
	td.MaybeScanArgs(t, "partition-epoch", &req.PartitionEpoch)
	if b, ok := h.c.View().Brokers[req.BrokerID]; ok {
		req.BrokerEpoch = b.Epoch
	}
	arg, ok := td.Arg("isr")
	require.True(t, ok)
	req.ISR = []int32{}
	for _, f := range strings.Fields(arg.Vals[0]) {
		id, err := strconv.Atoi(f)
		require.NoError(t, err)
		req.ISR = append(req.ISR, int32(id))
	}
	reply, records := h.c.AlterPartition(req)
	h.propose(records)
	out := fmt.Sprintf("alter %s-%d: %s", topicName, n, errName(reply.Err))
	if reply.Err == nil {
		out += fmt.Sprintf(" (%s)", reply.Partition)
	}
	return out + "\n" + h.show(records)
}

// topicPartitionArg parses a "topic/partition" argument.
func topicPartitionArg(t *testing.T, key string) (string, int32) {
	topic, part, ok := strings.Cut(key, "/")
	require.True(t, ok, "%q is not topic/partition", key)
	n, err := strconv.Atoi(part)
	require.NoError(t, err)
	return topic, int32(n)
}

func cmdReassign(t *testing.T, h *harness, td *datadriven.TestData) string {
	topic, part := topicPartitionArg(t, td.CmdArgs[0].Key)
	r := Reassignment{Topic: topic, Partition: part, KeepReplicationFactor: td.HasArg("keep-rf")}
	if arg, ok := td.Arg("replicas"); ok {
		r.Replicas = []int32{}
		for _, f := range strings.Fields(strings.Join(arg.Vals, " ")) {
			id, err := strconv.Atoi(f)
			require.NoError(t, err)
			r.Replicas = append(r.Replicas, int32(id))
		}
	} else {
		require.True(t, td.HasArg("cancel"), "reassign takes replicas=(...) or cancel")
	}
	res, records := h.c.AlterPartitionReassignments([]Reassignment{r})
	h.propose(records)
	out := fmt.Sprintf("reassign %s-%d: %s", topic, part, errName(res[0].Err))
	if res[0].Err != nil {
		out += " (" + res[0].Message + ")"
	}
	return out + "\n" + h.show(records)
}

func cmdListReassignments(t *testing.T, h *harness, td *datadriven.TestData) string {
	var req []TopicPartitions
	for _, arg := range td.CmdArgs {
		topic, part := topicPartitionArg(t, arg.Key)
		req = append(req, TopicPartitions{Topic: topic, Partitions: []int32{part}})
	}
	var b strings.Builder
	for _, o := range h.c.ListPartitionReassignments(req) {
		fmt.Fprintf(&b, "%s-%d: replicas=%s adding=%s removing=%s\n", o.Topic, o.Partition,
			formatIDs(o.Replicas), formatIDs(o.Adding), formatIDs(o.Removing))
	}
	if b.Len() == 0 {
		return "none\n"
	}
	return b.String()
}
