package node

import (
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ElectLeaders, versions 0-2 (KIP-183, KIP-460), on the active controller
// (any other broker forwards it), as raftmeta.Controller decides:
//
//   - ElectionType 0 (preferred; versions 0 know no other):
//     ElectPreferredLeaders moves leadership back to each partition's
//     preferred (first) replica, with its per-partition codes
//     (ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
//     UNKNOWN_TOPIC_OR_PARTITION).
//   - ElectionType 1 (unclean): ElectUncleanLeaders gives each partition
//     without a leader one, from outside the ISR and ELR if it must,
//     whatever the topic's unclean.leader.election.enable says, as Kafka
//     does (ELECTION_NOT_NEEDED when it has a leader,
//     ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica may lead,
//     UNKNOWN_TOPIC_OR_PARTITION). Any other type is INVALID_REQUEST.
//   - Null topics mean every partition; the answer then leaves out those
//     that needed no election, as Kafka's does.
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
	elect := b.ctl.ElectPreferredLeaders
	if req.ElectionType == 1 {
		elect = b.ctl.ElectUncleanLeaders
	}
	results, records := elect(asked)
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
