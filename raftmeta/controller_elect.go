package raftmeta

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Leader choice, in the manner of Kafka's PartitionChangeBuilder with
// unclean election off and without eligible leader replicas (KIP-966):
//
//   - A broker may lead, and may be chosen into a new ISR, when it is
//     registered, unfenced and not in controlled shutdown (Kafka's
//     "active" broker).
//   - When a broker is fenced, begins a controlled shutdown, is replaced by
//     a new incarnation or is unregistered, every partition whose ISR holds
//     it loses it from the ISR, unless it is the last member: KRaft keeps
//     the last member so that a clean election remains possible when it
//     comes back. A partition it led keeps no leader of its own choosing:
//     the new leader is the first replica, in replica order, that is in the
//     new ISR and may lead; NoLeader when none may.
//   - When a broker is unfenced, every partition without a leader whose ISR
//     holds it elects the first replica in the ISR that may lead (which is
//     it, unless another member came back before).
//   - A change writes the leader epoch up by one when the leader changes,
//     and the partition epoch up by one always.
//
// Unclean election (a leader from outside the ISR) is not offered: it is
// off by default in Kafka, and DESIGN.md section 6 keeps it off.

// eligible reports whether a broker may lead or be chosen into an ISR.
func (c *Controller) eligible(id int32) bool {
	b, ok := c.view.Brokers[id]
	return ok && !b.Fenced && !b.InControlledShutdown
}

// firstEligible returns the first replica, in replica order, that is in
// isr, is not exclude and may lead; NoLeader when none.
func (c *Controller) firstEligible(replicas, isr []int32, exclude int32) int32 {
	for _, r := range replicas {
		if r != exclude && indexOf(isr, r) >= 0 && c.eligible(r) {
			return r
		}
	}
	return NoLeader
}

// changePartition adds the record that moves partition i of t to leader
// and isr (nil: unchanged), with the epochs that follow; nothing when
// neither changes.
func (b *batch) changePartition(t *Topic, i int, leader int32, isr []int32) {
	p := &t.Partitions[i]
	if isr != nil && int32sEqual(isr, p.ISR) {
		isr = nil
	}
	if leader == p.Leader && isr == nil {
		return
	}
	leaderEpoch := p.LeaderEpoch
	if leader != p.Leader {
		leaderEpoch++
	}
	b.add(PartitionChangeRecord{Topic: t.ID, Partition: p.Index, Leader: leader, ISR: isr,
		LeaderEpoch: leaderEpoch, PartitionEpoch: p.PartitionEpoch + 1})
}

// giveUpPartitions takes the broker out of every ISR where it is not the
// last member and moves every leadership it holds.
func (c *Controller) giveUpPartitions(b *batch, id int32) {
	for _, name := range c.view.TopicNames() {
		t := c.view.TopicByName(name)
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if indexOf(p.ISR, id) < 0 {
				continue
			}
			isr := p.ISR
			if len(isr) > 1 {
				isr = without(isr, id)
			}
			leader := p.Leader
			if leader == id || (leader != NoLeader && !c.eligible(leader)) {
				leader = c.firstEligible(p.Replicas, isr, id)
			}
			b.changePartition(t, i, leader, isr)
		}
	}
}

// electLeaderless elects a leader for every partition without one whose
// ISR holds the broker.
func (c *Controller) electLeaderless(b *batch, id int32) {
	for _, name := range c.view.TopicNames() {
		t := c.view.TopicByName(name)
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if p.Leader != NoLeader || indexOf(p.ISR, id) < 0 {
				continue
			}
			b.changePartition(t, i, c.firstEligible(p.Replicas, p.ISR, NoLeader), nil)
		}
	}
}

func without(ids []int32, id int32) []int32 {
	out := make([]int32, 0, len(ids))
	for _, v := range ids {
		if v != id {
			out = append(out, v)
		}
	}
	return out
}

// TopicPartitions names partitions of a topic, as ElectLeaders asks.
type TopicPartitions struct {
	Topic      string
	Partitions []int32
}

// ElectionResult answers one partition of an ElectLeaders request.
type ElectionResult struct {
	Topic     string
	Partition int32
	Err       *kerr.Error
	Message   string
}

