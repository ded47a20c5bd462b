package node

import (
	"slices"
	"time"

	"github.com/sluicemq/sluice/isr"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch from the closest replica (KIP-392).
//
// A consumer that names its rack (Fetch v11+, RackID) may read from a
// follower in that rack instead of the leader. The leader decides: with
// replica.selector.class set to Kafka's RackAwareReplicaSelector it answers
// such a fetch with PreferredReadReplica and no records, and the client
// fetches from that replica until it errs or the client's metadata refresh
// sends it back. The choice is Kafka's (ReplicaManager.findPreferredReadReplica
// and RackAwareReplicaSelector.select):
//
//   - candidates are the leader and the followers in the ISR whose log, as
//     their last fetch gave it, holds the fetch offset (log start <= offset
//     <= log end); a follower whose broker is fenced or unknown has no
//     endpoint, so no rack, and is never picked;
//   - no client rack, or no candidate in it, or the leader in it: the
//     leader (no PreferredReadReplica is sent);
//   - else the candidate of that rack that is most caught up: the greatest
//     log end, then the most recently caught up, then the greatest broker
//     id (Kafka's ReplicaView.comparator).
//
// Any replica serves a v11+ consumer's fetch, whatever the selector: Kafka's
// FetchParams.fetchOnlyLeader is false for a consumer that sent client
// metadata (v11+), so a follower answers below its own high watermark (the
// leader's, capped at its durable end) with its own log start, and the
// CurrentLeaderEpoch is checked against the epoch the follower knows before
// anything else, as Kafka's Partition.getLocalLog does. A v4-v10 consumer is
// served by the leader only. ListOffsets and OffsetForLeaderEpoch stay
// leader-only, as in Kafka.
//
// Kafka's selector is a plug-in class; Sluice knows the one Kafka ships and
// refuses any other name at start (parseReplicaSelector).

// RackAwareSelectorClass is Kafka's rack-aware ReplicaSelector.
const RackAwareSelectorClass = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

// replicaView is one candidate read replica (Kafka's ReplicaView).
type replicaView struct {
	id int32
	// rack is the broker's rack; live says it has an endpoint (registered
	// and not fenced). A replica without one has no rack.
	rack string
	live bool
	// logEnd is its log end offset (a follower's: its last fetch offset),
	// sinceCaughtUp how long ago it last was caught up (0 for the leader).
	logEnd        int64
	sinceCaughtUp time.Duration
}

// moreCaughtUp orders replicas as Kafka's ReplicaView.comparator does: the
// greater log end, then the shorter time since caught up, then the greater
// broker id is more caught up.
func moreCaughtUp(x, y replicaView) bool {
	switch {
	case x.logEnd != y.logEnd:
		return x.logEnd > y.logEnd
	case x.sinceCaughtUp != y.sinceCaughtUp:
		return x.sinceCaughtUp < y.sinceCaughtUp
	}
	return x.id > y.id
}

// selectRackAware is RackAwareReplicaSelector.select: the replica a
// client in clientRack should read from, among candidates, the first of
// which is the leader.
func selectRackAware(clientRack string, candidates []replicaView) replicaView {
	leader := candidates[0]
	if clientRack == "" {
		return leader
	}
	var best *replicaView
	for i := range candidates {
		c := &candidates[i]
		if !c.live || c.rack != clientRack {
			continue
		}
		if i == 0 {
			return leader
		}
		if best == nil || moreCaughtUp(*c, *best) {
			best = c
		}
	}
	if best == nil {
		return leader
	}
	return *best
}

// preferredReadReplica is the replica the leader sends a consumer's fetch
// of p at fetchOffset to, or -1 for itself.
func (b *Broker) preferredReadReplica(req *kmsg.FetchRequest, p *partition, fetchOffset int64) int32 {
	if b.cfg.ReplicaSelectorClass == "" || req.Version < 11 || fetchReplicaID(req) >= 0 || !p.serving() {
		return -1
	}
	meta := p.rep.Metadata()
	candidates := []replicaView{b.replicaView(b.cfg.NodeID, p.log.LogEndOffset(), 0)}
	for _, id := range meta.Replicas {
		if id == b.cfg.NodeID || !slices.Contains(meta.ISR, id) {
			continue
		}
		end := p.rep.FollowerOffset(id)
		start, known := p.followerStarts[id]
		if !known {
			start = -1 // Kafka's UNKNOWN_OFFSET, which passes the check
		}
		if end < fetchOffset || start > fetchOffset {
			continue
		}
		candidates = append(candidates, b.replicaView(id, end, b.mono.now.Sub(p.rep.FollowerCaughtUp(id))))
	}
	chosen := selectRackAware(req.Rack, candidates)
	if chosen.id == b.cfg.NodeID || !chosen.live {
		return -1
	}
	return chosen.id
}

// replicaView is broker id's replica as the image describes its broker.
func (b *Broker) replicaView(id int32, logEnd int64, sinceCaughtUp time.Duration) replicaView {
	v := replicaView{id: id, logEnd: logEnd, sinceCaughtUp: sinceCaughtUp}
	if br, ok := b.image.Brokers[id]; ok && !br.Fenced {
		v.rack, v.live = br.Rack, true
	}
	return v
}

// readPartition returns partition index of t as this broker holds a replica
// a v11+ consumer may read: the one it leads, or one it follows whose
// truncation is not under way. The client's leaderEpoch is checked first
// (FENCED_LEADER_EPOCH older, UNKNOWN_LEADER_EPOCH newer, -1 skips), as
// Kafka's follower checks it; the partition is returned with those errors
// too, for its offsets.
func (b *Broker) readPartition(t *raftmeta.Topic, index, leaderEpoch int32) (*partition, *kerr.Error) {
	key := partitionKey{t.ID, index}
	p := b.partitions[key]
	if p.serving() {
		return b.ledPartition(t, index, leaderEpoch)
	}
	if p == nil || !p.recovered || p.truncating || p.rep.Role() != isr.RoleFollower {
		return nil, b.missingPartition(key)
	}
	switch {
	case leaderEpoch >= 0 && leaderEpoch < p.leaderEpoch:
		return p, kerr.FencedLeaderEpoch
	case leaderEpoch > p.leaderEpoch:
		return p, kerr.UnknownLeaderEpoch
	}
	return p, nil
}
