package node

import (
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
	want := Config{
		NodeID:                           3,
		Listeners:                        []Listener{{Name: "PLAINTEXT", Host: "0.0.0.0", Port: 19092}},
		AdvertisedListeners:              []Listener{{Name: "PLAINTEXT", Host: "broker3.example", Port: 19092}},
		LogDir:                           "/var/lib/sluice",
		NumPartitions:                    6,
		DefaultReplicationFactor:         1,
		AutoCreateTopics:                 false,
		LogRetention:                     time.Minute, // .ms wins over .hours, as in Kafka
		LogRetentionBytes:                1 << 30,
		LogSegmentBytes:                  512 << 20,
		LogRoll:                          DefaultConfig().LogRoll,
		LogRetentionCheckInterval:        5 * time.Minute,
		LogIndexIntervalBytes:            512,
		LogIndexSizeMaxBytes:             4096,
		LogFlushOffsetCheckpointInterval: 2500 * time.Millisecond,
		MessageMaxBytes:                  2 << 20,
		SocketRequestMaxBytes:            DefaultConfig().SocketRequestMaxBytes,
		ConnectionsMaxIdle:               -1,
		RequestReadTimeout:               5 * time.Second,
	}
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
		{"listeners=SSL://127.0.0.1:9092", "listeners"},
		{"listeners=PLAINTEXT://127.0.0.1:99999", "listeners"},
		{"auto.create.topics.enable=yes", "auto.create.topics.enable"},
		{"log.dirs=a,b", "log.dirs"},
		{"log.segment.bytes=-5", "log.segment.bytes"},
		{"justakey", "justakey"},
		{"connections.max.idle.ms=0", "connections.max.idle.ms"},
		{"connections.max.idle.ms=10m", "connections.max.idle.ms"},
		{"sluice.request.read.timeout.ms=0", "sluice.request.read.timeout.ms"},
		{"sluice.request.read.timeout.ms=", "sluice.request.read.timeout.ms"},
	} {
		_, _, err := ParseProperties(tc.text, DefaultConfig())
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%q: error %v does not name %s", tc.text, err, tc.key)
		}
	}
}

func TestNegativeRetentionMeansForever(t *testing.T) {
	cfg, _, err := ParseProperties("log.retention.ms=-1", DefaultConfig())
	if err != nil || cfg.LogRetention >= 0 {
		t.Fatalf("retention %v, err %v", cfg.LogRetention, err)
	}
}

func TestConnectionTimeoutDefaults(t *testing.T) {
	cfg := DefaultConfig()
	require.Equal(t, 10*time.Minute, cfg.ConnectionsMaxIdle, "Kafka's connections.max.idle.ms")
	require.Equal(t, 30*time.Second, cfg.RequestReadTimeout)
	cfg, _, err := ParseProperties("connections.max.idle.ms=-5\nsluice.request.read.timeout.ms=-1", cfg)
	require.NoError(t, err)
	require.Equal(t, time.Duration(-1), cfg.ConnectionsMaxIdle, "any negative is none, as in Kafka")
	require.Equal(t, time.Duration(-1), cfg.RequestReadTimeout)
}
