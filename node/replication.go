package node

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/internal/invariants"
	"github.com/sluicemq/sluice/isr"
	"github.com/sluicemq/sluice/log"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Replication on this broker: each partition's isr.Replica decides, and
// this file does what its Ready says. Followers fetch in fetcher.go; the
// leader's side of their fetches is in 01_fetch.go.
//
// The flush policy (DESIGN.md section 6, ARCHITECTURE.md "Replication"):
// a replica's position, what counts of its log toward the high watermark,
// is its durable end. The leader's appends are flushed as they come
// (group commit), and a follower fetches again only once what it appended
// is durable, so the fetch offset it reports is synced. The high watermark,
// the smallest position of the ISR, is then on the disk of every ISR
// member, and no acknowledged acks=all record is lost even when every
// node loses power at once.

// hwWaiter is an acks=all produce waiting for the high watermark to reach
// end.
type hwWaiter struct {
	end  int64
	done func(error)
}

// errNotLeader is what a produce waiting for replication gets when its
// partition's leadership moves first: whether its records survive is for
// the new leader's log to say (the client's outcome is unknown).
var errNotLeader = errors.New("node: leadership moved while the produce waited for its replicas")

// newReplica gives p its replication state, with no role until its
// recovery is durable (startReplica).
func (b *Broker) newReplica(p *partition, t *raftmeta.Topic) {
	p.flushMessages = b.flushMessagesOf(t)
	cfg := isr.Config{
		ID:                b.cfg.NodeID,
		ReplicaLagTimeMax: b.cfg.ReplicaLagTimeMax,
		MinInSync:         b.minInSync(t),
		// In page-cache mode a power loss may take back what was
		// counted; unclean elections may too.
		CheckTruncation: !p.pageCache() && t.Configs[raftmeta.UncleanLeaderElectionConfig] != "true",
	}
	p.hw = p.log.LogStartOffset()
	p.rep = isr.New(cfg, p.local(), p.hw)
}

