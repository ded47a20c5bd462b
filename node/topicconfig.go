package node

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// topicConfigDef describes one topic-level config: its Kafka name, the broker
// config that supplies its default, and how its values are checked.
type topicConfigDef struct {
	name string
	// brokerName is the broker-level key whose value is the default; ""
	// for a topic config with none (the throttled replicas lists).
	brokerName string
	kind       configKind
	// check returns why a value already of the right kind is invalid, or "";
	// nil accepts any.
	check func(string) string
	// defaultValue returns the default from the broker's configuration.
	defaultValue func(Config) string
	// doc is the one-line documentation DescribeConfigs v3+ returns.
	doc string
}

// configKind is the type DescribeConfigs v3+ reports (Kafka's ConfigType).
type configKind int8

const (
	kindBoolean  configKind = 1
	kindString   configKind = 2
	kindInt      configKind = 3
	kindShort    configKind = 4
	kindLong     configKind = 5
	kindDouble   configKind = 6
	kindList     configKind = 7
	kindClass    configKind = 8
	kindPassword configKind = 9
)

// topicConfigDefs returns the topic configs Sluice knows, sorted by name.
// Only these may be set at creation or by AlterConfigs; an unknown name gets
// INVALID_CONFIG, as in Kafka.
func topicConfigDefs() []topicConfigDef {
	defs := []topicConfigDef{
		{name: "cleanup.policy", brokerName: "log.cleanup.policy", kind: kindList,
			check: cleanupPolicy, defaultValue: constant("delete"),
			doc: "Whether old segments are deleted (delete) or compacted (compact)."},
		{name: "compression.type", brokerName: "compression.type", kind: kindString,
			check: oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), defaultValue: constant("producer"),
			doc: "The final compression of the topic's data; producer keeps the producer's."},
		{name: "delete.retention.ms", brokerName: "log.cleaner.delete.retention.ms", kind: kindLong,
			check: atLeast(0), defaultValue: constant("86400000"),
			doc: "How long delete tombstones are kept on compacted topics."},
		{name: "file.delete.delay.ms", brokerName: "log.segment.delete.delay.ms", kind: kindLong,
			check: atLeast(0), defaultValue: constant("60000"),
			doc: "How long to wait before deleting a file from the file system."},
		// Sluice's default is 1 where Kafka's is 9223372036854775807: every
		// record is synced (group-committed) before it counts toward the
		// high watermark, on the leader and on each follower, so no
		// acknowledged acks=all record is lost even when every node loses
		// power at once. Above 1 is Kafka's page-cache mode (replication.go).
		{name: "flush.messages", brokerName: "log.flush.interval.messages", kind: kindLong,
			check: atLeast(1), defaultValue: constant("1"),
			doc: "Force a sync after this many messages. 1 (Sluice's default): a record counts toward the high watermark only once it is on disk on every in-sync replica; above 1, once it is in their page caches, as in Kafka."},
		{name: "flush.ms", brokerName: "log.flush.interval.ms", kind: kindLong,
			check: atLeast(0), defaultValue: constant("9223372036854775807"),
			doc: "Force a sync after this long."},
		{name: "index.interval.bytes", brokerName: "log.index.interval.bytes", kind: kindInt,
			check: atLeast(0), defaultValue: func(c Config) string { return strconv.Itoa(int(c.LogIndexIntervalBytes)) },
			doc: "How often an entry is added to the offset index."},
		{name: leaderThrottledReplicasConfig, brokerName: "", kind: kindList,
			check: throttledReplicasProblem(leaderThrottledReplicasConfig), defaultValue: constant(""),
			doc: "Replicas whose log replication the leader throttles (partitionId:brokerId,... or *), at the broker's leader.replication.throttled.rate."},
		{name: followerThrottledReplicasConfig, brokerName: "", kind: kindList,
			check: throttledReplicasProblem(followerThrottledReplicasConfig), defaultValue: constant(""),
			doc: "Replicas whose log replication the follower throttles (partitionId:brokerId,... or *); stored, not yet enforced by Sluice."},
		{name: "max.message.bytes", brokerName: "message.max.bytes", kind: kindInt,
			check: atLeast(0), defaultValue: func(c Config) string { return strconv.Itoa(int(c.MessageMaxBytes)) },
			doc: "The largest record batch size allowed."},
		{name: "message.timestamp.type", brokerName: "log.message.timestamp.type", kind: kindString,
			check: oneOf("CreateTime", "LogAppendTime"), defaultValue: constant("CreateTime"),
			doc: "Whether record timestamps are the producer's (CreateTime) or the broker's (LogAppendTime)."},
		{name: "min.insync.replicas", brokerName: "min.insync.replicas", kind: kindInt,
			check: atLeast(1), defaultValue: constant("1"),
			doc: "The fewest in-sync replicas that must acknowledge an acks=all write."},
		{name: "retention.bytes", brokerName: "log.retention.bytes", kind: kindLong,
			check: atLeast(-1), defaultValue: func(c Config) string { return strconv.FormatInt(c.LogRetentionBytes, 10) },
			doc: "The most bytes a partition keeps before deleting old segments; -1 is unlimited."},
		{name: "retention.ms", brokerName: "log.retention.ms", kind: kindLong,
			check: atLeast(-1), defaultValue: func(c Config) string { return strconv.FormatInt(c.LogRetentionMs, 10) },
			doc: "How long a segment is kept before deletion; -1 is forever."},
		{name: "segment.bytes", brokerName: "log.segment.bytes", kind: kindInt,
			check: atLeast(segmentBytesMin), defaultValue: func(c Config) string { return strconv.FormatInt(c.LogSegmentBytes, 10) },
			doc: "The size at which a segment is rolled."},
		{name: "segment.index.bytes", brokerName: "log.index.size.max.bytes", kind: kindInt,
			check: atLeast(segmentIndexBytesMin), defaultValue: func(c Config) string { return strconv.Itoa(int(c.LogIndexSizeMaxBytes)) },
			doc: "The size preallocated for a segment's offset index."},
		{name: "segment.ms", brokerName: "log.roll.ms", kind: kindLong,
			check: atLeast(1), defaultValue: func(c Config) string { return strconv.FormatInt(c.LogRollMs, 10) },
			doc: "The age at which a segment is rolled even if not full."},
		{name: "unclean.leader.election.enable", brokerName: "unclean.leader.election.enable", kind: kindBoolean,
			defaultValue: constant("false"),
			doc:          "Whether an out-of-sync replica may become leader, losing data."},
	}
	sort.Slice(defs, func(i, j int) bool { return defs[i].name < defs[j].name })
	return defs
}

