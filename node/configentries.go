package node

import (
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config entries as DescribeConfigs and CreateTopics (v5+) report them.
//
// A topic config's value comes from the first of: the topic's own setting
// (TOPIC_CONFIG), the broker key that supplies its default as the broker's
// configuration file sets it (STATIC_BROKER_CONFIG), Kafka's default for that
// key (DEFAULT_CONFIG). Each step that has a value is one of the entry's
// synonyms, in that order, the one in force first: that is how Kafka
// answers IncludeSynonyms.
//
// Sluice has no dynamic broker configs: the configuration file is read at
// start and never changed, so every broker entry is read-only, and a broker
// key counts as set by the file when its value differs from Kafka's default
// (or Kafka has none). A key set to exactly its default reads as
// DEFAULT_CONFIG, which tells the client the same value.

// configEntry is one config of a topic or of the broker.
type configEntry struct {
	name     string
	value    string
	source   kmsg.ConfigSource
	kind     configKind
	readOnly bool
	doc      string
	// synonyms are the values the key has at each level, the one in force
	// first.
	synonyms []configSynonym
}

// configSynonym is one level's value of a config (Kafka's ConfigSynonym).
type configSynonym struct {
	name   string
	value  string
	source kmsg.ConfigSource
}

// brokerConfigDef is one broker config Sluice reports.
type brokerConfigDef struct {
	name  string
	kind  configKind
	value func(Config) string
	// kafkaDefault is Kafka's default for the key, nil when Kafka has none
	// (the key must be configured, or defaults to another key's value). A
	// key of Sluice's own (sluice.*) has Sluice's default here.
	kafkaDefault *string
	// static reports whether the file set the key, for keys where comparing
	// with kafkaDefault cannot tell; nil compares.
	static func(Config) bool
	doc    string
}

// brokerConfigDefs lists the broker keys Config holds, with Kafka's names.
func brokerConfigDefs() []brokerConfigDef {
	def := func(s string) *string { return &s }
	return append([]brokerConfigDef{
		{name: "node.id", kind: kindInt, value: func(c Config) string { return strconv.Itoa(int(c.NodeID)) },
			doc: "The node id of this broker."},
		{name: "listeners", kind: kindString, kafkaDefault: def("PLAINTEXT://:9092"),
			value: func(c Config) string { return listenersString(c.Listeners) },
			doc:   "The addresses the broker listens on."},
		{name: "advertised.listeners", kind: kindString,
			value:  advertisedListenersValue,
			static: func(c Config) bool { return len(c.AdvertisedListeners) > 0 },
			doc:    "The addresses clients are told to connect to; listeners when not set."},
		{name: "log.dirs", kind: kindString, value: func(c Config) string { return c.LogDir },
			doc: "The directory where the broker keeps its data."},
		{name: "num.partitions", kind: kindInt, kafkaDefault: def("1"),
			value: func(c Config) string { return strconv.Itoa(int(c.NumPartitions)) },
			doc:   "The number of partitions of a topic created with the broker's defaults."},
		{name: "default.replication.factor", kind: kindInt, kafkaDefault: def("1"),
			value: func(c Config) string { return strconv.Itoa(int(c.DefaultReplicationFactor)) },
			doc:   "The replication factor of a topic created with the broker's defaults."},
		{name: "auto.create.topics.enable", kind: kindBoolean, kafkaDefault: def("true"),
			value: func(c Config) string { return strconv.FormatBool(c.AutoCreateTopics) },
			doc:   "Whether Metadata requests create the unknown topics they name."},
		{name: "offsets.topic.num.partitions", kind: kindInt, kafkaDefault: def("50"),
			value: func(c Config) string { return strconv.Itoa(int(c.OffsetsTopicNumPartitions)) },
			doc:   "The number of partitions of __consumer_offsets, fixed when it is created."},
		{name: "offsets.topic.replication.factor", kind: kindShort, kafkaDefault: def("3"),
			value: func(c Config) string { return strconv.Itoa(int(c.OffsetsTopicReplicationFactor)) },
			doc:   "The replication factor of __consumer_offsets, capped at the brokers the cluster is configured to have."},
		{name: "log.retention.ms", kind: kindLong, kafkaDefault: def("604800000"),
			value: func(c Config) string { return strconv.FormatInt(c.LogRetentionMs, 10) },
			doc:   "How long a segment is kept before deletion; -1 is forever."},
		{name: "log.retention.bytes", kind: kindLong, kafkaDefault: def("-1"),
			value: func(c Config) string { return strconv.FormatInt(c.LogRetentionBytes, 10) },
			doc:   "The most bytes a partition keeps before deleting old segments; -1 is unlimited."},
		{name: "log.segment.bytes", kind: kindInt, kafkaDefault: def("1073741824"),
			value: func(c Config) string { return strconv.FormatInt(c.LogSegmentBytes, 10) },
			doc:   "The size at which a segment is rolled."},
		{name: "log.roll.ms", kind: kindLong, kafkaDefault: def("604800000"),
			value: func(c Config) string { return strconv.FormatInt(c.LogRollMs, 10) },
			doc:   "The age at which a segment is rolled even if not full."},
		{name: "log.retention.check.interval.ms", kind: kindLong, kafkaDefault: def("300000"),
			value: func(c Config) string { return durationMsString(c.LogRetentionCheckInterval) },
			doc:   "How often old segments are deleted and idle producer ids expired."},
		{name: "log.flush.offset.checkpoint.interval.ms", kind: kindInt, kafkaDefault: def("60000"),
			value: func(c Config) string { return durationMsString(c.LogFlushOffsetCheckpointInterval) },
			doc:   "How often each partition's recovery point is written to its checkpoint file."},
		{name: "message.max.bytes", kind: kindInt, kafkaDefault: def("1048588"),
			value: func(c Config) string { return strconv.Itoa(int(c.MessageMaxBytes)) },
			doc:   "The largest record batch size allowed."},
		{name: "socket.request.max.bytes", kind: kindInt, kafkaDefault: def("104857600"),
			value: func(c Config) string { return strconv.Itoa(int(c.SocketRequestMaxBytes)) },
			doc:   "The largest request the broker reads; a larger one closes the connection."},
		{name: "connections.max.idle.ms", kind: kindLong, kafkaDefault: def("600000"),
			value: func(c Config) string { return durationMsString(c.ConnectionsMaxIdle) },
			doc:   "How long a connection may have no bytes in or out, and no request in flight, before it is closed; -1 is forever."},
		// Sluice's own key: its default stands where Kafka's would.
		{name: "sluice.request.read.timeout.ms", kind: kindLong, kafkaDefault: def("30000"),
			value: func(c Config) string { return durationMsString(c.RequestReadTimeout) },
			doc:   "How long a request may take to arrive whole, from its first bytes, before the connection is closed; -1 is forever."},
		{name: "sluice.outbound.local.address", kind: kindString, kafkaDefault: def(""),
			value: func(c Config) string { return addrString(c.OutboundLocalAddress) },
			doc:   "The local IP address the connections this node opens to other nodes come from; empty lets the kernel pick."},
	}, append(kraftConfigDefs(), groupConfigDefs()...)...)
}

// addrString is a, or "" for the zero Addr (not set).
func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// kraftConfigDefs lists the keys of config_kraft.go.
func kraftConfigDefs() []brokerConfigDef {
	def := func(s string) *string { return &s }
	ms := func(d func(Config) time.Duration) func(Config) string {
		return func(c Config) string { return durationMsString(d(c)) }
	}
	return []brokerConfigDef{
		{name: "process.roles", kind: kindList, kafkaDefault: def(""),
			value: func(c Config) string { return c.ProcessRoles.String() },
			doc:   "The roles of this node: broker, controller, or both; not set is a node on its own."},
		{name: "controller.quorum.voters", kind: kindList, kafkaDefault: def(""),
			value: func(c Config) string { return votersString(c.ControllerQuorumVoters) },
			doc:   "The voters of a static metadata quorum, id@host:port each."},
		{name: "controller.quorum.bootstrap.servers", kind: kindList, kafkaDefault: def(""),
			value: func(c Config) string { return strings.Join(c.ControllerQuorumBootstrapServers, ",") },
			doc:   "Controllers to ask for the voters of a dynamic metadata quorum, host:port each."},
		// Kafka's default, in the order its documentation gives.
		{name: "listener.security.protocol.map", kind: kindString,
			kafkaDefault: def("SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"),
			value:        protocolMapValue,
			static:       func(c Config) bool { return c.ListenerSecurityProtocolMap != nil },
			doc:          "The security protocol of each listener name."},
		{name: "controller.listener.names", kind: kindString,
			value:  func(c Config) string { return strings.Join(c.ControllerListenerNames, ",") },
			static: func(c Config) bool { return len(c.ControllerListenerNames) > 0 },
			doc:    "The listeners that serve the metadata quorum; brokers reach the controllers with the first."},
		{name: "inter.broker.listener.name", kind: kindString,
			value:  func(c Config) string { return c.InterBrokerListenerName },
			static: func(c Config) bool { return c.InterBrokerListenerName != "PLAINTEXT" },
			doc:    "The listener other brokers reach this one on."},
		{name: "metadata.log.dir", kind: kindString,
			value:  func(c Config) string { return c.MetadataLogDir },
			static: func(c Config) bool { return c.MetadataLogDir != "" },
			doc:    "The directory of the metadata log; log.dirs when not set."},
		// Sluice's defaults (Kafka's are 9000 and 2000): a leader's
		// partitions move only once its session has run out, so the
		// session bounds every failover (section 4, "A leader's lease").
		{name: "broker.session.timeout.ms", kind: kindInt, kafkaDefault: def("2000"),
			value: ms(func(c Config) time.Duration { return c.BrokerSessionTimeout }),
			doc:   "How long a broker's lease lasts without a heartbeat."},
		{name: "broker.heartbeat.interval.ms", kind: kindInt, kafkaDefault: def("400"),
			value: ms(func(c Config) time.Duration { return c.BrokerHeartbeatInterval }),
			doc:   "How often a broker heartbeats to the controller."},
		{name: "replica.lag.time.max.ms", kind: kindLong, kafkaDefault: def("30000"),
			value: ms(func(c Config) time.Duration { return c.ReplicaLagTimeMax }),
			doc:   "How long a follower may stay behind its leader's log end before it leaves the ISR."},
		{name: "replica.fetch.wait.max.ms", kind: kindInt, kafkaDefault: def("500"),
			value: ms(func(c Config) time.Duration { return c.ReplicaFetchWaitMax }),
			doc:   "How long a follower's fetch waits at the leader for data."},
		{name: "replica.fetch.backoff.ms", kind: kindInt, kafkaDefault: def("1000"),
			value: ms(func(c Config) time.Duration { return c.ReplicaFetchBackoff }),
			doc:   "How long a follower waits to fetch again after an error."},
		{name: "replica.socket.timeout.ms", kind: kindInt, kafkaDefault: def("30000"),
			value: ms(func(c Config) time.Duration { return c.ReplicaSocketTimeout }),
			doc:   "How long past replica.fetch.wait.max.ms a follower waits for its leader before it reconnects."},
		// Sluice's default (Kafka's is 1000), so that a failover ends well
		// under a second: the default in force is what a client is told.
		{name: "controller.quorum.election.timeout.ms", kind: kindInt, kafkaDefault: def("500"),
			value: ms(func(c Config) time.Duration { return c.ControllerQuorumElectionTimeout }),
			doc:   "How long a voter waits without hearing from a leader before it starts an election."},
		{name: "controller.quorum.fetch.timeout.ms", kind: kindInt, kafkaDefault: def("2000"),
			value: ms(func(c Config) time.Duration { return c.ControllerQuorumFetchTimeout }),
			doc:   "How long a follower of the quorum goes without a fetch from the leader before it suspects it."},
		{name: "controller.quorum.request.timeout.ms", kind: kindInt, kafkaDefault: def("2000"),
			value: ms(func(c Config) time.Duration { return c.ControllerQuorumRequestTimeout }),
			doc:   "How long a request to another voter or to the controller may wait for its answer."},
		{name: "metadata.log.max.record.bytes.between.snapshots", kind: kindLong, kafkaDefault: def("20971520"),
			value: func(c Config) string { return strconv.FormatInt(c.MetadataLogMaxRecordBytesBetweenSnapshots, 10) },
			doc:   "The bytes of metadata records after the last snapshot that make a node write a new one."},
		{name: "metadata.log.max.snapshot.interval.ms", kind: kindLong, kafkaDefault: def("3600000"),
			value: ms(func(c Config) time.Duration { return c.MetadataLogMaxSnapshotInterval }),
			doc:   "The age of committed metadata records not in a snapshot that makes a node write one; 0 is never."},
		{name: "auto.leader.rebalance.enable", kind: kindBoolean, kafkaDefault: def("true"),
			value: func(c Config) string { return strconv.FormatBool(c.AutoLeaderRebalanceEnable) },
			doc:   "Whether the controller moves leaders back to their preferred replicas."},
		{name: "leader.imbalance.check.interval.seconds", kind: kindLong, kafkaDefault: def("300"),
			value: func(c Config) string { return strconv.FormatInt(int64(c.LeaderImbalanceCheckInterval/time.Second), 10) },
			doc:   "How often the controller checks the balance of leaders."},
		{name: "leader.imbalance.per.broker.percentage", kind: kindInt, kafkaDefault: def("10"),
			value: func(c Config) string { return strconv.Itoa(int(c.LeaderImbalancePerBrokerPercentage)) },
			doc:   "The share of its preferred partitions a broker may not lead before a rebalance, in percent."},
		{name: "broker.rack", kind: kindString,
			value:  func(c Config) string { return c.BrokerRack },
			static: func(c Config) bool { return c.BrokerRack != "" },
			doc:    "The rack of this broker."},
		{name: "replica.selector.class", kind: kindClass,
			value:  func(c Config) string { return c.ReplicaSelectorClass },
			static: func(c Config) bool { return c.ReplicaSelectorClass != "" },
			doc:    "The class that picks a consumer's preferred read replica; none: the leader."},
	}
}

// advertisedListenersValue is advertised.listeners as set, or the broker
// listeners advertised in its place.
func advertisedListenersValue(c Config) string {
	if len(c.AdvertisedListeners) > 0 {
		return listenersString(c.AdvertisedListeners)
	}
	return listenersString(c.Advertised())
}

func protocolMapValue(c Config) string {
	if c.ListenerSecurityProtocolMap == nil {
		return "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
	}
	parts := make([]string, len(c.ListenerSecurityProtocolMap))
	for i, e := range c.ListenerSecurityProtocolMap {
		parts[i] = e.Listener + ":" + e.Protocol
	}
	return strings.Join(parts, ",")
}

// brokerConfigEntries returns the broker's configs, sorted by name: the keys
// Config holds, and the broker keys that supply topic defaults (fixed at
// Kafka's defaults where Config has no field for them).
func (c Config) brokerConfigEntries() []configEntry {
	defs := brokerConfigDefs()
	known := map[string]bool{}
	for _, d := range defs {
		known[d.name] = true
	}
	for _, td := range topicConfigDefs() {
		if td.brokerName == "" || known[td.brokerName] {
			continue // no broker synonym, or one listed already
		}
		known[td.brokerName] = true
		kafkaDefault := td.defaultValue(DefaultConfig())
		defs = append(defs, brokerConfigDef{
			name: td.brokerName, kind: td.kind, value: td.defaultValue,
			kafkaDefault: &kafkaDefault, doc: td.doc,
		})
	}
	entries := make([]configEntry, 0, len(defs))
	for _, d := range defs {
		entries = append(entries, d.entry(c))
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	return entries
}

// entry describes the key as c has it.
func (d brokerConfigDef) entry(c Config) configEntry {
	e := configEntry{name: d.name, value: d.value(c), kind: d.kind, readOnly: true, doc: d.doc}
	static := d.kafkaDefault == nil || e.value != *d.kafkaDefault
	if d.static != nil {
		static = d.static(c)
	}
	if static {
		e.synonyms = append(e.synonyms, configSynonym{d.name, e.value, kmsg.ConfigSourceStaticBrokerConfig})
	}
	if d.kafkaDefault != nil {
		e.synonyms = append(e.synonyms, configSynonym{d.name, *d.kafkaDefault, kmsg.ConfigSourceDefaultConfig})
	}
	e.source = kmsg.ConfigSourceDefaultConfig
	if len(e.synonyms) > 0 {
		e.source = e.synonyms[0].source
	}
	return e
}

// topicConfigEntries returns every topic config in force for a topic whose
// own settings are set, sorted by name.
func (b *Broker) topicConfigEntries(set map[string]string) []configEntry {
	broker := map[string]configEntry{}
	for _, e := range b.cfg.brokerConfigEntries() {
		broker[e.name] = e
	}
	defs := topicConfigDefs()
	entries := make([]configEntry, 0, len(defs))
	for _, d := range defs {
		e := configEntry{name: d.name, kind: d.kind, doc: d.doc}
		if v, ok := set[d.name]; ok {
			e.synonyms = append(e.synonyms, configSynonym{d.name, v, kmsg.ConfigSourceDynamicTopicConfig})
		}
		e.synonyms = append(e.synonyms, broker[d.brokerName].synonyms...)
		e.value, e.source = d.defaultValue(b.cfg), kmsg.ConfigSourceDefaultConfig
		if len(e.synonyms) > 0 {
			e.value, e.source = e.synonyms[0].value, e.synonyms[0].source
		}
		entries = append(entries, e)
	}
	return entries
}

// durationMsString writes a duration in milliseconds, a negative one (no
// timeout) as Kafka's -1.
func durationMsString(d time.Duration) string {
	if d < 0 {
		return "-1"
	}
	return strconv.FormatInt(d.Milliseconds(), 10)
}

func listenersString(ls []Listener) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.String()
	}
	return strings.Join(parts, ",")
}
