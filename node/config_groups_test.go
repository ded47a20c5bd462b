package node

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// everyGroupKey sets each group coordinator key to a value other than
// Kafka's default, each one a valid configuration with the others.
const everyGroupKey = `
group.initial.rebalance.delay.ms=250
group.min.session.timeout.ms=2000
group.max.session.timeout.ms=90000
group.max.size=7
group.consumer.session.timeout.ms=20000
group.consumer.min.session.timeout.ms=10000
group.consumer.max.session.timeout.ms=30000
group.consumer.heartbeat.interval.ms=3000
group.consumer.min.heartbeat.interval.ms=1000
group.consumer.max.heartbeat.interval.ms=4000
group.consumer.max.size=9
group.consumer.assignors=range,org.apache.kafka.coordinator.group.assignor.UniformAssignor
offsets.retention.minutes=60
offsets.retention.check.interval.ms=30000
offset.metadata.max.bytes=100
`

func TestGroupKeysAreReadAsKafkaNamesThem(t *testing.T) {
	cfg := parse(t, everyGroupKey)
	want := DefaultConfig()
	want.GroupInitialRebalanceDelay = 250 * time.Millisecond
	want.GroupMinSessionTimeout, want.GroupMaxSessionTimeout = 2*time.Second, 90*time.Second
	want.GroupMaxSize = 7
	want.GroupConsumerSessionTimeout = 20 * time.Second
	want.GroupConsumerMinSessionTimeout, want.GroupConsumerMaxSessionTimeout = 10*time.Second, 30*time.Second
	want.GroupConsumerHeartbeatInterval = 3 * time.Second
	want.GroupConsumerMinHeartbeatInterval, want.GroupConsumerMaxHeartbeatInterval = time.Second, 4*time.Second
	want.GroupConsumerMaxSize = 9
	want.GroupConsumerAssignors = []string{"range", "uniform"} // Kafka's class name, read as the name
	want.OffsetsRetention, want.OffsetsRetentionCheckInterval = time.Hour, 30*time.Second
	want.OffsetMetadataMaxBytes = 100
	require.Equal(t, want, cfg)
	require.NoError(t, cfg.Validate())
}

// The shards get what DefaultConfig holds as Kafka's defaults, and a
// Config whose group fields are zero means the same.
func TestGroupDefaultsAreKafkas(t *testing.T) {
	var zero Config
	zero.GroupInitialRebalanceDelay = DefaultConfig().GroupInitialRebalanceDelay // its zero is "no delay"
	entriesOf := func(c Config) map[string]configEntry {
		out := map[string]configEntry{}
		for _, e := range c.brokerConfigEntries() {
			out[e.name] = e
		}
		return out
	}
	defaults, zeros := entriesOf(DefaultConfig()), entriesOf(zero)
	for name, want := range map[string]string{
		"group.initial.rebalance.delay.ms":         "3000",
		"group.min.session.timeout.ms":             "6000",
		"group.max.session.timeout.ms":             "1800000",
		"group.max.size":                           "2147483647",
		"group.consumer.session.timeout.ms":        "45000",
		"group.consumer.min.session.timeout.ms":    "45000",
		"group.consumer.max.session.timeout.ms":    "60000",
		"group.consumer.heartbeat.interval.ms":     "5000",
		"group.consumer.min.heartbeat.interval.ms": "5000",
		"group.consumer.max.heartbeat.interval.ms": "15000",
		"group.consumer.max.size":                  "2147483647",
		"group.consumer.assignors":                 "uniform,range",
		"offsets.retention.minutes":                "10080",
		"offsets.retention.check.interval.ms":      "600000",
		"offset.metadata.max.bytes":                "4096",
	} {
		for _, got := range []configEntry{defaults[name], zeros[name]} {
			require.Equal(t, want, got.value, name)
			require.Equal(t, kmsg.ConfigSourceDefaultConfig, got.source, name)
			require.NotEmpty(t, got.doc, name)
		}
	}
}

// Every setting of groups.Config but those the runtime supplies is a
// broker key: a new one left unwired fails here.
func TestEveryGroupsSettingIsABrokerKey(t *testing.T) {
	runtime := map[string]string{
		"Partition":          "the shard's partition",
		"TopicExists":        "the metadata image",
		"Topics":             "the metadata image",
		"Rand":               "the node's env.Rand",
		"SnapshotMinRecords": "Sluice's own tuning, no Kafka key",
	}
	defaults := reflect.ValueOf(DefaultConfig().groupsConfig())
	set := reflect.ValueOf(parse(t, everyGroupKey).groupsConfig())
	typ := defaults.Type()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		if _, ok := runtime[name]; ok {
			continue
		}
		require.NotEqual(t, defaults.Field(i).Interface(), set.Field(i).Interface(),
			"groups.Config.%s does not follow any broker key", name)
	}
}

