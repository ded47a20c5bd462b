package node

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Config is a broker's configuration. Its fields carry Kafka's names in their
// comments; ParseProperties reads them from a Kafka-style properties file.
// The zero value is not valid: start from DefaultConfig.
type Config struct {
	// NodeID is node.id.
	NodeID int32
	// Listeners is listeners: "PLAINTEXT://host:port", comma-separated.
	// Only PLAINTEXT is served for now.
	Listeners []Listener
	// AdvertisedListeners is advertised.listeners; empty means Listeners.
	AdvertisedListeners []Listener
	// LogDir is log.dirs (one directory; log.dir is accepted too). The node's
	// env.FS is rooted there; the broker itself only sees relative paths.
	LogDir string

	// NumPartitions is num.partitions, used by auto-creation and by
	// CreateTopics requests that leave the count to the broker (-1).
	NumPartitions int32
	// DefaultReplicationFactor is default.replication.factor.
	DefaultReplicationFactor int16
	// AutoCreateTopics is auto.create.topics.enable.
	AutoCreateTopics bool

	// LogRetentionMs is log.retention.ms (or .minutes, .hours) in
	// milliseconds, as Kafka keeps it: Unlimited (-1) keeps data forever,
	// any other value is at least 1.
	LogRetentionMs int64
	// LogRetentionBytes is log.retention.bytes: Unlimited (-1), or at
	// least 0.
	LogRetentionBytes int64
	// LogSegmentBytes is log.segment.bytes.
	LogSegmentBytes int64
	// LogRollMs is log.roll.ms (or .hours) in milliseconds, at least 1.
	LogRollMs int64
	// LogRetentionCheckInterval is log.retention.check.interval.ms: how
	// often old segments are deleted and idle producer ids expired.
	LogRetentionCheckInterval time.Duration
	// LogIndexIntervalBytes is log.index.interval.bytes, the default of
	// index.interval.bytes: how many bytes of batches lie between two
	// offset index entries.
	LogIndexIntervalBytes int32
	// LogIndexSizeMaxBytes is log.index.size.max.bytes, the default of
	// segment.index.bytes: a segment rolls when its index is full.
	LogIndexSizeMaxBytes int32
	// LogFlushOffsetCheckpointInterval is
	// log.flush.offset.checkpoint.interval.ms: how long a partition's
	// recovery point may lag in its checkpoint file (recovery scans what
	// lies past it).
	LogFlushOffsetCheckpointInterval time.Duration
	// MessageMaxBytes is message.max.bytes: the largest record batch.
	MessageMaxBytes int32
	// SocketRequestMaxBytes is socket.request.max.bytes: the largest request
	// frame; a larger one closes the connection.
	SocketRequestMaxBytes int32
	// ConnectionsMaxIdle is connections.max.idle.ms: a connection that has
	// had no bytes in or out for this long, and has no request in flight,
	// is closed. Negative (-1) never closes one.
	ConnectionsMaxIdle time.Duration
	// RequestReadTimeout is sluice.request.read.timeout.ms, a key of
	// Sluice's own (Kafka has none): a connection whose request frame has
	// not arrived whole this long after its first bytes is closed, so a
	// client that stops inside a frame does not hold its buffer until the
	// idle timeout. The default is the Kafka clients' request.timeout.ms:
	// by then such a client has given up on the request itself. Negative
	// (-1) waits forever.
	RequestReadTimeout time.Duration
}

// Unlimited is Kafka's -1 for the keys where it means no limit
// (log.retention.ms, log.retention.bytes and their topic keys retention.ms
// and retention.bytes). Any other negative value of those keys is refused.
const Unlimited = -1

// Listener is one listener: a security protocol and an address.
type Listener struct {
	Name string // "PLAINTEXT"
	Host string
	Port int32
}

// Addr is host:port.
func (l Listener) Addr() string { return l.Host + ":" + strconv.Itoa(int(l.Port)) }

func (l Listener) String() string { return l.Name + "://" + l.Addr() }

// DefaultConfig is Kafka's defaults for the keys Sluice reads, with one
// node listening on 127.0.0.1:9092 and data in ./data.
func DefaultConfig() Config {
	return Config{
		NodeID:                           1,
		Listeners:                        []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092}},
		LogDir:                           "data",
		NumPartitions:                    1,
		DefaultReplicationFactor:         1,
		AutoCreateTopics:                 true,
		LogRetentionMs:                   7 * 24 * 3600 * 1000,
		LogRetentionBytes:                Unlimited,
		LogSegmentBytes:                  1 << 30,
		LogRollMs:                        7 * 24 * 3600 * 1000,
		LogRetentionCheckInterval:        5 * time.Minute,
		LogIndexIntervalBytes:            4096,
		LogIndexSizeMaxBytes:             10 << 20,
		LogFlushOffsetCheckpointInterval: time.Minute,
		MessageMaxBytes:                  1048588,
		SocketRequestMaxBytes:            100 << 20,
		ConnectionsMaxIdle:               10 * time.Minute,
		RequestReadTimeout:               30 * time.Second,
	}
}

