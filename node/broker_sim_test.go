package node

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim"
	"github.com/sluicemq/sluice/wire"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// simBroker is one broker and one client node in a simulated world, for
// handler tests that speak the real protocol over simulated connections.
type simBroker struct {
	t      *testing.T
	world  *sim.World
	broker *Broker
	client *wire.Client
	cfg    Config
	// onStart, when set, receives the outcome of every start instead of
	// the test failing on an error.
	onStart func(error)
}

func newSimBroker(t *testing.T, seed uint64, tweak func(*Config)) *simBroker {
	t.Helper()
	s := &simBroker{t: t, world: sim.New(seed), cfg: DefaultConfig()}
	s.cfg.Listeners = []Listener{{Name: "PLAINTEXT", Host: "n1", Port: 9092}}
	if tweak != nil {
		tweak(&s.cfg)
	}
	s.world.AddNode("n1", func(e env.Env) {
		b, err := New(e, s.cfg)
		require.NoError(t, err)
		s.broker = b
		b.Start(func(err error) {
			if s.onStart != nil {
				s.onStart(err)
				return
			}
			require.NoError(t, err)
		})
	})
	s.world.AddNode("c1", func(env.Env) {})
	s.waitRunning()
	s.connect()
	return s
}

func (s *simBroker) waitRunning() {
	s.t.Helper()
	ok := s.world.RunUntil(func() bool { return s.broker != nil && s.broker.state == stateRunning }, time.Minute)
	require.True(s.t, ok, "broker did not start")
}

func (s *simBroker) connect() {
	s.t.Helper()
	s.client = nil
	var dialErr error
	done := false
	s.world.Node("c1").Post(func() {
		wire.Dial(s.world.Node("c1").Env().Net, "n1:9092", "test", func(c *wire.Client, err error) {
			s.client, dialErr, done = c, err, true
		})
	})
	require.True(s.t, s.world.RunUntil(func() bool { return done }, time.Minute), "dial did not complete")
	require.NoError(s.t, dialErr)
}

// do sends req from the client and runs the world until its response.
func (s *simBroker) do(req kmsg.Request) kmsg.Response {
	s.t.Helper()
	var resp kmsg.Response
	var err error
	done := false
	s.world.Node("c1").Post(func() {
		s.client.Request(req, func(r kmsg.Response, e error) { resp, err, done = r, e, true })
	})
	require.True(s.t, s.world.RunUntil(func() bool { return done }, 5*time.Minute), "no response to %s", kmsg.NameForKey(req.Key()))
	require.NoError(s.t, err)
	return resp
}

// restart crashes the broker node (memory and unsynced disk state lost)
// and boots it again.
func (s *simBroker) restart() {
	s.t.Helper()
	s.world.Node("n1").Crash()
	s.broker = nil
	s.world.Node("n1").Restart()
	s.waitRunning()
	s.connect()
}

func TestApiVersionsListsServedAPIs(t *testing.T) {
	s := newSimBroker(t, 1, nil)
	for _, v := range []int16{0, 3, 4} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1.0"
		resp := s.do(req).(*kmsg.ApiVersionsResponse)
		require.Zero(t, resp.ErrorCode, "v%d", v)
		keys := map[int16]bool{}
		for _, k := range resp.ApiKeys {
			keys[k.ApiKey] = true
		}
		require.True(t, keys[3] && keys[18] && keys[22], "v%d lists %v", v, resp.ApiKeys)
	}
}

func TestMetadataDescribesBrokerAndAutoCreatesTopics(t *testing.T) {
	s := newSimBroker(t, 2, func(c *Config) { c.NumPartitions = 3 })
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	req.AllowAutoTopicCreation = true
	topic := kmsg.NewMetadataRequestTopic()
	name := "orders"
	topic.Topic = &name
	req.Topics = append(req.Topics, topic)
	resp := s.do(req).(*kmsg.MetadataResponse)
	require.Len(t, resp.Brokers, 1)
	require.Equal(t, "n1", resp.Brokers[0].Host)
	require.Equal(t, int32(9092), resp.Brokers[0].Port)
	require.NotNil(t, resp.ClusterID)
	require.Len(t, resp.Topics, 1)
	mt := resp.Topics[0]
	require.Zero(t, mt.ErrorCode, kerr.ErrorForCode(mt.ErrorCode))
	require.Len(t, mt.Partitions, 3)
	require.NotEqual(t, [16]byte{}, mt.TopicID)

	// The topic, its id and the cluster id survive a crash.
	s.restart()
	all := kmsg.NewPtrMetadataRequest()
	all.Version = 2
	again := s.do(all).(*kmsg.MetadataResponse)
	require.Equal(t, *resp.ClusterID, *again.ClusterID)
	require.Len(t, again.Topics, 1)
	require.Equal(t, "orders", *again.Topics[0].Topic)

	// v0: an empty list means every topic; unknown and invalid names.
	v0 := kmsg.NewPtrMetadataRequest()
	require.Len(t, s.do(v0).(*kmsg.MetadataResponse).Topics, 1)
	noAuto := kmsg.NewPtrMetadataRequest()
	noAuto.Version = 12
	for _, n := range []string{"missing", "bad/name"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = &n
		noAuto.Topics = append(noAuto.Topics, rt)
	}
	got := s.do(noAuto).(*kmsg.MetadataResponse)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, got.Topics[0].ErrorCode)
	require.Equal(t, kerr.InvalidTopicException.Code, got.Topics[1].ErrorCode)
}

func TestProducerIDsNeverRepeatAcrossRestarts(t *testing.T) {
	s := newSimBroker(t, 3, nil)
	seen := map[int64]bool{}
	last := int64(-1)
	for round := 0; round < 3; round++ {
		for i := 0; i < 5; i++ {
			resp := s.do(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
			require.Zero(t, resp.ErrorCode)
			require.False(t, seen[resp.ProducerID], "producer id %d handed out twice", resp.ProducerID)
			require.Greater(t, resp.ProducerID, last)
			seen[resp.ProducerID], last = true, resp.ProducerID
		}
		s.restart()
	}
	txn := kmsg.NewPtrInitProducerIDRequest()
	id := "txn-1"
	txn.TransactionalID = &id
	require.Equal(t, kerr.UnsupportedVersion.Code, s.do(txn).(*kmsg.InitProducerIDResponse).ErrorCode)
}
