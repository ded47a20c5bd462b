package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim/simfs"
	"github.com/sluicemq/sluice/wire"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *simBroker) createTopic(name string, partitions int32) [16]byte {
	s.t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &name
	req.Topics = append(req.Topics, rt)
	prev := s.cfg.NumPartitions
	s.broker.cfg.NumPartitions = partitions
	resp := s.do(req).(*kmsg.MetadataResponse)
	s.broker.cfg.NumPartitions = prev
	require.Zero(s.t, resp.Topics[0].ErrorCode)
	return resp.Topics[0].TopicID
}

func produceRequest(topic string, partition int32, acks int16, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = 11
	req.Acks = acks
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func valueBatch(producer wire.BatchProducer, ts int64, values ...string) []byte {
	var recs []wire.Record
	for _, v := range values {
		recs = append(recs, wire.Record{Key: []byte("k"), Value: []byte(v), Timestamp: ts})
	}
	return wire.AppendBatch(nil, producer, recs)
}

func (s *simBroker) produce(topic string, partition int32, acks int16, batch []byte) kmsg.ProduceResponseTopicPartition {
	s.t.Helper()
	return s.do(produceRequest(topic, partition, acks, batch)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

func fetchRequest(topic string, partition int32, offset int64, maxWaitMs int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.MaxWaitMillis = maxWaitMs
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func (s *simBroker) fetch(topic string, partition int32, offset int64) (kmsg.FetchResponseTopicPartition, []wire.Record) {
	s.t.Helper()
	resp := s.do(fetchRequest(topic, partition, offset, 0)).(*kmsg.FetchResponse)
	require.Len(s.t, resp.Topics, 1)
	p := resp.Topics[0].Partitions[0]
	recs, err := wire.DecodeBatches(p.RecordBatches)
	require.NoError(s.t, err)
	return p, recs
}

func TestProduceThenFetchBackInOrderAcrossRestart(t *testing.T) {
	s := newSimBroker(t, 10, nil)
	s.createTopic("events", 2)
	var want []string
	for i := 0; i < 20; i++ {
		v := fmt.Sprintf("v%d", i)
		got := s.produce("events", 1, -1, valueBatch(wire.NoProducer, 1000+int64(i), v))
		require.Zero(t, got.ErrorCode, kerr.ErrorForCode(got.ErrorCode))
		require.Equal(t, int64(i), got.BaseOffset)
		want = append(want, v)
	}
	check := func() {
		p, recs := s.fetch("events", 1, 0)
		require.Zero(t, p.ErrorCode)
		require.Equal(t, int64(20), p.HighWatermark)
		var vals []string
		for i, r := range recs {
			require.Equal(t, int64(i), r.Offset)
			vals = append(vals, string(r.Value))
		}
		require.Equal(t, want, vals)
	}
	check()
	s.restart() // acks=all writes were durable: a crash keeps them all
	check()
}

func TestProduceErrors(t *testing.T) {
	s := newSimBroker(t, 11, nil)
	s.createTopic("t", 1)
	batch := valueBatch(wire.NoProducer, 1, "x")
	require.Equal(t, kerr.InvalidRequiredAcks.Code, s.produce("t", 0, 2, batch).ErrorCode)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, s.produce("missing", 0, 1, batch).ErrorCode)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, s.produce("t", 5, 1, batch).ErrorCode)
	require.Equal(t, kerr.InvalidTopicException.Code, s.produce("bad name", 0, 1, batch).ErrorCode)
	corrupt := append([]byte{}, batch...)
	corrupt[len(corrupt)-1] ^= 0xff
	require.Equal(t, kerr.CorruptMessage.Code, s.produce("t", 0, 1, corrupt).ErrorCode)
}

func TestIdempotentRetryGetsOriginalOffsets(t *testing.T) {
	s := newSimBroker(t, 12, nil)
	s.createTopic("t", 1)
	pid := s.do(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
	prod := wire.BatchProducer{ID: pid.ProducerID, Epoch: pid.ProducerEpoch, BaseSequence: 0}
	first := s.produce("t", 0, -1, valueBatch(prod, 5, "a", "b"))
	require.Zero(t, first.ErrorCode)
	again := s.produce("t", 0, -1, valueBatch(prod, 5, "a", "b"))
	require.Zero(t, again.ErrorCode)
	require.Equal(t, first.BaseOffset, again.BaseOffset)
	prod.BaseSequence = 5 // a gap
	require.Equal(t, kerr.OutOfOrderSequenceNumber.Code, s.produce("t", 0, -1, valueBatch(prod, 5, "c")).ErrorCode)
	_, recs := s.fetch("t", 0, 0)
	require.Len(t, recs, 2)
}

func TestFetchLongPollWakesOnProduce(t *testing.T) {
	s := newSimBroker(t, 13, nil)
	s.createTopic("t", 1)
	var resp *kmsg.FetchResponse
	s.world.Node("c1").Post(func() {
		s.client.Request(fetchRequest("t", 0, 0, 30_000), func(r kmsg.Response, err error) {
			require.NoError(t, err)
			resp = r.(*kmsg.FetchResponse)
		})
	})
	s.world.Run(time.Second)
	require.Nil(t, resp, "fetch answered before any data arrived")
	// A second connection produces; the parked fetch wakes well before its 30s.
	first := s.client
	s.connect()
	require.Zero(t, s.produce("t", 0, 1, valueBatch(wire.NoProducer, 1, "hello")).ErrorCode)
	start := s.world.Now()
	require.True(t, s.world.RunUntil(func() bool { return resp != nil }, time.Minute))
	require.Less(t, s.world.Now()-start, 5*time.Second)
	recs, err := wire.DecodeBatches(resp.Topics[0].Partitions[0].RecordBatches)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	first.Close()
}

func TestFetchOutOfRangeAndEmptyAboveHighWatermark(t *testing.T) {
	s := newSimBroker(t, 14, nil)
	s.createTopic("t", 1)
	require.Zero(t, s.produce("t", 0, -1, valueBatch(wire.NoProducer, 1, "a")).ErrorCode)
	p, recs := s.fetch("t", 0, 1)
	require.Zero(t, p.ErrorCode)
	require.Empty(t, recs)
	p, _ = s.fetch("t", 0, 7)
	require.Equal(t, kerr.OffsetOutOfRange.Code, p.ErrorCode)
	require.Equal(t, int64(1), p.HighWatermark)
}

func TestListOffsets(t *testing.T) {
	s := newSimBroker(t, 15, nil)
	s.createTopic("t", 1)
	for i, ts := range []int64{100, 300, 200} {
		require.Equal(t, int64(i), s.produce("t", 0, -1, valueBatch(wire.NoProducer, ts, "v")).BaseOffset)
	}
	list := func(ts int64) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 8
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return s.do(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	}
	require.Equal(t, int64(3), list(-1).Offset)
	require.Equal(t, int64(0), list(-2).Offset)
	require.Equal(t, int64(1), list(-3).Offset)
	require.Equal(t, int64(1), list(250).Offset)
	require.Equal(t, int64(0), list(50).Offset)
	require.Equal(t, int64(-1), list(301).Offset)
}

// deleteRecordsRequest asks to delete partition 0 of topic below offset,
// waiting up to a minute for the answer.
func deleteRecordsRequest(topic string, offset int64) *kmsg.DeleteRecordsRequest {
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 60000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Offset = offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func TestDeleteRecordsMovesLogStart(t *testing.T) {
	s := newSimBroker(t, 16, nil)
	s.createTopic("t", 1)
	for i := 0; i < 5; i++ {
		s.produce("t", 0, -1, valueBatch(wire.NoProducer, 1, "v"))
	}
	req := deleteRecordsRequest("t", 3)
	got := s.do(req).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
	require.Zero(t, got.ErrorCode)
	require.Equal(t, int64(3), got.LowWatermark)
	p, _ := s.fetch("t", 0, 1)
	require.Equal(t, kerr.OffsetOutOfRange.Code, p.ErrorCode)
	s.restart()
	p, recs := s.fetch("t", 0, 3)
	require.Zero(t, p.ErrorCode)
	require.Equal(t, int64(3), p.LogStartOffset)
	require.Len(t, recs, 2)
	req = deleteRecordsRequest("t", 9)
	require.Equal(t, kerr.OffsetOutOfRange.Code, s.do(req).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode)
}

func TestRetentionDeletesOldSegments(t *testing.T) {
	s := newSimBroker(t, 17, func(c *Config) {
		c.LogSegmentBytes = 1024
		c.LogRetentionMs = 3600 * 1000
		c.LogRetentionCheckInterval = time.Minute
	})
	s.createTopic("t", 1)
	// Old records (timestamps two hours back), enough for several segments.
	old := s.world.Node("n1").Clock().Now().Add(-2 * time.Hour).UnixMilli()
	for i := 0; i < 40; i++ {
		require.Zero(t, s.produce("t", 0, -1, valueBatch(wire.NoProducer, old, fmt.Sprintf("%0100d", i))).ErrorCode)
	}
	require.Zero(t, s.produce("t", 0, -1, valueBatch(wire.NoProducer, old+2*3600_000, "fresh")).ErrorCode)
	s.world.Run(2 * time.Minute)
	p, recs := s.fetch("t", 0, 40)
	require.Zero(t, p.ErrorCode)
	require.Greater(t, p.LogStartOffset, int64(0), "no segment was deleted")
	require.Len(t, recs, 1)
	first, _ := s.fetch("t", 0, 0)
	require.Equal(t, kerr.OffsetOutOfRange.Code, first.ErrorCode)
}

func TestPartitionThatCannotOpenIsOfflineNotFatal(t *testing.T) {
	s := newSimBroker(t, 18, nil)
	// The partition directory cannot be made: the topic commits, its
	// partition is offline, and the broker goes on serving.
	require.NoError(t, s.world.Node("n1").Disk().FailNext(simfs.OpMkdir, env.ErrIO))
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("t")
	req.Topics = append(req.Topics, rt)
	mp := s.do(req).(*kmsg.MetadataResponse).Topics[0].Partitions[0]
	require.Equal(t, kerr.LeaderNotAvailable.Code, mp.ErrorCode)
	require.Equal(t, []int32{1}, mp.OfflineReplicas)
	require.Equal(t, kerr.KafkaStorageError.Code, s.produce("t", 0, -1, valueBatch(wire.NoProducer, 1, "a")).ErrorCode)

	// A restart with a healthy disk brings it back.
	s.restart()
	require.Zero(t, s.produce("t", 0, -1, valueBatch(wire.NoProducer, 1, "a")).ErrorCode)
}

func TestAlteredTopicConfigAppliesAtOnce(t *testing.T) {
	s := newSimBroker(t, 19, nil)
	s.createTopic("t", 1)
	big := valueBatch(wire.NoProducer, 1, string(make([]byte, 500)))
	require.Zero(t, s.produce("t", 0, -1, big).ErrorCode)
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = "max.message.bytes", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("100")
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	require.Zero(t, s.do(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode)
	big = valueBatch(wire.NoProducer, 1, string(make([]byte, 500)))
	require.Equal(t, kerr.MessageTooLarge.Code, s.produce("t", 0, -1, big).ErrorCode)
}

// Two DeleteRecords of one partition whose checkpoints overlap: each is
// answered with the log start it made, which its checkpoint made durable,
// not with a later request's log start that the first checkpoint to
// complete does not hold (found by the simulator's durability oracle: a
// crash right after the first answer would bring the log start back below
// the low watermark it reported).
func TestDeleteRecordsAnswersTheLogStartItMade(t *testing.T) {
	s := newSimBroker(t, 18, nil)
	s.createTopic("t", 1)
	for i := 0; i < 10; i++ {
		s.produce("t", 0, -1, valueBatch(wire.NoProducer, 1, "v"))
	}
	s.slowDisk()
	first := s.send(s.dialClient(), deleteRecordsRequest("t", 3))
	s.world.Run(100 * time.Millisecond) // the first checkpoint is in flight
	second := s.send(s.dialClient(), deleteRecordsRequest("t", 7))
	s.runUntil("both answered", answered(first, second))
	low := func(r *kmsg.Response) int64 {
		p := (*r).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
		require.Zero(t, p.ErrorCode)
		return p.LowWatermark
	}
	require.Equal(t, int64(3), low(first), "the first request's answer")
	require.Equal(t, int64(7), low(second))
}

// ListOffsets for the largest timestamp names only a record below the high
// watermark, as Kafka's Partition.fetchOffsetForTimestamp filters it: a
// record not yet durable may still be lost, and the offset with it.
func TestListOffsetsMaxTimestampStaysBelowTheHighWatermark(t *testing.T) {
	s := newSimBroker(t, 19, nil)
	s.createTopic("t", 1)
	require.Zero(t, s.produce("t", 0, -1, valueBatch(wire.NoProducer, 100, "durable")).ErrorCode)
	s.slowDisk()
	require.Zero(t, s.produce("t", 0, 1, valueBatch(wire.NoProducer, 900, "in the page cache")).ErrorCode)
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 8
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -3
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	got := s.do(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	require.Zero(t, got.ErrorCode)
	require.Equal(t, int64(-1), got.Offset, "the record with the largest timestamp is above the high watermark")
}
