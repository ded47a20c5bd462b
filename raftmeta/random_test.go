package raftmeta

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/sim/rng"
	"github.com/stretchr/testify/require"
)

// randomDriver drives a controller through the harness with random
// requests, heartbeats, time and failovers: a source of record sequences
// that a real cluster could write, and a check that the controller keeps
// its promises (the harness checks after every step) whatever it is asked.
type randomDriver struct {
	h   *harness
	r   *rng.Rand
	ops int
	// uncleanAsked is set by a step that asked for unclean elections.
	uncleanAsked bool
	// askedISR is the ISR the step's AlterPartition asked for: a change
	// that completes a reassignment removing the leader elects from it.
	askedISR []int32
}

func newRandomDriver(t testing.TB, seed uint64) *randomDriver {
	r := rng.New(seed)
	cfg := ControllerConfig{SessionTimeout: 9 * time.Second, AutoLeaderRebalance: r.Chance(0.5),
		RebalanceInterval: time.Duration(1+r.Intn(30)) * time.Second, ImbalancePercent: 1 + r.Intn(30)}
	return &randomDriver{h: newHarness(t, cfg, seed), r: r.Fork("ops")}
}

// step does one random thing, and checks that every leader it elected was
// in the ISR, the ELR or the last known ELR, unless unclean election was
// allowed; it returns how many unclean elections it made.
func (d *randomDriver) step() int {
	before := d.h.c.View().Clone()
	d.uncleanAsked, d.askedISR, d.h.last = false, nil, nil
	d.do()
	unclean := 0
	for _, rec := range d.h.last {
		if pc, ok := rec.(PartitionChangeRecord); ok {
			unclean += d.checkElection(before, pc)
		}
		require.NoError(d.h.t, before.Apply(rec))
	}
	return unclean
}

// checkElection checks one change against the partition before it.
func (d *randomDriver) checkElection(before *Image, r PartitionChangeRecord) int {
	t := before.Topics[r.Topic]
	p := t.Partitions[r.Partition]
	if r.Leader == NoLeader || r.Leader == p.Leader || indexOf(p.ISR, r.Leader) >= 0 || indexOf(p.ELR, r.Leader) >= 0 ||
		indexOf(p.LastKnownELR, r.Leader) >= 0 {
		return 0
	}
	if indexOf(p.RemovingReplicas, p.Leader) >= 0 && r.RemovingReplicas != nil && indexOf(d.askedISR, r.Leader) >= 0 {
		return 0 // a completed reassignment moved the leader into the ISR asked for
	}
	allowed := d.uncleanAsked || t.Configs[UncleanLeaderElectionConfig] == "true" ||
		(t.Configs[UncleanLeaderElectionConfig] == "" && before.BrokerConfigs[""][UncleanLeaderElectionConfig] == "true")
	require.True(d.h.t, allowed, "%v (before %v, last %v): partition %s-%d elected %d, outside ISR %v, ELR %v and last known ELR %v, unclean election off",
		t.Name, r.Partition, r.Leader, p.ISR, p.ELR, p.LastKnownELR)
	return 1
}

