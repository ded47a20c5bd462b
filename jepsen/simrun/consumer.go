package simrun

import (
	"errors"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/jepsen"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch parameters of the consumers and of the final read.
const (
	fetchMaxWait          = 200 * time.Millisecond
	fetchRequestTimeout   = 3 * time.Second
	fetchMaxBytes         = 64 << 10
	fetchPartitionMaxByte = 16 << 10
)

// consumer reads partitions from offsets, following what it got, one fetch
// in flight at a time. Now and then it seeks back to an earlier offset and
// reads again, so that old data is read after crashes too.
type consumer struct {
	w *worker
	// pos is the next offset to read, per partition; it outlives crashes
	// of the node as a committed offset would.
	pos  []int64
	op   *fetchOp
	sess *consumerSession
}

type fetchOp struct {
	id   jepsen.OpID
	tp   jepsen.TopicPartition
	from int64
}

type consumerSession struct {
	c *consumer
	e env.Env
	s *session
}

func (c *consumer) boot(e env.Env) {
	cs := &consumerSession{c: c, e: e, s: c.w.newSession(e)}
	c.sess = cs
	cs.step()
}

func (c *consumer) crashed() {
	if c.op != nil {
		c.w.r.h.Info(c.op.id, errors.New("client crashed"))
		c.op = nil
	}
	c.sess = nil
}

func (c *consumer) busy() bool { return c.op != nil }

func (cs *consumerSession) step() {
	c := cs.c
	if c.sess != cs || c.w.r.stopping {
		return
	}
	c.w.after(cs.e, c.w.think(), func() {
		if c.sess != cs || c.w.r.stopping {
			return
		}
		c.w.ensureTopic(cs.e, cs.s, func(topic *topicInfo) {
			if c.w.rand.Chance(0.05) {
				cs.listOffsets(topic)
				return
			}
			cs.fetch(topic)
		})
	})
}

// listOffsets asks for one partition's latest or earliest offset, or the
// first offset at or after a timestamp, and moves the consumer's position
// there, as a consumer with auto.offset.reset, or one seeking by time
// (offsetsForTimes), does. The answer goes into the history: the offsets
// check holds it against the log, the durability oracle against the disk.
func (cs *consumerSession) listOffsets(topic *topicInfo) {
	c := cs.c
	w := c.w
	r := w.r
	partition := int32(w.rand.Intn(len(c.pos)))
	tp := jepsen.TopicPartition{Topic: r.topic, Partition: partition}
	target := pick(w.rand, []int64{jepsen.TargetLatest, jepsen.TargetEarliest, 0})
	if target == 0 {
		target = r.lookupTarget(w.rand)
		r.probes.add("consumer.list_offsets_by_time")
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = pick(w.rand, []int16{1, 4, 7, 10})
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = r.topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = partition
	rp.CurrentLeaderEpoch = -1
	rp.Timestamp = target
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	r.probes.add("consumer.list_offsets")
	id := r.h.InvokeListOffsets(w.id, tp, target)
	cs.s.do(req, fetchRequestTimeout, func(resp kmsg.Response, err error) {
		if c.sess != cs {
			return
		}
		offset, err := listedOffset(resp, err, r.topic, partition)
		if err != nil {
			r.h.Complete(id, err)
			w.backoff(cs.e, cs.step)
			return
		}
		r.checkListedDurable(tp, target, offset)
		if r.cfg.Sabotage == SabotageLookupNext && target >= 0 && offset >= 0 && !r.sabotaged {
			offset++ // a test-only lie, once, so that the check has something to find
			r.sabotaged = true
		}
		r.h.ListOffsetsOk(id, offset)
		if offset >= 0 {
			c.pos[partition] = offset
		}
		cs.step()
	})
}

// listedOffset finds the partition's offset in a ListOffsets answer.
func listedOffset(resp kmsg.Response, err error, topic string, partition int32) (int64, error) {
	if err != nil {
		return 0, err
	}
	for _, t := range resp.(*kmsg.ListOffsetsResponse).Topics {
		for _, p := range t.Partitions {
			if t.Topic == topic && p.Partition == partition {
				if p.ErrorCode != 0 {
					return 0, kerr.ErrorForCode(p.ErrorCode)
				}
				return p.Offset, nil
			}
		}
	}
	return 0, errors.New("list offsets response does not carry the partition asked for")
}

// fetch reads one partition, chosen at random, from the consumer's
// position there.
func (cs *consumerSession) fetch(topic *topicInfo) {
	c := cs.c
	w := c.w
	partition := int32(w.rand.Intn(len(c.pos)))
	if w.rand.Chance(0.03) && c.pos[partition] > 0 {
		c.pos[partition] = int64(w.rand.Uint64n(uint64(c.pos[partition])))
		w.r.probes.add("consumer.seek")
	}
	tp := jepsen.TopicPartition{Topic: w.r.topic, Partition: partition}
	op := &fetchOp{tp: tp, from: c.pos[partition]}
	op.id = w.r.h.InvokeFetch(w.id, tp, op.from, 0)
	c.op = op
	req := fetchRequest(w.r.opts.FetchVersion, topic, tp, op.from, fetchMaxWait)
	cs.s.do(req, fetchRequestTimeout, func(resp kmsg.Response, err error) {
		if c.sess != cs {
			return
		}
		c.op = nil
		fp, err := fetchResult(resp, err, topic, tp, op.from)
		w.r.recordFetch(op.id, tp, fp, err)
		switch {
		case err == nil:
			if records := fp.records; len(records) > 0 {
				c.pos[partition] = records[len(records)-1].Offset + 1
			}
			cs.step()
		case errors.Is(err, kerr.OffsetOutOfRange):
			w.r.probes.add("consumer.out_of_range")
			c.pos[partition] = 0
			cs.step()
		default:
			if staleTopicCode(err) {
				cs.s.topic = nil
			}
			w.backoff(cs.e, cs.step)
		}
	})
}

// fetchRequest asks for one partition from offset, by name or (v13+) id.
func fetchRequest(version int16, topic *topicInfo, tp jepsen.TopicPartition, offset int64, maxWait time.Duration) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(maxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = fetchMaxBytes
	req.SessionID = 0
	req.SessionEpoch = -1 // a full fetch, outside any session
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = tp.Topic
	rt.TopicID = topic.id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = tp.Partition
	rp.FetchOffset = offset
	rp.CurrentLeaderEpoch = -1
	rp.LastFetchedEpoch = -1
	rp.LogStartOffset = -1
	rp.PartitionMaxBytes = fetchPartitionMaxByte
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// fetchResult turns a fetch's answer into the records at from and beyond,
// or the error that ended it. A batch that fails its CRC is an error: the
// consumer refuses what it cannot trust, and the read's outcome is unknown.
func fetchResult(resp kmsg.Response, err error, topic *topicInfo, tp jepsen.TopicPartition, from int64) (fetchedPartition, error) {
	if err != nil {
		return fetchedPartition{}, err
	}
	return fetchPartition(resp.(*kmsg.FetchResponse), topic, tp, from)
}

// fetchedPartition is what a fetch answer said of one partition.
type fetchedPartition struct {
	// marks are the high watermark and log start offset (-1 before fetch
	// v5, which does not carry it).
	marks jepsen.Watermarks
	// records are those at the fetch offset and beyond; batches every
	// whole batch served, for the durability oracle.
	records []jepsen.Record
	batches []batchRef
}

// fetchPartition finds tp in a fetch response and decodes its records.
func fetchPartition(resp *kmsg.FetchResponse, topic *topicInfo, tp jepsen.TopicPartition, from int64) (fetchedPartition, error) {
	if resp.ErrorCode != 0 {
		return fetchedPartition{}, kerr.ErrorForCode(resp.ErrorCode)
	}
	for _, t := range resp.Topics {
		if resp.Version >= 13 && t.TopicID != topic.id || resp.Version < 13 && t.Topic != tp.Topic {
			continue
		}
		for _, p := range t.Partitions {
			if p.Partition != tp.Partition {
				continue
			}
			if p.ErrorCode != 0 {
				return fetchedPartition{}, kerr.ErrorForCode(p.ErrorCode)
			}
			all, batches, err := readBatches(p.RecordBatches, from)
			if err != nil {
				return fetchedPartition{}, err
			}
			fp := fetchedPartition{marks: jepsen.Watermarks{HighWatermark: p.HighWatermark, LogStart: p.LogStartOffset}, batches: batches}
			if resp.Version < 5 {
				fp.marks.LogStart = -1
			}
			for _, rec := range all {
				if rec.Offset >= from {
					fp.records = append(fp.records, rec)
				}
			}
			return fp, nil
		}
	}
	return fetchedPartition{}, errors.New("fetch response does not carry the partition asked for")
}
