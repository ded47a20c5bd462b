package simrun

import (
	"errors"
	"math"
	"slices"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/jepsen"
	"github.com/sluicemq/sluice/sim/simfs"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// finalReader reads every partition whole, one after another, once the
// cluster is quiet: the reads that tell which writes survived. Each starts
// at the partition's log start, as ListOffsets earliest answers it (an
// operation of the history of its own), and is one operation however many
// fetches it takes; a failed fetch is retried until it succeeds, since
// nothing is left to fail once the faults have stopped. A read that finds
// its start below the log start (OFFSET_OUT_OF_RANGE: the log start moved
// after it was asked, which nothing should do now) ends with that error
// and another begins.
type finalReader struct {
	w    *worker
	e    env.Env
	s    *session
	next int32 // the partition being read
	done bool
}

// finalListVersion is the ListOffsets version the final reader asks the
// log start with.
const finalListVersion = 7

func (f *finalReader) start(e env.Env) {
	f.e = e
	f.s = f.w.newSession(e)
	f.readNext()
}

func (f *finalReader) readNext() {
	r := f.w.r
	if int(f.next) == r.opts.Partitions {
		f.done = true
		return
	}
	tp := jepsen.TopicPartition{Topic: r.topic, Partition: f.next}
	f.w.ensureTopic(f.e, f.s, func(topic *topicInfo) { f.listStart(topic, tp) })
}

// retry runs f again after a backoff, with the topic asked again if err
// says it may be stale.
func (f *finalReader) retry(err error, again func(*topicInfo)) {
	f.w.r.probes.add("final.retry")
	if staleTopicCode(err) {
		f.s.topic = nil
	}
	f.w.backoff(f.e, func() { f.w.ensureTopic(f.e, f.s, again) })
}

// listStart asks where tp's log begins, then reads it from there.
func (f *finalReader) listStart(topic *topicInfo, tp jepsen.TopicPartition) {
	r := f.w.r
	id := r.h.InvokeListOffsets(f.w.id, tp, jepsen.TargetEarliest)
	req := listOffsetsRequest(r.topic, tp.Partition, jepsen.TargetEarliest, finalListVersion)
	f.s.do(req, fetchRequestTimeout, func(resp kmsg.Response, err error) {
		start, err := listedOffset(resp, err, r.topic, tp.Partition)
		if err != nil {
			r.h.Complete(id, err)
			f.retry(err, func(topic *topicInfo) { f.listStart(topic, tp) })
			return
		}
		r.checkListedDurable(tp, jepsen.TargetEarliest, start)
		r.h.ListOffsetsOk(id, start)
		if start > 0 {
			r.probes.add("final.from_log_start")
		}
		f.read(topic, r.h.InvokeFinalRead(f.w.id, tp, start), tp, start, nil)
	})
}

// read fetches tp from just past what it has (from start at first), until
// a fetch returns nothing and the high watermark says nothing more is
// there.
func (f *finalReader) read(topic *topicInfo, id jepsen.OpID, tp jepsen.TopicPartition, start int64, got []jepsen.Record) {
	r := f.w.r
	from := start
	if len(got) > 0 {
		from = got[len(got)-1].Offset + 1
	}
	req := fetchRequest(r.opts.FetchVersion, topic, tp, from, 0)
	f.s.do(req, fetchRequestTimeout, func(resp kmsg.Response, err error) {
		var fp fetchedPartition
		if err == nil {
			fp, err = fetchPartition(resp.(*kmsg.FetchResponse), topic, tp, from)
		}
		records, hw := fp.records, fp.marks.HighWatermark
		switch {
		case errors.Is(err, kerr.OffsetOutOfRange):
			r.probes.add("final.out_of_range")
			r.h.Complete(id, err)
			f.retry(err, func(topic *topicInfo) { f.listStart(topic, tp) })
			return
		case err != nil:
			if errors.Is(err, errCorruptBatch) {
				r.probes.add("final.corrupt_batch")
				r.corruptServed(tp, err)
			}
			f.retry(err, func(topic *topicInfo) { f.read(topic, id, tp, start, got) })
			return
		}
		got = append(got, records...)
		switch {
		case len(records) > 0:
			f.read(topic, id, tp, start, got)
			return
		case from < hw:
			// Records are there but none came back: ask again, not in a
			// tight loop.
			r.probes.add("final.empty_below_hw")
			f.w.backoff(f.e, func() { f.read(topic, id, tp, start, got) })
			return
		}
		if r.cfg.Sabotage == SabotageDropFromFinal && len(got) > 0 {
			got = got[:len(got)-1] // a test-only lie: the last write is lost
		}
		r.h.FetchOk(id, got)
		f.lookUp(tp, segmentMaxTimestamps(r.broker.node.Disk(), tp, got), func() {
			f.next++
			f.readNext()
		})
	})
}

// finalLookupsMax bounds the lookups after one partition's final read.
const finalLookupsMax = 32

// segmentMaxTimestamps returns, for each of tp's segments the broker's
// disk holds durably (in offset order, at most finalLookupsMax), the
// newest timestamp among the final read's records in it. A lookup of that
// timestamp must find a record in the segment or before it: a broker
// whose idea of a segment's max timestamp is stale (index entries lost to
// a crash and trusted anyway) skips the segment and answers past it. The
// simulator knows where segments begin, a client does not: the lookups
// come where a stale index shows, not by chance.
func segmentMaxTimestamps(disk *simfs.Disk, tp jepsen.TopicPartition, got []jepsen.Record) []int64 {
	names, err := disk.ListDurable(partitionDirOf(tp))
	if err != nil {
		return nil // no durable directory: nothing rolled to look into
	}
	var bases []int64
	for _, name := range names {
		if base, ok := segmentBase(name); ok {
			bases = append(bases, base)
		}
	}
	slices.Sort(bases)
	var targets []int64
	i := 0
	for k, base := range bases {
		end := int64(math.MaxInt64)
		if k+1 < len(bases) {
			end = bases[k+1]
		}
		newest, seen := int64(0), false
		for ; i < len(got) && got[i].Offset < end; i++ {
			if got[i].Offset >= base && (!seen || got[i].Timestamp > newest) {
				newest, seen = got[i].Timestamp, true
			}
		}
		if seen && len(targets) < finalLookupsMax {
			targets = append(targets, newest)
		}
	}
	return targets
}

// lookUp asks ListOffsets for each timestamp in targets, one after
// another, then calls done. The answers go into the history, where the
// offsets check holds them against the final read; a failed lookup is
// recorded and not retried (nothing should fail once the faults have
// stopped, and the check needs no answer from it).
func (f *finalReader) lookUp(tp jepsen.TopicPartition, targets []int64, done func()) {
	if len(targets) == 0 {
		done()
		return
	}
	r := f.w.r
	target := targets[0]
	r.probes.add("final.lookup_by_time")
	id := r.h.InvokeListOffsets(f.w.id, tp, target)
	req := listOffsetsRequest(r.topic, tp.Partition, target, finalListVersion)
	f.s.do(req, fetchRequestTimeout, func(resp kmsg.Response, err error) {
		offset, err := listedOffset(resp, err, r.topic, tp.Partition)
		if err != nil {
			r.h.Complete(id, err)
		} else {
			r.checkListedDurable(tp, target, offset)
			r.h.ListOffsetsOk(id, offset)
		}
		f.lookUp(tp, targets[1:], done)
	})
}
