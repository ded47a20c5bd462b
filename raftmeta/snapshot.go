package raftmeta

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"sort"
)

// A snapshot is the image written as the records that rebuild it from empty,
// in a fixed order: the cluster id, brokers by id, broker configs by
// resource name and key, topics by name (each one CreateTopicRecord with
// its partitions' current state and its configs), and one producer-id block
// covering every id handed out. Loading applies them to an empty image and
// then sets Applied from the snapshot's header, so offsets go on counting
// where the log left off.
//
// Encoding (EncodeSnapshot), integers big-endian or uvarint:
//
//	magic "SLSN" | version 2 (1 byte) | applied (uvarint) | count (uvarint)
//	| (length (uvarint) | binary record)* | demotions (uvarint)
//	| (broker id (uvarint of its 32 bits) | offset (uvarint))*
//	| crc32c (4 bytes) of all before it
//
// The demotions (Image.DemotedAt, by broker id) are what no record can
// rebuild: the offsets of the last records that took a leadership from each
// broker. Version 1, without them, still loads (knowing no demotion).
//
// The order and the encoding are canonical: equal images give equal bytes,
// so Digest is a hash of them.

const (
	snapshotMagic   = "SLSN"
	snapshotVersion = 2
	// snapshotVersionNoDemotions is the version before demotions.
	snapshotVersionNoDemotions = 1
)