// ElectPreferredLeaders is ElectLeaders with election type 0 (preferred),
// following Kafka's ReplicationControlManager.electLeaders: each named
// partition moves its leadership to its first replica when that replica is
// in the ISR and may lead. Answers per partition: none when it moved,
// ELECTION_NOT_NEEDED when the first replica leads already,
// PREFERRED_LEADER_NOT_AVAILABLE when it may not lead or is not in the
// ISR, UNKNOWN_TOPIC_OR_PARTITION for a topic or partition that does not
// exist. A nil request means every partition of every topic (sorted by
// name), and then, as in Kafka, partitions that need no election are left
// out of the answer.
//
// Kafka's preferred election also gives a partition with no leader some
// other eligible ISR member when the first replica may not lead, and
// answers no error; here it answers PREFERRED_LEADER_NOT_AVAILABLE and
// leaves the partition alone, since every path that leaves a partition
// without a leader (controller_elect.go) already elects any eligible ISR
// member as soon as one exists.
func (c *Controller) ElectPreferredLeaders(req []TopicPartitions) ([]ElectionResult, []Record) {
	if c.failed != nil {
		err, msg := c.failedErr()
		return []ElectionResult{{Err: err, Message: msg}}, nil
	}
	b := c.batch()
	var out []ElectionResult
	if req == nil {
		for _, name := range c.view.TopicNames() {
			t := c.view.TopicByName(name)
			for i := range t.Partitions {
				if err, msg := c.electPreferred(b, t, i); err != kerr.ElectionNotNeeded {
					out = append(out, ElectionResult{Topic: name, Partition: int32(i), Err: err, Message: msg})
				}
			}
		}
		return c.electionResults(out, b)
	}
	for _, tp := range req {
		t := c.view.TopicByName(tp.Topic)
		for _, i := range tp.Partitions {
			res := ElectionResult{Topic: tp.Topic, Partition: i}
			switch {
			case t == nil:
				res.Err, res.Message = kerr.UnknownTopicOrPartition, fmt.Sprintf("no topic %q", tp.Topic)
			case i < 0 || int(i) >= len(t.Partitions):
				res.Err, res.Message = kerr.UnknownTopicOrPartition, fmt.Sprintf("no partition %s-%d", tp.Topic, i)
			default:
				res.Err, res.Message = c.electPreferred(b, t, int(i))
			}
			out = append(out, res)
		}
	}
	return c.electionResults(out, b)
}

// electionResults finishes an election batch; if the controller failed on
// the way, every answer is the failure.
func (c *Controller) electionResults(out []ElectionResult, b *batch) ([]ElectionResult, []Record) {
	records := b.done()
	if c.failed != nil {
		for i := range out {
			out[i].Err, out[i].Message = c.failedErr()
		}
	}
	return out, records
}

// electPreferred moves partition i's leadership to its first replica if
// it may lead.
func (c *Controller) electPreferred(b *batch, t *Topic, i int) (*kerr.Error, string) {
	p := &t.Partitions[i]
	preferred := p.Replicas[0]
	switch {
	case p.Leader == preferred:
		return kerr.ElectionNotNeeded, ""
	case indexOf(p.ISR, preferred) < 0:
		return kerr.PreferredLeaderNotAvailable, fmt.Sprintf("preferred replica %d is not in the ISR %v", preferred, p.ISR)
	case !c.eligible(preferred):
		return kerr.PreferredLeaderNotAvailable, fmt.Sprintf("preferred replica %d is fenced, shutting down or not registered", preferred)
	}
	b.changePartition(t, i, preferred, nil)
	return nil, ""
}

// rebalance is the automatic leader rebalance, as the ZooKeeper-era
// controller's checkAndTriggerAutoLeaderRebalance did it: for each broker
// that may lead, the partitions whose preferred replica it is but which it
// does not lead are its imbalance; when they are more than
// ImbalancePercent of its preferred partitions, each of them that can
// elects it (a preferred election). At most maxElectionsPerRebalance
// elections per round; it returns true when it stopped there, and the next
// round should follow at once. (KRaft's controller rebalances any
// imbalanced partition and ignores the percentage.)
func (c *Controller) rebalance(b *batch) bool {
	preferred, imbalanced := map[int32]int{}, map[int32]int{}
	for _, name := range c.view.TopicNames() {
		t := c.view.TopicByName(name)
		for i := range t.Partitions {
			p := &t.Partitions[i]
			preferred[p.Replicas[0]]++
			if p.Leader != p.Replicas[0] {
				imbalanced[p.Replicas[0]]++
			}
		}
	}
	elections := 0
	for _, name := range c.view.TopicNames() {
		t := c.view.TopicByName(name)
		for i := range t.Partitions {
			p := &t.Partitions[i]
			pref := p.Replicas[0]
			if p.Leader == pref || imbalanced[pref]*100 <= c.cfg.ImbalancePercent*preferred[pref] {
				continue
			}
			if elections == maxElectionsPerRebalance {
				return true
			}
			if err, _ := c.electPreferred(b, t, i); err == nil {
				elections++
			}
		}
	}
	return false
}

// AlterPartition is a partition leader's request to change its ISR
// (Kafka's AlterPartition), made against the epochs it knows.
type AlterPartition struct {
	BrokerID       int32
	BrokerEpoch    int64
	Topic          TopicID
	Partition      int32
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
	// ISREpochs, when not nil, is each ISR member's broker epoch, in ISR
	// order (AlterPartition v3's NewIsrWithEpochs, KIP-903); -1 skips the
	// check of that member, as in Kafka. A member now registered with
	// another epoch has restarted since its leader saw it catch up, and
	// may have lost what it acknowledged: INELIGIBLE_REPLICA.
	ISREpochs []int64
	// LeaderRecoveryState is the leader's claim (v1+): 0 recovered, 1
	// recovering from an unclean election. Sluice never elects uncleanly,
	// so every partition is recovered, and Kafka refuses a change from
	// recovered to recovering (INVALID_REQUEST).
	LeaderRecoveryState int8
}

