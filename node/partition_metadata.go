package node

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/raftmeta"
)

// Each partition directory names the topic id it belongs to in a
// partition.metadata file, as Kafka's does (KIP-516), so a directory left
// by a deleted topic is never taken for the data of a new topic of the same
// name: a deletion is applied on each broker when it applies the record,
// and a new topic may reuse the name at once, while a removal that failed
// (a bad disk) leaves the old directory behind.
//
// The file is Kafka's ("version: 0" and "topic_id: <id>" lines, the id in
// Kafka's URL-safe base64 form) with one line of Sluice's own after them,
// "crc32c: <n>", the checksum of the lines before it: the file decides
// whether a directory's records are deleted, and a bit flipped on a read
// of an unchecked file can turn one valid id into another (the simulator
// found it: seed 1 of the first sweep removed a live partition). A file
// that fails its checksum is treated as missing, which keeps the
// directory.

const partitionMetadataName = "partition.metadata"

func partitionMetadata(id raftmeta.TopicID) []byte {
	body := "version: 0\ntopic_id: " + base64.RawURLEncoding.EncodeToString(id[:]) + "\n"
	return []byte(body + "crc32c: " + strconv.FormatUint(uint64(crc32.Checksum([]byte(body), castagnoliTable)), 10) + "\n")
}

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// parsePartitionMetadata reads the topic id of a partition.metadata file.
func parsePartitionMetadata(p []byte) (raftmeta.TopicID, error) {
	var id raftmeta.TopicID
	i := bytes.LastIndex(p, []byte("crc32c: "))
	if i < 0 {
		return id, errors.New("no checksum")
	}
	sum, err := strconv.ParseUint(strings.TrimSpace(string(p[i+len("crc32c: "):])), 10, 32)
	if err != nil || uint32(sum) != crc32.Checksum(p[:i], castagnoliTable) {
		return id, errors.New("the checksum does not match")
	}
	var version, topic string
	for _, line := range strings.Split(string(p[:i]), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "version":
			version = strings.TrimSpace(v)
		case "topic_id":
			topic = strings.TrimSpace(v)
		}
	}
	if version != "0" {
		return id, fmt.Errorf("version %q, not 0", version)
	}
	raw, err := base64.RawURLEncoding.DecodeString(topic)
	if err != nil || len(raw) != len(id) {
		return id, fmt.Errorf("topic_id %q is not a topic id", topic)
	}
	copy(id[:], raw)
	return id, nil
}

// dirTopicID is the topic id a partition directory's partition.metadata
// names; ok is false when the directory has no such file (new, or written
// by an older Sluice, or the file was lost with a crash before its sync).
func (b *Broker) dirTopicID(dir string) (id raftmeta.TopicID, ok bool, err error) {
	f, err := b.env.FS.Open(dir + "/" + partitionMetadataName)
	if errors.Is(err, fs.ErrNotExist) {
		return id, false, nil
	}
	if err != nil {
		return id, false, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return id, false, err
	}
	if size > 1024 {
		return id, false, fmt.Errorf("%s/%s is %d bytes, not a partition.metadata file", dir, partitionMetadataName, size)
	}
	p := make([]byte, size)
	if _, err := f.ReadAt(p, 0); err != nil {
		return id, false, err
	}
	id, err = parsePartitionMetadata(p)
	if err != nil {
		// A torn write of the file (a crash before its sync) is not a
		// topic's claim: the directory is treated as unclaimed.
		b.env.Log.Warn("ignoring an unreadable partition.metadata", "dir", dir, "err", err)
		return id, false, nil
	}
	return id, true, nil
}

// claimPartitionDir makes dir ready to hold topic id's partition: a
// directory another topic id claims is a deleted topic's, left behind, and
// is removed first.
func (b *Broker) claimPartitionDir(dir string, id raftmeta.TopicID) error {
	owner, ok, err := b.dirTopicID(dir)
	if err != nil {
		return fmt.Errorf("read %s/%s: %w", dir, partitionMetadataName, err)
	}
	if ok && owner != id {
		b.env.Log.Warn("removing the directory of a deleted topic of the same name", "dir", dir, "topic_id", owner.String())
		if err := removeTree(b.env.FS, dir); err != nil {
			return fmt.Errorf("remove %s, left by deleted topic %s: %w", dir, owner, err)
		}
	}
	return nil
}

// writePartitionMetadata writes dir's partition.metadata if it has none.
// It is synced in the background: until it is durable, a crash may lose
// it, and the directory is then taken as unclaimed, which is safe as long
// as the topic it belongs to still exists (an unclaimed directory of a
// deleted topic is an orphan, removed at start).
func (b *Broker) writePartitionMetadata(dir string, id raftmeta.TopicID) {
	if _, ok, err := b.dirTopicID(dir); ok || err != nil {
		return
	}
	name := dir + "/" + partitionMetadataName
	f, err := b.env.FS.Create(name)
	if err == nil {
		_, err = f.Write(partitionMetadata(id))
	}
	if err != nil {
		b.env.Log.Warn("writing partition.metadata failed", "dir", dir, "err", err)
		if f != nil {
			f.Close()
		}
		return
	}
	f.Sync(func(err error) {
		if err != nil {
			b.env.Log.Warn("syncing partition.metadata failed", "dir", dir, "err", err)
		}
		f.Close()
	})
}
