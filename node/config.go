package node

import (
	"fmt"
	"math"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/groups"
)

// Config is a broker's configuration. Its fields carry Kafka's names in their
// comments; ParseProperties reads them from a Kafka-style properties file.
// The zero value is not valid: start from DefaultConfig.
type Config struct {
	// NodeID is node.id (broker.id is read too). Kafka has no default and
	// requires it once process.roles is set; Sluice keeps the default of 1
	// of its single-node mode for every mode. A controller of a cluster left
	// at 1 by mistake is refused where voter 1's port is not its controller
	// listener's; a broker-only node left at 1 is not caught here.
	NodeID int32
	// Listeners is listeners: "NAME://host:port", comma-separated, each name
	// once, each port once (port 0, an ephemeral port, excepted). A name is
	// kept upper-cased, as Kafka normalises it, and maps to a security
	// protocol through ListenerSecurityProtocolMap; only PLAINTEXT is
	// served. An empty host binds every address.
	Listeners []Listener
	// AdvertisedListeners is advertised.listeners: the addresses the node
	// tells others to connect to, by listener name. Empty means Listeners.
	// See Advertised and AdvertisedControllerListener.
	AdvertisedListeners []Listener
	// LogDir is log.dirs (one directory; log.dir is accepted too). The node's
	// env.FS is rooted there; the broker itself only sees relative paths.
	LogDir string

	// The keys of a KRaft cluster (config_kraft.go has their rules and the
	// helpers that read them: Roles, Voters, ControllerListener,
	// BrokerListeners, BrokersMax).

	// ProcessRoles is process.roles. Its zero value, the key not set (or
	// set empty), is Sluice's single-node mode: the node is broker and
	// controller of a metadata quorum of one voter, itself, reached by no
	// network, so it needs neither voters nor a CONTROLLER listener. Roles
	// reports the roles in force in either case.
	ProcessRoles Roles
	// ControllerQuorumVoters is controller.quorum.voters, "id@host:port,...":
	// a static quorum. Each id once, each address once.
	ControllerQuorumVoters []Voter
	// ControllerQuorumBootstrapServers is controller.quorum.bootstrap.servers,
	// "host:port,..." (KIP-853): the controllers a node asks for the voters
	// of a dynamic quorum. Kept as written (validated); with
	// ControllerQuorumVoters also set, the static voters are the quorum, as
	// in Kafka. A node with process.roles set needs one of the two.
	ControllerQuorumBootstrapServers []string
	// ListenerSecurityProtocolMap is listener.security.protocol.map,
	// "NAME:PROTOCOL,...". Nil means the key is not set: Kafka's default,
	// each security protocol's own name mapped to it, to which Kafka (and
	// Sluice) adds NAME:PLAINTEXT for each controller listener name when
	// process.roles is set and no SSL or SASL listener is in use. A map that
	// is set must name the controller listeners itself, as in Kafka. See
	// SecurityProtocol.
	ListenerSecurityProtocolMap []ListenerProtocol
	// ControllerListenerNames is controller.listener.names: the names of
	// the listeners that serve the metadata quorum. A node with the
	// controller role listens on each of them; a broker reaches the
	// controllers with the first (ControllerListenerName), and must not
	// listen on any. Required when process.roles is set; refused in
	// single-node mode.
	ControllerListenerNames []string
	// InterBrokerListenerName is inter.broker.listener.name: the advertised
	// listener other brokers use to reach this one (replication). It must be
	// one of the broker's advertised listeners.
	InterBrokerListenerName string
	// MetadataLogDir is metadata.log.dir; empty means LogDir, as in Kafka.
	// The node's env.FS is rooted at log.dirs, so for now any other
	// directory is refused.
	MetadataLogDir string
	// BrokerSessionTimeout is broker.session.timeout.ms: how long the
	// controller keeps a broker's lease without a heartbeat before fencing
	// it. Sluice's default is 2 s (Kafka's 9 s), with heartbeats every
	// 400 ms (Kafka's 2 s): a dead leader's partitions move once its
	// session runs out, and a new controller first gives every broker a
	// whole session (the brokers' leases rely on it), so the session
	// bounds failover. Heartbeats are answered from the controller's
	// memory; five a second per broker cost little.
	BrokerSessionTimeout time.Duration
	// BrokerHeartbeatInterval is broker.heartbeat.interval.ms: how often a
	// broker heartbeats to the controller. It must be below the session
	// timeout.
	BrokerHeartbeatInterval time.Duration
	// ReplicaLagTimeMax is replica.lag.time.max.ms: how long a follower may
	// go without catching up to its leader's log end before the leader
	// takes it out of the ISR. Kafka's default, 30 s.
	ReplicaLagTimeMax time.Duration
	// ReplicaFetchWaitMax is replica.fetch.wait.max.ms: how long a
	// follower's fetch waits at the leader for data (Kafka's default, 500
	// ms; it must stay below replica.lag.time.max.ms).
	ReplicaFetchWaitMax time.Duration
	// ReplicaFetchBackoff is replica.fetch.backoff.ms: how long a follower
	// waits before it fetches again after an error. Kafka's default, 1 s.
	ReplicaFetchBackoff time.Duration
	// ReplicaSocketTimeout is replica.socket.timeout.ms: how long past
	// replica.fetch.wait.max.ms a follower waits for its leader's answer
	// before it drops the connection and dials again (a leader that
	// crashed sends nothing). Kafka's default, 30 s.
	ReplicaSocketTimeout time.Duration
	// ControllerQuorumElectionTimeout is
	// controller.quorum.election.timeout.ms: how long a voter waits without
	// hearing from a leader before it starts an election. Kafka's default
	// is 1000; Sluice's is 500, so that a controller failover (detection,
	// election, the new leader's first commit) finishes well under a
	// second.
	ControllerQuorumElectionTimeout time.Duration
	// ControllerQuorumFetchTimeout is controller.quorum.fetch.timeout.ms
	// (Kafka's 2000): how long a follower of the quorum goes without a
	// successful fetch from the leader before it suspects it. Accepted and
	// kept; etcd raft's election timeout plays this part.
	ControllerQuorumFetchTimeout time.Duration
	// ControllerQuorumRequestTimeout is
	// controller.quorum.request.timeout.ms: how long a request to another
	// voter, or to the controller, may wait for its answer.
	ControllerQuorumRequestTimeout time.Duration
	// MetadataLogMaxRecordBytesBetweenSnapshots is
	// metadata.log.max.record.bytes.between.snapshots: a node snapshots its
	// metadata image once this many bytes of records follow the last
	// snapshot. At least 1.
	MetadataLogMaxRecordBytesBetweenSnapshots int64
	// MetadataLogMaxSnapshotInterval is metadata.log.max.snapshot.interval.ms:
	// a node snapshots its image once committed records this old are not
	// in a snapshot. Zero turns the time-based snapshot off, as in Kafka.
	MetadataLogMaxSnapshotInterval time.Duration
	// AutoLeaderRebalanceEnable is auto.leader.rebalance.enable: the
	// controller moves leadership back to each partition's preferred
	// replica when too many leaders sit elsewhere.
	AutoLeaderRebalanceEnable bool
	// LeaderImbalanceCheckInterval is leader.imbalance.check.interval.seconds:
	// how often the controller looks at the leaders' balance.
	LeaderImbalanceCheckInterval time.Duration
	// LeaderImbalancePerBrokerPercentage is
	// leader.imbalance.per.broker.percentage: the share of a broker's
	// preferred partitions it may fail to lead before a rebalance, 0 to 100.
	LeaderImbalancePerBrokerPercentage int32
	// BrokerRack is broker.rack; empty means none.
	BrokerRack string
	// ReplicaSelectorClass is replica.selector.class: empty (Kafka's
	// default, null) sends every consumer to the leader; Kafka's
	// RackAwareReplicaSelector (RackAwareSelectorClass) points a consumer
	// that names its rack to a replica in that rack (KIP-392,
	// replica_selector.go).
	ReplicaSelectorClass string

	// NumPartitions is num.partitions, used by auto-creation and by
	// CreateTopics requests that leave the count to the broker (-1).
	NumPartitions int32
	// DefaultReplicationFactor is default.replication.factor.
	DefaultReplicationFactor int16
	// AutoCreateTopics is auto.create.topics.enable.
	AutoCreateTopics bool
	// OffsetsTopicNumPartitions is offsets.topic.num.partitions: the
	// partitions of __consumer_offsets, one group coordinator shard each,
	// fixed when the topic is first created (coordinator.go).
	OffsetsTopicNumPartitions int32
	// OffsetsTopicReplicationFactor is offsets.topic.replication.factor:
	// the replicas of __consumer_offsets. Where Kafka refuses to create the
	// topic with fewer brokers, Sluice caps it once at the brokers the
	// cluster is configured to have (BrokersMax), so a single node works
	// out of the box; a cluster with fewer brokers registered than it
	// waits.
	OffsetsTopicReplicationFactor int16
	// GroupInitialRebalanceDelay is group.initial.rebalance.delay.ms
	// (3 s): how long a new classic group waits for more members before
	// its first generation. 0 is no delay.
	GroupInitialRebalanceDelay time.Duration
	// GroupConsumerSessionTimeout and GroupConsumerMinSessionTimeout are
	// group.consumer.session.timeout.ms and
	// group.consumer.min.session.timeout.ms: how long a KIP-848 member may
	// go without a heartbeat before it is fenced, and the least that may
	// be configured. 0 is Kafka's default (45 s each).
	GroupConsumerSessionTimeout    time.Duration
	GroupConsumerMinSessionTimeout time.Duration
	// The group coordinator's other keys, each the groups.Config field of
	// the same meaning (groups/config.go says what it does); DefaultConfig
	// holds Kafka's defaults, and 0 (or nil) means the default too.
	// config_groups.go reads and checks them.
	//
	// GroupMinSessionTimeout and GroupMaxSessionTimeout are
	// group.min.session.timeout.ms and group.max.session.timeout.ms (6 s,
	// 30 min): the session timeouts a classic member may ask for.
	GroupMinSessionTimeout time.Duration
	GroupMaxSessionTimeout time.Duration
	// GroupMaxSize is group.max.size: the members of a classic group.
	GroupMaxSize int32
	// GroupConsumerMaxSessionTimeout is group.consumer.max.session.timeout.ms
	// (60 s), the most group.consumer.session.timeout.ms may be.
	GroupConsumerMaxSessionTimeout time.Duration
	// GroupConsumerHeartbeatInterval is group.consumer.heartbeat.interval.ms
	// (5 s), within group.consumer.min/max.heartbeat.interval.ms (5 s,
	// 15 s) and below the session timeout.
	GroupConsumerHeartbeatInterval    time.Duration
	GroupConsumerMinHeartbeatInterval time.Duration
	GroupConsumerMaxHeartbeatInterval time.Duration
	// GroupConsumerMaxSize is group.consumer.max.size: the members of a
	// KIP-848 group.
	GroupConsumerMaxSize int32
	// GroupConsumerAssignors is group.consumer.assignors: the server-side
	// assignors by name (uniform, range), the first the default. Kafka's
	// class names of the two are read as their names.
	GroupConsumerAssignors []string
	// OffsetsRetention is offsets.retention.minutes (7 days), kept as a
	// duration; OffsetsRetentionCheckInterval is
	// offsets.retention.check.interval.ms (10 min).
	OffsetsRetention              time.Duration
	OffsetsRetentionCheckInterval time.Duration
	// OffsetMetadataMaxBytes is offset.metadata.max.bytes (4096): the
	// longest metadata a committed offset may carry.
	OffsetMetadataMaxBytes int32
	// OffsetsCommitTimeout is offsets.commit.timeout.ms (5 s): how long
	// an answer waits for the coordinator's records to be replicated
	// before it is COORDINATOR_NOT_AVAILABLE (as Kafka's
	// CoordinatorOperationExceptionHelper turns its REQUEST_TIMED_OUT);
	// the client retries, and the write may still commit. 0 is the
	// default.
	OffsetsCommitTimeout time.Duration
	// FetchCopyMax is the largest chunk of record batches a Fetch
	// response reads into its bytes instead of sending from the segment
	// file (fetch_encode.go); 0 sends every chunk from its file. No
	// property sets it: DefaultConfig's 16 KiB is measured, and the
	// simulator sends every chunk in some seeds so that the file path's
	// faults stay covered.
	FetchCopyMax int64
	// SabotageCoordinatorEarlyAck, for the simulator's sabotage tests
	// alone (no property sets it), makes the group coordinator answer a
	// request as soon as its shard does, before the high watermark passes
	// the records it wrote: a broken broker whose acknowledged commits a
	// failover or a power loss can lose.
	SabotageCoordinatorEarlyAck bool
	// SabotageCoordinatorFetchAhead, for the simulator's sabotage tests
	// alone, makes OffsetFetch v8+ answer one past each committed offset:
	// a broken broker whose group consumers skip a record at each
	// handover.
	SabotageCoordinatorFetchAhead bool
	// coordLoadStepBytes overrides loadStepBytesDefault, for tests of a
	// load in many steps; 0 is the default.
	coordLoadStepBytes int64

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
	// OutboundLocalAddress is sluice.outbound.local.address, a key of
	// Sluice's own: the local IP address that every connection the node
	// opens (to other brokers, to the controllers) is bound to, so that
	// peers see them come from it. For a host with several addresses; the
	// jepsen runner's proxy gives each node one of 127.0.0.0/8 to tell
	// whose a connection is. Not set (the zero Addr): the kernel picks, by
	// route.
	OutboundLocalAddress netip.Addr
}

