package raftmeta

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/internal/invariants"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Leader choice and the ISR's eligible leader replicas, in the manner of
// Kafka 4's PartitionChangeBuilder with eligible leader replicas enabled
// (KIP-966). Every change the controller decides goes through applyChange,
// so the rules below hold for fencing, controlled shutdown, unregistration,
// re-registration, unfencing, preferred and unclean elections and the
// leader's AlterPartition alike.
//
//   - A broker may lead, and may be chosen into a new ISR, when it is
//     registered, unfenced and not in controlled shutdown (Kafka's
//     "active" broker).
//   - Min ISR is the topic's min.insync.replicas, else the cluster
//     default (broker config resource ""), else 1; at most the replica
//     count. Whenever a change leaves the ISR below it, the members that
//     leave (and the ELR before) form the ELR, in replica order, minus the
//     new ISR; when the ISR is at least min ISR, the ELR is emptied. An
//     ELR member holds every record committed before it left, since
//     acks=all needed min ISR members to commit.
//   - When a broker is fenced, begins a controlled shutdown, is replaced by
//     a new incarnation or is unregistered, it leaves every ISR, the last
//     member too (the ISR may be empty, as in Kafka with ELR; the member
//     then goes to the ELR). A fenced broker stays in the ELRs it is in.
//   - A broker whose new incarnation registers without the epoch of the
//     registration it replaces (BrokerRegistration.PreviousBrokerEpoch:
//     the node sets it only after a clean shutdown) shut down uncleanly:
//     its unflushed records may be gone, so it leaves every ISR and ELR.
//   - Election, when the leader must change or the partition has none:
//     the current leader stays while it may lead and is in the ISR; else
//     the first replica in replica order that is in the ISR and may lead;
//     else the first in the ELR that may lead, which becomes the whole
//     ISR and leaves the ELR; else, when ISR and ELR are both empty and
//     the last known leader (LastKnownELR) may lead, it (Kafka's
//     last-known-leader recovery: it led when the last ISR member left,
//     so it had every committed record); else, when unclean election is
//     allowed (the topic's unclean.leader.election.enable, else the
//     cluster default, else false; or an ElectLeaders of type unclean),
//     the first replica that may lead; else NoLeader. The last two are
//     unclean: the ISR becomes the new leader alone and the ELR is
//     emptied. Kafka also marks such a leader RECOVERING; Sluice has no
//     leader recovery state yet. As in Kafka 4, the last known leader is
//     elected whether or not unclean election is on: with Sluice's
//     flush-before-ack durability target (DESIGN.md section 6) it holds
//     every acknowledged record even after an unclean shutdown, and
//     without it a partition whose every replica crashed would stay
//     offline for good.
//   - A preferred election (ElectLeaders type 0, the periodic rebalance)
//     moves the leadership to the first replica when it may lead and the
//     rule above would let it: in the ISR, or in the ELR when no ISR
//     member may lead.
//   - A change that empties the ISR of a partition with a leader records
//     that leader as the LastKnownELR; a change that leaves the partition
//     with a leader clears it.
//   - When a broker is unfenced, every partition without a leader that
//     has it as a replica holds an election; so does every partition
//     without a leader of a topic whose unclean election AlterConfigs has
//     just turned on (controller_topics.go).
//   - A change writes the leader epoch up by one when the leader changes,
//     and the partition epoch up by one always.
//
// Kafka elects from the ELR only when the ISR is empty; here an ELR member
// may lead whenever no ISR member may. The two differ only for an ISR that
// holds a member that may not lead, which no change here leaves behind
// (images written before ELR existed can hold one). Kafka leaves the other
// ELR members in place when one is elected from it; here the ELR is
// emptied then if the new ISR reaches min ISR, since records the new
// leader commits alone are not on them.

// MinISRConfig and UncleanLeaderElectionConfig are the topic configs (and
// cluster defaults) the controller reads.
const (
	MinISRConfig                = "min.insync.replicas"
	UncleanLeaderElectionConfig = "unclean.leader.election.enable"
)

// eligible reports whether a broker may lead or be chosen into an ISR.
func (c *Controller) eligible(id int32) bool {
	b, ok := c.view.Brokers[id]
	return ok && !b.Fenced && !b.InControlledShutdown
}

