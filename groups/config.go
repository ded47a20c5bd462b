package groups

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/groups/assign"
)

// Config configures one coordinator shard. The zero value of each duration
// or size means Kafka's default (see Default); set a field to override it.
type Config struct {
	// Partition is the __consumer_offsets partition this shard serves. It
	// seeds the fallback member-id source when Rand is nil.
	Partition int32

	// InitialRebalanceDelay is group.initial.rebalance.delay.ms (3 s): how
	// long a new (Empty) group waits for more members before its first
	// generation, extended by each member that joins meanwhile, up to the
	// rebalance timeout. Negative: no delay (Kafka's 0; zero here means
	// the default).
	InitialRebalanceDelay time.Duration
	// SessionTimeoutMin and SessionTimeoutMax are
	// group.min.session.timeout.ms (6 s) and group.max.session.timeout.ms
	// (30 min): a JoinGroup asking for a session timeout outside them gets
	// INVALID_SESSION_TIMEOUT.
	SessionTimeoutMin time.Duration
	SessionTimeoutMax time.Duration
	// GroupMaxSize is group.max.size (MaxInt32): joins past it get
	// GROUP_MAX_SIZE_REACHED.
	GroupMaxSize int32
	// OffsetsRetention is offsets.retention.minutes (7 days): the offsets of
	// a group that has been Empty this long (or, for a group without a
	// protocol type, of a commit this old) are removed.
	OffsetsRetention time.Duration
	// OffsetsRetentionCheckInterval is offsets.retention.check.interval.ms
	// (10 min): how often expiry runs.
	OffsetsRetentionCheckInterval time.Duration
	// OffsetMetadataMaxBytes is offset.metadata.max.bytes (4096): a commit
	// whose metadata is longer gets OFFSET_METADATA_TOO_LARGE.
	OffsetMetadataMaxBytes int32
	// SnapshotMinRecords is the floor of the snapshot trigger: the shard
	// restates its live state once the records written since its last
	// snapshot pass max(SnapshotMinRecords, 2 x live records). Default 1000.
	SnapshotMinRecords int

	// TopicExists says whether a topic partition exists, so that a commit to
	// a missing one gets UNKNOWN_TOPIC_OR_PARTITION as Kafka answers. The
	// runtime answers it from its metadata image. Nil: every partition
	// exists.
	TopicExists func(topic string, partition int32) bool
	// ConsumerSessionTimeout is group.consumer.session.timeout.ms (45 s): a
	// KIP-848 member that sends no ConsumerGroupHeartbeat for this long is
	// fenced. It must lie within ConsumerSessionTimeoutMin and Max
	// (group.consumer.min/max.session.timeout.ms, 45 s and 60 s).
	ConsumerSessionTimeout    time.Duration
	ConsumerSessionTimeoutMin time.Duration
	ConsumerSessionTimeoutMax time.Duration
	// ConsumerHeartbeatInterval is group.consumer.heartbeat.interval.ms
	// (5 s), told to members in every heartbeat answer; within
	// ConsumerHeartbeatIntervalMin and Max (5 s and 15 s) and below the
	// session timeout.
	ConsumerHeartbeatInterval    time.Duration
	ConsumerHeartbeatIntervalMin time.Duration
	ConsumerHeartbeatIntervalMax time.Duration
	// ConsumerGroupMaxSize is group.consumer.max.size (MaxInt32): a new
	// member past it gets GROUP_MAX_SIZE_REACHED.
	ConsumerGroupMaxSize int32
	// ConsumerAssignors is group.consumer.assignors, by name (default
	// "uniform", "range"): the server-side assignors members may ask for,
	// the first being the default.
	ConsumerAssignors []string
	// Topics lists the cluster's topics (name, id, partition count), which
	// KIP-848 subscriptions resolve against, topic names and regexes
	// alike. The runtime answers it from its metadata image. Nil: no
	// topics, so consumer groups get empty assignments.
	Topics func() []TopicInfo

	// Rand draws member ids (Kafka's client id, "-", a random UUID). The
	// runtime passes the node's env.Rand. Nil: a generator seeded by
	// Partition, fine for tests; ids are checked for uniqueness in the group
	// either way.
	Rand env.Rand
}

