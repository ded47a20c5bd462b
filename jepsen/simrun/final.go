package simrun

import (
	"errors"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/jepsen"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// finalReader reads every partition whole, one after another, once the
// cluster is quiet: the reads that tell which writes survived. Each is one
// operation in the history however many fetches it takes; a failed fetch is
// retried until it succeeds, since nothing is left to fail once the faults
// have stopped.
type finalReader struct {
	w    *worker
	e    env.Env
	s    *session
	next int32 // the partition being read
	done bool
}

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
	id := r.h.InvokeFinalRead(f.w.id, tp, 0)
	f.w.ensureTopic(f.e, f.s, func(topic *topicInfo) {
		f.read(topic, id, tp, nil)
	})
}

// read fetches tp from just past what it has, until a fetch returns nothing
// and the high watermark says nothing more is there.
func (f *finalReader) read(topic *topicInfo, id jepsen.OpID, tp jepsen.TopicPartition, got []jepsen.Record) {
	r := f.w.r
	from := int64(0)
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
		if err != nil {
			if errors.Is(err, errCorruptBatch) {
				r.probes.add("final.corrupt_batch")
			}
			r.probes.add("final.retry")
			if staleTopicCode(err) {
				f.s.topic = nil
			}
			f.w.backoff(f.e, func() {
				f.w.ensureTopic(f.e, f.s, func(topic *topicInfo) { f.read(topic, id, tp, got) })
			})
			return
		}
		got = append(got, records...)
		switch {
		case len(records) > 0:
			f.read(topic, id, tp, got)
			return
		case from < hw:
			// Records are there but none came back: ask again, not in a
			// tight loop.
			r.probes.add("final.empty_below_hw")
			f.w.backoff(f.e, func() { f.read(topic, id, tp, got) })
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