// topicConfig returns the topic's value of key, else the cluster
// default's, else "".
func (c *Controller) topicConfig(t *Topic, key string) string {
	if v, ok := t.Configs[key]; ok {
		return v
	}
	return c.view.BrokerConfigs[""][key]
}

// minISR is the partition's effective min.insync.replicas: the topic's,
// else the cluster default, else 1, and at most the replica count. A
// value that does not parse (the node validates them) counts as unset.
func (c *Controller) minISR(t *Topic, p *Partition) int {
	n := 1
	for _, v := range []string{c.view.BrokerConfigs[""][MinISRConfig], t.Configs[MinISRConfig]} {
		if m, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && m >= 1 {
			n = m
		}
	}
	return min(n, len(p.Replicas))
}

// uncleanAllowed reports whether the topic allows unclean election.
func (c *Controller) uncleanAllowed(t *Topic) bool {
	return strings.EqualFold(strings.TrimSpace(c.topicConfig(t, UncleanLeaderElectionConfig)), "true")
}

// partitionChange is what a caller asks of one partition; applyChange
// works out the rest (ELR, election, last known ELR, epochs, the
// completion of a reassignment).
type partitionChange struct {
	// isr is the target ISR; nil keeps the current one.
	isr []int32
	// leader is the leader to keep or move to, unless elect.
	leader int32
	// elect chooses the leader by the election rule.
	elect bool
	// unclean allows an unclean election whatever the topic says.
	unclean bool
	// exclude may not lead (a broker being fenced or removed); NoLeader
	// for none.
	exclude int32
	// uncleanShutdown leaves the ISR and the ELR; NoLeader for none.
	uncleanShutdown int32
	// replicas, adding and removing are the target replica list and
	// reassignment (controller_reassign.go); nil keeps each.
	replicas, adding, removing []int32
}

// changePartition adds the record that moves partition i of t to leader
// and isr (nil: unchanged), with the ELR and epochs that follow; nothing
// when nothing changes.
func (b *batch) changePartition(t *Topic, i int, leader int32, isr []int32) {
	b.applyChange(t, i, partitionChange{isr: isr, leader: leader, exclude: NoLeader, uncleanShutdown: NoLeader})
}

// applyChange adds the record for ch (see the rules at the top of the
// file); nothing when nothing changes. It reports whether the partition
// has a leader afterwards.
func (b *batch) applyChange(t *Topic, i int, ch partitionChange) bool {
	c := b.c
	p := &t.Partitions[i]
	isr := p.ISR
	if ch.isr != nil {
		isr = ch.isr
	}
	isr = without(isr, ch.uncleanShutdown)
	// q is the partition with its new replicas, the ISR the change asks
	// for and, when that completes a reassignment, without the replicas
	// it removes: the ELR and the election below work on it.
	q, isr, removed := c.reassigned(p, ch, isr)
	if indexOf(removed, p.Leader) >= 0 {
		ch.elect = true
	}
	minISR := c.minISR(t, &q)
	elr := c.nextELR(&q, isr, minISR, ch.uncleanShutdown)
	leader, unclean := ch.leader, false
	if ch.elect {
		leader, unclean = c.electLeader(t, &q, isr, elr, ch)
	}
	if leader != NoLeader && indexOf(isr, leader) < 0 {
		if invariants.Enabled && !ch.elect && indexOf(elr, leader) < 0 && indexOf(p.ELR, leader) < 0 {
			invariants.Panicf("controller: partition %s-%d: leader %d given, in neither ISR %v nor ELR %v", t.Name, i, leader, isr, p.ELR)
		}
		// Elected from the ELR, or unclean: it alone is in sync.
		isr = []int32{leader}
		elr = without(elr, leader)
		if len(isr) >= minISR {
			elr = nil
		}
	}
	if unclean {
		elr = nil
	}
	lastKnown := q.LastKnownELR
	switch {
	case len(isr) == 0 && len(p.ISR) > 0 && p.Leader != NoLeader:
		lastKnown = []int32{p.Leader}
	case leader != NoLeader:
		lastKnown = nil
	}
	q.Leader, q.ISR, q.ELR, q.LastKnownELR = leader, isr, elr, lastKnown
	b.addChange(t, p, &q)
	return leader != NoLeader
}

