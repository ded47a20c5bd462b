package node

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParsePropertiesReadsKafkaKeys(t *testing.T) {
	text := `
# a comment
! another
node.id=3
listeners=PLAINTEXT://0.0.0.0:19092
advertised.listeners: PLAINTEXT://broker3.example:19092
log.dirs /var/lib/sluice
num.partitions=6
default.replication.factor=1
auto.create.topics.enable=false
log.retention.hours=48
log.retention.ms=60000
log.retention.bytes=1073741824
log.segment.bytes=\
  536870912
message.max.bytes=2097152
log.index.interval.bytes=512
log.index.size.max.bytes=4096
log.flush.offset.checkpoint.interval.ms=2500
connections.max.idle.ms=-1
sluice.request.read.timeout.ms=5000
some.unknown.key=1
`
	cfg, unknown, err := ParseProperties(text, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.NodeID = 3
	want.Listeners = []Listener{{Name: "PLAINTEXT", Host: "0.0.0.0", Port: 19092}}
	want.AdvertisedListeners = []Listener{{Name: "PLAINTEXT", Host: "broker3.example", Port: 19092}}
	want.LogDir = "/var/lib/sluice"
	want.NumPartitions = 6
	want.AutoCreateTopics = false
	want.LogRetentionMs = 60000 // .ms wins over .hours, as in Kafka
	want.LogRetentionBytes = 1 << 30
	want.LogSegmentBytes = 512 << 20
	want.LogIndexIntervalBytes = 512
	want.LogIndexSizeMaxBytes = 4096
	want.LogFlushOffsetCheckpointInterval = 2500 * time.Millisecond
	want.MessageMaxBytes = 2 << 20
	want.ConnectionsMaxIdle = -1
	want.RequestReadTimeout = 5 * time.Second
	require.Equal(t, want, cfg)
	if len(unknown) != 1 || unknown[0] != "some.unknown.key" {
		t.Fatalf("unknown keys %v", unknown)
	}
	if cfg.Advertised()[0].Addr() != "broker3.example:19092" {
		t.Fatalf("advertised %v", cfg.Advertised())
	}
}

func TestParsePropertiesNamesTheBadKey(t *testing.T) {
	for _, tc := range []struct{ text, key string }{
		{"node.id=abc", "node.id"},
		{"num.partitions=0", "num.partitions"},
		{"listeners=127.0.0.1:9092", "listeners"},
		{"listeners=PLAINTEXT://127.0.0.1:99999", "listeners"},
		{"auto.create.topics.enable=yes", "auto.create.topics.enable"},
		{"log.dirs=a,b", "log.dirs"},
		{"log.segment.bytes=-5", "log.segment.bytes"},
		{"justakey", "justakey"},
		{"connections.max.idle.ms=0", "connections.max.idle.ms"},
		{"connections.max.idle.ms=10m", "connections.max.idle.ms"},
		{"sluice.request.read.timeout.ms=0", "sluice.request.read.timeout.ms"},
		{"sluice.request.read.timeout.ms=", "sluice.request.read.timeout.ms"},
		{"sluice.outbound.local.address=localhost", "sluice.outbound.local.address"},
		{"sluice.outbound.local.address=0.0.0.0", "sluice.outbound.local.address"},
	} {
		_, _, err := ParseProperties(tc.text, DefaultConfig())
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%q: error %v does not name %s", tc.text, err, tc.key)
		}
	}
}

// -1 is Kafka's "unlimited" for log.retention.ms, .minutes, .hours and
// log.retention.bytes, and reads back as -1, the finer unit winning.
func TestMinusOneRetentionReadsBackAsUnlimited(t *testing.T) {
	for _, text := range []string{
		"log.retention.ms=-1",
		"log.retention.minutes=-1",
		"log.retention.hours=-1",
		"log.retention.hours=5\nlog.retention.ms=-1",
		"log.retention.ms=-1\nlog.retention.bytes=-1",
	} {
		cfg, _, err := ParseProperties(text, DefaultConfig())
		require.NoError(t, err, text)
		entries := map[string]string{}
		for _, e := range cfg.brokerConfigEntries() {
			entries[e.name] = e.value
		}
		require.Equal(t, "-1", entries["log.retention.ms"], text)
		require.Equal(t, "-1", entries["log.retention.bytes"], text)
	}
	cfg, _, err := ParseProperties("log.retention.ms=-1\nlog.retention.hours=5", DefaultConfig())
	require.NoError(t, err)
	require.Equal(t, "-1", entryValue(cfg, "log.retention.ms"), ".ms wins over .hours whatever the order")
	cfg, _, err = ParseProperties("log.retention.minutes=2", DefaultConfig())
	require.NoError(t, err)
	require.Equal(t, "120000", entryValue(cfg, "log.retention.ms"))
}

