package node

import (
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterPartitionReassignments, versions 0-1 (KIP-455, KIP-860), on the
// active controller (any other broker forwards it), as
// raftmeta.Controller.AlterPartitionReassignments decides
// (raftmeta/controller_reassign.go):
//
//   - Each partition's Replicas is its target; null cancels the
//     reassignment in progress (NO_REASSIGNMENT_IN_PROGRESS when there is
//     none; INVALID_REPLICA_ASSIGNMENT when the revert would need an
//     unclean election the topic does not allow).
//   - An unknown topic or partition, and a topic being deleted once its
//     deletion commits, is UNKNOWN_TOPIC_OR_PARTITION.
//   - A target that is empty, names a broker twice, names an unregistered
//     broker, or adds a fenced one is INVALID_REPLICA_ASSIGNMENT, with
//     Kafka's messages.
//   - v1's AllowReplicationFactorChange false refuses a target of another
//     length (INVALID_REPLICATION_FACTOR), as Kafka 4 does.
//   - A TimeoutMillis of zero or less is REQUEST_TIMED_OUT, at the top
//     and for every partition, as Kafka's error response sets both.
//   - The answer comes once the change is applied on the broker that
//     answers; the reassignment itself completes later, when the adding
//     replicas have joined the ISR (ListPartitionReassignments follows
//     it). Each replica then leaving the partition closes its log and
//     deletes its directory (reassignment.go).
func (b *Broker) handleAlterPartitionReassignments(r *request) {
	req := r.body.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	var asked []raftmeta.Reassignment
	for _, rt := range req.Topics {
		if t := b.view().TopicByName(rt.Topic); t != nil && b.deleting.pending(t.ID) {
			b.deleting.onFinish(t.ID, func() { b.handleAlterPartitionReassignments(r) })
			return
		}
		for _, rp := range rt.Partitions {
			asked = append(asked, raftmeta.Reassignment{Topic: rt.Topic, Partition: rp.Partition, Replicas: rp.Replicas,
				KeepReplicationFactor: req.Version >= 1 && !req.AllowReplicationFactorChange})
		}
	}
	answer := func(results []raftmeta.ReassignmentResult, commitErr error) {
		i := 0
		for _, rt := range req.Topics {
			out := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			out.Topic = rt.Topic
			for range rt.Partitions {
				res := results[i]
				i++
				rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				rp.Partition = res.Partition
				code, msg := res.Err, res.Message
				if code == nil && commitErr != nil {
					code, msg = commitErrorCode(commitErr), commitErr.Error()
				}
				if code != nil {
					if msg == "" {
						msg = code.Description
					}
					rp.ErrorCode, rp.ErrorMessage = code.Code, &msg
				}
				out.Partitions = append(out.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, out)
		}
		r.respond(resp)
	}
	if req.TimeoutMillis <= 0 {
		results := make([]raftmeta.ReassignmentResult, len(asked))
		for i, a := range asked {
			results[i] = raftmeta.ReassignmentResult{Topic: a.Topic, Partition: a.Partition, Err: kerr.RequestTimedOut}
		}
		resp.ErrorCode = kerr.RequestTimedOut.Code
		answer(results, nil)
		return
	}
	results, records := b.ctl.AlterPartitionReassignments(asked)
	b.propose(records, func(err error) { answer(results, err) })
}
