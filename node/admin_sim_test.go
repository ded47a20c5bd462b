package node

import (
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim/simfs"
	"github.com/sluicemq/sluice/wire"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Simulator tests of the admin APIs: CreateTopics, DeleteTopics,
// DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DescribeCluster.

func newTopic(name string, partitions int32, rf int16, configs ...string) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, partitions, rf
	for i := 0; i+1 < len(configs); i += 2 {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = configs[i], kmsg.StringPtr(configs[i+1])
		t.Configs = append(t.Configs, c)
	}
	return t
}

func manualTopic(name string, assignment map[int32][]int32) kmsg.CreateTopicsRequestTopic {
	t := newTopic(name, -1, -1)
	for _, p := range sortedKeys(assignment) {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = p, assignment[p]
		t.ReplicaAssignment = append(t.ReplicaAssignment, a)
	}
	return t
}

func (s *simBroker) createTopics(version int16, validateOnly bool, topics ...kmsg.CreateTopicsRequestTopic) *kmsg.CreateTopicsResponse {
	s.t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.ValidateOnly, req.Topics = version, validateOnly, topics
	return s.do(req).(*kmsg.CreateTopicsResponse)
}

func (s *simBroker) createReq(topics ...kmsg.CreateTopicsRequestTopic) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.Topics = 7, topics
	return req
}

func (s *simBroker) mustCreate(names ...string) {
	s.t.Helper()
	var topics []kmsg.CreateTopicsRequestTopic
	for _, n := range names {
		topics = append(topics, newTopic(n, 1, 1))
	}
	for _, rt := range s.createTopics(7, false, topics...).Topics {
		require.Zero(s.t, rt.ErrorCode, "create %s: %v %v", rt.Topic, kerr.ErrorForCode(rt.ErrorCode), rt.ErrorMessage)
	}
}

func deleteByName(version int16, names ...string) *kmsg.DeleteTopicsRequest {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = version
	for _, n := range names {
		if version < 6 {
			req.TopicNames = append(req.TopicNames, n)
			continue
		}
		t := kmsg.NewDeleteTopicsRequestTopic()
		t.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, t)
	}
	return req
}

func (s *simBroker) topicNames() []string {
	s.t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	var names []string
	for _, t := range s.do(req).(*kmsg.MetadataResponse).Topics {
		names = append(names, *t.Topic)
	}
	return names
}

func describeTopic(version int16, name string, keys ...string) *kmsg.DescribeConfigsRequest {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version = version
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, name, keys
	req.Resources = append(req.Resources, rr)
	return req
}

func (s *simBroker) topicConfigs(name string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	s.t.Helper()
	res := s.do(describeTopic(4, name)).(*kmsg.DescribeConfigsResponse).Resources[0]
	require.Zero(s.t, res.ErrorCode, kerr.ErrorForCode(res.ErrorCode))
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range res.Configs {
		out[c.Name] = c
	}
	return out
}

// dialClient opens another connection, for requests that must be in flight
// at once (one connection answers one request at a time).
func (s *simBroker) dialClient() *wire.Client {
	s.t.Helper()
	saved := s.client
	s.connect()
	c := s.client
	s.client = saved
	return c
}

// send sends req on c; the response lands in the returned pointer.
func (s *simBroker) send(c *wire.Client, req kmsg.Request) *kmsg.Response {
	s.t.Helper()
	resp := new(kmsg.Response)
	s.world.Node("c1").Post(func() {
		c.Request(req, func(r kmsg.Response, err error) {
			require.NoError(s.t, err)
			*resp = r
		})
	})
	return resp
}

func (s *simBroker) runUntil(what string, cond func() bool) {
	s.t.Helper()
	require.True(s.t, s.world.RunUntil(cond, 5*time.Minute), "never: %s", what)
}

// slowDisk makes every sync of the broker's disk take a second, so that a
// metadata change stays in flight while other requests arrive.
func (s *simBroker) slowDisk() {
	s.t.Helper()
	require.NoError(s.t, s.world.Node("n1").Disk().SetSyncLatency(time.Second, time.Second))
}

func answered(resps ...*kmsg.Response) func() bool {
	return func() bool {
		for _, r := range resps {
			if *r == nil {
				return false
			}
		}
		return true
	}
}

func TestCreateTopicsUsesBrokerDefaultsAndDescribesTheTopic(t *testing.T) {
	s := newSimBroker(t, 10, func(c *Config) { c.NumPartitions = 2 })
	resp := s.createTopics(7, false, newTopic("orders", -1, -1, "retention.ms", "1000"))
	require.Len(t, resp.Topics, 1)
	rt := resp.Topics[0]
	require.Zero(t, rt.ErrorCode, kerr.ErrorForCode(rt.ErrorCode))
	require.Nil(t, rt.ErrorMessage)
	require.Equal(t, int32(2), rt.NumPartitions)
	require.Equal(t, int16(1), rt.ReplicationFactor)
	require.NotEqual(t, [16]byte{}, rt.TopicID)
	configs := map[string]kmsg.CreateTopicsResponseTopicConfig{}
	for _, c := range rt.Configs {
		configs[c.Name] = c
	}
	require.Len(t, configs, len(topicConfigDefs()))
	require.Equal(t, "1000", *configs["retention.ms"].Value)
	require.Equal(t, int8(kmsg.ConfigSourceDynamicTopicConfig), configs["retention.ms"].Source)
	require.Equal(t, "delete", *configs["cleanup.policy"].Value)
	require.Equal(t, int8(kmsg.ConfigSourceDefaultConfig), configs["cleanup.policy"].Source)

	// The topic, its id and its config survive a crash.
	s.restart()
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	got := s.do(md).(*kmsg.MetadataResponse).Topics
	require.Len(t, got, 1)
	require.Equal(t, rt.TopicID, got[0].TopicID)
	require.Len(t, got[0].Partitions, 2)
	require.Equal(t, "1000", *s.topicConfigs("orders")["retention.ms"].Value)
}