func entryValue(cfg Config, name string) string {
	for _, e := range cfg.brokerConfigEntries() {
		if e.name == name {
			return e.value
		}
	}
	return ""
}

// Values Kafka's validators refuse, and negatives other than -1 where -1
// means unlimited, are refused with an error naming the key and the value.
func TestParsePropertiesRefusesValuesKafkaRefuses(t *testing.T) {
	for _, text := range []string{
		"log.retention.ms=-5",
		"log.retention.ms=-2",
		"log.retention.ms=0", // Kafka: "must be unlimited (-1) or, greater than or equal to 1"
		"log.retention.minutes=-5",
		"log.retention.minutes=0",
		"log.retention.hours=-3",
		"log.retention.hours=0",
		"log.retention.hours=3000000000", // an INT in Kafka
		"log.retention.bytes=-2",
		"log.roll.ms=-1",
		"log.roll.ms=0",
		"log.roll.hours=0",
		"log.roll.hours=-1",
		"log.retention.check.interval.ms=0",
		"log.segment.bytes=20",         // below what a segment needs to hold a batch header
		"log.segment.bytes=3000000000", // an INT in Kafka
		"num.partitions=20000",         // above what one topic may have
	} {
		_, _, err := ParseProperties(text, DefaultConfig())
		require.Error(t, err, text)
		key, value, _ := strings.Cut(text, "=")
		require.Contains(t, err.Error(), key, text)
		require.Contains(t, err.Error(), value, text)
	}
}

func TestConnectionTimeoutDefaults(t *testing.T) {
	cfg := DefaultConfig()
	require.Equal(t, 10*time.Minute, cfg.ConnectionsMaxIdle, "Kafka's connections.max.idle.ms")
	require.Equal(t, 30*time.Second, cfg.RequestReadTimeout)
	cfg, _, err := ParseProperties("connections.max.idle.ms=-1\nsluice.request.read.timeout.ms=-1", cfg)
	require.NoError(t, err)
	require.Equal(t, time.Duration(-1), cfg.ConnectionsMaxIdle, "-1 is none, as in Kafka")
	require.Equal(t, time.Duration(-1), cfg.RequestReadTimeout)
	for _, text := range []string{"connections.max.idle.ms=-5", "connections.max.idle.ms=0", "sluice.request.read.timeout.ms=0"} {
		_, _, err := ParseProperties(text, DefaultConfig())
		require.ErrorContains(t, err, "must be positive, or -1 for no timeout", text)
	}
}

// sluice.outbound.local.address binds the node's own connections to an
// address of the host; not set, the kernel picks.
func TestOutboundLocalAddress(t *testing.T) {
	require.False(t, DefaultConfig().OutboundLocalAddress.IsValid())
	cfg, _, err := ParseProperties("sluice.outbound.local.address=127.0.0.11", DefaultConfig())
	require.NoError(t, err)
	require.Equal(t, netip.MustParseAddr("127.0.0.11"), cfg.OutboundLocalAddress)
	entries := map[string]string{}
	for _, e := range cfg.brokerConfigEntries() {
		entries[e.name] = e.value
	}
	require.Equal(t, "127.0.0.11", entries["sluice.outbound.local.address"])
}

// The KIP-848 session timeout is Kafka's pair of keys, and a session
// below the configured minimum is refused as Kafka's
// GroupCoordinatorConfig refuses it.
func TestConsumerGroupSessionTimeoutKeys(t *testing.T) {
	cfg, _, err := ParseProperties("group.consumer.session.timeout.ms=8000\ngroup.consumer.min.session.timeout.ms=6000\n", DefaultConfig())
	require.NoError(t, err)
	require.Equal(t, 8*time.Second, cfg.GroupConsumerSessionTimeout)
	require.Equal(t, 6*time.Second, cfg.GroupConsumerMinSessionTimeout)
	require.NoError(t, cfg.Validate())
	cfg, _, err = ParseProperties("group.consumer.session.timeout.ms=8000\n", DefaultConfig())
	require.NoError(t, err)
	require.Error(t, cfg.Validate(), "8 s is below the default minimum of 45 s")
}
