package node

import (
	"time"

	"github.com/sluicemq/sluice/log"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteRecords, versions 0-2.
//
// Moves a partition's log start offset up to the requested offset (-1 means
// the high watermark), deleting whole segments below it. An offset above
// the high watermark is OFFSET_OUT_OF_RANGE. The answer, with the new low
// watermark (the log start as this request left it), waits until that log
// start is checkpointed, so a restart never brings deleted records back;
// past the request's timeout the partition gets REQUEST_TIMED_OUT.
func (b *Broker) handleDeleteRecords(r *request) {
	req := r.body.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	pending := 1
	finished := false
	var timer interface{ Stop() bool }
	finish := func() {
		pending--
		if pending == 0 && !finished {
			finished = true
			if timer != nil {
				timer.Stop()
			}
			r.respond(resp)
		}
	}
	var waiting []*kmsg.DeleteRecordsResponseTopicPartition
	for _, rt := range req.Topics {
		respTopic := kmsg.NewDeleteRecordsResponseTopic()
		respTopic.Topic = rt.Topic
		respTopic.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, len(rt.Partitions))
		for i, rp := range rt.Partitions {
			out := &respTopic.Partitions[i]
			*out = kmsg.NewDeleteRecordsResponseTopicPartition()
			out.Partition, out.LowWatermark = rp.Partition, -1
			p, code := b.leaderPartition(rt.Topic, rp.Partition, -1)
			if code == nil {
				code = b.deleteRecords(p, rp.Offset)
			}
			if code != nil {
				out.ErrorCode = code.Code
				continue
			}
			pending++
			waiting = append(waiting, out)
			// The low watermark is the log start this request made, which
			// the checkpoint below (started after it) makes durable; the
			// log start when the checkpoint completes may already hold a
			// later request's, not yet durable.
			low := p.log.LogStartOffset()
			p.log.Checkpoint(func(err error) {
				if finished {
					return
				}
				if err != nil {
					out.ErrorCode = log.ErrorCode(err).Code
				} else {
					out.LowWatermark = low
				}
				finish()
			})
		}
		resp.Topics = append(resp.Topics, respTopic)
	}
	if pending > 1 {
		timeout := max(time.Duration(req.TimeoutMillis)*time.Millisecond, time.Millisecond)
		timer = b.env.Clock.AfterFunc(timeout, func() {
			for _, out := range waiting {
				if out.LowWatermark < 0 && out.ErrorCode == 0 {
					out.ErrorCode = kerr.RequestTimedOut.Code
				}
			}
			pending = 1
			finish()
		})
	}
	finish()
}

// deleteRecords moves p's log start to offset (-1: the high watermark).
func (b *Broker) deleteRecords(p *partition, offset int64) *kerr.Error {
	hw := p.highWatermark()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return kerr.OffsetOutOfRange
	}
	if err := p.log.DeleteRecords(offset); err != nil {
		return log.ErrorCode(err)
	}
	return nil
}