func TestCreateTopicsServesEveryVersion(t *testing.T) {
	s := newSimBroker(t, 11, nil)
	for v := int16(0); v <= 7; v++ {
		name := "v" + strconv.Itoa(int(v))
		resp := s.createTopics(v, false, newTopic(name, 1, 1), newTopic(name+"-bad", 0, 1))
		require.Len(t, resp.Topics, 2, "v%d", v)
		require.Zero(t, resp.Topics[0].ErrorCode, "v%d", v)
		require.Equal(t, kerr.InvalidPartitions.Code, resp.Topics[1].ErrorCode, "v%d", v)
		require.Equal(t, v >= 1, resp.Topics[1].ErrorMessage != nil, "v%d: ErrorMessage is v1+", v)
		require.Equal(t, v >= 5, len(resp.Topics[0].Configs) > 0, "v%d: configs are v5+", v)
		require.Equal(t, v >= 7, resp.Topics[0].TopicID != [16]byte{}, "v%d: topic id is v7+", v)
	}
	require.Len(t, s.topicNames(), 8)
}

func TestCreateTopicsAnswersEachBadTopicAlone(t *testing.T) {
	s := newSimBroker(t, 12, nil)
	s.mustCreate("taken", "a_b")
	bad := newTopic("nullcfg", 1, 1)
	bad.Configs = append(bad.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: "retention.ms"})
	cases := []struct {
		topic kmsg.CreateTopicsRequestTopic
		err   *kerr.Error
	}{
		{newTopic("dup", 1, 1), kerr.InvalidRequest},
		{newTopic("bad/name", 1, 1), kerr.InvalidTopicException},
		{newTopic("taken", 1, 1), kerr.TopicAlreadyExists},
		{newTopic("a.b", 1, 1), kerr.InvalidTopicException},
		{newTopic("zero-partitions", 0, 1), kerr.InvalidPartitions},
		{newTopic("negative-partitions", -2, 1), kerr.InvalidPartitions},
		{newTopic("zero-rf", 1, 0), kerr.InvalidReplicationFactor},
		{newTopic("rf-too-big", 1, 2), kerr.InvalidReplicationFactor},
		{bad, kerr.InvalidConfig},
		{newTopic("unknown-cfg", 1, 1, "no.such.config", "1"), kerr.InvalidConfig},
		{newTopic("bad-value", 1, 1, "retention.ms", "soon"), kerr.InvalidConfig},
		{newTopic("ok", 1, 1, "cleanup.policy", "delete"), nil},
		{newTopic("compacted", 1, 1, "cleanup.policy", "compact"), kerr.InvalidConfig},
		{func() kmsg.CreateTopicsRequestTopic {
			t := manualTopic("manual-rf", map[int32][]int32{0: {1}})
			t.ReplicationFactor = 1
			return t
		}(), kerr.InvalidRequest},
		{manualTopic("manual-gap", map[int32][]int32{0: {1}, 2: {1}}), kerr.InvalidReplicaAssignment},
		{manualTopic("manual-empty", map[int32][]int32{0: {}}), kerr.InvalidReplicaAssignment},
		{manualTopic("manual-unknown-broker", map[int32][]int32{0: {7}}), kerr.InvalidReplicaAssignment},
		{manualTopic("manual-twice", map[int32][]int32{0: {1, 1}}), kerr.InvalidReplicaAssignment},
		{manualTopic("manual-ok", map[int32][]int32{0: {1}, 1: {1}}), nil}, // two partitions
		{func() kmsg.CreateTopicsRequestTopic {
			t := manualTopic("manual-count", map[int32][]int32{0: {1}})
			t.NumPartitions = 1
			return t
		}(), kerr.InvalidRequest},
		{func() kmsg.CreateTopicsRequestTopic {
			t := manualTopic("manual-repeat", map[int32][]int32{0: {1}})
			t.ReplicaAssignment = append(t.ReplicaAssignment, t.ReplicaAssignment[0])
			return t
		}(), kerr.InvalidReplicaAssignment},
		{newTopic("dup", 2, 1), kerr.InvalidRequest},
	}
	var topics []kmsg.CreateTopicsRequestTopic
	for _, c := range cases {
		topics = append(topics, c.topic)
	}
	resp := s.createTopics(7, false, topics...)
	// One result per name: the duplicate is answered once, where it first
	// appears.
	require.Len(t, resp.Topics, len(cases)-1)
	for i, c := range cases[:len(cases)-1] {
		rt := resp.Topics[i]
		require.Equal(t, c.topic.Topic, rt.Topic)
		if c.err == nil {
			require.Zero(t, rt.ErrorCode, "%s: %v", rt.Topic, rt.ErrorMessage)
			continue
		}
		require.Equal(t, c.err.Code, rt.ErrorCode, "%s: got %v (%v)", rt.Topic, kerr.ErrorForCode(rt.ErrorCode), rt.ErrorMessage)
		require.NotEmpty(t, *rt.ErrorMessage, rt.Topic)
	}
	require.Equal(t, []string{"a_b", "manual-ok", "ok", "taken"}, s.topicNames())
}