// BrokersMax is the number of brokers a cluster with this configuration can
// ever have. Until the metadata quorum exists a cluster is this one broker
// (its metadata journal is local), so it is 1; once a static quorum names
// its voters, it will be their number. Every start-up check of a
// replication factor compares with this, and only this.
func (c Config) BrokersMax() int { return 1 }

// Validate checks what no single key can: a configuration that could never
// work is refused at start rather than failing every request that uses it.
// Each key's own value was checked when it was read (ApplyProperties).
func (c Config) Validate() error {
	if len(c.Listeners) == 0 {
		return fmt.Errorf("config listeners: no listener configured")
	}
	if n := c.BrokersMax(); int(c.DefaultReplicationFactor) > n {
		return fmt.Errorf("config default.replication.factor=%d: a cluster with this configuration has at most %d broker(s) "+
			"(until the metadata quorum exists, a cluster is this one broker), so no topic could be created with the default "+
			"replication factor; set default.replication.factor=%d", c.DefaultReplicationFactor, n, n)
	}
	return nil
}

// Advertised returns the listeners clients are told to connect to.
func (c Config) Advertised() []Listener {
	if len(c.AdvertisedListeners) > 0 {
		return c.AdvertisedListeners
	}
	return c.Listeners
}

// ParseProperties reads a Kafka-style properties file over base: "key=value"
// or "key: value" lines, '#' and '!' comments, and trailing-backslash
// continuations. It returns the keys it does not know (Kafka warns about
// those and goes on) and an error naming the first bad key or value.
func ParseProperties(text string, base Config) (Config, []string, error) {
	props, err := splitProperties(text)
	if err != nil {
		return base, nil, err
	}
	return ApplyProperties(props, base)
}

// ApplyProperties sets each key of props on base, in sorted key order so that
// errors are reported deterministically.
func ApplyProperties(props map[string]string, base Config) (Config, []string, error) {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	cfg := base
	var unknown []string
	// Kafka lets the finer unit win: log.retention.ms over .minutes over .hours.
	sort.SliceStable(keys, func(i, j int) bool { return unitRank(keys[i]) < unitRank(keys[j]) })
	for _, k := range keys {
		known, err := cfg.set(k, props[k])
		if err != nil {
			return base, nil, fmt.Errorf("config %s=%q: %w", k, props[k], err)
		}
		if !known {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	return cfg, unknown, nil
}

func unitRank(key string) int {
	switch {
	case strings.HasSuffix(key, ".hours"):
		return 0
	case strings.HasSuffix(key, ".minutes"):
		return 1
	}
	return 2
}

func (c *Config) set(key, value string) (known bool, err error) {
	switch key {
	case "node.id", "broker.id":
		return true, parseInt32(value, 0, &c.NodeID)
	case "listeners":
		c.Listeners, err = parseListeners(value)
		return true, err
	case "advertised.listeners":
		c.AdvertisedListeners, err = parseListeners(value)
		return true, err
	case "log.dirs", "log.dir":
		if strings.Contains(value, ",") {
			return true, fmt.Errorf("only one log directory is supported")
		}
		if value == "" {
			return true, fmt.Errorf("empty log directory")
		}
		c.LogDir = value
		return true, nil
	case "num.partitions":
		err := parseInt32(value, 1, &c.NumPartitions)
		if err == nil && c.NumPartitions > maxPartitionsPerTopic {
			err = fmt.Errorf("above the limit of %d partitions per topic", maxPartitionsPerTopic)
		}
		return true, err
	case "default.replication.factor":
		var v int32
		err := parseInt32(value, 1, &v)
		c.DefaultReplicationFactor = int16(v)
		if err == nil && v > 32767 {
			err = fmt.Errorf("above 32767")
		}
		return true, err
	case "auto.create.topics.enable":
		return true, parseBool(value, &c.AutoCreateTopics)
	case "log.retention.ms", "log.retention.minutes", "log.retention.hours":
		return true, parseMs(key, value, true, &c.LogRetentionMs)
	case "log.retention.bytes":
		return true, parseLimit(value, &c.LogRetentionBytes)
	case "log.segment.bytes":
		var v int32
		err := parseInt32(value, segmentBytesMin, &v)
		c.LogSegmentBytes = int64(v)
		return true, err
	case "log.roll.ms", "log.roll.hours":
		return true, parseMs(key, value, false, &c.LogRollMs)
	case "log.retention.check.interval.ms":
		return true, parseInterval(key, value, &c.LogRetentionCheckInterval)
	case "log.index.interval.bytes":
		return true, parseInt32(value, 0, &c.LogIndexIntervalBytes)
	case "log.index.size.max.bytes":
		return true, parseInt32(value, segmentIndexBytesMin, &c.LogIndexSizeMaxBytes)
	case "log.flush.offset.checkpoint.interval.ms":
		return true, parseInterval(key, value, &c.LogFlushOffsetCheckpointInterval)
	case "message.max.bytes":
		return true, parseInt32(value, 0, &c.MessageMaxBytes)
	case "socket.request.max.bytes":
		return true, parseInt32(value, 1, &c.SocketRequestMaxBytes)
	case "connections.max.idle.ms":
		return true, parseTimeout(key, value, &c.ConnectionsMaxIdle)
	case "sluice.request.read.timeout.ms":
		return true, parseTimeout(key, value, &c.RequestReadTimeout)
	}
	return false, nil
}

// parseMs reads a time key as Kafka does: a count of the unit its name ends
// in (.ms, .minutes, .hours; Kafka reads .ms as a LONG and the others as an
// INT), kept in milliseconds. It must be at least 1; with unlimited, -1 is
// accepted too and kept as Unlimited. Kafka maps every negative
// log.retention.* to -1; Sluice refuses all but -1, since -5 is more likely
// a typo than a wish to keep data forever.
func parseMs(key, s string, unlimited bool, dst *int64) error {
	bits, unitMs := 32, int64(1)
	switch {
	case strings.HasSuffix(key, ".hours"):
		unitMs = 3600 * 1000
	case strings.HasSuffix(key, ".minutes"):
		unitMs = 60 * 1000
	default:
		bits = 64
	}
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, bits)
	if err != nil {
		return fmt.Errorf("not a %d-bit integer", bits)
	}
	switch {
	case unlimited && v == Unlimited:
		*dst = Unlimited
		return nil
	case v < 1 && unlimited:
		return fmt.Errorf("must be -1 (unlimited) or at least 1")
	case v < 1:
		return fmt.Errorf("must be at least 1")
	case v > math.MaxInt64/unitMs:
		return fmt.Errorf("too large")
	}
	*dst = v * unitMs
	return nil
}

// parseLimit reads a byte limit: Unlimited (-1), or at least 0. Kafka takes
// any negative log.retention.bytes for unlimited; Sluice refuses all but -1,
// as parseMs does.
func parseLimit(s string, dst *int64) error {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	switch {
	case err != nil:
		return fmt.Errorf("not an integer")
	case v < Unlimited:
		return fmt.Errorf("must be -1 (unlimited) or at least 0")
	}
	*dst = v
	return nil
}

func parseInt32(s string, min int32, dst *int32) error {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
	if err != nil {
		return fmt.Errorf("not a 32-bit integer")
	}
	if int32(v) < min {
		return fmt.Errorf("below the minimum %d", min)
	}
	*dst = int32(v)
	return nil
}

func parseBool(s string, dst *bool) error {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		return fmt.Errorf("not true or false")
	}
	return nil
}

