package node

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeQuorum, versions 0-2 (KIP-595, KIP-836, KIP-853): the state of
// the metadata quorum, as its leader knows it.
//
//   - Only the topic __cluster_metadata, partition 0 exists; any other is
//     UNKNOWN_TOPIC_OR_PARTITION, as in Kafka.
//   - On any node but the quorum's leader: NOT_LEADER_OR_FOLLOWER for the
//     partition, with the leader and epoch this node knows of (Kafka's
//     answer; the admin client retries on the leader).
//   - The leader epoch is raft's term; the high watermark and each member's
//     log end offset are raft indexes (the committed index, and the index up
//     to which the member's log matches the leader's, plus one, as Kafka's
//     log end offset is the next offset). Voters are CurrentVoters, learners
//     (broker-only nodes) Observers, in id order. Fetch timestamps are not
//     tracked: -1. A voter being added by a joint configuration change is
//     among the voters as soon as the leader tracks it.
//   - v2 adds the voters' CONTROLLER endpoints in Nodes: every voter of the
//     configuration applied here, in id order, with its address from
//     controller.quorum.voters or, for a voter added since (AddRaftVoter),
//     from the membership change that added it (metadata_voters.go). A
//     voter whose address this node does not know is left out.
func (b *Broker) handleDescribeQuorum(r *request) {
	req := r.body.(*kmsg.DescribeQuorumRequest)
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewDescribeQuorumResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			t.Partitions = append(t.Partitions, b.describeQuorumPartition(rt.Topic, rp.Partition))
		}
		resp.Topics = append(resp.Topics, t)
	}
	if req.Version >= 2 {
		resp.Nodes = b.describeQuorumNodes()
	}
	r.respond(resp)
}

// metadataTopic is the name Kafka gives the metadata quorum's log.
const metadataTopic = "__cluster_metadata"

func (b *Broker) describeQuorumPartition(topic string, partition int32) kmsg.DescribeQuorumResponseTopicPartition {
	p := kmsg.NewDescribeQuorumResponseTopicPartition()
	p.Partition = partition
	if topic != metadataTopic || partition != 0 {
		p.ErrorCode = kerr.UnknownTopicOrPartition.Code
		return p
	}
	st := b.meta.node.Status()
	p.LeaderID, p.LeaderEpoch = nodeIDOfRaft(st.Leader), int32(st.Term)
	if st.Role != "leader" {
		p.ErrorCode = kerr.NotLeaderForPartition.Code
		return p
	}
	p.HighWatermark = int64(st.Commit) + 1
	for _, pr := range st.Progress {
		rs := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		rs.ReplicaID = nodeIDOfRaft(pr.ID)
		rs.LogEndOffset = int64(pr.Match) + 1
		if pr.Learner {
			p.Observers = append(p.Observers, rs)
		} else {
			p.CurrentVoters = append(p.CurrentVoters, rs)
		}
	}
	return p
}

// describeQuorumNodes lists the current voters' CONTROLLER endpoints.
func (b *Broker) describeQuorumNodes() []kmsg.DescribeQuorumResponseNode {
	var nodes []kmsg.DescribeQuorumResponseNode
	for _, id := range currentVoters(b.meta.node.Status().Config) {
		addr, ok := b.voterAddrOf(id)
		if !ok {
			continue
		}
		host, port, err := splitHostPort(addr)
		if err != nil {
			continue
		}
		n := kmsg.NewDescribeQuorumResponseNode()
		n.NodeID = nodeIDOfRaft(id)
		l := kmsg.NewDescribeQuorumResponseNodeListener()
		l.Name, l.Host, l.Port = b.cfg.ControllerListenerName(), host, uint16(port)
		n.Listeners = append(n.Listeners, l)
		nodes = append(nodes, n)
	}
	return nodes
}