func TestGroupKeysRefuseBadValuesNamingTheKey(t *testing.T) {
	for _, text := range []string{
		"group.initial.rebalance.delay.ms=-1",
		"group.min.session.timeout.ms=0",
		"group.max.session.timeout.ms=abc",
		"group.max.size=0",
		"group.consumer.max.session.timeout.ms=0",
		"group.consumer.heartbeat.interval.ms=0",
		"group.consumer.min.heartbeat.interval.ms=-5",
		"group.consumer.max.heartbeat.interval.ms=4294967296",
		"group.consumer.max.size=0",
		"group.consumer.assignors= , ",
		"offsets.retention.minutes=0",
		"offsets.retention.check.interval.ms=0",
		"offset.metadata.max.bytes=0",
	} {
		_, _, err := ParseProperties(text, DefaultConfig())
		key, _, _ := strings.Cut(text, "=")
		require.ErrorContains(t, err, key, text)
	}
}

// A configuration that cannot work is refused at start, as Kafka's
// GroupCoordinatorConfig refuses it, with the key named.
func TestValidateRefusesGroupSettingsThatCannotWork(t *testing.T) {
	for _, tc := range []struct{ text, key string }{
		{"group.min.session.timeout.ms=60000\ngroup.max.session.timeout.ms=30000", "group.max.session.timeout.ms"},
		{"group.consumer.session.timeout.ms=70000", "group.consumer.session.timeout.ms"},
		{"group.consumer.session.timeout.ms=10000", "group.consumer.session.timeout.ms"},
		{"group.consumer.max.session.timeout.ms=40000", "group.consumer.max.session.timeout.ms"},
		{"group.consumer.heartbeat.interval.ms=20000", "group.consumer.heartbeat.interval.ms"},
		{"group.consumer.heartbeat.interval.ms=1000", "group.consumer.heartbeat.interval.ms"},
		{"group.consumer.min.heartbeat.interval.ms=20000", "group.consumer.max.heartbeat.interval.ms"},
		{"group.consumer.session.timeout.ms=5000\ngroup.consumer.min.session.timeout.ms=1000\ngroup.consumer.min.heartbeat.interval.ms=1000",
			"below group.consumer.session.timeout.ms"},
		{"group.consumer.assignors=uniform,sticky", `"sticky"`},
		{"group.consumer.assignors=range,range", `"range"`},
		{"group.consumer.assignors=org.apache.kafka.coordinator.group.assignor.CustomAssignor", "group.consumer.assignors"},
		{"offset.metadata.max.bytes=40000", "offset.metadata.max.bytes"},
	} {
		err := parse(t, tc.text).Validate()
		require.ErrorContains(t, err, tc.key, tc.text)
	}
}

// DescribeConfigs shows a key the file sets as STATIC_BROKER_CONFIG, with
// Kafka's default as its synonym.
func TestBrokerConfigEntriesShowGroupKeys(t *testing.T) {
	got := map[string]configEntry{}
	for _, e := range parse(t, everyGroupKey).brokerConfigEntries() {
		got[e.name] = e
	}
	for name, want := range map[string]struct {
		value, kafkaDefault string
		kind                configKind
	}{
		"group.min.session.timeout.ms":          {"2000", "6000", kindInt},
		"group.max.session.timeout.ms":          {"90000", "1800000", kindInt},
		"group.max.size":                        {"7", "2147483647", kindInt},
		"group.consumer.max.session.timeout.ms": {"30000", "60000", kindInt},
		"group.consumer.heartbeat.interval.ms":  {"3000", "5000", kindInt},
		"group.consumer.max.size":               {"9", "2147483647", kindInt},
		"group.consumer.assignors":              {"range,uniform", "uniform,range", kindList},
		"offsets.retention.minutes":             {"60", "10080", kindInt},
		"offsets.retention.check.interval.ms":   {"30000", "600000", kindLong},
		"offset.metadata.max.bytes":             {"100", "4096", kindInt},
	} {
		e := got[name]
		require.Equal(t, want.value, e.value, name)
		require.Equal(t, want.kind, e.kind, name)
		require.Equal(t, kmsg.ConfigSourceStaticBrokerConfig, e.source, name)
		require.True(t, e.readOnly, name)
		require.Equal(t, []configSynonym{
			{name, want.value, kmsg.ConfigSourceStaticBrokerConfig},
			{name, want.kafkaDefault, kmsg.ConfigSourceDefaultConfig},
		}, e.synonyms, name)
	}
}