// SnapshotRecords returns the records that rebuild the image from empty, in
// the snapshot's order. They share the image's immutable slices.
func (im *Image) SnapshotRecords() []Record {
	var out []Record
	if im.ClusterID != "" {
		out = append(out, ClusterIDRecord{ClusterID: im.ClusterID})
	}
	for _, id := range im.BrokerIDs() {
		out = append(out, RegisterBrokerRecord{Broker: im.Brokers[id]})
	}
	for _, name := range im.brokerConfigNames() {
		configs := im.BrokerConfigs[name]
		for _, key := range sortedKeys(configs) {
			v := configs[key]
			out = append(out, ConfigRecord{Resource: ConfigBroker, Name: name, Key: key, Value: &v})
		}
	}
	for _, name := range im.TopicNames() {
		out = append(out, CreateTopicRecord{Topic: *im.TopicByName(name)})
	}
	if im.NextProducerID > 0 {
		out = append(out, ProducerIDsRecord{First: 0, Count: im.NextProducerID})
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// EncodeSnapshot writes the image as a checksummed snapshot.
func (im *Image) EncodeSnapshot() []byte {
	records := im.SnapshotRecords()
	buf := make([]byte, 0, 64+16*im.partitions)
	buf = append(buf, snapshotMagic...)
	buf = append(buf, snapshotVersion)
	buf = binary.AppendUvarint(buf, im.Applied)
	buf = binary.AppendUvarint(buf, uint64(len(records)))
	var scratch []byte
	for _, r := range records {
		var err error
		if scratch, err = AppendBinaryRecord(scratch[:0], r); err != nil {
			// Every record SnapshotRecords makes has an encoding.
			panic(fmt.Sprintf("raftmeta: snapshot: %v", err))
		}
		buf = binary.AppendUvarint(buf, uint64(len(scratch)))
		buf = append(buf, scratch...)
	}
	ids := make([]int32, 0, len(im.demoted))
	for id := range im.demoted {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	buf = binary.AppendUvarint(buf, uint64(len(ids)))
	for _, id := range ids {
		buf = binary.AppendUvarint(buf, uint64(uint32(id)))
		buf = binary.AppendUvarint(buf, im.demoted[id])
	}
	return binary.BigEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoli))
}

// DecodeSnapshot rebuilds the image EncodeSnapshot wrote. A snapshot that
// fails its checksum, does not parse, holds a record that does not apply or
// an image that breaks an invariant is an error.
func DecodeSnapshot(p []byte) (*Image, error) {
	body, version, err := checkSnapshotFrame(p)
	if err != nil {
		return nil, err
	}
	applied, n := binary.Uvarint(body)
	if n <= 0 {
		return nil, errors.New("decode snapshot: truncated header")
	}
	body = body[n:]
	count, n := binary.Uvarint(body)
	if n <= 0 || count > uint64(len(body)) {
		return nil, errors.New("decode snapshot: bad record count")
	}
	body = body[n:]
	im := NewImage()
	for i := uint64(0); i < count; i++ {
		size, n := binary.Uvarint(body)
		if n <= 0 || size > uint64(len(body)-n) {
			return nil, fmt.Errorf("decode snapshot: record %d of %d is truncated", i, count)
		}
		r, err := decodeBinaryRecord(body[n : n+int(size)])
		if err != nil {
			return nil, fmt.Errorf("decode snapshot: record %d of %d: %w", i, count, err)
		}
		if err := im.Apply(r); err != nil {
			return nil, fmt.Errorf("decode snapshot: record %d of %d: %w", i, count, err)
		}
		body = body[n+int(size):]
	}
	if version != snapshotVersionNoDemotions {
		if body, err = decodeDemotions(im, body, applied); err != nil {
			return nil, err
		}
	}
	if len(body) != 0 {
		return nil, fmt.Errorf("decode snapshot: %d bytes after its %d records", len(body), count)
	}
	if applied < im.Applied {
		return nil, fmt.Errorf("decode snapshot: applied count %d is below its own %d records", applied, im.Applied)
	}
	im.Applied = applied
	if err := im.Validate(); err != nil {
		return nil, fmt.Errorf("decode snapshot: %w", err)
	}
	return im, nil
}

// decodeDemotions reads the demotions after the records into im and
// returns what follows them.
func decodeDemotions(im *Image, body []byte, applied uint64) ([]byte, error) {
	count, n := binary.Uvarint(body)
	if n <= 0 || count > uint64(len(body)) {
		return nil, errors.New("decode snapshot: bad demotion count")
	}
	body = body[n:]
	prev := int64(math.MinInt64)
	for i := uint64(0); i < count; i++ {
		id, n1 := binary.Uvarint(body)
		if n1 <= 0 || id > math.MaxUint32 {
			return nil, fmt.Errorf("decode snapshot: demotion %d of %d: bad broker id", i, count)
		}
		offset, n2 := binary.Uvarint(body[n1:])
		if n2 <= 0 {
			return nil, fmt.Errorf("decode snapshot: demotion %d of %d is truncated", i, count)
		}
		broker := int32(uint32(id))
		if int64(broker) <= prev || offset == 0 || offset > applied {
			return nil, fmt.Errorf("decode snapshot: demotion %d of %d (broker %d at offset %d) is out of order or past the records", i, count, broker, offset)
		}
		prev = int64(broker)
		if im.demoted == nil {
			im.demoted = map[int32]uint64{}
		}
		im.demoted[broker] = offset
		body = body[n1+n2:]
	}
	return body, nil
}

// checkSnapshotFrame checks the magic, version and checksum and returns
// what lies between the version and the checksum, and the version.
func checkSnapshotFrame(p []byte) ([]byte, byte, error) {
	header := len(snapshotMagic) + 1
	if len(p) < header+4 {
		return nil, 0, fmt.Errorf("decode snapshot: %d bytes is too short", len(p))
	}
	end := len(p) - 4
	if crc32.Checksum(p[:end], castagnoli) != binary.BigEndian.Uint32(p[end:]) {
		return nil, 0, errors.New("decode snapshot: checksum mismatch")
	}
	if string(p[:len(snapshotMagic)]) != snapshotMagic {
		return nil, 0, errors.New("decode snapshot: not a snapshot (bad magic)")
	}
	version := p[len(snapshotMagic)]
	if version != snapshotVersion && version != snapshotVersionNoDemotions {
		return nil, 0, fmt.Errorf("decode snapshot: unknown version %d", version)
	}
	return p[header:end], version, nil
}

// Digest is a canonical hash of the image: equal images (Equal) have equal
// digests on every node and every run, whatever order their maps were
// filled in, so two nodes can compare their images by 32 bytes. It is the
// SHA-256 of the snapshot encoding.
func (im *Image) Digest() [32]byte { return sha256.Sum256(im.EncodeSnapshot()) }
