package node

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/wire"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Simulator tests of what the broker's configuration keys mean once the
// broker runs: -1 as Kafka's "unlimited", and what DescribeConfigs shows.

// newPropsBroker starts a broker configured by properties text, as sluice
// serve would read it, over small segments and a one-second retention pass.
func newPropsBroker(t *testing.T, seed uint64, props string) *simBroker {
	t.Helper()
	return newSimBroker(t, seed, func(c *Config) {
		cfg, unknown, err := ParseProperties("log.segment.bytes=1024\nlog.retention.check.interval.ms=1000\n"+props, *c)
		require.NoError(t, err)
		require.Empty(t, unknown)
		*c = cfg
	})
}

// produceMany produces n records of 100 bytes, one batch each, stamped
// with the broker's clock minus age.
func (s *simBroker) produceMany(topic string, n int, age time.Duration) {
	s.t.Helper()
	ts := s.world.Node("n1").Clock().Now().Add(-age).UnixMilli()
	for i := 0; i < n; i++ {
		p := s.produce(topic, 0, -1, valueBatch(wire.NoProducer, ts, fmt.Sprintf("%0100d", i)))
		require.Zero(s.t, p.ErrorCode, kerr.ErrorForCode(p.ErrorCode))
	}
}

// requireAllKept checks that every one of n records is still served from
// offset 0.
func (s *simBroker) requireAllKept(topic string, n int) {
	s.t.Helper()
	var got int
	for offset := int64(0); offset < int64(n); {
		p, recs := s.fetch(topic, 0, offset)
		require.Zero(s.t, p.ErrorCode, "fetch at %d: %v (log start %d)", offset, kerr.ErrorForCode(p.ErrorCode), p.LogStartOffset)
		require.Zero(s.t, p.LogStartOffset, "retention deleted segments")
		require.NotEmpty(s.t, recs, "fetch at %d", offset)
		got += len(recs)
		offset += int64(len(recs))
	}
	require.Equal(s.t, n, got)
}

func (s *simBroker) brokerConfigs() map[string]string {
	s.t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version = 4
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	req.Resources = append(req.Resources, rr)
	res := s.do(req).(*kmsg.DescribeConfigsResponse).Resources[0]
	require.Zero(s.t, res.ErrorCode, kerr.ErrorForCode(res.ErrorCode))
	out := map[string]string{}
	for _, c := range res.Configs {
		out[c.Name] = *c.Value
	}
	return out
}

// -1 is Kafka's documented "keep forever" for every unit of
// log.retention.*: 200 records in 1 KiB segments, retention passes every
// second, and all of them are still there ten seconds later; DescribeConfigs
// shows -1 for the broker key and for the topic default it supplies.
func TestBrokerRetentionMinusOneKeepsEverything(t *testing.T) {
	for i, key := range []string{"log.retention.ms", "log.retention.minutes", "log.retention.hours"} {
		t.Run(key, func(t *testing.T) {
			s := newPropsBroker(t, 40+uint64(i), key+"=-1\n")
			s.createTopic("t", 1)
			s.produceMany("t", 200, 30*24*time.Hour)
			s.world.Run(10 * time.Second)
			s.requireAllKept("t", 200)
			require.Equal(t, "-1", s.brokerConfigs()["log.retention.ms"])
			rc := s.topicConfigs("t")["retention.ms"]
			require.Equal(t, "-1", *rc.Value)
			require.Equal(t, kmsg.ConfigSourceStaticBrokerConfig, rc.Source)
		})
	}
}

// The topic key retention.ms=-1 keeps a topic's data over a broker default
// that would delete it, and reads back as -1.
func TestTopicRetentionMinusOneKeepsEverything(t *testing.T) {
	s := newPropsBroker(t, 44, "log.retention.ms=1000\n")
	resp := s.createTopics(7, false, newTopic("t", 1, 1, "retention.ms", "-1"))
	require.Zero(t, resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage)
	s.produceMany("t", 200, 30*24*time.Hour)
	s.world.Run(10 * time.Second)
	s.requireAllKept("t", 200)
	require.Equal(t, "-1", *s.topicConfigs("t")["retention.ms"].Value)
}

