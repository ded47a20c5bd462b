package groups

// KIP-848's records of __consumer_offsets, as Kafka 3.7+ writes them
// (group-coordinator/src/main/resources/common/message/ConsumerGroup*.json).
// kmsg has no Go types for them, so they are encoded here by hand:
//
//	key version | key fields       value (version 0, flexible)
//	  3 ConsumerGroupMetadata           group           Epoch
//	  4 ConsumerGroupPartitionMetadata  group           Topics [id, name, partitions, racks]
//	  5 ConsumerGroupMemberMetadata     group, member   instance, rack, client, host, topics, regex, rebalance timeout, assignor
//	  6 ConsumerGroupTargetAssignmentMetadata group     AssignmentEpoch
//	  7 ConsumerGroupTargetAssignmentMember   group, member  [id, partitions]
//	  8 ConsumerGroupCurrentMemberAssignment  group, member  epoch, previous epoch, state, assigned, pending revocation
//
// Keys are not flexible: an int16 version, then int16-length strings.
// Values are flexible version 0: compact strings and arrays (uvarint
// length + 1, 0 for null), 16-byte uuids, and a tag buffer closing every
// struct. Tagged fields read are skipped (ConsumerGroupMemberMetadata's
// ClassicMemberMetadata, tag 0, belongs to members of the classic protocol
// inside a consumer group, which Sluice does not serve).

import (
	"fmt"
	"slices"

	"github.com/sluicemq/sluice/groups/assign"
	"github.com/twmb/franz-go/pkg/kbin"
)

const (
	keyCGMetadata       = 3
	keyCGPartitions     = 4
	keyCGMember         = 5
	keyCGTargetMetadata = 6
	keyCGTargetMember   = 7
	keyCGCurrent        = 8
)

func cgKey(version int16, group, member string) []byte {
	b := kbin.AppendInt16(nil, version)
	b = kbin.AppendString(b, group)
	if version == keyCGMember || version == keyCGTargetMember || version == keyCGCurrent {
		b = kbin.AppendString(b, member)
	}
	return b
}

func decodeCGKey(version int16, b []byte) (recordKey, error) {
	r := kbin.Reader{Src: b[2:]}
	k := recordKey{kind: keyConsumer, version: version, group: r.String()}
	if version == keyCGMember || version == keyCGTargetMember || version == keyCGCurrent {
		k.member = r.String()
	}
	if err := r.Complete(); err != nil {
		return recordKey{}, fmt.Errorf("consumer group key v%d: %w", version, err)
	}
	return k, nil
}

// topicMeta is one topic of a group's subscription metadata (Kafka's
// ConsumerGroupPartitionMetadataValue; racks are not kept).
type topicMeta struct {
	id         assign.TopicID
	name       string
	partitions int32
}

// memberSubscription is a member's ConsumerGroupMemberMetadataValue.
type memberSubscription struct {
	instanceID, rackID   *string
	clientID, clientHost string
	topicNames           []string
	regex                *string
	rebalanceTimeoutMs   int32
	assignor             *string
}

// memberAssignment is a member's ConsumerGroupCurrentMemberAssignmentValue.
type memberAssignment struct {
	epoch, previousEpoch int32
	state                memberState
	assigned, revoking   assign.Assignment
}

func valueHeader() []byte { return kbin.AppendInt16(nil, 0) }

func endStruct(b []byte) []byte { return kbin.AppendUvarint(b, 0) }

func appendAssignment(b []byte, a assign.Assignment) []byte {
	b = kbin.AppendCompactArrayLen(b, len(a))
	for _, tp := range a {
		b = kbin.AppendUuid(b, tp.Topic)
		b = kbin.AppendCompactArrayLen(b, len(tp.Partitions))
		for _, p := range tp.Partitions {
			b = kbin.AppendInt32(b, p)
		}
		b = endStruct(b)
	}
	return b
}

func encodeEpochValue(epoch int32) []byte {
	return endStruct(kbin.AppendInt32(valueHeader(), epoch))
}

func encodePartitionMetadata(topics []topicMeta) []byte {
	b := kbin.AppendCompactArrayLen(valueHeader(), len(topics))
	for _, t := range topics {
		b = kbin.AppendUuid(b, t.id)
		b = kbin.AppendCompactString(b, t.name)
		b = kbin.AppendInt32(b, t.partitions)
		b = kbin.AppendCompactArrayLen(b, 0) // PartitionMetadata: no racks
		b = endStruct(b)
	}
	return endStruct(b)
}

func encodeMemberSubscription(m memberSubscription) []byte {
	b := kbin.AppendCompactNullableString(valueHeader(), m.instanceID)
	b = kbin.AppendCompactNullableString(b, m.rackID)
	b = kbin.AppendCompactString(b, m.clientID)
	b = kbin.AppendCompactString(b, m.clientHost)
	b = kbin.AppendCompactArrayLen(b, len(m.topicNames))
	for _, t := range m.topicNames {
		b = kbin.AppendCompactString(b, t)
	}
	b = kbin.AppendCompactNullableString(b, m.regex)
	b = kbin.AppendInt32(b, m.rebalanceTimeoutMs)
	b = kbin.AppendCompactNullableString(b, m.assignor)
	return endStruct(b)
}

