// Package raftmeta holds the cluster's metadata: the image every broker
// answers Metadata, CreateTopics and the like from, the records that change
// it, its snapshots, and the controller that decides which records to write.
//
// The image is a pure function of the applied records, in order: applying the
// same records to an empty image always gives the same image. That is what lets
// the metadata quorum replicate the image by replicating records, what lets a
// single node recover it by replaying its journal (journal.go) after a
// restart, and what lets a snapshot (snapshot.go) stand for a prefix of the
// log: it is written as the records that rebuild the image.
//
// The model is Kafka's KRaft metadata (metadata/src/main/resources/common/
// metadata/*.json and the image classes): brokers registered with an epoch
// and fenced until they catch up, topics with partitions that carry a
// leader, an ISR, a leader epoch and a partition epoch, configs, and
// producer-id blocks. Records are encoded two ways (codec.go): JSON, which
// the single-node journal writes, and a compact binary form for the quorum's
// log and for snapshots; DecodeRecord reads both.
//
// Slices inside an image (a partition's replicas and ISR, a broker's
// listeners) are never written after they enter it: a record replaces them.
// So images and records may share them, Clone is cheap, and a caller must
// not modify a slice it put in a record once the record is applied.
package raftmeta

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/sluicemq/sluice/internal/invariants"
)

// NoLeader is a partition's leader when none of its replicas may lead.
const NoLeader int32 = -1

// Listener is one endpoint a broker serves clients or peers on.
type Listener struct {
	Name string `json:"name"`
	Host string `json:"host"`
	Port int32  `json:"port"`
}

// Broker is a registered broker.
type Broker struct {
	ID int32 `json:"id"`
	// Host and Port are the first listener's, for callers that know one
	// listener (the single-node broker, and the journal's records from
	// before listeners existed, whose Host and Port become that listener).
	Host string `json:"host"`
	Port int32  `json:"port"`
	Rack string `json:"rack,omitempty"`
	// Epoch is given by the controller at each registration and only grows
	// (KRaft uses the offset of the registration record, as Sluice's
	// controller does), so a stale incarnation's requests can be told
	// apart.
	Epoch int64 `json:"epoch"`
	// IncarnationID identifies the broker process; zero in the journal's
	// records from before registrations carried one.
	IncarnationID IncarnationID `json:"incarnation_id,omitzero"`
	Listeners     []Listener    `json:"listeners,omitempty"`
	// Fenced brokers lead nothing. A controller's registration starts
	// fenced, as in KRaft, until the broker's heartbeat shows it has
	// caught up with the metadata log. (The journal's records carry no
	// such flag: a single node's broker is unfenced.)
	Fenced bool `json:"fenced,omitempty"`
	// InControlledShutdown marks a broker that asked to shut down: it takes
	// no new leaderships, and its old ones are moved away. Never set on a
	// fenced broker.
	InControlledShutdown bool `json:"in_controlled_shutdown,omitempty"`
}

// Partition is one partition's placement and leadership.
type Partition struct {
	Index int32 `json:"index"`
	// Replicas are in preference order: the first is the preferred leader.
	Replicas []int32 `json:"replicas"`
	// ISR is empty only when the partition has no leader: as in Kafka 4
	// with eligible leader replicas, the last member leaves it like any
	// other, into the ELR.
	ISR []int32 `json:"isr"`
	// ELR are the eligible leader replicas (KIP-966): replicas that left
	// the ISR while it was below min.insync.replicas, so every record
	// committed before they left is on them, and each may lead once no ISR
	// member may (it then becomes the whole ISR). Disjoint from the ISR,
	// in replica order, emptied whenever the ISR is at least
	// min.insync.replicas; a replica whose broker shut down uncleanly
	// leaves it. Nil when empty.
	ELR []int32 `json:"elr,omitempty"`
	// LastKnownELR is, as Kafka 4 keeps it, the leader the partition had
	// when its ISR became empty: it may lead again when neither ISR nor ELR
	// holds anyone (KIP-966's last-known-leader recovery). Cleared once
	// the partition has a leader. Nil when empty.
	LastKnownELR []int32 `json:"last_known_elr,omitempty"`
	// AddingReplicas and RemovingReplicas describe a reassignment in
	// progress (KIP-455): Replicas is then the target's replicas followed
	// by the current ones outside it; AddingReplicas are the target's
	// members that were not replicas, RemovingReplicas the replicas
	// outside the target. Both are replicas, disjoint, and nil when no
	// reassignment is in progress. The reassignment completes when every
	// adding replica is in the ISR (controller_reassign.go).
	AddingReplicas   []int32 `json:"adding_replicas,omitempty"`
	RemovingReplicas []int32 `json:"removing_replicas,omitempty"`
	// Leader is a member of the ISR, or NoLeader.
	Leader int32 `json:"leader"`
	// LeaderEpoch increases with every leader change; produce and fetch carry
	// it so stale leaders and followers are fenced.
	LeaderEpoch int32 `json:"leader_epoch"`
	// PartitionEpoch increases with every change of this record (leader or
	// ISR), so a change proposed against an old version can be refused.
	PartitionEpoch int32 `json:"partition_epoch"`
}