func TestCreateTopicsValidateOnlyAndZeroTimeoutCreateNothing(t *testing.T) {
	s := newSimBroker(t, 13, nil)
	resp := s.createTopics(7, true, newTopic("dry", 4, 1), newTopic("dry-bad", 1, 1, "retention.ms", "x"))
	require.Zero(t, resp.Topics[0].ErrorCode)
	require.Equal(t, int32(4), resp.Topics[0].NumPartitions)
	require.Equal(t, [16]byte{}, resp.Topics[0].TopicID, "a dry run creates no id")
	require.Equal(t, kerr.InvalidConfig.Code, resp.Topics[1].ErrorCode)

	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.TimeoutMillis = 4, 0
	req.Topics = append(req.Topics, newTopic("late", 1, 1))
	late := s.do(req).(*kmsg.CreateTopicsResponse)
	require.Equal(t, kerr.RequestTimedOut.Code, late.Topics[0].ErrorCode)
	require.Empty(t, s.topicNames())
}

func TestCreateTopicsRacingForOneNameCreateItOnce(t *testing.T) {
	s := newSimBroker(t, 14, nil)
	other := s.dialClient()
	s.slowDisk()
	first := s.send(s.client, s.createReq(newTopic("race", 1, 1)))
	s.runUntil("creation in flight", func() bool { return s.broker.creating["race"] })
	second := s.send(other, s.createReq(newTopic("race", 1, 1)))
	// The second is held until the first's outcome is known: answering
	// TOPIC_ALREADY_EXISTS sooner would name a topic the log may never get.
	s.world.Run(200 * time.Millisecond) // the first's sync takes a second
	require.Nil(t, *second, "answered while the first creation was in flight")
	s.runUntil("the first answered", answered(first))
	s.runUntil("the second answered", answered(second))
	require.Zero(t, (*first).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode)
	require.Equal(t, kerr.TopicAlreadyExists.Code, (*second).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode)
	require.Equal(t, []string{"race"}, s.topicNames())
}

func TestDeleteTopicsByNameAndByIDSurviveRestart(t *testing.T) {
	s := newSimBroker(t, 20, nil)
	s.mustCreate("a", "b", "c", "d", "e")
	ids := map[string][16]byte{}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	for _, mt := range s.do(md).(*kmsg.MetadataResponse).Topics {
		ids[*mt.Topic] = mt.TopicID
	}

	old := s.do(deleteByName(0, "a", "missing")).(*kmsg.DeleteTopicsResponse)
	require.Len(t, old.Topics, 2)
	require.Zero(t, old.Topics[0].ErrorCode)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, old.Topics[1].ErrorCode)

	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	byID := func(id [16]byte) kmsg.DeleteTopicsRequestTopic {
		t := kmsg.NewDeleteTopicsRequestTopic()
		t.TopicID = id
		return t
	}
	both := byID(ids["c"])
	both.Topic = kmsg.StringPtr("c")
	req.Topics = []kmsg.DeleteTopicsRequestTopic{
		byID(ids["b"]),
		byID([16]byte{9}),
		both,
		kmsg.NewDeleteTopicsRequestTopic(),
		deleteByName(6, "d").Topics[0],
		deleteByName(6, "d").Topics[0],
		deleteByName(6, "b").Topics[0], // b is also named by id above
		byID(ids["e"]),
		byID(ids["e"]),
	}
	resp := s.do(req).(*kmsg.DeleteTopicsResponse)
	want := []*kerr.Error{nil, kerr.UnknownTopicID, kerr.InvalidRequest, kerr.InvalidRequest, kerr.InvalidRequest,
		kerr.InvalidRequest, kerr.InvalidRequest}
	require.Len(t, resp.Topics, len(want))
	for i, w := range want {
		code := int16(0)
		if w != nil {
			code = w.Code
		}
		require.Equal(t, code, resp.Topics[i].ErrorCode, "entry %d: %v", i, resp.Topics[i].ErrorMessage)
	}
	require.Equal(t, "b", *resp.Topics[0].Topic, "a deletion by id names the topic")
	require.Equal(t, ids["b"], resp.Topics[5].TopicID)

	s.restart()
	require.Equal(t, []string{"c", "d", "e"}, s.topicNames())
	// A deleted name can be used again, under a new id.
	s.mustCreate("a")
	require.Equal(t, []string{"a", "c", "d", "e"}, s.topicNames())
	require.NotEqual(t, ids["a"], s.broker.image.TopicByName("a").ID)
}

