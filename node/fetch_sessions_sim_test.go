package node

import (
	"runtime"
	"testing"
	"time"

	"github.com/sluicemq/sluice/wire"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func sessionFetch(id, epoch int32, topic string, parts map[int32]int64, forget []int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.MinBytes, req.MaxBytes = 0, 1<<20
	req.SessionID, req.SessionEpoch = id, epoch
	if len(parts) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		for _, p := range sortedKeys(parts) {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, parts[p], 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.Partitions = topic, forget
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return req
}

func partitionsIn(resp *kmsg.FetchResponse) []int32 {
	var out []int32
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, p.Partition)
		}
	}
	return out
}

func TestFetchSessionsSendOnlyWhatChanged(t *testing.T) {
	s := newSimBroker(t, 20, nil)
	s.createTopic("t", 3)
	for p := int32(0); p < 3; p++ {
		require.Zero(t, s.produce("t", p, -1, valueBatch(wire.NoProducer, 1, "x")).ErrorCode)
	}
	// Open a session: a full response with every partition.
	full := s.do(sessionFetch(0, 0, "t", map[int32]int64{0: 0, 1: 0, 2: 0}, nil)).(*kmsg.FetchResponse)
	require.Zero(t, full.ErrorCode)
	require.NotZero(t, full.SessionID)
	require.Equal(t, []int32{0, 1, 2}, partitionsIn(full))
	id := full.SessionID

	// Epoch 1, offsets moved to the end: nothing changed, nothing sent.
	inc := s.do(sessionFetch(id, 1, "t", map[int32]int64{0: 1, 1: 1, 2: 1}, nil)).(*kmsg.FetchResponse)
	require.Zero(t, inc.ErrorCode)
	require.Equal(t, id, inc.SessionID)
	require.Empty(t, partitionsIn(inc))

	// New data on partition 2 only: only partition 2 comes back.
	require.Zero(t, s.produce("t", 2, -1, valueBatch(wire.NoProducer, 1, "y")).ErrorCode)
	inc = s.do(sessionFetch(id, 2, "t", nil, nil)).(*kmsg.FetchResponse)
	require.Equal(t, []int32{2}, partitionsIn(inc))

	// Forget partition 2; data there is no longer sent.
	require.Zero(t, s.produce("t", 2, -1, valueBatch(wire.NoProducer, 1, "z")).ErrorCode)
	inc = s.do(sessionFetch(id, 3, "t", nil, []int32{2})).(*kmsg.FetchResponse)
	require.Empty(t, partitionsIn(inc))

	// A wrong epoch, an unknown session, forgotten topics in a full fetch.
	require.Equal(t, kerr.InvalidFetchSessionEpoch.Code, s.do(sessionFetch(id, 9, "t", nil, nil)).(*kmsg.FetchResponse).ErrorCode)
	require.Equal(t, kerr.FetchSessionIDNotFound.Code, s.do(sessionFetch(id+1, 1, "t", nil, nil)).(*kmsg.FetchResponse).ErrorCode)
	require.Equal(t, kerr.InvalidRequest.Code, s.do(sessionFetch(0, 0, "t", nil, []int32{1})).(*kmsg.FetchResponse).ErrorCode)

	// Closing the session (epoch -1) answers in full without a session.
	closed := s.do(sessionFetch(id, -1, "t", map[int32]int64{0: 0}, nil)).(*kmsg.FetchResponse)
	require.Zero(t, closed.SessionID)
	require.Equal(t, []int32{0}, partitionsIn(closed))
	require.Equal(t, kerr.FetchSessionIDNotFound.Code, s.do(sessionFetch(id, 4, "t", nil, nil)).(*kmsg.FetchResponse).ErrorCode)
}

func TestAcksZeroGetsNoResponseAndFailureClosesTheConnection(t *testing.T) {
	s := newSimBroker(t, 21, nil)
	s.createTopic("t", 1)
	s.world.Node("c1").Post(func() {
		s.client.Request(produceRequest("t", 0, 0, valueBatch(wire.NoProducer, 1, "a")), func(r kmsg.Response, err error) {
			require.NoError(t, err)
			require.Nil(t, r)
		})
	})
	// The next request on the same connection is answered: the acks=0
	// produce did not hold the connection. (It long-polls: the record is
	// served once durable.)
	resp := s.do(fetchRequest("t", 0, 0, 10_000)).(*kmsg.FetchResponse)
	recs, err := wire.DecodeBatches(resp.Topics[0].Partitions[0].RecordBatches)
	require.NoError(t, err)
	require.Len(t, recs, 1)

	// A failing acks=0 produce closes the connection.
	var closedErr error
	done := false
	s.world.Node("c1").Post(func() {
		s.client.Request(produceRequest("missing", 0, 0, valueBatch(wire.NoProducer, 1, "a")), func(kmsg.Response, error) {})
		s.client.Request(kmsg.NewPtrMetadataRequest(), func(_ kmsg.Response, err error) { closedErr, done = err, true })
	})
	require.True(t, s.world.RunUntil(func() bool { return done }, time.Minute), "no answer")
	require.ErrorIs(t, closedErr, wire.ErrClientClosed)
}

func TestTimedOutFetchesLeaveNoWatchers(t *testing.T) {
	s := newSimBroker(t, 22, nil)
	s.createTopic("t", 1)
	for i := 0; i < 20; i++ {
		resp := s.do(fetchRequest("t", 0, 0, 100)).(*kmsg.FetchResponse)
		require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)
	}
	for _, p := range s.broker.partitions {
		require.Empty(t, p.watchers, "finished fetches still watch the partition")
	}
}

// TestPipelinedRequestsDoNotDeepenTheStack answers thousands of pipelined
// requests, each inside its own dispatch, and watches the stack depth at
// the handler: answering one must not start the next a frame deeper.
func TestPipelinedRequestsDoNotDeepenTheStack(t *testing.T) {
	s := newSimBroker(t, 23, nil)
	const n = 3000
	depthMin, depthMax := 1<<30, 0
	inner := s.broker.handlers[18]
	s.broker.handlers[18] = func(r *request) {
		depth := runtime.Callers(0, make([]uintptr, 4096))
		depthMin, depthMax = min(depthMin, depth), max(depthMax, depth)
		inner(r)
	}
	answered := 0
	s.world.Node("c1").Post(func() {
		for i := 0; i < n; i++ {
			s.client.Request(kmsg.NewPtrApiVersionsRequest(), func(_ kmsg.Response, err error) {
				require.NoError(t, err)
				answered++
			})
		}
	})
	require.True(t, s.world.RunUntil(func() bool { return answered == n }, time.Minute))
	require.LessOrEqual(t, depthMax-depthMin, 8, "the handler's stack depth grew from %d to %d frames", depthMin, depthMax)
}