// lookupTopicConfig looks up a topic config by name.
func lookupTopicConfig(name string) (topicConfigDef, bool) {
	defs := topicConfigDefs()
	i := sort.Search(len(defs), func(i int) bool { return defs[i].name >= name })
	if i < len(defs) && defs[i].name == name {
		return defs[i], true
	}
	return topicConfigDef{}, false
}

// topicConfigValueMax bounds one config value: no topic config needs more,
// and every value is written into the metadata log.
const topicConfigValueMax = 4096

// topicConfigsProblem checks names and values. It returns "" when they are
// valid, else a message for the client saying which and why, worded as
// Kafka's INVALID_CONFIG messages are.
func topicConfigsProblem(configs map[string]string) string {
	for _, name := range sortedKeys(configs) {
		if len(configs[name]) > topicConfigValueMax {
			return fmt.Sprintf("Invalid value for configuration %s: longer than %d bytes", name, topicConfigValueMax)
		}
		def, ok := lookupTopicConfig(name)
		if !ok {
			return "Unknown topic config name: " + name
		}
		if why := def.problem(configs[name]); why != "" {
			return fmt.Sprintf("Invalid value %s for configuration %s: %s", configs[name], name, why)
		}
	}
	return ""
}

// problem returns why v is not a valid value, or "".
func (d topicConfigDef) problem(v string) string {
	switch d.kind {
	case kindBoolean:
		if v != "true" && v != "false" {
			return "Expected value to be either true or false"
		}
	case kindInt:
		if _, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32); err != nil {
			return "Not a number of type INT"
		}
	case kindLong:
		if _, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err != nil {
			return "Not a number of type LONG"
		}
	}
	if d.check != nil {
		return d.check(strings.TrimSpace(v))
	}
	return ""
}

// The smallest segment and index sizes a partition log can work with: a
// segment must hold a record batch header, an index one time and one offset
// entry per slot.
const (
	segmentBytesMin      = 61
	segmentIndexBytesMin = 96
)

// cleanupPolicy accepts delete only: compaction is not implemented, and
// accepting compact while deleting by time would silently drop the data of
// topics (Kafka Connect's, a schema registry's) that must be kept forever.
func cleanupPolicy(v string) string {
	for _, item := range strings.Split(v, ",") {
		switch strings.TrimSpace(item) {
		case "delete":
		case "compact":
			return "cleanup.policy=compact is not supported yet (log compaction is not implemented)"
		default:
			return "String must be one of: delete, compact"
		}
	}
	return ""
}

func constant(v string) func(Config) string { return func(Config) string { return v } }

func atLeast(min int64) func(string) string {
	return func(v string) string {
		if n, _ := strconv.ParseInt(v, 10, 64); n < min {
			return fmt.Sprintf("Value must be at least %d", min)
		}
		return ""
	}
}

func oneOf(allowed ...string) func(string) string {
	return func(v string) string {
		for _, a := range allowed {
			if v == a {
				return ""
			}
		}
		return "String must be one of: " + strings.Join(allowed, ", ")
	}
}
