package raftmeta

import (
	"fmt"
	"sort"

	"github.com/sluicemq/sluice/env"
)

// placer places new partitions' replicas in the manner of Kafka's
// StripedReplicaPlacer: brokers are grouped by rack (brokers without one
// form one rack), and each partition takes its replicas round-robin over
// the racks, one per rack while racks last, each rack handing out its
// brokers round-robin too. Both rounds start at a random offset and every
// partition moves the rack offset on by one, which gives the "striped"
// pattern: leaders (first replicas) and replicas spread evenly, and a
// partition's replicas sit on distinct racks whenever the replication
// factor allows. Once as many partitions as brokers have been placed, the
// rack order and each rack's brokers are shuffled, so the same sets do not
// repeat.
//
// Two differences from Kafka's. First, it places only on brokers that may
// lead (unfenced, not in controlled shutdown), where Kafka also places
// followers on fenced brokers: a new partition's ISR is its replicas, and a
// replica on a fenced broker could not be in it. So the replication factor
// is bounded by those brokers. Second, a rack keeps two cursors, one for
// the leaders it gives and one for the followers, where Kafka's keeps one
// offset moved once per partition the rack serves: when a rack serves twice
// per turn of the stripe (3 racks of 2 brokers, replication factor 2: as a
// follower, then as the leader), Kafka's gives every leadership of the rack
// to the same broker until the next shuffle. With two cursors the leaders
// of a rack take turns, and so do its followers.
type placer struct {
	rand  env.Rand
	racks []*rackBrokers
	// brokers counts the brokers of every rack.
	brokers int
	// offset is the rack the next partition's leader comes from; placed
	// counts the partitions placed since the last shuffle.
	offset, placed int
}

// rackBrokers hands out one rack's brokers round-robin, leaders and
// followers each in their own turn.
type rackBrokers struct {
	ids                  []int32
	leaderAt, followerAt int
}

// newPlacer groups brokers by rack, in sorted order, and draws the start
// offsets.
func newPlacer(brokers []Broker, rand env.Rand) *placer {
	byRack := map[string]*rackBrokers{}
	var names []string
	for _, b := range brokers {
		r := byRack[b.Rack]
		if r == nil {
			r = &rackBrokers{}
			byRack[b.Rack] = r
			names = append(names, b.Rack)
		}
		r.ids = append(r.ids, b.ID)
	}
	sort.Strings(names)
	p := &placer{rand: rand, brokers: len(brokers)}
	for _, name := range names {
		r := byRack[name]
		sort.Slice(r.ids, func(i, j int) bool { return r.ids[i] < r.ids[j] })
		r.leaderAt = env.Intn(rand, len(r.ids))
		r.followerAt = env.Intn(rand, len(r.ids))
		p.racks = append(p.racks, r)
	}
	if len(p.racks) > 0 {
		p.offset = env.Intn(rand, len(p.racks))
	}
	return p
}

// leader returns the rack's next leader.
func (r *rackBrokers) leader() int32 {
	id := r.ids[r.leaderAt%len(r.ids)]
	r.leaderAt++
	return id
}

// follower returns the rack's next follower not already chosen for the
// partition, or -1 when every broker of the rack is.
func (r *rackBrokers) follower(chosen []int32) int32 {
	for j := range r.ids {
		id := r.ids[(r.followerAt+j)%len(r.ids)]
		if indexOf(chosen, id) < 0 {
			r.followerAt += j + 1
			return id
		}
	}
	return -1
}

// place returns the replicas of one partition, the first its leader.
func (p *placer) place(replicationFactor int) ([]int32, error) {
	if replicationFactor <= 0 {
		return nil, fmt.Errorf("replication factor %d is not positive", replicationFactor)
	}
	if replicationFactor > p.brokers {
		return nil, fmt.Errorf("replication factor %d is above the %d brokers that are unfenced and not shutting down", replicationFactor, p.brokers)
	}
	if p.placed == p.brokers && p.brokers > 1 {
		p.shuffle()
		p.placed = 0
	}
	if p.offset >= len(p.racks) {
		p.offset = 0
	}
	out := make([]int32, 0, replicationFactor)
	out = append(out, p.racks[p.offset].leader())
	// Followers from the racks after the leader's, round and round: each
	// turn adds at least one broker while fewer than replicationFactor
	// (at most the brokers there are) are chosen.
	for at := p.offset + 1; len(out) < replicationFactor; at++ {
		if id := p.racks[at%len(p.racks)].follower(out); id >= 0 {
			out = append(out, id)
		}
	}
	p.placed++
	p.offset++
	return out, nil
}

// shuffle reorders the racks and each rack's brokers (Fisher-Yates, drawn
// from the placer's source).
func (p *placer) shuffle() {
	for i := len(p.racks) - 1; i > 0; i-- {
		j := env.Intn(p.rand, i+1)
		p.racks[i], p.racks[j] = p.racks[j], p.racks[i]
	}
	for _, r := range p.racks {
		for i := len(r.ids) - 1; i > 0; i-- {
			j := env.Intn(p.rand, i+1)
			r.ids[i], r.ids[j] = r.ids[j], r.ids[i]
		}
	}
}