// addChange writes the record moving p to next's leader, ISR, ELR, last
// known ELR, replicas and reassignment, with the epochs that follow;
// nothing when it is p's state already.
func (b *batch) addChange(t *Topic, p, next *Partition) {
	r := PartitionChangeRecord{Topic: t.ID, Partition: p.Index, Leader: next.Leader,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch + 1}
	differ := func(a, b []int32) []int32 {
		if int32sEqual(a, b) {
			return nil
		}
		return append([]int32{}, a...)
	}
	r.ISR = differ(next.ISR, p.ISR)
	r.ELR = differ(next.ELR, p.ELR)
	r.LastKnownELR = differ(next.LastKnownELR, p.LastKnownELR)
	r.Replicas = differ(next.Replicas, p.Replicas)
	r.AddingReplicas = differ(next.AddingReplicas, p.AddingReplicas)
	r.RemovingReplicas = differ(next.RemovingReplicas, p.RemovingReplicas)
	if next.Leader == p.Leader && r.ISR == nil && r.ELR == nil && r.LastKnownELR == nil &&
		r.Replicas == nil && r.AddingReplicas == nil && r.RemovingReplicas == nil {
		return
	}
	replicaLeft := false
	for _, id := range p.Replicas {
		replicaLeft = replicaLeft || indexOf(next.Replicas, id) < 0
	}
	if next.Leader != p.Leader || replicaLeft {
		r.LeaderEpoch++
	}
	b.add(r)
}

// nextELR is the ELR that goes with a target ISR: empty once the ISR
// reaches min ISR, else the members of the current ISR and ELR outside the
// target ISR, in replica order, without a broker that shut down uncleanly.
func (c *Controller) nextELR(p *Partition, isr []int32, minISR int, uncleanShutdown int32) []int32 {
	if len(isr) >= minISR {
		return nil
	}
	var elr []int32
	for _, r := range p.Replicas {
		was := indexOf(p.ISR, r) >= 0 || indexOf(p.ELR, r) >= 0
		if was && indexOf(isr, r) < 0 && r != uncleanShutdown {
			elr = append(elr, r)
		}
	}
	return elr
}

// electLeader chooses p's leader for the target ISR and ELR, and reports
// whether the choice is unclean.
func (c *Controller) electLeader(t *Topic, p *Partition, isr, elr []int32, ch partitionChange) (int32, bool) {
	mayLead := func(r int32) bool { return r != ch.exclude && r != ch.uncleanShutdown && c.eligible(r) }
	if p.Leader != NoLeader && indexOf(isr, p.Leader) >= 0 && mayLead(p.Leader) {
		return p.Leader, false
	}
	if r := firstOf(p.Replicas, isr, mayLead); r != NoLeader {
		return r, false
	}
	if r := firstOf(p.Replicas, elr, mayLead); r != NoLeader {
		return r, false
	}
	if len(isr) == 0 && len(elr) == 0 && len(p.LastKnownELR) == 1 && mayLead(p.LastKnownELR[0]) {
		return p.LastKnownELR[0], true
	}
	if ch.unclean || c.uncleanAllowed(t) {
		if r := firstOf(p.Replicas, p.Replicas, mayLead); r != NoLeader {
			return r, true
		}
	}
	return NoLeader, false
}

// firstOf returns the first replica, in replica order, that is in set and
// passes ok; NoLeader when none.
func firstOf(replicas, set []int32, ok func(int32) bool) int32 {
	for _, r := range replicas {
		if indexOf(set, r) >= 0 && ok(r) {
			return r
		}
	}
	return NoLeader
}

// giveUpPartitions takes the broker out of every ISR and moves every
// leadership it holds.
func (c *Controller) giveUpPartitions(b *batch, id int32) {
	for _, name := range c.view.TopicNames() {
		t := c.view.TopicByName(name)
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if indexOf(p.ISR, id) < 0 {
				continue
			}
			b.applyChange(t, i, partitionChange{isr: without(p.ISR, id), elect: true, exclude: id, uncleanShutdown: NoLeader})
		}
	}
}

