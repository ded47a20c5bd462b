package node

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/wire"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPipelinedProducesAppendBeforeTheFirstIsDurable pipelines five
// idempotent acks=all produce requests, as franz-go and the Java client do,
// then a Metadata request. Every produce must be appended before any is
// answered (so that one flush can cover them all), the answers must come back
// in request order with consecutive offsets, and the Metadata request must
// not start until every produce before it was answered.
func TestPipelinedProducesAppendBeforeTheFirstIsDurable(t *testing.T) {
	s := newSimBroker(t, 31, nil)
	s.createTopic("t", 1)
	pid := s.do(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)

	const n = 5
	var answered []int
	var offsets []int64
	var aheadAtStart []int // unanswered requests ahead of each produce as it started
	inner := s.broker.handlers[0]
	s.broker.handlers[0] = func(r *request) {
		aheadAtStart = append(aheadAtStart, len(r.c.started)-1)
		inner(r)
	}
	metadataStarted := -1
	innerMeta := s.broker.handlers[3]
	s.broker.handlers[3] = func(r *request) {
		metadataStarted = len(r.c.started) - 1 // requests ahead of it still unanswered
		innerMeta(r)
	}
	s.world.Node("c1").Post(func() {
		for i := range n {
			prod := wire.BatchProducer{ID: pid.ProducerID, Epoch: pid.ProducerEpoch, BaseSequence: int32(i)}
			s.client.Request(produceRequest("t", 0, -1, valueBatch(prod, 5, "v")), func(resp kmsg.Response, err error) {
				require.NoError(t, err)
				p := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
				require.Zero(t, p.ErrorCode)
				answered = append(answered, i)
				offsets = append(offsets, p.BaseOffset)
			})
		}
		s.client.Request(kmsg.NewPtrMetadataRequest(), func(_ kmsg.Response, err error) { require.NoError(t, err) })
	})
	require.True(t, s.world.RunUntil(func() bool { return len(answered) == n && metadataStarted >= 0 }, time.Minute))
	require.Equal(t, []int{0, 1, 2, 3, 4}, answered, "answers out of request order")
	require.Equal(t, []int64{0, 1, 2, 3, 4}, offsets)
	require.Equal(t, []int{0, 1, 2, 3, 4}, aheadAtStart, "a produce waited for the one before it to be answered")
	require.Zero(t, metadataStarted, "Metadata started while produces ahead of it were unanswered")
	_, recs := s.fetch("t", 0, 0)
	require.Len(t, recs, n)
}

// TestFailedAcksZeroProduceClosesAfterTheAnswersBeforeIt: an acks=0 produce
// that fails closes the connection, as Kafka does, but only once the answer
// of the acks=all produce started before it (still awaiting durability when
// the acks=0 one overtook it) has gone out.
func TestFailedAcksZeroProduceClosesAfterTheAnswersBeforeIt(t *testing.T) {
	s := newSimBroker(t, 32, nil)
	s.createTopic("t", 1)
	var first kmsg.Response
	var firstErr, closedErr error
	firstDone, closed := false, false
	s.world.Node("c1").Post(func() {
		s.client.Request(produceRequest("t", 0, -1, valueBatch(wire.NoProducer, 5, "kept")), func(resp kmsg.Response, err error) {
			first, firstErr, firstDone = resp, err, true
		})
		s.client.Request(produceRequest("missing", 0, 0, valueBatch(wire.NoProducer, 5, "lost")), func(kmsg.Response, error) {})
		s.client.Request(kmsg.NewPtrMetadataRequest(), func(_ kmsg.Response, err error) { closedErr, closed = err, true })
	})
	require.True(t, s.world.RunUntil(func() bool { return firstDone && closed }, time.Minute))
	require.NoError(t, firstErr, "the acks=all answer was lost to the close")
	require.Zero(t, first.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)
	require.ErrorIs(t, closedErr, wire.ErrClientClosed)
}
