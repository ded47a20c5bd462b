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

// consumer reads partitions from offsets, following what it got, one
// operation in flight at a time. Now and then it seeks back to an earlier
// offset and reads again, so that old data is read after crashes too; with
// Options.DeleteRecords it also deletes, a few times a run, records it has
// read. A position that falls below the log start gets
// OFFSET_OUT_OF_RANGE and is reset to the log start by ListOffsets
// earliest, as auto.offset.reset=earliest does.
type consumer struct {
	w *worker
	// pos is the next offset to read, per partition; it outlives crashes
	// of the node as a committed offset would.
	pos []int64
	// read is, per partition, the end of what this consumer was served
	// (its last record's offset plus one): a DeleteRecords asks for no
	// more, so that records are deleted only once read and the final read
	// keeps everything since.
	read []int64
	// deleteAt is when (virtual time) the consumer next deletes records;
	// zero until its first step draws it.
	deleteAt time.Duration
	op       *consumerOp
	sess     *consumerSession
}

// consumerOp is the operation a consumer has in flight (a fetch or a
// DeleteRecords), recorded as unknown if its node crashes.
type consumerOp struct {
	id jepsen.OpID
}

// Deleting records: how far apart a consumer's DeleteRecords are, and how
// long the broker may take to make one durable before it answers
// REQUEST_TIMED_OUT (less than the client's own timeout, so that the
// broker's answer usually arrives).
const (
	deleteEveryMin = 2 * time.Second
	deleteEveryMax = 10 * time.Second
	deleteTimeout  = 2 * time.Second
)

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
			if c.deleteDue() {
				cs.deleteRecords(topic)
				return
			}
			if c.w.rand.Chance(0.05) {
				cs.listOffsets(topic)
				return
			}
			cs.fetch(topic)
		})
	})
}

// deleteDue reports whether it is time for a DeleteRecords, and if so
// draws when the next one is. Without Options.DeleteRecords it draws
// nothing, so that such seeds run as they did before the option.
func (c *consumer) deleteDue() bool {
	r := c.w.r
	if !r.opts.DeleteRecords {
		return false
	}
	now := r.w.Now()
	due := c.deleteAt != 0 && now >= c.deleteAt
	if c.deleteAt == 0 || due {
		c.deleteAt = now + deleteEveryMin + time.Duration(c.w.rand.Uint64n(uint64(deleteEveryMax-deleteEveryMin)))
	}
	return due
}

