package node

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/groups"
	"github.com/sluicemq/sluice/groups/assign"
)

// The group coordinator's keys: each is a field of groups.Config, which
// says what it does; here they are read from a properties file, checked
// together, and handed to the shards (Broker.groupsConfig adds what only
// the runtime knows). The bounds are Kafka's (GroupCoordinatorConfig),
// with two exceptions: group.min.session.timeout.ms and
// offset.metadata.max.bytes, which Kafka takes at any value, must be at
// least 1, since groups reads a zero as Kafka's default.
//
// offsets.commit.timeout.ms is the runtime's alone (coordinator.go): the
// shards answer at once, and the runtime holds each answer until its
// records are replicated, for at most that long.

// setGroups sets a group coordinator key; known is false for any other key.
func (c *Config) setGroups(key, value string) (known bool, err error) {
	ms := func(min int32, dst *time.Duration) error {
		var v int32
		if err := parseInt32(value, min, &v); err != nil {
			return err
		}
		*dst = time.Duration(v) * time.Millisecond
		return nil
	}
	switch key {
	case "group.initial.rebalance.delay.ms":
		return true, ms(0, &c.GroupInitialRebalanceDelay)
	case "group.min.session.timeout.ms":
		return true, ms(1, &c.GroupMinSessionTimeout)
	case "group.max.session.timeout.ms":
		return true, ms(1, &c.GroupMaxSessionTimeout)
	case "group.max.size":
		return true, parseInt32(value, 1, &c.GroupMaxSize)
	case "group.consumer.session.timeout.ms":
		return true, ms(1, &c.GroupConsumerSessionTimeout)
	case "group.consumer.min.session.timeout.ms":
		return true, ms(1, &c.GroupConsumerMinSessionTimeout)
	case "group.consumer.max.session.timeout.ms":
		return true, ms(1, &c.GroupConsumerMaxSessionTimeout)
	case "group.consumer.heartbeat.interval.ms":
		return true, ms(1, &c.GroupConsumerHeartbeatInterval)
	case "group.consumer.min.heartbeat.interval.ms":
		return true, ms(1, &c.GroupConsumerMinHeartbeatInterval)
	case "group.consumer.max.heartbeat.interval.ms":
		return true, ms(1, &c.GroupConsumerMaxHeartbeatInterval)
	case "group.consumer.max.size":
		return true, parseInt32(value, 1, &c.GroupConsumerMaxSize)
	case "group.consumer.assignors":
		c.GroupConsumerAssignors, err = parseAssignors(value)
		return true, err
	case "offsets.retention.minutes":
		var v int32
		err := parseInt32(value, 1, &v)
		c.OffsetsRetention = time.Duration(v) * time.Minute
		return true, err
	case "offsets.retention.check.interval.ms":
		return true, parseInterval(key, value, &c.OffsetsRetentionCheckInterval)
	case "offset.metadata.max.bytes":
		return true, parseInt32(value, 1, &c.OffsetMetadataMaxBytes)
	case "offsets.commit.timeout.ms":
		return true, ms(1, &c.OffsetsCommitTimeout)
	}
	return false, nil
}

// parseAssignors reads group.consumer.assignors: names, comma-separated,
// or the class names of Kafka's two built-in assignors. Whether each is
// one Sluice serves is checked by Validate.
func parseAssignors(s string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, assignorName(part))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no assignor")
	}
	return out, nil
}

// assignorName is the name of a built-in assignor given by Kafka's class
// name (which Kafka before 4.0 required), or s itself.
func assignorName(s string) string {
	switch s {
	case "org.apache.kafka.coordinator.group.assignor.UniformAssignor":
		return assign.Uniform{}.Name()
	case "org.apache.kafka.coordinator.group.assignor.RangeAssignor":
		return assign.Range{}.Name()
	}
	return s
}

// defaultAssignors is Kafka's default group.consumer.assignors.
func defaultAssignors() []string {
	var names []string
	for _, a := range assign.All() {
		names = append(names, a.Name())
	}
	return names
}

// groupsConfig is the shards' configuration as c sets it, but for what
// only the runtime knows (the partition, Rand, the topics).
func (c Config) groupsConfig() groups.Config {
	delay := c.GroupInitialRebalanceDelay
	if delay == 0 {
		delay = -1 // groups' "no delay"; its zero is Kafka's default
	}
	return groups.Config{
		InitialRebalanceDelay:         delay,
		SessionTimeoutMin:             c.GroupMinSessionTimeout,
		SessionTimeoutMax:             c.GroupMaxSessionTimeout,
		GroupMaxSize:                  c.GroupMaxSize,
		OffsetsRetention:              c.OffsetsRetention,
		OffsetsRetentionCheckInterval: c.OffsetsRetentionCheckInterval,
		OffsetMetadataMaxBytes:        c.OffsetMetadataMaxBytes,
		ConsumerSessionTimeout:        c.GroupConsumerSessionTimeout,
		ConsumerSessionTimeoutMin:     c.GroupConsumerMinSessionTimeout,
		ConsumerSessionTimeoutMax:     c.GroupConsumerMaxSessionTimeout,
		ConsumerHeartbeatInterval:     c.GroupConsumerHeartbeatInterval,
		ConsumerHeartbeatIntervalMin:  c.GroupConsumerMinHeartbeatInterval,
		ConsumerHeartbeatIntervalMax:  c.GroupConsumerMaxHeartbeatInterval,
		ConsumerGroupMaxSize:          c.GroupConsumerMaxSize,
		ConsumerAssignors:             slices.Clone(c.GroupConsumerAssignors),
	}
}

// validateGroups checks the group coordinator's settings as the shards
// will take them: a minimum above its maximum, a session timeout or
// heartbeat interval outside its bounds, an assignor Sluice does not
// serve (or named twice) is refused, naming the key.
func (c Config) validateGroups() error {
	return c.groupsConfig().Validate()
}