// minInSync is the topic's min.insync.replicas.
func (b *Broker) minInSync(t *raftmeta.Topic) int {
	v, ok := t.Configs["min.insync.replicas"]
	if !ok {
		def, _ := lookupTopicConfig("min.insync.replicas")
		v = def.defaultValue(b.cfg)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// local is p's log as its replica sees it: its position is its durable
// end, or in page-cache mode its log end.
func (p *partition) local() isr.Local {
	end := p.log.LogEndOffset()
	epoch, ok := p.log.LatestEpoch()
	if !ok {
		epoch = -1
	}
	position := min(p.log.DurableOffset(), end)
	if p.pageCache() {
		position = end
	}
	return isr.Local{LogStart: p.log.LogStartOffset(), LogEnd: end, Position: position, LatestEpoch: epoch}
}

// setFlushMessages changes p's flush.messages. Into the power-loss-safe
// mode, the switch waits for a flush of the whole log: a position counted
// from the page cache must be on disk before positions are durable ends.
func (b *Broker) setFlushMessages(p *partition, n int64) {
	if n > 1 || !p.pageCache() {
		p.flushMessages = n
		return
	}
	p.log.Flush(p.log.LogEndOffset(), func(err error) {
		t := b.image.Topics[p.topicID]
		if err != nil || t == nil || b.flushMessagesOf(t) != 1 || b.partitions[partitionKey{p.topicID, p.index}] != p {
			return
		}
		if p.hw > p.log.DurableOffset() {
			b.setFlushMessages(p, 1) // the high watermark moved on meanwhile
			return
		}
		p.flushMessages, p.unflushed = 1, 0
		b.localMoved(p)
	})
}

// flushMessagesOf is the topic's flush.messages.
func (b *Broker) flushMessagesOf(t *raftmeta.Topic) int64 {
	v, ok := t.Configs["flush.messages"]
	if !ok {
		def, _ := lookupTopicConfig("flush.messages")
		v = def.defaultValue(b.cfg)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// startReplica gives a recovered partition its role from the image.
func (b *Broker) startReplica(p *partition) {
	if mp, ok := b.imagePartition(partitionKey{p.topicID, p.index}); ok {
		b.stepReplica(p, isr.Message{Type: isr.MsgMetadata, Meta: replicaMetadata(mp)})
	}
}

func replicaMetadata(mp raftmeta.Partition) isr.Metadata {
	return isr.Metadata{Leader: mp.Leader, LeaderEpoch: mp.LeaderEpoch, PartitionEpoch: mp.PartitionEpoch,
		Replicas: mp.Replicas, ISR: mp.ISR}
}

// followMetadata takes a committed change of p's partition: leadership,
// epochs, ISR.
func (b *Broker) followMetadata(p *partition, mp raftmeta.Partition) {
	wasLeading, wasLeader := p.serving(), p.rep.Role() == isr.RoleLeader
	b.env.Log.Debug("partition changed", "topic", p.topic, "partition", p.index, "leader", mp.Leader, "leader_epoch", mp.LeaderEpoch,
		"partition_epoch", mp.PartitionEpoch, "isr", fmt.Sprint(mp.ISR), "elr", fmt.Sprint(mp.ELR), "recovered", p.recovered)
	p.leaderEpoch, p.leading = mp.LeaderEpoch, mp.Leader == b.cfg.NodeID
	if p.recovered {
		b.stepReplica(p, isr.Message{Type: isr.MsgMetadata, Meta: replicaMetadata(mp)})
	}
	switch {
	case wasLeading && !p.serving():
		b.leadershipLost(p)
	case wasLeader && p.rep.Role() != isr.RoleLeader:
		// Not serving already (its lease ran out), and now no longer the
		// leader either: what waits for its replicas fails all the same.
		// Left waiting, a produce was acknowledged by the high watermark
		// this broker then learned as a follower, though its records had
		// been truncated away (the cluster sweep found two acks=all
		// produces acknowledged at one offset).
		b.leadershipLost(p)
	}
	b.failUnderMinISR(p)
}

// failUnderMinISR answers the acks=all produces waiting on p
// NOT_ENOUGH_REPLICAS_AFTER_APPEND once its ISR is below
// min.insync.replicas: the high watermark stands still until the ISR is
// back, so they would only time out (their records are in the log and
// may yet be replicated: the outcome is unknown to the client).
func (b *Broker) failUnderMinISR(p *partition) {
	if len(p.hwWaiters) > 0 && p.rep.Role() == isr.RoleLeader && p.rep.UnderMinISR() {
		p.failWaiters(errUnderMinISR)
	}
}

// leadershipLost answers what waits on p as its leader: parked fetches
// answer NOT_LEADER_OR_FOLLOWER now, and produces waiting for replication
// fail.
func (b *Broker) leadershipLost(p *partition) {
	b.shardPartitionLost(p)
	for _, f := range slices.Clone(p.watchers) {
		f.wake()
	}
	waiting := p.hwWaiters
	p.hwWaiters = nil
	for _, w := range waiting {
		w.done(errNotLeader)
	}
}

// localMoved tells p's replica that its log moved (an append became
// durable, a truncation finished).
func (b *Broker) localMoved(p *partition) {
	if p.recovered && b.partitions[partitionKey{p.topicID, p.index}] == p {
		b.stepReplica(p, isr.Message{Type: isr.MsgLocal})
	}
}

// stepReplica steps p's replica with m (its Local and Now filled in) and
// does what it then asks.
func (b *Broker) stepReplica(p *partition, m isr.Message) {
	m.Now = b.mono.now
	m.Local = p.local()
	p.rep.Step(m)
	b.replicaReady(p)
}

// replicaReady does what p's replica asks.
func (b *Broker) replicaReady(p *partition) {
	rd := p.rep.Ready()
	if rd.HWMoved {
		b.setHighWatermark(p, rd.HighWatermark)
	}
	if rd.Alter != nil {
		b.proposeISR(p, *rd.Alter)
	}
	if rd.Query != nil {
		p.query = rd.Query
	}
	if rd.TruncateTo >= 0 {
		b.truncateFollower(p, rd.TruncateTo)
	}
	p.fetching = rd.Fetch
	b.assignFetcher(p)
}

// setHighWatermark moves p's high watermark and wakes what waits for it.
func (b *Broker) setHighWatermark(p *partition, hw int64) {
	if invariants.Enabled && hw < p.hw && p.rep.Role() == isr.RoleLeader {
		invariants.Panicf("partition %s-%d: the leader's high watermark went back from %d to %d", p.topic, p.index, p.hw, hw)
	}
	p.hw = hw
	if invariants.Enabled {
		p.checkOffsets()
	}
	// A woken fetch that finishes removes itself from p.watchers.
	for _, f := range slices.Clone(p.watchers) {
		f.wake()
	}
	if p.rep.Role() != isr.RoleLeader {
		// A follower's high watermark is its leader's: it acknowledges
		// nothing (a produce still waiting here is failed when the
		// leadership goes, above).
		return
	}
	n := 0
	for n < len(p.hwWaiters) && p.hwWaiters[n].end <= hw {
		n++
	}
	reached := p.hwWaiters[:n]
	p.hwWaiters = slices.Clone(p.hwWaiters[n:])
	for _, w := range reached {
		w.done(nil)
	}
}

// whenReplicated calls done once p's high watermark has reached end: every
// ISR member has the records before it on its disk. It fails if the
// leadership moves first or the log fails.
func (p *partition) whenReplicated(end int64, done func(error)) {
	if p.hw >= end {
		p.b.env.Loop.Post(func() { done(nil) })
		return
	}
	// Appends come in offset order, so the list stays sorted by end.
	p.hwWaiters = append(p.hwWaiters, hwWaiter{end: end, done: done})
}

// failWaiters fails every produce waiting on p (its log failed).
func (p *partition) failWaiters(err error) {
	waiting := p.hwWaiters
	p.hwWaiters = nil
	for _, w := range waiting {
		w.done(err)
	}
}

// proposeISR sends the replica's ISR change to the controller and steps
// the answer back.
func (b *Broker) proposeISR(p *partition, a isr.AlterISR) {
	if len(a.ISR) < p.rep.InSync() {
		b.replStats.ShrinksProposed++
	} else {
		b.replStats.ExpandsProposed++
	}
	req := raftmeta.AlterPartition{BrokerID: b.cfg.NodeID, BrokerEpoch: b.brokerEpoch, Topic: p.topicID, Partition: p.index,
		LeaderEpoch: a.LeaderEpoch, PartitionEpoch: a.PartitionEpoch, ISR: a.ISR}
	// Each member's broker epoch as its fetches named it (KIP-903): a
	// member that restarted since, perhaps without what it had, is refused
	// (INELIGIBLE_REPLICA).
	for _, id := range a.ISR {
		epoch := p.rep.FollowerBrokerEpoch(id)
		if id == b.cfg.NodeID {
			epoch = b.brokerEpoch
		}
		req.ISREpochs = append(req.ISREpochs, epoch)
	}
	b.env.Log.Info("proposing an ISR change", "topic", p.topic, "partition", p.index, "isr", a.ISR,
		"leader_epoch", a.LeaderEpoch, "partition_epoch", a.PartitionEpoch)
	b.alterPartition(req, func(reply raftmeta.AlterPartitionReply, err error) {
		if b.partitions[partitionKey{p.topicID, p.index}] != p {
			return
		}
		m := isr.Message{Type: isr.MsgAlterDone}
		switch {
		case err != nil:
			// No answer (a timeout, a lost connection, a proposal lost with
			// the controller's leadership): it may have committed.
			m.Err = fmt.Errorf("%w: %w", isr.ErrOutcomeUnknown, err)
		case reply.Err == kerr.NotController || reply.Err == kerr.RequestTimedOut:
			m.Err = fmt.Errorf("%w: %w: %s", isr.ErrOutcomeUnknown, reply.Err, reply.Message)
		case reply.Err == kerr.InvalidUpdateVersion || reply.Err == kerr.FencedLeaderEpoch:
			if reply.Err == kerr.InvalidUpdateVersion {
				b.replStats.ISRStale++
			}
			m.Err = fmt.Errorf("%w: %s (%w)", reply.Err, reply.Message, isr.ErrStaleEpoch)
		case reply.Err != nil:
			m.Err = fmt.Errorf("%w: %s", reply.Err, reply.Message)
		default:
			m.Meta = replicaMetadata(reply.Partition)
		}
		if m.Err != nil {
			b.replStats.ISRRefused++
			b.env.Log.Info("ISR change refused", "topic", p.topic, "partition", p.index, "isr", a.ISR, "err", m.Err)
		}
		if errors.Is(m.Err, isr.ErrOutcomeUnknown) {
			// The replica proposes it again at once: after a pause, or a
			// controller that fails every proposal at once (it has just
			// lost the quorum's lead) spins the loop without end (the
			// sweep found one logging 1.4 GB in a second of virtual time).
			b.env.Clock.AfterFunc(alterRetryBackoff, func() {
				if b.partitions[partitionKey{p.topicID, p.index}] == p {
					b.stepReplica(p, m)
				}
			})
			return
		}
		b.stepReplica(p, m)
		b.failUnderMinISR(p)
	})
}

// alterRetryBackoff is how long an ISR change whose outcome is unknown
// waits before it is sent again.
const alterRetryBackoff = 200 * time.Millisecond

// truncateFollower removes p's records from offset on, as its replica
// decided from the leader's answer, and tells it once that is durable.
func (b *Broker) truncateFollower(p *partition, offset int64) {
	p.truncating = true
	b.replStats.Truncations++
	b.env.Log.Info("follower truncating", "topic", p.topic, "partition", p.index, "to", offset, "log_end", p.log.LogEndOffset())
	if err := p.log.TruncateTo(offset); err != nil {
		b.partitionFailed(p, err)
		return
	}
	p.log.Ready(func(err error) {
		p.truncating = false
		if err != nil {
			b.partitionFailed(p, err)
			return
		}
		if pos := p.local().Position; p.hw > pos {
			// Only past an unclean election (CheckTruncation's note).
			p.hw = pos
		}
		b.stepReplica(p, isr.Message{Type: isr.MsgTruncated})
	})
}

// partitionFailed takes a partition whose log failed offline: it serves
// KAFKA_STORAGE_ERROR until a restart opens it again.
func (b *Broker) partitionFailed(p *partition, err error) {
	key := partitionKey{p.topicID, p.index}
	b.env.Log.Error("partition offline", "topic", p.topic, "partition", p.index, "err", err)
	if b.partitions[key] == p {
		delete(b.partitions, key)
		b.offline[key] = err
	}
	p.fetching, p.query = false, nil
	b.assignFetcher(p)
	b.shardPartitionLost(p)
	p.failWaiters(&log.Error{Code: kerr.KafkaStorageError, Msg: "the partition went offline", Err: err})
	for _, f := range slices.Clone(p.watchers) {
		f.wake()
	}
}

// tickReplicas lets every leader look for lagging followers, every half
// replica.lag.time.max.ms (as Kafka's isr-expiration task runs).
func (b *Broker) tickReplicas() {
	b.replicaTicker = b.env.Clock.AfterFunc(b.cfg.ReplicaLagTimeMax/2, func() {
		if b.state != stateRunning {
			return
		}
		for _, key := range b.sortedPartitionKeys() {
			if p := b.partitions[key]; p.recovered && p.rep.Role() == isr.RoleLeader {
				b.stepReplica(p, isr.Message{Type: isr.MsgTick})
			}
		}
		b.tickReplicas()
	})
}