// do does one random thing.
func (d *randomDriver) do() {
	h, r := d.h, d.r
	d.ops++
	brokerID := int32(1 + r.Intn(6))
	switch op := r.Intn(100); {
	case op < 12:
		if r.Chance(0.3) {
			h.incarnations[brokerID]++
		}
		racks := []string{"", "a", "b", "c"}
		// Half the restarts are clean (the previous epoch named), so
		// brokers both keep and lose their ELR places.
		previous := int64(-1)
		if b, ok := h.c.View().Brokers[brokerID]; ok && r.Chance(0.5) {
			previous = b.Epoch
		}
		h.registerAfter(brokerID, racks[r.Intn(len(racks))], previous)
	case op < 40:
		d.heartbeat(brokerID)
	case op < 50:
		h.now = h.now.Add(time.Duration(r.Intn(4000)) * time.Millisecond)
		h.tick()
	case op < 58:
		d.createTopic()
	case op < 62:
		d.createPartitions()
	case op < 65:
		d.deleteTopic()
	case op < 72:
		d.alterISR()
	case op < 74:
		_, records := h.c.ElectPreferredLeaders(nil)
		h.propose(records)
	case op < 76:
		elect := h.c.ElectUncleanLeaders
		d.uncleanAsked = true
		if r.Chance(0.5) {
			elect, d.uncleanAsked = h.c.ElectPreferredLeaders, false
		}
		_, records := elect([]TopicPartitions{{Topic: d.topicName(), Partitions: []int32{int32(r.Intn(4))}}})
		h.propose(records)
	case op < 80:
		d.alterConfig()
	case op < 83:
		if b, ok := h.c.View().Brokers[brokerID]; ok {
			_, records := h.c.AllocateProducerIDs(brokerID, b.Epoch)
			h.propose(records)
		}
	case op < 85:
		_, records := h.c.UnregisterBroker(brokerID)
		h.propose(records)
	case op < 90:
		// Hold proposals for a while, so that decisions are made against
		// a view ahead of the committed image.
		if h.holding {
			h.holding = false
			h.commit()
		} else {
			h.holding = true
		}
	case op < 92:
		// A failover. Proposals in flight are lost, as when a leader's
		// uncommitted entries are overwritten by the next term's.
		h.held, h.holding = nil, false
		h.c = NewController(h.committed, h.cfg, h.now, h.rand)
	case op < 95:
		d.reassign()
	default:
		h.now = h.now.Add(time.Duration(r.Intn(20)) * time.Second)
	}
}

// reassign starts a reassignment of a random partition to 1-3 random
// brokers (sometimes unregistered or repeated), or cancels one.
func (d *randomDriver) reassign() {
	h, r := d.h, d.r
	req := Reassignment{Topic: d.topicName(), Partition: int32(r.Intn(4))}
	if !r.Chance(0.2) {
		req.Replicas = []int32{}
		for n := 1 + r.Intn(3); len(req.Replicas) < n; {
			req.Replicas = append(req.Replicas, int32(1+r.Intn(7)))
		}
	}
	_, records := h.c.AlterPartitionReassignments([]Reassignment{req})
	h.propose(records)
}

func (d *randomDriver) heartbeat(id int32) {
	h, r := d.h, d.r
	b, ok := h.c.View().Brokers[id]
	epoch := b.Epoch
	if !ok || r.Chance(0.05) {
		epoch = int64(r.Intn(50))
	}
	offset := h.committed.Applied
	if r.Chance(0.2) {
		offset = uint64(r.Intn(int(offset) + 1))
	}
	_, records := h.c.Heartbeat(h.now, BrokerHeartbeat{BrokerID: id, BrokerEpoch: epoch, MetadataOffset: offset,
		WantFence: r.Chance(0.1), WantShutDown: r.Chance(0.1)})
	h.propose(records)
}

func (d *randomDriver) topicName() string { return fmt.Sprintf("t%d", d.r.Intn(8)) }

func (d *randomDriver) createTopic() {
	h, r := d.h, d.r
	spec := TopicSpec{Name: d.topicName(), Partitions: int32(r.Intn(6)), ReplicationFactor: int16(r.Intn(4))}
	if r.Chance(0.3) {
		spec.Assignment = [][]int32{}
		rf := 1 + r.Intn(3)
		for p := r.Intn(4); p > 0; p-- {
			var replicas []int32
			for i := 0; i < rf; i++ {
				replicas = append(replicas, int32(1+r.Intn(7)))
			}
			spec.Assignment = append(spec.Assignment, replicas)
		}
	}
	if r.Chance(0.3) {
		spec.Configs = map[string]string{"retention.ms": fmt.Sprint(r.Intn(1000))}
	}
	if r.Chance(0.5) {
		if spec.Configs == nil {
			spec.Configs = map[string]string{}
		}
		spec.Configs[MinISRConfig] = fmt.Sprint(1 + r.Intn(3))
		if r.Chance(0.3) {
			spec.Configs[UncleanLeaderElectionConfig] = "true"
		}
	}
	_, records := h.c.CreateTopics([]TopicSpec{spec})
	h.propose(records)
}