func TestDeleteTopicsServesEveryVersion(t *testing.T) {
	s := newSimBroker(t, 21, nil)
	for v := int16(0); v <= 6; v++ {
		name := "v" + strconv.Itoa(int(v))
		s.mustCreate(name)
		resp := s.do(deleteByName(v, name, "nope")).(*kmsg.DeleteTopicsResponse)
		require.Len(t, resp.Topics, 2, "v%d", v)
		require.Equal(t, name, *resp.Topics[0].Topic)
		require.Zero(t, resp.Topics[0].ErrorCode, "v%d", v)
		require.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Topics[1].ErrorCode, "v%d", v)
		require.Equal(t, v >= 5, resp.Topics[1].ErrorMessage != nil, "v%d: ErrorMessage is v5+", v)
	}
	require.Empty(t, s.topicNames())

	s.mustCreate("kept")
	late := deleteByName(3, "kept")
	late.TimeoutMillis = -1
	require.Equal(t, kerr.RequestTimedOut.Code, s.do(late).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode)
	require.Equal(t, []string{"kept"}, s.topicNames())
}

func TestConcurrentDeletesOfOneTopicCommitOnce(t *testing.T) {
	s := newSimBroker(t, 22, nil)
	s.mustCreate("gone", "other")
	id := s.broker.image.TopicByName("gone").ID
	c2, c3 := s.dialClient(), s.dialClient()
	applied := s.broker.image.Applied
	s.slowDisk()
	first := s.send(s.client, deleteByName(6, "gone"))
	s.runUntil("deletion in flight", func() bool { return s.broker.deleting.pending(id) })
	second := s.send(c2, deleteByName(4, "gone", "other"))
	third := s.send(c3, deleteByName(1, "gone"))
	s.runUntil("both wait", func() bool { return len(s.broker.deleting.waiters[id]) == 2 })
	s.runUntil("all answered", answered(first, second, third))

	require.Zero(t, (*first).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode)
	got := (*second).(*kmsg.DeleteTopicsResponse).Topics
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, got[0].ErrorCode, "gone by the time it was planned")
	require.Zero(t, got[1].ErrorCode)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, (*third).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode)
	require.Equal(t, applied+2, s.broker.image.Applied, "one record per deleted topic")
	require.Empty(t, s.topicNames())
}

func TestDeleteRacingCreateAndAlterOfOneTopic(t *testing.T) {
	s := newSimBroker(t, 23, nil)
	if os.Getenv("SLUICE_LOG") != "" {
		s.world.SetLog(os.Stderr, slog.LevelDebug)
	}
	other := s.dialClient()
	s.slowDisk()
	create := s.send(s.client, s.createReq(newTopic("young", 1, 1)))
	s.runUntil("creation in flight", func() bool { return s.broker.creating["young"] })
	del := s.send(other, deleteByName(6, "young"))
	s.runUntil("both answered", answered(create, del))
	require.Zero(t, (*create).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, (*del).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode,
		"a topic still being created is not yet there to delete")

	id := s.broker.image.TopicByName("young").ID
	del = s.send(s.client, deleteByName(6, "young"))
	s.runUntil("deletion in flight", func() bool { return s.broker.deleting.pending(id) })
	alter := s.send(other, incrementalSet("young", "retention.ms", "5"))
	s.runUntil("both answered", answered(del, alter))
	require.Zero(t, (*del).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code,
		(*alter).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode, "the alteration waited for the deletion")
	s.restart()
	require.Empty(t, s.topicNames())
}

// A deleted topic's name may be reused at once: the new topic's partition
// waits for the old directory's removal before it opens, and starts empty.
func TestDeletedNameIsReusedOnceItsPartitionsAreGone(t *testing.T) {
	s := newSimBroker(t, 25, nil)
	s.mustCreate("x")
	oldID := s.broker.image.TopicByName("x").ID
	require.Len(t, s.produceValues("x", 0, "old"), 1)
	other := s.dialClient()
	s.slowDisk()
	del := s.send(s.client, deleteByName(6, "x"))
	s.runUntil("deletion committed, partitions not yet removed", func() bool {
		return s.broker.image.TopicByName("x") == nil && s.broker.removing["x-0"] != nil
	})
	create := s.send(other, s.createReq(newTopic("x", 1, 1)))
	s.runUntil("both answered", answered(del, create))
	require.Zero(t, (*del).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode)
	require.Zero(t, (*create).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode)
	require.NotEqual(t, oldID, s.broker.image.TopicByName("x").ID)
	s.runUntil("the new partition opened", func() bool { return len(s.broker.partitions) == 1 })
	_, recs := s.fetch("x", 0, 0)
	require.Empty(t, recs)
}

