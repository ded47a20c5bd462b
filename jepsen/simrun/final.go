package simrun

import (
	"errors"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/jepsen"
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
		f.next++
		f.readNext()
	})
}
