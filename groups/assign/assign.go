package assign

import (
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// TopicID is a topic's 16-byte UUID, as the protocol carries it. It has the
// layout of raftmeta.TopicID, so one converts to the other.
type TopicID [16]byte

// Compare orders topic ids as Kafka's Uuid.compareTo does: the two 64-bit
// halves, big-endian, compared as signed numbers, most significant first.
// The uniform assignor breaks ties by topic id, so this order is part of
// which member a partition goes to.
func (id TopicID) Compare(other TopicID) int {
	if c := cmp.Compare(int64(binary.BigEndian.Uint64(id[:8])), int64(binary.BigEndian.Uint64(other[:8]))); c != 0 {
		return c
	}
	return cmp.Compare(int64(binary.BigEndian.Uint64(id[8:])), int64(binary.BigEndian.Uint64(other[8:])))
}

// String is the id as Kafka prints a Uuid: URL-safe base64 without padding.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// TopicPartitions is one topic's share of an assignment.
type TopicPartitions struct {
	Topic      TopicID
	Partitions []int32
}

// Assignment is the partitions of one member. The assignors return it
// normalized: one entry per topic, topics in TopicID.Compare order,
// partitions ascending, no empty entry. As input (a member's current
// assignment) any order is accepted, and duplicates, partitions out of range
// and topics the member does not subscribe to are dropped.
type Assignment []TopicPartitions

// Count is the number of partitions in the assignment.
func (a Assignment) Count() int {
	n := 0
	for _, tp := range a {
		n += len(tp.Partitions)
	}
	return n
}

// Member is one member of a group as an assignor sees it.
type Member struct {
	// ID is the member id; it is unique in the group and never empty.
	ID string
	// InstanceID is group.instance.id, or "" for a dynamic member. The range
	// assignor orders static members by it, which is its stickiness.
	InstanceID string
	// Rack is the member's rack, or "" if it has none. No assignor uses it
	// yet (Kafka's uniform and range assignors are not rack aware either).
	Rack string
	// Topics are the topics the member subscribes to, its topic names and
	// its regex already resolved to ids. Order and duplicates do not matter.
	Topics []TopicID
	// Current is the member's current target assignment, which the uniform
	// assignor keeps as far as balance allows.
	Current Assignment
}

// GroupSpec is what an assignor is given about the group. Members may come
// in any order: the assignors sort them, so the order cannot change the
// result.
type GroupSpec struct {
	Members []Member
}

// TopicDescriber gives the assignors the topics' metadata.
type TopicDescriber interface {
	// Partitions is the topic's partition count, or -1 if there is no such
	// topic.
	Partitions(topic TopicID) int32
}

// TopicCounts is a TopicDescriber from a map of partition counts.
type TopicCounts map[TopicID]int32

// Partitions implements TopicDescriber.
func (c TopicCounts) Partitions(topic TopicID) int32 {
	if n, ok := c[topic]; ok {
		return n
	}
	return -1
}

// MemberAssignment is one member's part of a GroupAssignment.
type MemberAssignment struct {
	MemberID   string
	Partitions Assignment
}

// GroupAssignment is an assignor's result: every member of the spec, in
// ascending member id order, with its (possibly empty) assignment.
type GroupAssignment struct {
	Members []MemberAssignment
}

// Member returns the assignment of the member with the given id.
func (g GroupAssignment) Member(id string) (Assignment, bool) {
	i, ok := slices.BinarySearchFunc(g.Members, id, func(m MemberAssignment, id string) int {
		return cmp.Compare(m.MemberID, id)
	})
	if !ok {
		return nil, false
	}
	return g.Members[i].Partitions, true
}

// Assignor computes a group's target assignment, as Kafka's
// ConsumerGroupPartitionAssignor does. Assign is a pure function of its
// arguments: the same spec and topics give the same result, whatever the
// order of the members, their topics and their current partitions.
type Assignor interface {
	// Name is the name members ask for in server_assignor and that
	// group.consumer.assignors lists ("uniform", "range").
	Name() string
	// Assign returns the target assignment, or an error (*UnknownTopicError,
	// ErrInvalidSpec) for which Kafka's coordinator answers
	// UNKNOWN_SERVER_ERROR: a PartitionAssignorException there.
	Assign(spec GroupSpec, topics TopicDescriber) (GroupAssignment, error)
}

// All returns the assignors Sluice serves, in the order of Kafka's default
// group.consumer.assignors: the first is the default.
func All() []Assignor { return []Assignor{Uniform{}, Range{}} }

// ByName returns the assignor with the given name.
func ByName(name string) (Assignor, bool) {
	for _, a := range All() {
		if a.Name() == name {
			return a, true
		}
	}
	return nil, false
}

// ErrInvalidSpec reports a group spec that no group can produce: a member
// without an id, or two members with one id.
var ErrInvalidSpec = errors.New("invalid group spec")

// UnknownTopicError reports a member subscribed to a topic the describer
// does not know, as Kafka's assignors throw PartitionAssignorException.
type UnknownTopicError struct {
	Member string
	Topic  TopicID
}

func (e *UnknownTopicError) Error() string {
	return fmt.Sprintf("member %q is subscribed to topic %s, which does not exist in the topic metadata", e.Member, e.Topic)
}