// A metadata log whose sync fails cannot be trusted any more (the kernel may
// have dropped the pages it could not write): the node stops serving, as
// Kafka's broker halts, and a restart recovers what is durable.
func TestFailedMetadataSyncStopsTheNode(t *testing.T) {
	s := newSimBroker(t, 24, nil)
	s.mustCreate("t")
	var fatal error
	s.broker.OnFatal(func(err error) { fatal = err })
	disk := s.world.Node("n1").Disk()
	require.NoError(t, disk.FailNext(simfs.OpSync, env.ErrIO))
	var resp kmsg.Response
	var err error
	done := false
	s.world.Node("c1").Post(func() {
		s.client.Request(incrementalSet("t", "retention.ms", "5"), func(r kmsg.Response, e error) { resp, err, done = r, e, true })
	})
	require.True(t, s.world.RunUntil(func() bool { return done }, time.Minute))
	if err == nil {
		require.Equal(t, kerr.UnknownServerError.Code, resp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode)
	}
	require.ErrorIs(t, fatal, env.ErrIO)
	require.Empty(t, s.broker.listeners, "the node stopped serving")
	s.restart()
	s.mustCreate("u")
	require.Equal(t, []string{"t", "u"}, s.topicNames())
}

func TestDescribeTopicConfigsReportsSourcesAndSynonyms(t *testing.T) {
	s := newSimBroker(t, 30, func(c *Config) { c.LogRetentionBytes = 1 << 30 })
	s.mustCreate("t")
	require.Zero(t, s.do(incrementalSet("t", "segment.bytes", "1048576")).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode)

	req := describeTopic(3, "t", "segment.bytes", "retention.bytes", "cleanup.policy", "no.such.key")
	req.IncludeSynonyms, req.IncludeDocumentation = true, true
	res := s.do(req).(*kmsg.DescribeConfigsResponse).Resources[0]
	require.Zero(t, res.ErrorCode)
	require.Len(t, res.Configs, 3, "only the asked keys that exist")
	got := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range res.Configs {
		got[c.Name] = c
		require.False(t, c.ReadOnly)
		require.NotNil(t, c.Documentation)
	}
	seg := got["segment.bytes"]
	require.Equal(t, "1048576", *seg.Value)
	require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, seg.Source)
	require.Equal(t, kmsg.ConfigTypeInt, seg.ConfigType)
	require.Len(t, seg.ConfigSynonyms, 2)
	require.Equal(t, "log.segment.bytes", seg.ConfigSynonyms[1].Name)
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, seg.ConfigSynonyms[1].Source)

	ret := got["retention.bytes"]
	require.Equal(t, "1073741824", *ret.Value)
	require.Equal(t, kmsg.ConfigSourceStaticBrokerConfig, ret.Source)
	require.Equal(t, []string{"log.retention.bytes", "log.retention.bytes"},
		[]string{ret.ConfigSynonyms[0].Name, ret.ConfigSynonyms[1].Name})
	require.Equal(t, "-1", *ret.ConfigSynonyms[1].Value)
	require.Equal(t, kmsg.ConfigTypeList, got["cleanup.policy"].ConfigType)

	// v0 knows no source: IsDefault says whether the topic sets the value.
	v0 := s.do(describeTopic(0, "t", "segment.bytes", "retention.bytes")).(*kmsg.DescribeConfigsResponse).Resources[0]
	require.Equal(t, []string{"retention.bytes", "segment.bytes"}, []string{v0.Configs[0].Name, v0.Configs[1].Name})
	require.True(t, v0.Configs[0].IsDefault)
	require.False(t, v0.Configs[1].IsDefault)
	require.Empty(t, v0.Configs[1].ConfigSynonyms)

	// Every key when none are named; errors per resource.
	all := describeTopic(4, "t")
	for _, name := range []string{"missing", "bad/name"} {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, name
		all.Resources = append(all.Resources, rr)
	}
	resp := s.do(all).(*kmsg.DescribeConfigsResponse)
	require.Len(t, resp.Resources[0].Configs, len(topicConfigDefs()))
	require.Nil(t, resp.Resources[0].Configs[0].Documentation, "documentation only when asked")
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Resources[1].ErrorCode)
	require.Equal(t, kerr.InvalidTopicException.Code, resp.Resources[2].ErrorCode)
	require.NotNil(t, resp.Resources[2].ErrorMessage)
}