// Topic is a topic and its partitions.
type Topic struct {
	Name       string            `json:"name"`
	ID         TopicID           `json:"id"`
	Partitions []Partition       `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

// Image is the cluster metadata at some point of the record log.
//
// Invariants (Validate checks them all): Topics and topicNames are each
// other's inverse; every partition's Index equals its position in
// Partitions and its shape is valid (distinct replicas; an ISR, an ELR and
// a last known ELR of distinct replicas, the ELRs disjoint from the ISR; a
// leader in the ISR or none, and an empty ISR only with none); leaders and
// partitions count what Topics holds; a broker's Host and Port are its first listener's; no
// fenced broker is in controlled shutdown; no config map is empty.
type Image struct {
	ClusterID string
	Brokers   map[int32]Broker
	Topics    map[TopicID]*Topic
	// BrokerConfigs are dynamic broker-level configs (resource name "" is the
	// cluster default, as in Kafka).
	BrokerConfigs map[string]map[string]string
	// NextProducerID is the first producer ID not yet handed out; blocks are
	// allocated by records so an ID is never reused, even across restarts.
	NextProducerID int64
	// Applied counts the records applied so far: a record's offset is the
	// value Applied takes when it is applied (1 for the first record). A
	// snapshot carries it, so offsets go on counting after a load.
	Applied uint64

	topicNames map[string]TopicID
	// leaders counts the partitions each broker leads, so that "does it
	// lead anything" costs nothing (controlled shutdown, fencing).
	leaders map[int32]int
	// demoted is, for each broker, the offset of the last record that took
	// a partition's leadership from it (a new leader, or the topic
	// deleted): a broker whose image has not reached it may lead, in its
	// own view, a partition that has moved on (DemotedAt). Derived from
	// the records; a snapshot does not carry it, so demotions before the
	// last snapshot loaded are not known.
	demoted map[int32]uint64
	// partitions counts every topic's partitions.
	partitions int
}

// NewImage returns the empty image, before any record.
func NewImage() *Image {
	return &Image{
		Brokers:       map[int32]Broker{},
		Topics:        map[TopicID]*Topic{},
		BrokerConfigs: map[string]map[string]string{},
		topicNames:    map[string]TopicID{},
		leaders:       map[int32]int{},
	}
}

// TopicByName returns the named topic, or nil.
func (im *Image) TopicByName(name string) *Topic {
	id, ok := im.topicNames[name]
	if !ok {
		return nil
	}
	return im.Topics[id]
}

// TopicNames returns every topic's name, sorted.
func (im *Image) TopicNames() []string {
	names := make([]string, 0, len(im.topicNames))
	for name := range im.topicNames {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// BrokerIDs returns the registered brokers' IDs, sorted.
func (im *Image) BrokerIDs() []int32 {
	ids := make([]int32, 0, len(im.Brokers))
	for id := range im.Brokers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// LeaderCount returns how many partitions the broker leads.
func (im *Image) LeaderCount(broker int32) int { return im.leaders[broker] }

// PartitionCount returns how many partitions all topics have together.
func (im *Image) PartitionCount() int { return im.partitions }

// brokerConfigNames returns the BrokerConfigs resource names, sorted.
func (im *Image) brokerConfigNames() []string {
	names := make([]string, 0, len(im.BrokerConfigs))
	for name := range im.BrokerConfigs {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// fullCheckPartitionsMax bounds the images that Apply checks whole after
// every record in an invariants build: beyond it the check would make a
// test of many records quadratic. Record-local checks run at every size.
const fullCheckPartitionsMax = 1024

// Apply applies one record. A record that does not fit the image (a topic
// created twice, a partition of a missing topic, a stale broker epoch) is an
// error and leaves the image unchanged: the writer of records validates
// first, so such an error means a bug or a corrupt log, and the caller stops.
func (im *Image) Apply(r Record) error {
	applied := im.Applied
	if err := r.applyTo(im); err != nil {
		return fmt.Errorf("apply %s record: %w", r.recordType(), err)
	}
	im.Applied++
	if invariants.Enabled {
		if im.Applied != applied+1 {
			invariants.Panicf("image: applied count went from %d to %d on a %s record", applied, im.Applied, r.recordType())
		}
		if im.partitions <= fullCheckPartitionsMax {
			if err := im.Validate(); err != nil {
				invariants.Panicf("image: after %s record %d: %v", r.recordType(), im.Applied, err)
			}
		}
	}
	return nil
}

// Clone returns an image equal to im that shares nothing mutable with it
// (the immutable slices inside partitions and brokers are shared).
func (im *Image) Clone() *Image {
	out := &Image{
		ClusterID:      im.ClusterID,
		Brokers:        make(map[int32]Broker, len(im.Brokers)),
		Topics:         make(map[TopicID]*Topic, len(im.Topics)),
		BrokerConfigs:  make(map[string]map[string]string, len(im.BrokerConfigs)),
		NextProducerID: im.NextProducerID,
		Applied:        im.Applied,
		topicNames:     make(map[string]TopicID, len(im.topicNames)),
		leaders:        make(map[int32]int, len(im.leaders)),
		partitions:     im.partitions,
	}
	for id, b := range im.Brokers {
		out.Brokers[id] = b
	}
	for name, id := range im.topicNames {
		out.topicNames[name] = id
	}
	for id, n := range im.leaders {
		out.leaders[id] = n
	}
	if len(im.demoted) > 0 {
		out.demoted = make(map[int32]uint64, len(im.demoted))
		for id, o := range im.demoted {
			out.demoted[id] = o
		}
	}
	for _, name := range im.TopicNames() {
		t := im.TopicByName(name)
		c := *t
		c.Partitions = append([]Partition(nil), t.Partitions...)
		c.Configs = copyConfigs(t.Configs)
		out.Topics[t.ID] = &c
	}
	for _, name := range im.brokerConfigNames() {
		out.BrokerConfigs[name] = copyConfigs(im.BrokerConfigs[name])
	}
	return out
}

// Equal reports whether two images hold the same metadata at the same
// offset (derived indexes are not compared: Validate checks them).
func (im *Image) Equal(o *Image) bool {
	if im.ClusterID != o.ClusterID || im.NextProducerID != o.NextProducerID || im.Applied != o.Applied ||
		len(im.Brokers) != len(o.Brokers) || len(im.Topics) != len(o.Topics) ||
		!configSetsEqual(im.BrokerConfigs, o.BrokerConfigs) || len(im.demoted) != len(o.demoted) {
		return false
	}
	for _, id := range slices.Sorted(maps.Keys(im.demoted)) {
		if o.demoted[id] != im.demoted[id] {
			return false
		}
	}
	for _, id := range im.BrokerIDs() {
		b, ok := o.Brokers[id]
		if !ok || !brokersEqual(im.Brokers[id], b) {
			return false
		}
	}
	for _, name := range im.TopicNames() {
		t, u := im.TopicByName(name), o.TopicByName(name)
		if u == nil || !topicsEqual(t, u) {
			return false
		}
	}
	return true
}

func brokersEqual(a, b Broker) bool {
	if a.ID != b.ID || a.Host != b.Host || a.Port != b.Port || a.Rack != b.Rack || a.Epoch != b.Epoch ||
		a.IncarnationID != b.IncarnationID || a.Fenced != b.Fenced ||
		a.InControlledShutdown != b.InControlledShutdown || len(a.Listeners) != len(b.Listeners) {
		return false
	}
	for i := range a.Listeners {
		if a.Listeners[i] != b.Listeners[i] {
			return false
		}
	}
	return true
}

func topicsEqual(a, b *Topic) bool {
	if a.Name != b.Name || a.ID != b.ID || len(a.Partitions) != len(b.Partitions) || !configsEqual(a.Configs, b.Configs) {
		return false
	}
	for i := range a.Partitions {
		if !partitionsEqual(&a.Partitions[i], &b.Partitions[i]) {
			return false
		}
	}
	return true
}

func partitionsEqual(a, b *Partition) bool {
	return a.Index == b.Index && a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch &&
		a.PartitionEpoch == b.PartitionEpoch && int32sEqual(a.Replicas, b.Replicas) && int32sEqual(a.ISR, b.ISR) &&
		int32sEqual(a.ELR, b.ELR) && int32sEqual(a.LastKnownELR, b.LastKnownELR) &&
		int32sEqual(a.AddingReplicas, b.AddingReplicas) && int32sEqual(a.RemovingReplicas, b.RemovingReplicas)
}

// Reassigning reports whether a reassignment of p is in progress.
func (p Partition) Reassigning() bool {
	return len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0
}

func int32sEqual(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func configsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, k := range sortedKeys(a) {
		if w, ok := b[k]; !ok || w != a[k] {
			return false
		}
	}
	return true
}

func configSetsEqual(a, b map[string]map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if w, ok := b[k]; !ok || !configsEqual(a[k], w) {
			return false
		}
	}
	return true
}

// Validate checks every invariant of the image and returns the first that
// fails. Apply runs it after each record in an invariants build (on images
// up to fullCheckPartitionsMax partitions), and DecodeSnapshot on every
// image it loads, so a snapshot is checked on both sides.
func (im *Image) Validate() error {
	if len(im.topicNames) != len(im.Topics) {
		return fmt.Errorf("%d topic names for %d topics", len(im.topicNames), len(im.Topics))
	}
	leaders := map[int32]int{}
	partitions := 0
	for _, name := range im.TopicNames() {
		t := im.TopicByName(name)
		if t == nil || t.Name != name {
			return fmt.Errorf("topic name %q maps to no topic of that name", name)
		}
		if len(t.Partitions) == 0 {
			return fmt.Errorf("topic %q has no partitions", name)
		}
		if t.Configs != nil && len(t.Configs) == 0 {
			return fmt.Errorf("topic %q has an empty config map", name)
		}
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if p.Index != int32(i) {
				return fmt.Errorf("topic %q partition at position %d has index %d", name, i, p.Index)
			}
			if err := checkPartition(p); err != nil {
				return fmt.Errorf("partition %s-%d: %w", name, i, err)
			}
			if p.Leader != NoLeader {
				leaders[p.Leader]++
			}
		}
		partitions += len(t.Partitions)
	}
	if partitions != im.partitions {
		return fmt.Errorf("partition count %d, but topics hold %d", im.partitions, partitions)
	}
	if err := im.checkLeaderCounts(leaders); err != nil {
		return err
	}
	for _, id := range im.BrokerIDs() {
		b := im.Brokers[id]
		if b.ID != id {
			return fmt.Errorf("broker under id %d says it is %d", id, b.ID)
		}
		if err := checkBroker(b); err != nil {
			return fmt.Errorf("broker %d: %w", id, err)
		}
	}
	for _, name := range im.brokerConfigNames() {
		if len(im.BrokerConfigs[name]) == 0 {
			return fmt.Errorf("broker config resource %q is an empty map", name)
		}
	}
	return nil
}

func (im *Image) checkLeaderCounts(want map[int32]int) error {
	ids := make([]int32, 0, len(want)+len(im.leaders))
	for id := range want {
		ids = append(ids, id)
	}
	for id := range im.leaders {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		if n, ok := im.leaders[id]; want[id] != n || (ok && n == 0) {
			return fmt.Errorf("broker %d leads %d partitions, but the index says %d", id, want[id], n)
		}
	}
	return nil
}

// DemotedAt returns the offset of the last record that took a partition's
// leadership from broker (0 if none is known): the controller holds a
// broker's image to it before it renews the broker's leader lease.
func (im *Image) DemotedAt(broker int32) uint64 { return im.demoted[broker] }

// demote notes that the record being applied takes a partition's
// leadership from broker.
func (im *Image) demote(broker int32) {
	if broker == NoLeader {
		return
	}
	if im.demoted == nil {
		im.demoted = map[int32]uint64{}
	}
	im.demoted[broker] = im.Applied + 1
}

// addLeader moves the leader index by delta partitions for a broker.
func (im *Image) addLeader(broker int32, delta int) {
	if broker == NoLeader {
		return
	}
	n := im.leaders[broker] + delta
	if invariants.Enabled && n < 0 {
		invariants.Panicf("image: broker %d would lead %d partitions", broker, n)
	}
	if n == 0 {
		delete(im.leaders, broker)
		return
	}
	im.leaders[broker] = n
}

func copyConfigs(c map[string]string) map[string]string {
	if len(c) == 0 {
		return nil
	}
	out := make(map[string]string, len(c))
	for k, v := range c {
		out[k] = v
	}
	return out
}