func encodeTargetMember(a assign.Assignment) []byte {
	return endStruct(appendAssignment(valueHeader(), a))
}

func encodeMemberAssignment(m memberAssignment) []byte {
	b := kbin.AppendInt32(valueHeader(), m.epoch)
	b = kbin.AppendInt32(b, m.previousEpoch)
	b = kbin.AppendInt8(b, int8(m.state))
	b = appendAssignment(b, m.assigned)
	b = appendAssignment(b, m.revoking)
	return endStruct(b)
}

// valueReader reads a flexible version-0 value.
type valueReader struct{ kbin.Reader }

func newValueReader(what string, b []byte) (*valueReader, error) {
	r := &valueReader{kbin.Reader{Src: b}}
	if v := r.Int16(); !r.Ok() {
		return nil, fmt.Errorf("%s value of %d bytes has no version", what, len(b))
	} else if v != 0 {
		return nil, fmt.Errorf("%w: %s value version %d", ErrUnknownRecord, what, v)
	}
	return r, nil
}

// skipTags skips a tag buffer.
func (r *valueReader) skipTags() {
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		r.Uvarint()
		r.Span(int(r.Uvarint()))
	}
}

// count reads a compact array length; a null array reads as empty, and a
// length past what is left fails the reader.
func (r *valueReader) count() int {
	n := r.CompactArrayLen()
	if n < 0 {
		return 0
	}
	if int(n) > len(r.Src) {
		r.Span(len(r.Src) + 1)
		return 0
	}
	return int(n)
}

func (r *valueReader) assignment() assign.Assignment {
	var a assign.Assignment
	for range r.count() {
		tp := assign.TopicPartitions{Topic: r.Uuid()}
		for range r.count() {
			tp.Partitions = append(tp.Partitions, r.Int32())
		}
		r.skipTags()
		if len(tp.Partitions) > 0 {
			a = append(a, tp)
		}
	}
	return normalize(a)
}

func (r *valueReader) done(what string) error {
	r.skipTags()
	if err := r.Complete(); err != nil {
		return fmt.Errorf("%s value: %w", what, err)
	}
	return nil
}

func decodeEpochValue(what string, b []byte) (int32, error) {
	r, err := newValueReader(what, b)
	if err != nil {
		return 0, err
	}
	epoch := r.Int32()
	return epoch, r.done(what)
}

func decodePartitionMetadata(b []byte) ([]topicMeta, error) {
	r, err := newValueReader("partition metadata", b)
	if err != nil {
		return nil, err
	}
	var topics []topicMeta
	for range r.count() {
		t := topicMeta{id: r.Uuid(), name: r.CompactString(), partitions: r.Int32()}
		for range r.count() {
			r.Int32()
			for range r.count() {
				r.CompactString()
			}
			r.skipTags()
		}
		r.skipTags()
		topics = append(topics, t)
	}
	slices.SortFunc(topics, func(a, b topicMeta) int { return compareStrings(a.name, b.name) })
	return topics, r.done("partition metadata")
}

func decodeMemberSubscription(b []byte) (memberSubscription, error) {
	r, err := newValueReader("member metadata", b)
	if err != nil {
		return memberSubscription{}, err
	}
	var m memberSubscription
	m.instanceID, m.rackID = r.CompactNullableString(), r.CompactNullableString()
	m.clientID, m.clientHost = r.CompactString(), r.CompactString()
	for range r.count() {
		m.topicNames = append(m.topicNames, r.CompactString())
	}
	m.regex = r.CompactNullableString()
	m.rebalanceTimeoutMs = r.Int32()
	m.assignor = r.CompactNullableString()
	return m, r.done("member metadata")
}

func decodeTargetMember(b []byte) (assign.Assignment, error) {
	r, err := newValueReader("target assignment member", b)
	if err != nil {
		return nil, err
	}
	a := r.assignment()
	return a, r.done("target assignment member")
}

func decodeMemberAssignment(b []byte) (memberAssignment, error) {
	r, err := newValueReader("current member assignment", b)
	if err != nil {
		return memberAssignment{}, err
	}
	var m memberAssignment
	m.epoch, m.previousEpoch, m.state = r.Int32(), r.Int32(), memberState(r.Int8())
	m.assigned, m.revoking = r.assignment(), r.assignment()
	if err := r.done("current member assignment"); err != nil {
		return memberAssignment{}, err
	}
	if m.state != memberStable && m.state != memberUnrevoked && m.state != memberUnreleased {
		return memberAssignment{}, fmt.Errorf("current member assignment: unknown member state %d", m.state)
	}
	return m, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