// log.retention.bytes=-1 (Kafka's default) and retention.bytes=-1 keep
// everything; retention.bytes=0 is Kafka's "only the active segment", not
// the log's own default.
func TestRetentionBytes(t *testing.T) {
	s := newPropsBroker(t, 45, "log.retention.bytes=-1\n")
	s.mustCreate("unlimited")
	resp := s.createTopics(7, false, newTopic("zero", 1, 1, "retention.bytes", "0"))
	require.Zero(t, resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage)
	s.produceMany("unlimited", 50, 0)
	s.produceMany("zero", 50, 0)
	s.world.Run(5 * time.Second)
	s.requireAllKept("unlimited", 50)
	require.Equal(t, "-1", *s.topicConfigs("unlimited")["retention.bytes"].Value)
	p, _ := s.fetch("zero", 0, 49)
	require.Zero(t, p.ErrorCode)
	require.Greater(t, p.LogStartOffset, int64(0), "retention.bytes=0 deletes every segment but the active one")
}

// A topic's retention.ms below -1, retention.bytes below -1 and segment.ms
// below 1 are refused by name at creation and by both alter APIs.
func TestTopicConfigsRefuseNegativesOtherThanUnlimited(t *testing.T) {
	s := newSimBroker(t, 46, nil)
	s.mustCreate("t")
	for _, kv := range [][2]string{
		{"retention.ms", "-5"}, {"retention.ms", "-2"}, {"retention.bytes", "-2"},
		{"segment.ms", "0"}, {"segment.ms", "-1"},
	} {
		resp := s.createTopics(7, false, newTopic("new", 1, 1, kv[0], kv[1]))
		rt := resp.Topics[0]
		require.Equal(t, kerr.InvalidConfig.Code, rt.ErrorCode, "%s=%s", kv[0], kv[1])
		require.Contains(t, *rt.ErrorMessage, kv[0])

		inc := s.do(incrementalSet("t", kv[0], kv[1])).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
		require.Equal(t, kerr.InvalidConfig.Code, inc.ErrorCode, "%s=%s", kv[0], kv[1])
		require.Contains(t, *inc.ErrorMessage, kv[0])

		req := kmsg.NewPtrAlterConfigsRequest()
		res := kmsg.NewAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kv[0], kmsg.StringPtr(kv[1])
		res.Configs = append(res.Configs, c)
		req.Resources = append(req.Resources, res)
		alt := s.do(req).(*kmsg.AlterConfigsResponse).Resources[0]
		require.Equal(t, kerr.InvalidConfig.Code, alt.ErrorCode, "%s=%s", kv[0], kv[1])
		require.Contains(t, *alt.ErrorMessage, kv[0])
	}
	require.Equal(t, []string{"t"}, s.topicNames())
}

// log.roll.ms and log.roll.hours set segment.ms in milliseconds: an hour
// of rolling keeps 200 small batches in a few segments, not one each.
func TestLogRollSetsSegmentMs(t *testing.T) {
	for i, tc := range []struct{ props, want string }{
		{"log.roll.hours=1\n", "3600000"},
		{"log.roll.ms=3600000\n", "3600000"},
		{"log.roll.hours=2\nlog.roll.ms=1000\n", "1000"}, // the finer unit wins
	} {
		s := newSimBroker(t, 47+uint64(i), func(c *Config) {
			cfg, _, err := ParseProperties(tc.props, *c)
			require.NoError(t, err)
			*c = cfg
		})
		s.mustCreate("t")
		require.Equal(t, tc.want, *s.topicConfigs("t")["segment.ms"].Value, tc.props)
		require.Equal(t, tc.want, s.brokerConfigs()["log.roll.ms"], tc.props)
	}
}