func (d *randomDriver) createPartitions() {
	h, r := d.h, d.r
	_, records := h.c.CreatePartitions([]PartitionsSpec{{Topic: d.topicName(), Count: int32(r.Intn(10))}})
	h.propose(records)
}

func (d *randomDriver) deleteTopic() {
	h := d.h
	if t := h.c.View().TopicByName(d.topicName()); t != nil {
		_, records := h.c.DeleteTopics([]TopicID{t.ID})
		h.propose(records)
	}
}

// alterISR has a partition's leader ask for a random ISR holding itself
// (sometimes with stale epochs).
func (d *randomDriver) alterISR() {
	h, r := d.h, d.r
	t := h.c.View().TopicByName(d.topicName())
	if t == nil {
		return
	}
	i := r.Intn(len(t.Partitions))
	p := t.Partitions[i]
	if p.Leader == NoLeader {
		return
	}
	isr := []int32{p.Leader}
	for _, id := range p.Replicas {
		if id != p.Leader && r.Chance(0.6) {
			isr = append(isr, id)
		}
	}
	req := AlterPartition{BrokerID: p.Leader, BrokerEpoch: h.c.View().Brokers[p.Leader].Epoch, Topic: t.ID,
		Partition: int32(i), LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: isr}
	if r.Chance(0.1) {
		req.PartitionEpoch--
	}
	d.askedISR = isr
	_, records := h.c.AlterPartition(req)
	h.propose(records)
}

func (d *randomDriver) alterConfig() {
	h, r := d.h, d.r
	alt := ConfigAlteration{Resource: ConfigTopic, Name: d.topicName()}
	if r.Chance(0.4) {
		alt = ConfigAlteration{Resource: ConfigBroker, Name: []string{"", "1", "2"}[r.Intn(3)]}
	}
	for n := 1 + r.Intn(3); n > 0; n-- {
		key := fmt.Sprintf("k%d", r.Intn(4))
		v := fmt.Sprint(r.Intn(3))
		switch r.Intn(4) {
		case 0:
			key, v = MinISRConfig, fmt.Sprint(1+r.Intn(3))
		case 1:
			key, v = UncleanLeaderElectionConfig, []string{"true", "false"}[r.Intn(2)]
		}
		if r.Chance(0.3) {
			alt.Changes = append(alt.Changes, ConfigEntry{Key: key})
		} else {
			alt.Changes = append(alt.Changes, ConfigEntry{Key: key, Value: &v})
		}
	}
	_, records := h.c.AlterConfigs([]ConfigAlteration{alt})
	h.propose(records)
}

// finish commits what is held.
func (d *randomDriver) finish() {
	d.h.holding = false
	d.h.commit()
}

// TestControllerRandomRequestsKeepInvariants runs random sequences of
// requests; the harness checks after every step that leaders are
// registered unfenced brokers, the committed image is valid, and the view
// equals it when nothing is pending (Apply checks every record's epochs
// and the image's invariants as it goes).
func TestControllerRandomRequestsKeepInvariants(t *testing.T) {
	kinds := map[string]int{}
	for seed := uint64(0); seed < 100; seed++ {
		d := newRandomDriver(t, seed)
		for i := 0; i < 1000; i++ {
			kinds["unclean election"] += d.step()
			for _, r := range d.h.last {
				kinds[r.recordType()]++
				if pc, ok := r.(PartitionChangeRecord); ok {
					countELRChange(kinds, pc)
				}
			}
		}
		d.finish()
	}
	// And every kind of ELR change.
	for _, kind := range []string{"elr set", "elr emptied", "isr emptied", "last known set", "last known emptied", "unclean election",
		"adding set", "adding emptied", "removing set", "removing emptied"} {
		require.Positive(t, kinds[kind], "no %s in the random runs", kind)
	}
	// The driver reaches every kind of record the controller writes.
	for _, kind := range []string{"register_broker", "broker_change", "unregister_broker", "create_topic",
		"delete_topic", "create_partitions", "partition_change", "config", "producer_ids"} {
		require.Positive(t, kinds[kind], "no %s record in the random runs", kind)
	}
	t.Logf("records by kind: %v", kinds)
}