func TestDescribeBrokerConfigs(t *testing.T) {
	s := newSimBroker(t, 31, func(c *Config) { c.NumPartitions, c.RequestReadTimeout = 3, 5*time.Second })
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version, req.IncludeSynonyms = 4, true
	for _, rr := range []struct {
		typ  kmsg.ConfigResourceType
		name string
	}{
		{kmsg.ConfigResourceTypeBroker, "1"},
		{kmsg.ConfigResourceTypeBroker, ""},
		{kmsg.ConfigResourceTypeBroker, "2"},
		{kmsg.ConfigResourceTypeBroker, "one"},
		{kmsg.ConfigResourceTypeBrokerLogger, "1"},
		{kmsg.ConfigResourceTypeBrokerLogger, ""},
		{kmsg.ConfigResourceTypeGroupConfig, "g"},
		{kmsg.ConfigResourceType(3), "x"},
		{kmsg.ConfigResourceTypeBrokerLogger, "3"},
	} {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = rr.typ, rr.name
		req.Resources = append(req.Resources, r)
	}
	resp := s.do(req).(*kmsg.DescribeConfigsResponse)
	got := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		got[c.Name] = c
		dynamic := c.Name == leaderThrottledRateConfig || c.Name == followerThrottledRateConfig
		require.Equal(t, !dynamic, c.ReadOnly, c.Name)
	}
	require.Equal(t, "1", *got["node.id"].Value)
	require.Equal(t, kmsg.ConfigSourceStaticBrokerConfig, got["node.id"].Source)
	require.Equal(t, "PLAINTEXT://n1:9092", *got["listeners"].Value)
	np := got["num.partitions"]
	require.Equal(t, "3", *np.Value)
	require.Equal(t, kmsg.ConfigSourceStaticBrokerConfig, np.Source)
	require.Len(t, np.ConfigSynonyms, 2)
	require.Equal(t, "1", *np.ConfigSynonyms[1].Value)
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, got["message.max.bytes"].Source)
	require.Equal(t, "1", *got["min.insync.replicas"].Value, "the broker keys behind topic defaults are listed")
	idle := got["connections.max.idle.ms"]
	require.Equal(t, "600000", *idle.Value)
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, idle.Source)
	read := got["sluice.request.read.timeout.ms"]
	require.Equal(t, "5000", *read.Value)
	require.Equal(t, kmsg.ConfigSourceStaticBrokerConfig, read.Source)
	require.Equal(t, "30000", *read.ConfigSynonyms[1].Value, "the default, as a synonym")

	require.Zero(t, resp.Resources[1].ErrorCode)
	require.Empty(t, resp.Resources[1].Configs, "no dynamic cluster-wide defaults set")
	for _, i := range []int{2, 3, 5, 6, 7, 8} {
		require.Equal(t, kerr.InvalidRequest.Code, resp.Resources[i].ErrorCode, "resource %d", i)
		require.NotNil(t, resp.Resources[i].ErrorMessage, "resource %d", i)
	}
	logger := resp.Resources[4]
	require.Zero(t, logger.ErrorCode)
	require.Len(t, logger.Configs, 1)
	require.Equal(t, "root", logger.Configs[0].Name)
	require.Equal(t, kmsg.ConfigSourceDynamicBrokerLoggerConfig, logger.Configs[0].Source)
}

func TestDescribeConfigsServesEveryVersion(t *testing.T) {
	s := newSimBroker(t, 32, nil)
	s.mustCreate("t")
	for v := int16(0); v <= 4; v++ {
		req := describeTopic(v, "t", "retention.ms")
		req.IncludeSynonyms, req.IncludeDocumentation = true, true
		res := s.do(req).(*kmsg.DescribeConfigsResponse).Resources[0]
		require.Zero(t, res.ErrorCode, "v%d", v)
		require.Len(t, res.Configs, 1, "v%d", v)
		c := res.Configs[0]
		require.Equal(t, "604800000", *c.Value, "v%d", v)
		require.Equal(t, v >= 1, len(c.ConfigSynonyms) > 0, "v%d: synonyms are v1+", v)
		require.Equal(t, v >= 3, c.Documentation != nil, "v%d: documentation is v3+", v)
		require.Equal(t, v >= 3, c.ConfigType == kmsg.ConfigTypeLong, "v%d: types are v3+", v)
	}
}

// Every topic config's default comes from a broker entry with the same value.
func TestTopicDefaultsMatchBrokerEntries(t *testing.T) {
	cfg := DefaultConfig()
	cfg.LogRetentionBytes, cfg.MessageMaxBytes, cfg.LogRollMs = 5, 7, 3600*1000
	broker := map[string]configEntry{}
	for _, e := range cfg.brokerConfigEntries() {
		broker[e.name] = e
	}
	for _, d := range topicConfigDefs() {
		if d.brokerName == "" {
			require.NotContains(t, broker, "", "%s has no broker synonym", d.name)
			continue
		}
		e, ok := broker[d.brokerName]
		require.True(t, ok, "%s: no broker entry %s", d.name, d.brokerName)
		require.Equal(t, d.defaultValue(cfg), e.value, d.name)
	}
	for _, d := range brokerConfigDefs() {
		// DefaultConfig listens on 127.0.0.1, where Kafka listens on every
		// address; the rest are Kafka's defaults.
		if d.kafkaDefault != nil && d.static == nil && d.name != "listeners" {
			require.Equal(t, *d.kafkaDefault, d.value(DefaultConfig()), "%s: DefaultConfig is Kafka's default", d.name)
		}
	}
}

func incrementalSet(topic string, kv ...string) *kmsg.IncrementalAlterConfigsRequest {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Version = 1
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	for i := 0; i+1 < len(kv); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = kv[i], kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(kv[i+1])
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	return req
}

func alterOpConfig(name string, op kmsg.IncrementalAlterConfigOp, value *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = name, op, value
	return c
}