// TopicInfo is one topic as Config.Topics lists it.
type TopicInfo struct {
	Name       string
	ID         assign.TopicID
	Partitions int32
}

// Kafka's defaults.
const (
	DefaultConsumerSessionTimeout       = 45 * time.Second
	DefaultConsumerSessionTimeoutMin    = 45 * time.Second
	DefaultConsumerSessionTimeoutMax    = 60 * time.Second
	DefaultConsumerHeartbeatInterval    = 5 * time.Second
	DefaultConsumerHeartbeatIntervalMin = 5 * time.Second
	DefaultConsumerHeartbeatIntervalMax = 15 * time.Second
	DefaultConsumerGroupMaxSize         = math.MaxInt32

	DefaultInitialRebalanceDelay         = 3 * time.Second
	DefaultSessionTimeoutMin             = 6 * time.Second
	DefaultSessionTimeoutMax             = 30 * time.Minute
	DefaultGroupMaxSize                  = math.MaxInt32
	DefaultOffsetsRetention              = 7 * 24 * time.Hour
	DefaultOffsetsRetentionCheckInterval = 10 * time.Minute
	DefaultOffsetMetadataMaxBytes        = 4096
	DefaultSnapshotMinRecords            = 1000
)

// withDefaults returns cfg with every zero field set to Kafka's default.
// InitialRebalanceDelay cannot be set to zero this way; use a negative value
// for "no delay" (Kafka allows 0).
func (cfg Config) withDefaults() Config {
	if cfg.InitialRebalanceDelay == 0 {
		cfg.InitialRebalanceDelay = DefaultInitialRebalanceDelay
	} else if cfg.InitialRebalanceDelay < 0 {
		cfg.InitialRebalanceDelay = 0
	}
	if cfg.SessionTimeoutMin == 0 {
		cfg.SessionTimeoutMin = DefaultSessionTimeoutMin
	}
	if cfg.SessionTimeoutMax == 0 {
		cfg.SessionTimeoutMax = DefaultSessionTimeoutMax
	}
	if cfg.GroupMaxSize == 0 {
		cfg.GroupMaxSize = DefaultGroupMaxSize
	}
	if cfg.OffsetsRetention == 0 {
		cfg.OffsetsRetention = DefaultOffsetsRetention
	}
	if cfg.OffsetsRetentionCheckInterval == 0 {
		cfg.OffsetsRetentionCheckInterval = DefaultOffsetsRetentionCheckInterval
	}
	if cfg.OffsetMetadataMaxBytes == 0 {
		cfg.OffsetMetadataMaxBytes = DefaultOffsetMetadataMaxBytes
	}
	if cfg.SnapshotMinRecords == 0 {
		cfg.SnapshotMinRecords = DefaultSnapshotMinRecords
	}
	return cfg.consumerDefaults()
}

func (cfg Config) consumerDefaults() Config {
	set := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	set(&cfg.ConsumerSessionTimeout, DefaultConsumerSessionTimeout)
	set(&cfg.ConsumerSessionTimeoutMin, DefaultConsumerSessionTimeoutMin)
	set(&cfg.ConsumerSessionTimeoutMax, DefaultConsumerSessionTimeoutMax)
	set(&cfg.ConsumerHeartbeatInterval, DefaultConsumerHeartbeatInterval)
	set(&cfg.ConsumerHeartbeatIntervalMin, DefaultConsumerHeartbeatIntervalMin)
	set(&cfg.ConsumerHeartbeatIntervalMax, DefaultConsumerHeartbeatIntervalMax)
	if cfg.ConsumerGroupMaxSize == 0 {
		cfg.ConsumerGroupMaxSize = DefaultConsumerGroupMaxSize
	}
	if len(cfg.ConsumerAssignors) == 0 {
		for _, a := range assign.All() {
			cfg.ConsumerAssignors = append(cfg.ConsumerAssignors, a.Name())
		}
	}
	return cfg
}