// Unlimited is Kafka's -1 for the keys where it means no limit
// (log.retention.ms, log.retention.bytes and their topic keys retention.ms
// and retention.bytes). Any other negative value of those keys is refused.
const Unlimited = -1

// Listener is one listener: a name (upper case, as Kafka normalises it),
// which listener.security.protocol.map maps to a security protocol, and an
// address.
type Listener struct {
	Name string // "PLAINTEXT", "CONTROLLER", ...
	Host string
	Port int32
}

// Addr is host:port, an IPv6 host in brackets.
func (l Listener) Addr() string { return joinHostPort(l.Host, l.Port) }

// joinHostPort writes host:port, bracketing a host that holds a colon (an
// IPv6 address), as net.JoinHostPort does.
func joinHostPort(host string, port int32) string {
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(int(port))
}

func (l Listener) String() string { return l.Name + "://" + l.Addr() }

// DefaultConfig is Kafka's defaults for the keys Sluice reads, with one
// node listening on 127.0.0.1:9092 and data in ./data, in single-node mode
// (process.roles not set). One default differs from Kafka's:
// controller.quorum.election.timeout.ms (see ControllerQuorumElectionTimeout).
func DefaultConfig() Config {
	return Config{
		NodeID:                           1,
		Listeners:                        []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092}},
		LogDir:                           "data",
		NumPartitions:                    1,
		DefaultReplicationFactor:         1,
		AutoCreateTopics:                 true,
		OffsetsTopicNumPartitions:        50,
		OffsetsTopicReplicationFactor:    3,
		GroupInitialRebalanceDelay:       3 * time.Second,
		FetchCopyMax:                     defaultFetchCopyMax,
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

		GroupConsumerSessionTimeout:       groups.DefaultConsumerSessionTimeout,
		GroupConsumerMinSessionTimeout:    groups.DefaultConsumerSessionTimeoutMin,
		GroupMinSessionTimeout:            groups.DefaultSessionTimeoutMin,
		GroupMaxSessionTimeout:            groups.DefaultSessionTimeoutMax,
		GroupMaxSize:                      groups.DefaultGroupMaxSize,
		GroupConsumerMaxSessionTimeout:    groups.DefaultConsumerSessionTimeoutMax,
		GroupConsumerHeartbeatInterval:    groups.DefaultConsumerHeartbeatInterval,
		GroupConsumerMinHeartbeatInterval: groups.DefaultConsumerHeartbeatIntervalMin,
		GroupConsumerMaxHeartbeatInterval: groups.DefaultConsumerHeartbeatIntervalMax,
		GroupConsumerMaxSize:              groups.DefaultConsumerGroupMaxSize,
		GroupConsumerAssignors:            defaultAssignors(),
		OffsetsRetention:                  groups.DefaultOffsetsRetention,
		OffsetsRetentionCheckInterval:     groups.DefaultOffsetsRetentionCheckInterval,
		OffsetMetadataMaxBytes:            groups.DefaultOffsetMetadataMaxBytes,
		OffsetsCommitTimeout:              defaultOffsetsCommitTimeout,

		InterBrokerListenerName:                   "PLAINTEXT",
		BrokerSessionTimeout:                      2 * time.Second,
		BrokerHeartbeatInterval:                   400 * time.Millisecond,
		ReplicaLagTimeMax:                         30 * time.Second,
		ReplicaFetchWaitMax:                       500 * time.Millisecond,
		ReplicaFetchBackoff:                       time.Second,
		ReplicaSocketTimeout:                      30 * time.Second,
		ControllerQuorumElectionTimeout:           500 * time.Millisecond,
		ControllerQuorumFetchTimeout:              2 * time.Second,
		ControllerQuorumRequestTimeout:            2 * time.Second,
		MetadataLogMaxRecordBytesBetweenSnapshots: 20 << 20,
		MetadataLogMaxSnapshotInterval:            time.Hour,
		AutoLeaderRebalanceEnable:                 true,
		LeaderImbalanceCheckInterval:              300 * time.Second,
		LeaderImbalancePerBrokerPercentage:        10,
	}
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
		c.Listeners, err = parseListeners(value, true)
		return true, err
	case "advertised.listeners":
		c.AdvertisedListeners, err = parseListeners(value, false)
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
	case "offsets.topic.num.partitions":
		err := parseInt32(value, 1, &c.OffsetsTopicNumPartitions)
		if err == nil && c.OffsetsTopicNumPartitions > maxPartitionsPerTopic {
			err = fmt.Errorf("above the limit of %d partitions per topic", maxPartitionsPerTopic)
		}
		return true, err
	case "offsets.topic.replication.factor":
		var v int32
		err := parseInt32(value, 1, &v)
		c.OffsetsTopicReplicationFactor = int16(v)
		if err == nil && v > 32767 {
			err = fmt.Errorf("above 32767")
		}
		return true, err
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
	case "sluice.outbound.local.address":
		return true, parseLocalAddress(value, &c.OutboundLocalAddress)
	}
	if known, err := c.setGroups(key, value); known {
		return true, err
	}
	return c.setKRaft(key, value)
}