// uncleanShutdown takes a broker that shut down uncleanly out of every ISR
// and ELR (Kafka's handleBrokerUncleanShutdown).
func (c *Controller) uncleanShutdown(b *batch, id int32) {
	for _, name := range c.view.TopicNames() {
		t := c.view.TopicByName(name)
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if indexOf(p.ISR, id) < 0 && indexOf(p.ELR, id) < 0 {
				continue
			}
			b.applyChange(t, i, partitionChange{elect: true, exclude: id, uncleanShutdown: id})
		}
	}
}

// electLeaderless holds an election in every partition without a leader
// that has the broker as a replica.
func (c *Controller) electLeaderless(b *batch, id int32) {
	for _, name := range c.view.TopicNames() {
		t := c.view.TopicByName(name)
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if p.Leader != NoLeader || indexOf(p.Replicas, id) < 0 {
				continue
			}
			b.applyChange(t, i, partitionChange{elect: true, exclude: NoLeader, uncleanShutdown: NoLeader})
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
// partition moves its leadership to its first replica when that replica
// may lead and is in the ISR (or in the ELR, when no ISR member may lead).
// Answers per partition: none when it moved,
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
	return c.electLeaders(req, c.electPreferred)
}

// ElectUncleanLeaders is ElectLeaders with election type 1 (unclean),
// following Kafka's ReplicationControlManager.electLeader with
// Election.UNCLEAN: each named partition without a leader elects one by
// the rule of every election (controller_elect.go's top), with unclean
// election allowed whatever the topic's unclean.leader.election.enable
// says, as in Kafka: an ISR member, else an ELR member, else the last
// known leader, else the first replica that may lead, which then is the
// whole ISR. Answers per partition: none when it got a leader,
// ELECTION_NOT_NEEDED when it has one, ELIGIBLE_LEADERS_NOT_AVAILABLE when
// no replica may lead (none registered, unfenced and not shutting down),
// UNKNOWN_TOPIC_OR_PARTITION for a topic or partition that does not exist.
// A nil request means every partition, and then partitions that need no
// election are left out of the answer.
func (c *Controller) ElectUncleanLeaders(req []TopicPartitions) ([]ElectionResult, []Record) {
	return c.electLeaders(req, c.electUnclean)
}

// electLeaders runs elect on each partition req names (every partition
// when nil) and gathers the answers.
func (c *Controller) electLeaders(req []TopicPartitions, elect func(*batch, *Topic, int) (*kerr.Error, string)) ([]ElectionResult, []Record) {
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
				if err, msg := elect(b, t, i); err != kerr.ElectionNotNeeded {
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
				res.Err, res.Message = elect(b, t, int(i))
			}
			out = append(out, res)
		}
	}
	return c.electionResults(out, b)
}

// electUnclean elects a leader for partition i if it has none, unclean
// election allowed.
func (c *Controller) electUnclean(b *batch, t *Topic, i int) (*kerr.Error, string) {
	p := &t.Partitions[i]
	if p.Leader != NoLeader {
		return kerr.ElectionNotNeeded, ""
	}
	if !b.applyChange(t, i, partitionChange{elect: true, unclean: true, exclude: NoLeader, uncleanShutdown: NoLeader}) {
		return kerr.EligibleLeadersNotAvailable, fmt.Sprintf("no replica of %v is registered, unfenced and not shutting down", p.Replicas)
	}
	return nil, ""
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
// it may lead and is in the ISR, or in the ELR when no ISR member may
// lead (it then is the whole ISR, as in any election from the ELR).
func (c *Controller) electPreferred(b *batch, t *Topic, i int) (*kerr.Error, string) {
	p := &t.Partitions[i]
	preferred := p.Replicas[0]
	inISR := indexOf(p.ISR, preferred) >= 0
	fromELR := !inISR && indexOf(p.ELR, preferred) >= 0 && firstOf(p.Replicas, p.ISR, c.eligible) == NoLeader
	switch {
	case p.Leader == preferred:
		return kerr.ElectionNotNeeded, ""
	case !inISR && !fromELR:
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
	// The shape asked for is the ISR's alone: a member the leader takes
	// back from the ELR leaves the ELR (applyChange decides the ELR).
	next.ELR = nil
	for _, r := range p.ELR {
		if indexOf(req.ISR, r) < 0 {
			next.ELR = append(next.ELR, r)
		}
	}
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
