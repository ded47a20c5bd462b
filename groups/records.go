package groups

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The record formats of __consumer_offsets, as Kafka writes them, so that
// Kafka's tools (kafka-console-consumer's OffsetsMessageFormatter and
// GroupMetadataMessageFormatter, kafka-dump-log --offsets-decoder) read
// Sluice's topic:
//
//	key   int16 version | fields                     value
//	  0,1 OffsetCommitKey   group, topic, partition  OffsetCommitValue v3 (v1 with an expire time)
//	  2   GroupMetadataKey  group                    GroupMetadataValue v3
//	  3-8 KIP-848's consumer group records (see consumer_records.go)
//
// A nil value is a tombstone: the offset, or the group's metadata, is gone.
// Key versions 0 and 1 are the same layout; Kafka writes 1, and so do we.

const (
	offsetKeyVersion   = 1
	groupKeyVersion    = 2
	offsetValueVersion = 3 // v1 when an expire timestamp is set (OffsetCommit v2-v4 retention)
	groupValueVersion  = 3
)

// ErrUnknownRecord is returned by Replay for a key version this shard does
// not know (past 8: share groups and later).
var ErrUnknownRecord = errors.New("unknown __consumer_offsets record")

type keyKind uint8

const (
	keyOffset keyKind = iota + 1
	keyGroup
	keyConsumer // KIP-848: version says which record
)

// recordKey is a decoded key of either kind.
type recordKey struct {
	kind      keyKind
	group     string
	topic     string
	partition int32
	version   int16  // keyConsumer: the key version, 3 to 8
	member    string // keyConsumer versions 5, 7 and 8
}

func offsetKey(group, topic string, partition int32) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: topic, Partition: partition}
	return k.AppendTo(nil)
}

func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: group}
	return k.AppendTo(nil)
}

func decodeKey(b []byte) (recordKey, error) {
	if len(b) < 2 {
		return recordKey{}, fmt.Errorf("key of %d bytes has no version", len(b))
	}
	switch version := int16(b[0])<<8 | int16(b[1]); version {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(b); err != nil {
			return recordKey{}, fmt.Errorf("offset commit key: %w", err)
		}
		return recordKey{kind: keyOffset, group: k.Group, topic: k.Topic, partition: k.Partition}, nil
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(b); err != nil {
			return recordKey{}, fmt.Errorf("group metadata key: %w", err)
		}
		return recordKey{kind: keyGroup, group: k.Group}, nil
	case keyCGMetadata, keyCGPartitions, keyCGMember, keyCGTargetMetadata, keyCGTargetMember, keyCGCurrent:
		return decodeCGKey(version, b)
	default:
		return recordKey{}, fmt.Errorf("%w: key version %d", ErrUnknownRecord, version)
	}
}

// offsetValue is one committed offset.
type offsetValue struct {
	offset      int64
	leaderEpoch int32 // -1: none
	metadata    string
	commitMs    int64
	expireMs    int64 // -1: none (the retention applies)
}

func encodeOffsetValue(o offsetValue) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetValueVersion
	if o.expireMs >= 0 {
		v.Version = 1
		v.ExpireTimestamp = o.expireMs
	}
	v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = o.offset, o.leaderEpoch, o.metadata, o.commitMs
	return v.AppendTo(nil)
}

func decodeOffsetValue(b []byte) (offsetValue, error) {
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(b); err != nil {
		return offsetValue{}, fmt.Errorf("offset commit value: %w", err)
	}
	if v.Version < 0 || v.Version > 4 {
		return offsetValue{}, fmt.Errorf("%w: offset commit value version %d", ErrUnknownRecord, v.Version)
	}
	o := offsetValue{offset: v.Offset, leaderEpoch: -1, metadata: v.Metadata, commitMs: v.CommitTimestamp, expireMs: -1}
	if v.Version >= 3 {
		o.leaderEpoch = v.LeaderEpoch
	}
	if v.Version == 1 {
		o.expireMs = v.ExpireTimestamp
	}
	return o, nil
}

func encodeGroupValue(v *kmsg.GroupMetadataValue) []byte {
	v.Version = groupValueVersion
	return v.AppendTo(nil)
}

func decodeGroupValue(b []byte) (*kmsg.GroupMetadataValue, error) {
	v := new(kmsg.GroupMetadataValue)
	if err := v.ReadFrom(b); err != nil {
		return nil, fmt.Errorf("group metadata value: %w", err)
	}
	if v.Version < 0 || v.Version > 4 {
		return nil, fmt.Errorf("%w: group metadata value version %d", ErrUnknownRecord, v.Version)
	}
	seen := make(map[string]bool, len(v.Members))
	for _, m := range v.Members {
		if m.MemberID == "" || seen[m.MemberID] {
			return nil, fmt.Errorf("group metadata value: member id %q empty or repeated", m.MemberID)
		}
		seen[m.MemberID] = true
	}
	return v, nil
}