// parseLocalAddress reads an IP address to bind to, or nothing (the
// kernel picks). A host name is refused: it would be resolved once, at
// start, to an address the host may no longer have.
func parseLocalAddress(s string, dst *netip.Addr) error {
	if s == "" {
		*dst = netip.Addr{}
		return nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return fmt.Errorf("want an IP address of this host (or nothing, to let the kernel pick): %w", err)
	}
	if a.IsUnspecified() || a.IsMulticast() {
		return fmt.Errorf("%s is not an address a connection can come from: want one of this host's addresses", a)
	}
	*dst = a
	return nil
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

// parseListeners reads "NAME://host:port,NAME://host:port" (advertised.listeners
// too, where two listeners may share a port: distinctPorts is false). Which
// security protocol a name stands for is checked by Validate, once
// listener.security.protocol.map is known.
func parseListeners(s string, distinctPorts bool) ([]Listener, error) {
	var out []Listener
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, addr, ok := strings.Cut(part, "://")
		if !ok || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("listener %q is not NAME://host:port", part)
		}
		host, port, err := splitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("listener %q: %w", part, err)
		}
		out = append(out, Listener{Name: strings.ToUpper(strings.TrimSpace(name)), Host: host, Port: port})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no listener")
	}
	return out, checkListenerList(out, distinctPorts)
}