func TestIncrementalAlterConfigsSetsAppendsDeletesAndPersists(t *testing.T) {
	s := newSimBroker(t, 40, nil)
	s.mustCreate("t")
	req := incrementalSet("t", "retention.ms", "60000", "segment.bytes", "1048576")
	req.Resources[0].Configs = append(req.Resources[0].Configs,
		alterOpConfig("cleanup.policy", kmsg.IncrementalAlterConfigOpAppend, kmsg.StringPtr("delete")))
	for v := int16(0); v <= 1; v++ {
		req.Version = v
		res := s.do(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
		require.Zero(t, res.ErrorCode, "v%d: %v", v, res.ErrorMessage)
		require.Equal(t, "t", res.ResourceName)
	}
	s.restart()
	got := s.topicConfigs("t")
	require.Equal(t, "60000", *got["retention.ms"].Value)
	require.Equal(t, "delete", *got["cleanup.policy"].Value, "appending an item already there adds nothing")

	// Compaction is not implemented: asking for it is INVALID_CONFIG.
	compact := incrementalSet("t")
	compact.Resources[0].Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{
		alterOpConfig("cleanup.policy", kmsg.IncrementalAlterConfigOpAppend, kmsg.StringPtr("compact")),
	}
	require.Equal(t, kerr.InvalidConfig.Code, s.do(compact).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode)

	del := incrementalSet("t")
	del.Resources[0].Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{
		alterOpConfig("retention.ms", kmsg.IncrementalAlterConfigOpDelete, nil),
	}
	require.Zero(t, s.do(del).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode)
	s.restart()
	got = s.topicConfigs("t")
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, got["retention.ms"].Source)
	require.Equal(t, "delete", *got["cleanup.policy"].Value)
	require.Equal(t, "1048576", *got["segment.bytes"].Value)

	dry := incrementalSet("t", "segment.bytes", "2097152")
	dry.ValidateOnly = true
	require.Zero(t, s.do(dry).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode)
	require.Equal(t, "1048576", *s.topicConfigs("t")["segment.bytes"].Value)
}

func TestIncrementalAlterConfigsErrors(t *testing.T) {
	s := newSimBroker(t, 41, nil)
	s.mustCreate("t")
	applied := s.broker.image.Applied
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Version = 1
	add := func(typ kmsg.ConfigResourceType, name string, configs ...kmsg.IncrementalAlterConfigsRequestResourceConfig) {
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName, rr.Configs = typ, name, configs
		req.Resources = append(req.Resources, rr)
	}
	set := func(k, v string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		return alterOpConfig(k, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(v))
	}
	topic := kmsg.ConfigResourceTypeTopic
	add(topic, "missing", set("retention.ms", "1"))
	add(topic, "t", set("no.such.key", "1"))
	add(topic, "t", set("retention.ms", "1")) // t twice: both refused
	add(topic, "bad/name", set("retention.ms", "1"))
	add(topic, "", set("retention.ms", "1"))
	add(kmsg.ConfigResourceTypeBroker, "1", set("num.partitions", "2"))
	add(kmsg.ConfigResourceTypeBroker, "2")
	add(kmsg.ConfigResourceTypeBroker, "")
	add(kmsg.ConfigResourceTypeBrokerLogger, "1", set("root", "DEBUG"))
	add(kmsg.ConfigResourceType(9), "x")
	add(kmsg.ConfigResourceTypeGroupConfig, "g", set("consumer.session.timeout.ms", "6000"))
	want := []*kerr.Error{
		kerr.UnknownTopicOrPartition, kerr.InvalidRequest, kerr.InvalidRequest, kerr.InvalidTopicException,
		kerr.InvalidRequest, kerr.InvalidRequest, kerr.InvalidRequest, nil, kerr.InvalidRequest, kerr.InvalidRequest,
		kerr.InvalidRequest,
	}
	resp := s.do(req).(*kmsg.IncrementalAlterConfigsResponse)
	require.Len(t, resp.Resources, len(want))
	for i, w := range want {
		res := resp.Resources[i]
		if w == nil {
			require.Zero(t, res.ErrorCode, "resource %d: %v", i, res.ErrorMessage)
			continue
		}
		require.Equal(t, w.Code, res.ErrorCode, "resource %d: got %v (%v)", i, kerr.ErrorForCode(res.ErrorCode), res.ErrorMessage)
		require.NotNil(t, res.ErrorMessage, "resource %d", i)
	}

	for _, c := range []struct {
		configs []kmsg.IncrementalAlterConfigsRequestResourceConfig
		err     *kerr.Error
		msg     string
	}{
		{[]kmsg.IncrementalAlterConfigsRequestResourceConfig{set("retention.ms", "1"), set("retention.ms", "2")},
			kerr.InvalidRequest, "duplicate config keys"},
		{[]kmsg.IncrementalAlterConfigsRequestResourceConfig{alterOpConfig("retention.ms", kmsg.IncrementalAlterConfigOpSet, nil)},
			kerr.InvalidRequest, "Null value"},
		{[]kmsg.IncrementalAlterConfigsRequestResourceConfig{alterOpConfig("retention.ms", kmsg.IncrementalAlterConfigOp(7), kmsg.StringPtr("1"))},
			kerr.InvalidRequest, "Unknown operations type 7"},
		{[]kmsg.IncrementalAlterConfigsRequestResourceConfig{alterOpConfig("retention.ms", kmsg.IncrementalAlterConfigOpAppend, kmsg.StringPtr("1"))},
			kerr.InvalidConfig, "not LIST"},
		{[]kmsg.IncrementalAlterConfigsRequestResourceConfig{set("retention.ms", "-5")},
			kerr.InvalidConfig, "retention.ms"},
		{[]kmsg.IncrementalAlterConfigsRequestResourceConfig{set("cleanup.policy", "delete,shred")},
			kerr.InvalidConfig, "cleanup.policy"},
	} {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		add := kmsg.NewIncrementalAlterConfigsRequestResource()
		add.ResourceType, add.ResourceName, add.Configs = topic, "t", c.configs
		req.Resources = append(req.Resources, add)
		res := s.do(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
		require.Equal(t, c.err.Code, res.ErrorCode, c.msg)
		require.Contains(t, *res.ErrorMessage, c.msg)
	}
	require.Equal(t, applied, s.broker.image.Applied, "no refused change was committed")
}

func TestAlterConfigsReplacesTheWholeSet(t *testing.T) {
	s := newSimBroker(t, 42, nil)
	s.mustCreate("t")
	legacy := func(version int16, validateOnly bool, kv ...string) *kmsg.AlterConfigsResponseResource {
		req := kmsg.NewPtrAlterConfigsRequest()
		req.Version, req.ValidateOnly = version, validateOnly
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
		for i := 0; i+1 < len(kv); i += 2 {
			c := kmsg.NewAlterConfigsRequestResourceConfig()
			c.Name, c.Value = kv[i], kmsg.StringPtr(kv[i+1])
			rr.Configs = append(rr.Configs, c)
		}
		req.Resources = append(req.Resources, rr)
		return &s.do(req).(*kmsg.AlterConfigsResponse).Resources[0]
	}
	require.Zero(t, legacy(0, false, "retention.ms", "1000", "segment.bytes", "1048576").ErrorCode)
	require.Zero(t, legacy(2, false, "retention.ms", "2000").ErrorCode)
	require.Zero(t, legacy(1, true, "retention.ms", "3000").ErrorCode)
	bad := legacy(2, false, "retention.ms", "x")
	require.Equal(t, kerr.InvalidConfig.Code, bad.ErrorCode)
	require.Contains(t, *bad.ErrorMessage, "retention.ms")
	s.restart()
	got := s.topicConfigs("t")
	require.Equal(t, "2000", *got["retention.ms"].Value)
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, got["segment.bytes"].Source, "an unlisted config returns to its default")

	req := kmsg.NewPtrAlterConfigsRequest()
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, "1"
	req.Resources = append(req.Resources, rr)
	res := s.do(req).(*kmsg.AlterConfigsResponse).Resources[0]
	require.Equal(t, kerr.InvalidRequest.Code, res.ErrorCode)
	require.Equal(t, "Unknown resource type 8", *res.ErrorMessage)
}