func countELRChange(kinds map[string]int, r PartitionChangeRecord) {
	for _, c := range []struct {
		ids  []int32
		name string
	}{{r.ELR, "elr"}, {r.ISR, "isr"}, {r.LastKnownELR, "last known"}, {r.AddingReplicas, "adding"}, {r.RemovingReplicas, "removing"}} {
		switch {
		case c.ids == nil:
		case len(c.ids) == 0:
			kinds[c.name+" emptied"]++
		default:
			kinds[c.name+" set"]++
		}
	}
}

// TestSnapshotOfRandomSequencesLoadsEqual: for record sequences a
// controller writes, applying them gives the same image as encoding the
// image as a snapshot and loading it, at every point of the sequence.
func TestSnapshotOfRandomSequencesLoadsEqual(t *testing.T) {
	for seed := uint64(100); seed < 130; seed++ {
		d := newRandomDriver(t, seed)
		for i := 0; i < 300; i++ {
			d.step()
			if i%10 != 0 {
				continue
			}
			im := d.h.committed
			loaded, err := DecodeSnapshot(im.EncodeSnapshot())
			require.NoError(t, err)
			require.True(t, im.Equal(loaded), "seed %d step %d: snapshot loads a different image", seed, i)
			require.Equal(t, im.Digest(), loaded.Digest())
			// The records of a snapshot applied one by one give the same
			// image too (bar the offset and the demotions, which the
			// snapshot's header and trailer set).
			replayed := NewImage()
			for _, r := range im.SnapshotRecords() {
				require.NoError(t, replayed.Apply(r))
			}
			replayed.Applied = im.Applied
			replayed.demoted = loaded.demoted
			require.True(t, im.Equal(replayed))
		}
	}
}

// TestDigestsEqualIffImagesEqual compares every pair of images taken along
// random runs, with equal copies made in other ways (a snapshot load fills
// the maps in another order; a clone) and near copies with one change.
func TestDigestsEqualIffImagesEqual(t *testing.T) {
	var images []*Image
	for seed := uint64(200); seed < 206; seed++ {
		d := newRandomDriver(t, seed)
		for i := 0; i < 200; i++ {
			d.step()
			if i%25 == 0 {
				im := d.h.committed.Clone()
				loaded, err := DecodeSnapshot(im.EncodeSnapshot())
				require.NoError(t, err)
				images = append(images, im, loaded, nearCopy(t, im))
			}
		}
	}
	digests := make([][32]byte, len(images))
	for i, im := range images {
		digests[i] = im.Digest()
	}
	equalPairs := 0
	for i := range images {
		for j := range images {
			equal := images[i].Equal(images[j])
			require.Equal(t, equal, digests[i] == digests[j], "images %d and %d: Equal %t", i, j, equal)
			if equal && i != j {
				equalPairs++
			}
		}
	}
	require.Positive(t, equalPairs)
}

// nearCopy returns a copy of im with one small change.
func nearCopy(t testing.TB, im *Image) *Image {
	c := im.Clone()
	v := "changed"
	if names := c.TopicNames(); len(names) > 0 {
		require.NoError(t, c.Apply(ConfigRecord{Resource: ConfigTopic, Name: names[0], Key: "near", Value: &v}))
		c.Applied = im.Applied
		return c
	}
	c.NextProducerID++
	return c
}