func autoCreateRequest(names ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Version, req.AllowAutoTopicCreation = 12, true
	for _, n := range names {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// An auto-creation that cannot be satisfied answers the client with the
// creation's error, the topic named and without partitions, and logs one
// line per topic however often the client retries (then again after
// autoCreateLogInterval). A start-up check keeps default.replication.factor
// within the brokers a configuration can have; a replication factor above
// the registered brokers stays possible once clusters have several nodes
// (a broker not yet registered), which the test stands in for by changing
// the running broker's default.
func TestUnsatisfiableAutoCreationAnswersTheErrorAndLogsOnce(t *testing.T) {
	// The client's connection waits out autoCreateLogInterval, as long as
	// connections.max.idle.ms.
	s := newSimBroker(t, 48, func(c *Config) { c.ConnectionsMaxIdle = -1 })
	var logs bytes.Buffer
	s.world.SetLog(&logs, slog.LevelWarn)
	s.broker.cfg.DefaultReplicationFactor = 3
	for i := 0; i < 20; i++ {
		resp := s.do(autoCreateRequest("three", "bad/name")).(*kmsg.MetadataResponse)
		require.Len(t, resp.Topics, 2)
		mt := resp.Topics[0]
		require.Equal(t, "three", *mt.Topic)
		require.Equal(t, kerr.InvalidReplicationFactor.Code, mt.ErrorCode, kerr.ErrorForCode(mt.ErrorCode))
		require.Empty(t, mt.Partitions)
		require.Equal(t, kerr.InvalidTopicException.Code, resp.Topics[1].ErrorCode)
		s.world.Run(time.Second)
	}
	require.Equal(t, 1, strings.Count(logs.String(), "auto-creation of a topic failed"), logs.String())
	require.Contains(t, logs.String(), "topic=three")
	require.Contains(t, logs.String(), "INVALID_REPLICATION_FACTOR")
	require.Contains(t, logs.String(), "only 1 broker(s) are registered")

	s.world.Run(autoCreateLogInterval)
	s.do(autoCreateRequest("three"))
	require.Equal(t, 2, strings.Count(logs.String(), "auto-creation of a topic failed"), logs.String())
	require.Contains(t, logs.String(), "failures_since_last_logged=19")

	// Nothing was created; with a replication factor the cluster can
	// satisfy, the same request creates the topic.
	require.Empty(t, s.topicNames())
	s.broker.cfg.DefaultReplicationFactor = 1
	mt := s.do(autoCreateRequest("three")).(*kmsg.MetadataResponse).Topics[0]
	require.Zero(t, mt.ErrorCode)
	require.Len(t, mt.Partitions, 1)
}

// default.replication.factor above the brokers a configuration can ever
// have is refused when the broker is made, with what to set.
func TestReplicationFactorAboveTheClusterIsRefusedAtStart(t *testing.T) {
	cfg, _, err := ParseProperties("default.replication.factor=3", DefaultConfig())
	require.NoError(t, err, "the key alone is valid")
	err = cfg.Validate()
	require.ErrorContains(t, err, "default.replication.factor=3")
	require.ErrorContains(t, err, "set default.replication.factor=1")
	_, err = New(env.Env{}, cfg)
	require.ErrorContains(t, err, "default.replication.factor=3")
}

// metadata.log.dir in a directory of its own needs the environment to give
// the node a file system for it (osenv's Config.MetadataDir); without one
// the node refuses, naming the key.
func TestMetadataLogDirOfItsOwnNeedsAFileSystem(t *testing.T) {
	cfg, _, err := ParseProperties("log.dirs=/srv/data\nmetadata.log.dir=/srv/meta", DefaultConfig())
	require.NoError(t, err)
	require.NoError(t, cfg.Validate())
	require.Equal(t, "/srv/meta", cfg.MetadataDir())
	_, err = New(env.Env{}, cfg)
	require.ErrorContains(t, err, "metadata.log.dir=/srv/meta is not log.dirs")
}
