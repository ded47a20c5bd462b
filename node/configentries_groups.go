package node

import (
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/groups"
)

// groupConfigDefs lists the group coordinator's keys (config_groups.go),
// each with Kafka's default; a zero field reads as that default, which is
// what the shards take it for.
func groupConfigDefs() []brokerConfigDef {
	def := func(s string) *string { return &s }
	ms := func(d func(Config) time.Duration, dflt time.Duration) func(Config) string {
		return func(c Config) string { return durationMsString(orDefault(d(c), dflt)) }
	}
	size := func(n func(Config) int32, dflt int32) func(Config) string {
		return func(c Config) string { return strconv.Itoa(int(orDefault(n(c), dflt))) }
	}
	return []brokerConfigDef{
		{name: "group.initial.rebalance.delay.ms", kind: kindInt, kafkaDefault: def("3000"),
			value: func(c Config) string { return durationMsString(c.GroupInitialRebalanceDelay) },
			doc:   "How long a new classic group waits for more members before its first rebalance."},
		{name: "group.min.session.timeout.ms", kind: kindInt, kafkaDefault: def("6000"),
			value: ms(func(c Config) time.Duration { return c.GroupMinSessionTimeout }, groups.DefaultSessionTimeoutMin),
			doc:   "The shortest session timeout a classic group member may ask for."},
		{name: "group.max.session.timeout.ms", kind: kindInt, kafkaDefault: def("1800000"),
			value: ms(func(c Config) time.Duration { return c.GroupMaxSessionTimeout }, groups.DefaultSessionTimeoutMax),
			doc:   "The longest session timeout a classic group member may ask for."},
		{name: "group.max.size", kind: kindInt, kafkaDefault: def("2147483647"),
			value: size(func(c Config) int32 { return c.GroupMaxSize }, groups.DefaultGroupMaxSize),
			doc:   "The most members a classic group may have."},
		{name: "group.consumer.session.timeout.ms", kind: kindInt, kafkaDefault: def("45000"),
			value: ms(func(c Config) time.Duration { return c.GroupConsumerSessionTimeout }, groups.DefaultConsumerSessionTimeout),
			doc:   "How long a consumer-protocol member may go without a heartbeat before it is fenced."},
		{name: "group.consumer.min.session.timeout.ms", kind: kindInt, kafkaDefault: def("45000"),
			value: ms(func(c Config) time.Duration { return c.GroupConsumerMinSessionTimeout }, groups.DefaultConsumerSessionTimeoutMin),
			doc:   "The least group.consumer.session.timeout.ms may be."},
		{name: "group.consumer.max.session.timeout.ms", kind: kindInt, kafkaDefault: def("60000"),
			value: ms(func(c Config) time.Duration { return c.GroupConsumerMaxSessionTimeout }, groups.DefaultConsumerSessionTimeoutMax),
			doc:   "The most group.consumer.session.timeout.ms may be."},
		{name: "group.consumer.heartbeat.interval.ms", kind: kindInt, kafkaDefault: def("5000"),
			value: ms(func(c Config) time.Duration { return c.GroupConsumerHeartbeatInterval }, groups.DefaultConsumerHeartbeatInterval),
			doc:   "The heartbeat interval given to consumer-protocol members."},
		{name: "group.consumer.min.heartbeat.interval.ms", kind: kindInt, kafkaDefault: def("5000"),
			value: ms(func(c Config) time.Duration { return c.GroupConsumerMinHeartbeatInterval }, groups.DefaultConsumerHeartbeatIntervalMin),
			doc:   "The least group.consumer.heartbeat.interval.ms may be."},
		{name: "group.consumer.max.heartbeat.interval.ms", kind: kindInt, kafkaDefault: def("15000"),
			value: ms(func(c Config) time.Duration { return c.GroupConsumerMaxHeartbeatInterval }, groups.DefaultConsumerHeartbeatIntervalMax),
			doc:   "The most group.consumer.heartbeat.interval.ms may be."},
		{name: "group.consumer.max.size", kind: kindInt, kafkaDefault: def("2147483647"),
			value: size(func(c Config) int32 { return c.GroupConsumerMaxSize }, groups.DefaultConsumerGroupMaxSize),
			doc:   "The most members a consumer-protocol group may have."},
		{name: "group.consumer.assignors", kind: kindList, kafkaDefault: def(strings.Join(defaultAssignors(), ",")),
			value: func(c Config) string {
				if len(c.GroupConsumerAssignors) == 0 {
					return strings.Join(defaultAssignors(), ",")
				}
				return strings.Join(c.GroupConsumerAssignors, ",")
			},
			doc: "The server-side assignors consumer-protocol members may ask for, by name; the first is the default."},
		{name: "offsets.retention.minutes", kind: kindInt, kafkaDefault: def("10080"),
			value: func(c Config) string {
				return strconv.FormatInt(int64(orDefault(c.OffsetsRetention, groups.DefaultOffsetsRetention)/time.Minute), 10)
			},
			doc: "How long a group's committed offsets are kept once it is empty (or, without a protocol, after each commit)."},
		{name: "offsets.retention.check.interval.ms", kind: kindLong, kafkaDefault: def("600000"),
			value: ms(func(c Config) time.Duration { return c.OffsetsRetentionCheckInterval }, groups.DefaultOffsetsRetentionCheckInterval),
			doc:   "How often expired offsets are looked for."},
		{name: "offset.metadata.max.bytes", kind: kindInt, kafkaDefault: def("4096"),
			value: size(func(c Config) int32 { return c.OffsetMetadataMaxBytes }, groups.DefaultOffsetMetadataMaxBytes),
			doc:   "The longest metadata a committed offset may carry."},
		{name: "offsets.commit.timeout.ms", kind: kindInt, kafkaDefault: def("5000"),
			value: ms(func(c Config) time.Duration { return c.OffsetsCommitTimeout }, defaultOffsetsCommitTimeout),
			doc:   "How long a coordinator's answer waits for its records to be replicated before it is COORDINATOR_NOT_AVAILABLE."},
	}
}

// orDefault is v, or dflt when v is 0.
func orDefault[T time.Duration | int32](v, dflt T) T {
	if v == 0 {
		return dflt
	}
	return v
}