// Validate reports the first setting that is out of range, by its Kafka
// name. Zero fields are defaults and always valid.
func (cfg Config) Validate() error {
	c := cfg.withDefaults()
	switch {
	case cfg.Partition < 0:
		return fmt.Errorf("groups: partition %d is negative", cfg.Partition)
	case c.SessionTimeoutMin < 0:
		return errors.New("groups: group.min.session.timeout.ms must not be negative")
	case c.SessionTimeoutMax < c.SessionTimeoutMin:
		return fmt.Errorf("groups: group.max.session.timeout.ms %d is below group.min.session.timeout.ms %d",
			c.SessionTimeoutMax.Milliseconds(), c.SessionTimeoutMin.Milliseconds())
	case c.GroupMaxSize < 1:
		return fmt.Errorf("groups: group.max.size %d must be at least 1", c.GroupMaxSize)
	case c.OffsetsRetention < time.Minute:
		return fmt.Errorf("groups: offsets.retention.minutes %v must be at least 1", c.OffsetsRetention)
	case c.OffsetsRetentionCheckInterval < time.Millisecond:
		return fmt.Errorf("groups: offsets.retention.check.interval.ms %v must be at least 1", c.OffsetsRetentionCheckInterval)
	case c.OffsetMetadataMaxBytes < 0 || c.OffsetMetadataMaxBytes > maxString:
		// The records carry metadata behind an int16 length.
		return fmt.Errorf("groups: offset.metadata.max.bytes %d is outside [0, %d]", c.OffsetMetadataMaxBytes, maxString)
	case c.SnapshotMinRecords < 1:
		return fmt.Errorf("groups: snapshot minimum %d must be at least 1", c.SnapshotMinRecords)
	}
	return c.validateConsumer()
}

// validateConsumer checks the KIP-848 settings as Kafka's
// GroupCoordinatorConfig does.
func (c Config) validateConsumer() error {
	switch {
	case c.ConsumerSessionTimeoutMax < c.ConsumerSessionTimeoutMin:
		return fmt.Errorf("groups: group.consumer.max.session.timeout.ms %d is below group.consumer.min.session.timeout.ms %d",
			c.ConsumerSessionTimeoutMax.Milliseconds(), c.ConsumerSessionTimeoutMin.Milliseconds())
	case c.ConsumerHeartbeatIntervalMax < c.ConsumerHeartbeatIntervalMin:
		return fmt.Errorf("groups: group.consumer.max.heartbeat.interval.ms %d is below group.consumer.min.heartbeat.interval.ms %d",
			c.ConsumerHeartbeatIntervalMax.Milliseconds(), c.ConsumerHeartbeatIntervalMin.Milliseconds())
	case c.ConsumerSessionTimeout < c.ConsumerSessionTimeoutMin || c.ConsumerSessionTimeout > c.ConsumerSessionTimeoutMax:
		return fmt.Errorf("groups: group.consumer.session.timeout.ms %d is outside [%d, %d]", c.ConsumerSessionTimeout.Milliseconds(),
			c.ConsumerSessionTimeoutMin.Milliseconds(), c.ConsumerSessionTimeoutMax.Milliseconds())
	case c.ConsumerHeartbeatInterval < c.ConsumerHeartbeatIntervalMin || c.ConsumerHeartbeatInterval > c.ConsumerHeartbeatIntervalMax:
		return fmt.Errorf("groups: group.consumer.heartbeat.interval.ms %d is outside [%d, %d]", c.ConsumerHeartbeatInterval.Milliseconds(),
			c.ConsumerHeartbeatIntervalMin.Milliseconds(), c.ConsumerHeartbeatIntervalMax.Milliseconds())
	case c.ConsumerHeartbeatInterval < time.Millisecond || c.ConsumerHeartbeatInterval >= c.ConsumerSessionTimeout:
		return fmt.Errorf("groups: group.consumer.heartbeat.interval.ms %d must be at least 1 and below group.consumer.session.timeout.ms %d",
			c.ConsumerHeartbeatInterval.Milliseconds(), c.ConsumerSessionTimeout.Milliseconds())
	case c.ConsumerGroupMaxSize < 1:
		return fmt.Errorf("groups: group.consumer.max.size %d must be at least 1", c.ConsumerGroupMaxSize)
	}
	seen := map[string]bool{}
	for _, name := range c.ConsumerAssignors {
		if _, ok := assign.ByName(name); !ok || seen[name] {
			return fmt.Errorf("groups: group.consumer.assignors names %q, which is unknown or repeated", name)
		}
		seen[name] = true
	}
	return nil
}