// parseInterval reads a positive count of milliseconds as a duration,
// with parseMs's rules.
func parseInterval(key, s string, dst *time.Duration) error {
	var ms int64
	if err := parseMs(key, s, false, &ms); err != nil {
		return err
	}
	if ms > int64(math.MaxInt64/time.Millisecond) {
		return fmt.Errorf("too large")
	}
	*dst = time.Duration(ms) * time.Millisecond
	return nil
}

// parseTimeout reads a timeout in milliseconds: positive, or -1 for none.
// Kafka takes 0 for connections.max.idle.ms and then closes every
// connection the moment it is quiet; Sluice refuses it.
func parseTimeout(key, s string, dst *time.Duration) error {
	if v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil && v == Unlimited {
		*dst = -1
		return nil
	}
	if err := parseInterval(key, s, dst); err != nil {
		return fmt.Errorf("must be positive, or -1 for no timeout")
	}
	return nil
}

// parseListeners reads "NAME://host:port,NAME://host:port".
func parseListeners(s string) ([]Listener, error) {
	var out []Listener
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, addr, ok := strings.Cut(part, "://")
		if !ok {
			return nil, fmt.Errorf("listener %q is not NAME://host:port", part)
		}
		i := strings.LastIndexByte(addr, ':')
		if i < 0 {
			return nil, fmt.Errorf("listener %q has no port", part)
		}
		host := strings.TrimSuffix(strings.TrimPrefix(addr[:i], "["), "]")
		port, err := strconv.ParseUint(addr[i+1:], 10, 16)
		if err != nil {
			return nil, fmt.Errorf("listener %q has a bad port", part)
		}
		if name != "PLAINTEXT" {
			return nil, fmt.Errorf("listener %q: only PLAINTEXT is supported", part)
		}
		out = append(out, Listener{Name: name, Host: host, Port: int32(port)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no listener")
	}
	return out, nil
}

// splitProperties parses the properties syntax into key/value pairs.
func splitProperties(text string) (map[string]string, error) {
	props := map[string]string{}
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		lineNo := i + 1
		line := strings.TrimLeft(lines[i], " \t\f")
		for strings.HasSuffix(line, "\\") && !strings.HasSuffix(line, "\\\\") && i+1 < len(lines) {
			i++
			line = line[:len(line)-1] + strings.TrimLeft(lines[i], " \t\f")
		}
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		sep := strings.IndexAny(line, "=: \t")
		if sep < 0 {
			return nil, fmt.Errorf("properties line %d: %q has no value", lineNo, line)
		}
		key := line[:sep]
		value := strings.TrimLeft(line[sep:], " \t")
		if value != "" && (value[0] == '=' || value[0] == ':') {
			value = value[1:]
		}
		props[key] = strings.TrimSpace(value)
	}
	return props, nil
}
