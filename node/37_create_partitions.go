package node

import (
	"fmt"

	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreatePartitions, versions 0-3: grow topics, on the active controller
// (any other broker forwards it).
//
//   - A topic named twice gets INVALID_REQUEST ("Duplicate topic name."),
//     both times, and neither is changed, as in Kafka.
//   - A TimeoutMillis of zero or less is REQUEST_TIMED_OUT for every topic,
//     as for CreateTopics.
//   - Count must be above the topic's partitions (INVALID_PARTITIONS) and
//     at most the 10,000 a topic may have; new partitions take the topic's
//     replication factor, placed by the controller, or the request's
//     Assignment (one replica list per new partition, checked as
//     CreateTopics checks one: INVALID_REPLICA_ASSIGNMENT).
//   - An unknown topic is UNKNOWN_TOPIC_OR_PARTITION; a topic being
//     deleted answers once its deletion is committed (and so is unknown).
//   - ValidateOnly checks everything against the controller's view and
//     changes nothing.
//   - The answer comes once the change is applied on the broker that
//     answers, and its new partitions there accept appends; a refusal,
//     once the controller's proposals in flight have committed (it was
//     decided against them), or NOT_CONTROLLER if one did not.
func (b *Broker) handleCreatePartitions(r *request) {
	req := r.body.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	answer := func(topic string, err *kerr.Error, msg string) {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = topic
		if err != nil {
			rt.ErrorCode = err.Code
			if msg == "" {
				msg = err.Description
			}
			rt.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, rt)
	}
	counts := map[string]int{}
	for _, rt := range req.Topics {
		counts[rt.Topic]++
	}
	var specs []raftmeta.PartitionsSpec
	var slots []int
	for _, rt := range req.Topics {
		switch {
		case counts[rt.Topic] > 1:
			answer(rt.Topic, kerr.InvalidRequest, "Duplicate topic name.")
			continue
		case req.TimeoutMillis <= 0:
			answer(rt.Topic, kerr.RequestTimedOut, "The request's timeout passed before it ran: TimeoutMillis must be positive.")
			continue
		case rt.Count > maxPartitionsPerTopic:
			answer(rt.Topic, kerr.InvalidPartitions, fmt.Sprintf("Number of partitions %d is above the limit of %d per topic.", rt.Count, maxPartitionsPerTopic))
			continue
		}
		if t := b.view().TopicByName(rt.Topic); t != nil && b.deleting.pending(t.ID) {
			b.deleting.onFinish(t.ID, func() { b.handleCreatePartitions(r) })
			return
		}
		spec := raftmeta.PartitionsSpec{Topic: rt.Topic, Count: rt.Count}
		for _, a := range rt.Assignment {
			// The controller checks each list: registered brokers, no
			// repeats, the topic's replication factor.
			spec.Assignment = append(spec.Assignment, append([]int32(nil), a.Replicas...))
		}
		slots = append(slots, len(resp.Topics))
		answer(rt.Topic, nil, "")
		specs = append(specs, spec)
	}
	if len(specs) == 0 {
		r.respond(resp)
		return
	}
	ctl := b.ctl
	if req.ValidateOnly {
		// A controller of its own, so that nothing is proposed or kept.
		ctl = raftmeta.NewController(b.view(), b.controllerConfig(), b.mono.now, b.env.Rand)
	}
	results, records := ctl.CreatePartitions(specs)
	for i, res := range results {
		if res.Err != nil {
			msg := res.Message
			if msg == "" {
				msg = res.Err.Description
			}
			resp.Topics[slots[i]].ErrorCode, resp.Topics[slots[i]].ErrorMessage = res.Err.Code, &msg
		}
	}
	if req.ValidateOnly {
		r.respond(resp)
		return
	}
	b.propose(records, func(err error) {
		if err != nil {
			// Every answer the controller gave was decided against a view
			// that held what did not commit, its refusals too.
			msg := err.Error()
			for _, i := range slots {
				resp.Topics[i].ErrorCode, resp.Topics[i].ErrorMessage = commitErrorCode(err).Code, &msg
			}
			r.respond(resp)
			return
		}
		all := newJoin(func(error) { r.respond(resp) })
		for _, i := range slots {
			if t := b.image.TopicByName(resp.Topics[i].Topic); t != nil && resp.Topics[i].ErrorCode == 0 {
				b.awaitTopicReady(t, all.add())
			}
		}
		all.wait()
	})
}
