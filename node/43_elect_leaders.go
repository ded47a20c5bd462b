package node

import (
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ElectLeaders, versions 0-2 (KIP-183, KIP-460), on the active controller
// (any other broker forwards it): move leadership back to each partition's
// preferred (first) replica, as raftmeta.Controller's ElectPreferredLeaders
// decides, with its per-partition codes (ELECTION_NOT_NEEDED,
// PREFERRED_LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION).
//
//   - Null topics mean every partition; the answer then leaves out those
//     that needed no election, as Kafka's does.
//   - ElectionType 1 (unclean) is served as the preferred election: with
//     one replica per partition the only replica that may lead is the
//     preferred one, so the two coincide until replication exists. Any
//     other type is INVALID_REQUEST.
//   - A TimeoutMillis of zero or less is REQUEST_TIMED_OUT, as Kafka's
//     controller answers a request whose deadline has passed.
//   - The answer comes once the new leaders are applied on the broker that
//     answers.
func (b *Broker) handleElectLeaders(r *request) {
	req := r.body.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	if req.ElectionType != 0 && req.ElectionType != 1 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		r.respond(resp)
		return
	}
	if req.TimeoutMillis <= 0 {
		resp.ErrorCode = kerr.RequestTimedOut.Code
		r.respond(resp)
		return
	}
	var asked []raftmeta.TopicPartitions
	if req.Topics != nil {
		asked = []raftmeta.TopicPartitions{}
		for _, t := range req.Topics {
			asked = append(asked, raftmeta.TopicPartitions{Topic: t.Topic, Partitions: t.Partitions})
		}
	}
	results, records := b.ctl.ElectPreferredLeaders(asked)
	b.propose(records, func(err error) {
		byTopic := map[string]int{}
		for _, res := range results {
			if res.Topic == "" && res.Err != nil {
				// The controller failed as a whole.
				resp.ErrorCode = res.Err.Code
				continue
			}
			i, ok := byTopic[res.Topic]
			if !ok {
				rt := kmsg.NewElectLeadersResponseTopic()
				rt.Topic = res.Topic
				resp.Topics = append(resp.Topics, rt)
				i = len(resp.Topics) - 1
				byTopic[res.Topic] = i
			}
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition = res.Partition
			code, msg := res.Err, res.Message
			if code == nil && err != nil {
				code, msg = commitErrorCode(err), err.Error()
			}
			if code != nil {
				rp.ErrorCode = code.Code
				if msg == "" {
					msg = code.Description
				}
				rp.ErrorMessage = &msg
			}
			resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
		}
		r.respond(resp)
	})
}