// deleteRecords deletes the records of one partition, chosen at random,
// below an offset between half and all of what this consumer has read
// there (at most the high watermark, so never refused for that), at a
// version the broker serves. The answer's low watermark goes into the
// history, where the offsets check holds it against every later log
// start, and is held against the disk by the durability oracle.
func (cs *consumerSession) deleteRecords(topic *topicInfo) {
	c := cs.c
	w := c.w
	r := w.r
	partition := int32(w.rand.Intn(len(c.pos)))
	read, served := c.read[partition], cs.s.served(kmsg.DeleteRecords.Int16())
	if read == 0 || served < 0 {
		cs.fetch(topic)
		return
	}
	offset := read - int64(w.rand.Uint64n(uint64(read/2+1)))
	tp := jepsen.TopicPartition{Topic: r.topic, Partition: partition}
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.Version = int16(w.rand.Intn(int(min(served, 2)) + 1))
	req.TimeoutMillis = int32(deleteTimeout / time.Millisecond)
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = r.topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	short := r.cfg.Sabotage == SabotageDeleteShort && !r.sabotaged
	if short {
		rp.Offset-- // a test-only lie, once: the broker deletes less than the history says
		r.sabotaged = true
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	r.probes.add("consumer.delete_records")
	id := r.h.InvokeDeleteRecords(w.id, tp, offset)
	c.op = &consumerOp{id: id}
	cs.s.do(req, fetchRequestTimeout, func(resp kmsg.Response, err error) {
		if c.sess != cs {
			return
		}
		c.op = nil
		low, err := lowWatermark(resp, err, r.topic, partition)
		if err != nil {
			r.h.Complete(id, err)
			w.backoff(cs.e, cs.step)
			return
		}
		if short {
			low = max(low, offset) // the lie's other half
		}
		r.probes.add("consumer.delete_records_ok")
		r.checkDeletedDurable(tp, low)
		r.h.DeleteRecordsOk(id, low)
		cs.step()
	})
}

// lowWatermark finds the partition's low watermark in a DeleteRecords
// answer.
func lowWatermark(resp kmsg.Response, err error, topic string, partition int32) (int64, error) {
	if err != nil {
		return 0, err
	}
	for _, t := range resp.(*kmsg.DeleteRecordsResponse).Topics {
		for _, p := range t.Partitions {
			if t.Topic == topic && p.Partition == partition {
				if p.ErrorCode != 0 {
					return 0, kerr.ErrorForCode(p.ErrorCode)
				}
				return p.LowWatermark, nil
			}
		}
	}
	return 0, errors.New("delete records response does not carry the partition asked for")
}

// listOffsets asks for one partition's latest or earliest offset, or the
// first offset at or after a timestamp, and moves the consumer's position
// there, as a consumer with auto.offset.reset, or one seeking by time
// (offsetsForTimes), does.
func (cs *consumerSession) listOffsets(topic *topicInfo) {
	c := cs.c
	w := c.w
	r := w.r
	partition := int32(w.rand.Intn(len(c.pos)))
	target := pick(w.rand, []int64{jepsen.TargetLatest, jepsen.TargetEarliest, 0})
	if target == 0 {
		target = r.lookupTarget(w.rand)
		r.probes.add("consumer.list_offsets_by_time")
	}
	cs.listOffsetsOf(partition, target, func(int64) {})
}

// resetToEarliest moves the position in a partition that was out of range
// to the log start, as auto.offset.reset=earliest does.
func (cs *consumerSession) resetToEarliest(partition int32, from int64) {
	cs.listOffsetsOf(partition, jepsen.TargetEarliest, func(start int64) {
		if start > from {
			cs.c.w.r.probes.add("consumer.below_log_start")
		}
	})
}

// listOffsetsOf asks ListOffsets for target in partition and moves the
// position there, then calls moved with the offset. The answer goes into
// the history: the offsets check holds it against the log, the durability
// oracle against the disk.
func (cs *consumerSession) listOffsetsOf(partition int32, target int64, moved func(int64)) {
	c := cs.c
	w := c.w
	r := w.r
	tp := jepsen.TopicPartition{Topic: r.topic, Partition: partition}
	req := listOffsetsRequest(r.topic, partition, target, pick(w.rand, []int16{1, 4, 7, 10}))
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
			moved(offset)
		}
		cs.step()
	})
}

// listOffsetsRequest asks for target (TargetLatest, TargetEarliest or a
// timestamp) in one partition.
func listOffsetsRequest(topic string, partition int32, target int64, version int16) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = version
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = partition
	rp.CurrentLeaderEpoch = -1
	rp.Timestamp = target
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
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
	from := c.pos[partition]
	id := w.r.h.InvokeFetch(w.id, tp, from, 0)
	c.op = &consumerOp{id: id}
	req := fetchRequest(w.r.opts.FetchVersion, topic, tp, from, fetchMaxWait)
	cs.s.do(req, fetchRequestTimeout, func(resp kmsg.Response, err error) {
		if c.sess != cs {
			return
		}
		c.op = nil
		fp, err := fetchResult(resp, err, topic, tp, from)
		w.r.recordFetch(id, tp, fp, err)
		switch {
		case err == nil:
			if records := fp.records; len(records) > 0 {
				next := records[len(records)-1].Offset + 1
				c.pos[partition], c.read[partition] = next, max(c.read[partition], next)
			}
			cs.step()
		case errors.Is(err, kerr.OffsetOutOfRange):
			w.r.probes.add("consumer.out_of_range")
			cs.resetToEarliest(partition, from)
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
	// preferred is the replica the leader told a consumer with a rack to
	// read from instead (KIP-392), -1 for none.
	preferred int32
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
			fp := fetchedPartition{marks: jepsen.Watermarks{HighWatermark: p.HighWatermark, LogStart: p.LogStartOffset}, batches: batches,
				preferred: p.PreferredReadReplica}
			if resp.Version < 11 {
				fp.preferred = -1
			}
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