func TestConcurrentAlterationsOfOneTopicApplyInOrder(t *testing.T) {
	s := newSimBroker(t, 43, nil)
	s.mustCreate("t")
	other := s.dialClient()
	s.slowDisk()
	replace := kmsg.NewPtrAlterConfigsRequest()
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	rr.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: kmsg.StringPtr("7")}}
	replace.Resources = append(replace.Resources, rr)

	first := s.send(s.client, incrementalSet("t", "segment.bytes", "1048576"))
	s.runUntil("alteration in flight", func() bool { return s.broker.altering.pending("t") })
	second := s.send(other, replace)
	s.runUntil("second waits", func() bool { return len(s.broker.altering.waiters["t"]) == 1 })
	s.runUntil("both answered", answered(first, second))
	require.Zero(t, (*first).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode)
	require.Zero(t, (*second).(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode)
	got := s.topicConfigs("t")
	require.Equal(t, "7", *got["retention.ms"].Value)
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, got["segment.bytes"].Source,
		"the replacement, checked after the first change applied, removed it")
}

func TestDescribeCluster(t *testing.T) {
	s := newSimBroker(t, 50, nil)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	clusterID := *s.do(md).(*kmsg.MetadataResponse).ClusterID
	for v := int16(0); v <= 2; v++ {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version, req.IncludeClusterAuthorizedOperations, req.IncludeFencedBrokers = v, true, true
		resp := s.do(req).(*kmsg.DescribeClusterResponse)
		require.Zero(t, resp.ErrorCode, "v%d", v)
		require.Equal(t, clusterID, resp.ClusterID)
		require.Equal(t, int32(1), resp.ControllerID)
		require.Len(t, resp.Brokers, 1)
		require.Equal(t, "n1", resp.Brokers[0].Host)
		require.Equal(t, int32(9092), resp.Brokers[0].Port)
		require.False(t, resp.Brokers[0].IsFenced)
		require.Equal(t, clusterOperationsAll, resp.ClusterAuthorizedOperations)
	}
	plain := kmsg.NewPtrDescribeClusterRequest()
	require.Equal(t, int32(-2147483648), s.do(plain).(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations)
	for endpoint, want := range map[int8]*kerr.Error{2: kerr.MismatchedEndpointType, 3: kerr.UnsupportedEndpointType} {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version, req.EndpointType = 1, endpoint
		resp := s.do(req).(*kmsg.DescribeClusterResponse)
		require.Equal(t, want.Code, resp.ErrorCode)
		require.NotNil(t, resp.ErrorMessage)
	}
}