// AlterPartitionReply answers AlterPartition with the partition's state
// once the change commits (or as it is, when the request changes nothing).
type AlterPartitionReply struct {
	Err       *kerr.Error
	Message   string
	Partition Partition
}

// AlterPartition changes a partition's ISR at its leader's request,
// checked as Kafka's ReplicationControlManager.validateAlterPartitionData
// does: the requester must be registered with its epoch
// (BROKER_ID_NOT_REGISTERED, STALE_BROKER_EPOCH); the partition must exist
// (UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION); epochs above the
// partition's mean this controller is behind (NOT_CONTROLLER); a leader
// epoch below it is FENCED_LEADER_EPOCH; a requester that is not the
// leader, or an ISR that is not distinct replicas including the leader, is
// INVALID_REQUEST; a partition epoch below it is INVALID_UPDATE_VERSION; an
// ISR member that may not be in an ISR (not registered, fenced, in
// controlled shutdown, or registered with another epoch than ISREpochs
// names) is INELIGIBLE_REPLICA; ISREpochs not matching the ISR, or a
// leader recovery state other than recovered, is INVALID_REQUEST. A valid
// request for the ISR the partition already has writes nothing.
func (c *Controller) AlterPartition(req AlterPartition) (AlterPartitionReply, []Record) {
	if c.failed != nil {
		err, msg := c.failedErr()
		return AlterPartitionReply{Err: err, Message: msg}, nil
	}
	t, i, err, msg := c.alterPartitionProblem(req)
	if err != nil {
		return AlterPartitionReply{Err: err, Message: msg}, nil
	}
	b := c.batch()
	b.changePartition(t, i, t.Partitions[i].Leader, append([]int32(nil), req.ISR...))
	records := b.done()
	if c.failed != nil {
		err, msg := c.failedErr()
		return AlterPartitionReply{Err: err, Message: msg}, nil
	}
	return AlterPartitionReply{Partition: t.Partitions[i]}, records
}

func (c *Controller) alterPartitionProblem(req AlterPartition) (*Topic, int, *kerr.Error, string) {
	br, ok := c.view.Brokers[req.BrokerID]
	if !ok {
		return nil, 0, kerr.BrokerIDNotRegistered, ""
	}
	if br.Epoch != req.BrokerEpoch {
		return nil, 0, kerr.StaleBrokerEpoch, ""
	}
	t := c.view.Topics[req.Topic]
	if t == nil {
		return nil, 0, kerr.UnknownTopicID, ""
	}
	if req.Partition < 0 || int(req.Partition) >= len(t.Partitions) {
		return nil, 0, kerr.UnknownTopicOrPartition, ""
	}
	p := &t.Partitions[req.Partition]
	switch {
	case req.LeaderEpoch > p.LeaderEpoch || req.PartitionEpoch > p.PartitionEpoch:
		return nil, 0, kerr.NotController, fmt.Sprintf("epochs %d/%d are ahead of the controller's %d/%d", req.LeaderEpoch, req.PartitionEpoch, p.LeaderEpoch, p.PartitionEpoch)
	case req.LeaderEpoch < p.LeaderEpoch:
		return nil, 0, kerr.FencedLeaderEpoch, fmt.Sprintf("leader epoch %d is below %d", req.LeaderEpoch, p.LeaderEpoch)
	case req.BrokerID != p.Leader:
		return nil, 0, kerr.InvalidRequest, fmt.Sprintf("broker %d is not the leader (%d)", req.BrokerID, p.Leader)
	case req.PartitionEpoch < p.PartitionEpoch:
		return nil, 0, kerr.InvalidUpdateVersion, fmt.Sprintf("partition epoch %d is below %d", req.PartitionEpoch, p.PartitionEpoch)
	}
	next := *p
	next.ISR = req.ISR
	if err := checkPartition(&next); err != nil {
		return nil, 0, kerr.InvalidRequest, err.Error()
	}
	if req.ISREpochs != nil && len(req.ISREpochs) != len(req.ISR) {
		return nil, 0, kerr.InvalidRequest, fmt.Sprintf("%d broker epochs for the %d ISR members", len(req.ISREpochs), len(req.ISR))
	}
	if req.LeaderRecoveryState != 0 {
		return nil, 0, kerr.InvalidRequest, fmt.Sprintf("leader recovery state %d: the partition is recovered", req.LeaderRecoveryState)
	}
	for k, r := range req.ISR {
		if !c.eligible(r) {
			return nil, 0, kerr.IneligibleReplica, fmt.Sprintf("replica %d is not registered, fenced or shutting down", r)
		}
		if req.ISREpochs != nil && req.ISREpochs[k] != -1 && req.ISREpochs[k] != c.view.Brokers[r].Epoch {
			return nil, 0, kerr.IneligibleReplica, fmt.Sprintf("replica %d has broker epoch %d, not %d", r, c.view.Brokers[r].Epoch, req.ISREpochs[k])
		}
	}
	return t, int(req.Partition), nil, ""
}
