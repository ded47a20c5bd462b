// Package raftmeta holds the cluster's metadata: the image every broker
// answers Metadata, CreateTopics and the like from, and the records that
// change it.
//
// The image is a pure function of the applied records, in order: applying the
// same records to an empty image always gives the same image. That is what lets
// the metadata quorum (etcd raft, a later step) replicate the image by
// replicating records, and what lets a single node recover it by replaying its
// journal (journal.go) after a restart.
//
// Records are small Go structs encoded as JSON with a type tag: readable in a
// dump of the journal, stable across versions as long as fields are only added,
// and deterministic to encode (encoding/json writes struct fields in order and
// map keys sorted).
package raftmeta

import (
	"fmt"
	"sort"

	"github.com/sluicemq/sluice/internal/invariants"
)

// TopicID is a topic's 16-byte UUID, as Kafka's protocol carries it.
type TopicID [16]byte

// IsZero reports whether the ID is unset (Kafka's "zero UUID").
func (id TopicID) IsZero() bool { return id == TopicID{} }

// String formats the ID as a canonical hex UUID (Kafka's tools print URL-safe
// base64; the hex form is what logs and file names here use).
func (id TopicID) String() string {
	const hexdigits = "0123456789abcdef"
	var b [36]byte
	j := 0
	for i, v := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b[j] = '-'
			j++
		}
		b[j], b[j+1] = hexdigits[v>>4], hexdigits[v&0xf]
		j += 2
	}
	return string(b[:])
}

// Broker is a registered broker.
type Broker struct {
	ID   int32  `json:"id"`
	Host string `json:"host"`
	Port int32  `json:"port"`
	Rack string `json:"rack,omitempty"`
	// Epoch increases each time the broker registers (each restart), so a
	// stale incarnation's requests can be told apart.
	Epoch int64 `json:"epoch"`
}

// Partition is one partition's placement and leadership.
type Partition struct {
	Index    int32   `json:"index"`
	Replicas []int32 `json:"replicas"`
	ISR      []int32 `json:"isr"`
	Leader   int32   `json:"leader"`
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
// Invariant: Topics and topicNames are each other's inverse; every
// partition's Index equals its position in Partitions.
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
	// Applied counts the records applied so far.
	Applied uint64

	topicNames map[string]TopicID
}

// NewImage returns the empty image, before any record.
func NewImage() *Image {
	return &Image{
		Brokers:       map[int32]Broker{},
		Topics:        map[TopicID]*Topic{},
		BrokerConfigs: map[string]map[string]string{},
		topicNames:    map[string]TopicID{},
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

// Apply applies one record. A record that does not fit the image (a topic
// created twice, a partition of a missing topic) is an error and leaves the
// image unchanged: the writer of records validates first, so such an error
// means a bug or a corrupt log, and the caller stops.
func (im *Image) Apply(r Record) error {
	var before map[partitionRef]partitionEpochs
	if invariants.Enabled {
		before = im.partitionEpochs()
	}
	applied := im.Applied
	if err := r.applyTo(im); err != nil {
		return fmt.Errorf("apply %s record: %w", r.recordType(), err)
	}
	im.Applied++
	if invariants.Enabled {
		im.checkAdvance(r, applied, before)
	}
	return nil
}

// partitionRef names a partition by its topic's id, never reused.
type partitionRef struct {
	topic TopicID
	index int32
}

// partitionEpochs are the two epochs of a partition that only grow.
type partitionEpochs struct{ leader, partition int32 }

func (im *Image) partitionEpochs() map[partitionRef]partitionEpochs {
	out := map[partitionRef]partitionEpochs{}
	for _, name := range im.TopicNames() {
		t := im.TopicByName(name)
		for _, p := range t.Partitions {
			out[partitionRef{t.ID, p.Index}] = partitionEpochs{p.LeaderEpoch, p.PartitionEpoch}
		}
	}
	return out
}

// checkAdvance asserts what brokers rely on when an image moves on: the
// applied count grows by one per record, and no partition's leader epoch
// or partition epoch goes backwards (fencing compares them).
func (im *Image) checkAdvance(r Record, applied uint64, before map[partitionRef]partitionEpochs) {
	if im.Applied != applied+1 {
		invariants.Panicf("image: applied count went from %d to %d on a %s record", applied, im.Applied, r.recordType())
	}
	for _, name := range im.TopicNames() {
		t := im.TopicByName(name)
		for _, p := range t.Partitions {
			old, ok := before[partitionRef{t.ID, p.Index}]
			if ok && (p.LeaderEpoch < old.leader || p.PartitionEpoch < old.partition) {
				invariants.Panicf("image: a %s record moved partition %s-%d from leader epoch %d, partition epoch %d to %d, %d",
					r.recordType(), t.Name, p.Index, old.leader, old.partition, p.LeaderEpoch, p.PartitionEpoch)
			}
		}
	}
}

// MarshalText writes the canonical UUID form, so journals stay readable.
func (id TopicID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText parses the canonical UUID form.
func (id *TopicID) UnmarshalText(p []byte) error {
	parsed, err := ParseTopicID(string(p))
	if err != nil {
		return err
	}
	*id = parsed
	return nil
}

// ParseTopicID parses a canonical hex UUID ("8-4-4-4-12").
func ParseTopicID(s string) (TopicID, error) {
	var id TopicID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, fmt.Errorf("topic id %q is not a canonical UUID", s)
	}
	j := 0
	for i := 0; i < len(s); {
		if s[i] == '-' {
			i++
			continue
		}
		hi, ok1 := unhex(s[i])
		lo, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			return TopicID{}, fmt.Errorf("topic id %q has a non-hex digit", s)
		}
		id[j] = hi<<4 | lo
		j++
		i += 2
	}
	return id, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