// checkListenerList refuses what Kafka refuses in a list of listeners: a
// name twice, and (in listeners) a port twice, unless it is 0 or the two
// hosts are an IPv4 and an IPv6 address.
func checkListenerList(ls []Listener, distinctPorts bool) error {
	for i, a := range ls {
		for _, b := range ls[:i] {
			switch {
			case strings.EqualFold(a.Name, b.Name):
				return fmt.Errorf("listener name %s appears twice (%s and %s): each listener must have a name of its own", a.Name, b, a)
			case distinctPorts && a.Port == b.Port && a.Port != 0 && !ipv4AndIPv6(a.Host, b.Host):
				return fmt.Errorf("listeners %s and %s have the same port: each listener must have a port of its own", b, a)
			}
		}
	}
	return nil
}

// ipv4AndIPv6 reports whether one host is an IPv4 address and the other an
// IPv6 one: two such listeners may share a port.
func ipv4AndIPv6(a, b string) bool {
	x, errA := netip.ParseAddr(a)
	y, errB := netip.ParseAddr(b)
	return errA == nil && errB == nil && x.Unmap().Is4() != y.Unmap().Is4()
}

// splitHostPort reads host:port, an IPv6 host in brackets; the host may be
// empty (every address), the port is 0 to 65535.
func splitHostPort(addr string) (string, int32, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("no port")
	}
	host := addr[:i]
	if strings.HasPrefix(host, "[") != strings.HasSuffix(host, "]") {
		return "", 0, fmt.Errorf("unbalanced brackets around the host")
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.ContainsAny(host, " \t/@[]") {
		return "", 0, fmt.Errorf("bad host %q", host)
	}
	port, err := strconv.ParseUint(addr[i+1:], 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("bad port %q", addr[i+1:])
	}
	return host, int32(port), nil
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
