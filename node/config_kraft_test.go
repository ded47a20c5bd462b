package node

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// combinedNode1 is node 1 of three combined broker,controller nodes on one
// machine, as cmd/sluice/config/cluster/server-1.properties has it.
const combinedNode1 = `
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097
listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
controller.listener.names=CONTROLLER
`

// brokerNode4 is a broker-only node beside them.
const brokerNode4 = `
process.roles=broker
node.id=4
controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097
listeners=PLAINTEXT://127.0.0.1:9098
controller.listener.names=CONTROLLER
`

// controllerNode1 is a controller-only node 1.
const controllerNode1 = `
process.roles=controller
node.id=1
controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097
listeners=CONTROLLER://127.0.0.1:9093
controller.listener.names=CONTROLLER
`

// kafkaKRaftServer holds the KRaft keys of Kafka's own
// config/kraft/server.properties: empty hosts, localhost, an explicit map.
const kafkaKRaftServer = `
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
`

// parse reads properties over DefaultConfig; a later line sets a key
// again, so a case is a base and the lines that change it.
func parse(t *testing.T, text string) Config {
	t.Helper()
	cfg, unknown, err := ParseProperties(text, DefaultConfig())
	require.NoError(t, err, text)
	require.Empty(t, unknown, text)
	return cfg
}

func TestKRaftKeysDefaults(t *testing.T) {
	cfg := DefaultConfig()
	require.Equal(t, Roles{}, cfg.ProcessRoles, "process.roles not set: single-node mode")
	require.True(t, cfg.SingleNode())
	require.Nil(t, cfg.ControllerQuorumVoters)
	require.Nil(t, cfg.ControllerQuorumBootstrapServers)
	require.Nil(t, cfg.ListenerSecurityProtocolMap, "Kafka's default map")
	require.Nil(t, cfg.ControllerListenerNames)
	require.Equal(t, "PLAINTEXT", cfg.InterBrokerListenerName)
	require.Equal(t, "", cfg.MetadataLogDir, "log.dirs")
	require.Equal(t, 2*time.Second, cfg.BrokerSessionTimeout, "Sluice's; Kafka's is 9000")
	require.Equal(t, 400*time.Millisecond, cfg.BrokerHeartbeatInterval, "Sluice's; Kafka's is 2000")
	require.Equal(t, 500*time.Millisecond, cfg.ControllerQuorumElectionTimeout, "Sluice's; Kafka's is 1000")
	require.Equal(t, 2*time.Second, cfg.ControllerQuorumFetchTimeout)
	require.Equal(t, 2*time.Second, cfg.ControllerQuorumRequestTimeout)
	require.Equal(t, int64(20971520), cfg.MetadataLogMaxRecordBytesBetweenSnapshots)
	require.Equal(t, time.Hour, cfg.MetadataLogMaxSnapshotInterval)
	require.True(t, cfg.AutoLeaderRebalanceEnable)
	require.Equal(t, 300*time.Second, cfg.LeaderImbalanceCheckInterval)
	require.Equal(t, int32(10), cfg.LeaderImbalancePerBrokerPercentage)
	require.Equal(t, "", cfg.BrokerRack)
	require.Equal(t, "", cfg.ReplicaSelectorClass, "Kafka's default (null): consumers read from the leader")
	require.NoError(t, cfg.Validate())
}

func TestParsePropertiesReadsKRaftKeys(t *testing.T) {
	cfg := parse(t, `
process.roles=controller, broker
node.id=2
controller.quorum.voters=1@c1.example:9093, 2@[::1]:9095,3@10.0.0.3:9097
controller.quorum.bootstrap.servers=c1.example:9093,[::1]:9095
listeners=plaintext://:9094,Controller://[::1]:9095
advertised.listeners=PLAINTEXT://b2.example:9094
listener.security.protocol.map=controller:plaintext,PLAINTEXT:PLAINTEXT
controller.listener.names=controller
inter.broker.listener.name=plaintext
metadata.log.dir=data
broker.session.timeout.ms=6000
broker.heartbeat.interval.ms=1000
controller.quorum.election.timeout.ms=300
controller.quorum.fetch.timeout.ms=1500
controller.quorum.request.timeout.ms=2500
metadata.log.max.record.bytes.between.snapshots=1048576
metadata.log.max.snapshot.interval.ms=0
auto.leader.rebalance.enable=false
leader.imbalance.check.interval.seconds=60
leader.imbalance.per.broker.percentage=0
broker.rack=rack-a
replica.selector.class= org.apache.kafka.common.replica.RackAwareReplicaSelector
`)
	require.Equal(t, Roles{Broker: true, Controller: true}, cfg.ProcessRoles, "either order")
	require.Equal(t, []Voter{{1, "c1.example", 9093}, {2, "::1", 9095}, {3, "10.0.0.3", 9097}}, cfg.ControllerQuorumVoters)
	require.Equal(t, []string{"c1.example:9093", "[::1]:9095"}, cfg.ControllerQuorumBootstrapServers)
	require.Equal(t, []Listener{{"PLAINTEXT", "", 9094}, {"CONTROLLER", "::1", 9095}}, cfg.Listeners, "names upper-cased, as Kafka normalises them")
	require.Equal(t, []ListenerProtocol{{"CONTROLLER", "PLAINTEXT"}, {"PLAINTEXT", "PLAINTEXT"}}, cfg.ListenerSecurityProtocolMap)
	require.Equal(t, []string{"CONTROLLER"}, cfg.ControllerListenerNames)
	require.Equal(t, "PLAINTEXT", cfg.InterBrokerListenerName)
	require.Equal(t, "data", cfg.MetadataLogDir)
	require.Equal(t, 6*time.Second, cfg.BrokerSessionTimeout)
	require.Equal(t, time.Second, cfg.BrokerHeartbeatInterval)
	require.Equal(t, 300*time.Millisecond, cfg.ControllerQuorumElectionTimeout)
	require.Equal(t, 1500*time.Millisecond, cfg.ControllerQuorumFetchTimeout)
	require.Equal(t, 2500*time.Millisecond, cfg.ControllerQuorumRequestTimeout)
	require.Equal(t, int64(1<<20), cfg.MetadataLogMaxRecordBytesBetweenSnapshots)
	require.Equal(t, time.Duration(0), cfg.MetadataLogMaxSnapshotInterval, "0 turns time-based snapshots off")
	require.False(t, cfg.AutoLeaderRebalanceEnable)
	require.Equal(t, time.Minute, cfg.LeaderImbalanceCheckInterval)
	require.Equal(t, int32(0), cfg.LeaderImbalancePerBrokerPercentage)
	require.Equal(t, "rack-a", cfg.BrokerRack)
	require.Equal(t, RackAwareSelectorClass, cfg.ReplicaSelectorClass)
	require.NoError(t, cfg.Validate())
	require.Equal(t, "[::1]:9095", cfg.Voters()[1].Addr())
	require.Equal(t, "2@[::1]:9095", cfg.Voters()[1].String())

	// An empty value clears a list, and empty process.roles is not set.
	cfg = parse(t, combinedNode1+"process.roles=\ncontroller.quorum.voters=\ncontroller.listener.names=\nlisteners=PLAINTEXT://127.0.0.1:9092")
	require.True(t, cfg.SingleNode())
	require.NoError(t, cfg.Validate())
}

// A value no configuration could use is refused when its key is read,
// naming the key and the value.
func TestParsePropertiesRefusesBadKRaftValues(t *testing.T) {
	for _, tc := range []struct{ line, why string }{
		{"process.roles=brokr", `unknown role "brokr"`},
		{"process.roles=Broker", `unknown role "Broker"`}, // Kafka's names are lower case
		{"process.roles=broker,quorum", `unknown role "quorum"`},
		{"process.roles=broker,broker", "listed twice"},
		{"controller.quorum.voters=1@h1:9093,1@h2:9093", "voter id 1 appears twice"},
		{"controller.quorum.voters=1@h1:9093,2@h1:9093", "same address"},
		{"controller.quorum.voters=1@H1:9093,2@h1:9093", "same address"},
		{"controller.quorum.voters=1-h1:9093", "not id@host:port"},
		{"controller.quorum.voters=one@h1:9093", "not a node id"},
		{"controller.quorum.voters=-1@h1:9093", "not a node id"},
		{"controller.quorum.voters=1@h1", "no port"},
		{"controller.quorum.voters=1@:9093", "no host"},
		{"controller.quorum.voters=1@0.0.0.0:9093", "not routable"},
		{"controller.quorum.voters=1@h1:0", "port 0"},
		{"controller.quorum.voters=1@h1:70000", "bad port"},
		{"controller.quorum.voters=1@h1@h2:9093", "bad host"},
		{"controller.quorum.bootstrap.servers=h1", "no port"},
		{"controller.quorum.bootstrap.servers=h1:x", "bad port"},
		{"controller.quorum.bootstrap.servers=[::]:9093", "not routable"},
		{"listener.security.protocol.map=CONTROLLER", "not LISTENER_NAME:SECURITY_PROTOCOL"},
		{"listener.security.protocol.map=CONTROLLER:TLS", `unknown security protocol "TLS"`},
		{"listener.security.protocol.map=A:PLAINTEXT,a:SSL", "mapped twice"},
		{"listener.security.protocol.map=", "no entry"},
		{"controller.listener.names=CONTROLLER,controller", "listed twice"},
		{"inter.broker.listener.name=", "empty listener name"},
		{"listeners=PLAINTEXT://h:9092,plaintext://h:9093", "appears twice"},
		{"listeners=A://h:9092,B://h:9092", "same port"},
		{"listeners=A://127.0.0.1:9092,B://10.0.0.1:9092", "same port"},
		{"listeners=://h:9092", "not NAME://host:port"},
		{"listeners=A://[::1:9092", "unbalanced brackets"},
		{"advertised.listeners=A://h:9092,a://h:9093", "appears twice"},
		{"broker.session.timeout.ms=0", "below the minimum 1"},
		{"broker.session.timeout.ms=9s", "not a 32-bit integer"},
		{"broker.heartbeat.interval.ms=-1", "below the minimum 1"},
		{"controller.quorum.election.timeout.ms=0", "below the minimum 1"},
		{"controller.quorum.election.timeout.ms=3000000000", "not a 32-bit integer"}, // an INT in Kafka
		{"controller.quorum.fetch.timeout.ms=0", "below the minimum 1"},
		{"controller.quorum.request.timeout.ms=0", "below the minimum 1"},
		{"metadata.log.max.record.bytes.between.snapshots=0", "below the minimum 1"},
		{"metadata.log.max.snapshot.interval.ms=-1", "below the minimum 0"},
		{"metadata.log.max.snapshot.interval.ms=9223372036854775807", "too large"},
		{"auto.leader.rebalance.enable=maybe", "not true or false"},
		{"leader.imbalance.check.interval.seconds=0", "below the minimum 1"},
		{"leader.imbalance.check.interval.seconds=9223372036854775807", "too large"},
		{"leader.imbalance.per.broker.percentage=-1", "below the minimum 0"},
		{"leader.imbalance.per.broker.percentage=101", "above 100"},
		{"replica.selector.class=org.apache.kafka.common.replica.LeaderSelector", "unknown replica selector class"},
		{"replica.selector.class=RackAwareReplicaSelector", "the one supported is " + RackAwareSelectorClass},
	} {
		_, _, err := ParseProperties(tc.line, DefaultConfig())
		require.Error(t, err, tc.line)
		key, value, _ := strings.Cut(tc.line, "=")
		require.ErrorContains(t, err, "config "+key+"=", tc.line)
		require.ErrorContains(t, err, value, tc.line)
		require.ErrorContains(t, err, tc.why, tc.line)
	}
}

// Two listeners may share a port when one is IPv4 and the other IPv6, as
// in Kafka; port 0 (an ephemeral port) is never a clash; advertised
// listeners may share one (a proxy in front).
func TestListenersMayShareAPortWhereKafkaAllows(t *testing.T) {
	for _, line := range []string{
		"listeners=PLAINTEXT://127.0.0.1:9092,OTHER://[::1]:9092",
		"listeners=PLAINTEXT://:0,OTHER://:0",
		"listeners=PLAINTEXT://127.0.0.1:9092,OTHER://127.0.0.1:9093\nadvertised.listeners=PLAINTEXT://proxy:9092,OTHER://proxy:9092",
	} {
		parse(t, line)
	}
}

// Every configuration Validate refuses, the key named in the message, with
// what the operator must change. Each case is a base configuration and the
// lines that change it; the base alone is valid.
func TestValidateRefusesNamingTheKey(t *testing.T) {
	for _, base := range []string{"", combinedNode1, brokerNode4, controllerNode1, kafkaKRaftServer} {
		require.NoError(t, parse(t, base).Validate(), base)
	}
	for _, tc := range []struct {
		name, base, change string
		key, why           string
	}{
		// Single-node mode: no quorum keys.
		{"voters without roles", "", "controller.quorum.voters=1@127.0.0.1:9093",
			"controller.quorum.voters", "is set but process.roles is not"},
		{"bootstrap servers without roles", "", "controller.quorum.bootstrap.servers=127.0.0.1:9093",
			"controller.quorum.bootstrap.servers", "is set but process.roles is not"},
		{"controller listener names without roles", "", "controller.listener.names=CONTROLLER",
			"controller.listener.names", "is set but process.roles is not"},
		{"a CONTROLLER listener without roles", "", "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
			"listeners", "no security protocol for it in listener.security.protocol.map"},
		{"a replication factor above one node", "", "default.replication.factor=2",
			"default.replication.factor=2", "set default.replication.factor=1"},

		// The quorum.
		{"no voters nor bootstrap servers", combinedNode1, "controller.quorum.voters=",
			"controller.quorum.voters", "controller.quorum.bootstrap.servers"},
		{"no controller listener names", combinedNode1, "controller.listener.names=",
			"controller.listener.names", "needs the name of the listener"},
		{"a controller that is not a voter", combinedNode1, "node.id=4",
			"controller.quorum.voters", "node.id 4 must be one of the voters"},
		{"a controller-only node that is not a voter", controllerNode1, "node.id=4",
			"controller.quorum.voters", "node.id 4 must be one of the voters"},
		{"a broker-only node that is a voter", brokerNode4, "node.id=1",
			"controller.quorum.voters", "node.id 1 must not be one of the voters"},
		{"a voter on another port than its controller listener", combinedNode1,
			"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9193",
			"controller.quorum.voters", "controller listener CONTROLLER is on port 9193"},
		{"a voter on another port than its advertised controller listener", combinedNode1,
			"advertised.listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9999",
			"controller.quorum.voters", "controller listener CONTROLLER is on port 9999"},
		{"a node left at the default node.id", combinedNode1,
			"listeners=PLAINTEXT://127.0.0.1:9094,CONTROLLER://127.0.0.1:9095",
			"controller.quorum.voters", "node.id 1 is voter 1@127.0.0.1:9093"},

		// Listeners by role.
		{"a controller without its CONTROLLER listener", combinedNode1, "listeners=PLAINTEXT://127.0.0.1:9092",
			"listeners", "the controller listener CONTROLLER (controller.listener.names) must be one of listeners"},
		{"a controller without its second controller listener", combinedNode1, "controller.listener.names=CONTROLLER,QUORUM",
			"listeners", "the controller listener QUORUM"},
		{"a controller-only node with a client listener", controllerNode1,
			"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
			"listeners", "may only be controller listeners"},
		{"a combined node without a client listener", combinedNode1, "listeners=CONTROLLER://127.0.0.1:9093",
			"listeners", "needs a listener for clients"},
		{"a broker-only node on a controller listener", brokerNode4,
			"listeners=PLAINTEXT://127.0.0.1:9098,CONTROLLER://127.0.0.1:9099",
			"listeners", "must not listen on the controller listener CONTROLLER://127.0.0.1:9099"},

		// Security protocols.
		{"an SSL listener", "", "listeners=SSL://127.0.0.1:9092",
			"listeners", "makes it SSL, and Sluice serves only PLAINTEXT"},
		{"a listener mapped to SASL_SSL", "", "listener.security.protocol.map=PLAINTEXT:SASL_SSL",
			"listeners", "makes it SASL_SSL"},
		{"a listener the default map does not name", "", "listeners=CLIENTS://127.0.0.1:9092\ninter.broker.listener.name=CLIENTS",
			"listeners", "set listener.security.protocol.map=CLIENTS:PLAINTEXT"},
		{"a map that is set without the controller listener", combinedNode1, "listener.security.protocol.map=PLAINTEXT:PLAINTEXT",
			"listeners", "add CONTROLLER:PLAINTEXT"},
		{"a broker-only node whose map lacks the controller listener", brokerNode4, "listener.security.protocol.map=PLAINTEXT:PLAINTEXT",
			"controller.listener.names", "add CONTROLLER:PLAINTEXT"},
		{"a controller listener mapped to SSL", brokerNode4, "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
			"controller.listener.names", "makes it SSL"},
		{"an inter-broker listener with no protocol", "", "inter.broker.listener.name=INTERNAL",
			"inter.broker.listener.name", "no security protocol"},

		// Advertised listeners.
		{"an advertised listener that is not a listener", "", "advertised.listeners=EXTERNAL://b1.example:9092",
			"advertised.listeners", "EXTERNAL://b1.example:9092 is not one of listeners (PLAINTEXT)"},
		{"a broker-only node advertising a controller listener", brokerNode4,
			"advertised.listeners=PLAINTEXT://127.0.0.1:9098,CONTROLLER://127.0.0.1:9099",
			"advertised.listeners", "must not advertise the controller listener"},
		{"an inter-broker listener that is not advertised", "",
			"listeners=PLAINTEXT://127.0.0.1:9092,OTHER://127.0.0.1:9093\nadvertised.listeners=OTHER://127.0.0.1:9093\n" +
				"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
			"inter.broker.listener.name=PLAINTEXT", "advertised listeners (OTHER)"},
		{"the controller listener as the inter-broker listener", combinedNode1, "inter.broker.listener.name=CONTROLLER",
			"inter.broker.listener.name=CONTROLLER", "advertised listeners (PLAINTEXT)"},
		{"0.0.0.0 advertised from listeners", "", "listeners=PLAINTEXT://0.0.0.0:9092",
			"listeners", "set advertised.listeners to a routable host"},
		{":: advertised", "", "listeners=PLAINTEXT://[::]:9092\nadvertised.listeners=PLAINTEXT://[::]:9092",
			"advertised.listeners", "is not an address anyone can connect to"},
		{"a controller advertising 0.0.0.0", combinedNode1,
			"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://0.0.0.0:9093\nadvertised.listeners=PLAINTEXT://127.0.0.1:9092",
			"listeners", "CONTROLLER://0.0.0.0:9093 would be advertised"},

		// Directories, timeouts, the replication factor.
		{"a metadata log inside log.dirs", "", "metadata.log.dir=data/meta",
			"metadata.log.dir=data/meta", "is inside log.dirs (data)"},
		{"a metadata log holding log.dirs", "log.dirs=/var/lib/sluice/data", "metadata.log.dir=/var/lib/sluice",
			"metadata.log.dir=/var/lib/sluice", "holds log.dirs (/var/lib/sluice/data)"},
		{"heartbeats as slow as the session", "", "broker.heartbeat.interval.ms=2000",
			"broker.heartbeat.interval.ms=2000", "below broker.session.timeout.ms=2000"},
		{"a replication factor above the voters", combinedNode1, "default.replication.factor=4",
			"default.replication.factor=4", "at most 3 broker(s) (a static quorum of 3 broker,controller nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := parse(t, tc.base+"\n"+tc.change)
			err := cfg.Validate()
			require.Error(t, err)
			require.ErrorContains(t, err, "config "+tc.key)
			require.ErrorContains(t, err, tc.why)
		})
	}
}

// Validate checks the lists again for configurations built in code.
func TestValidateRefusesBadListsBuiltInCode(t *testing.T) {
	cfg := parse(t, combinedNode1)
	cfg.ControllerQuorumVoters = append(cfg.ControllerQuorumVoters, Voter{ID: 2, Host: "127.0.0.1", Port: 9099})
	require.ErrorContains(t, cfg.Validate(), "config controller.quorum.voters: voter id 2 appears twice")
	cfg = parse(t, combinedNode1)
	cfg.ControllerQuorumVoters[2].Port = 9095
	require.ErrorContains(t, cfg.Validate(), "config controller.quorum.voters: voters 2@127.0.0.1:9095 and 3@127.0.0.1:9095 have the same address")
	cfg = DefaultConfig()
	cfg.Listeners = append(cfg.Listeners, Listener{Name: "plaintext", Host: "127.0.0.1", Port: 9093})
	require.ErrorContains(t, cfg.Validate(), "config listeners: listener name plaintext appears twice")
	cfg = DefaultConfig()
	cfg.Listeners = nil
	require.ErrorContains(t, cfg.Validate(), "config listeners: no listener configured")
}

// Configurations Kafka accepts that Validate accepts too.
func TestValidateAccepts(t *testing.T) {
	for _, tc := range []struct{ name, text string }{
		{"a dynamic quorum", combinedNode1 + "controller.quorum.voters=\ncontroller.quorum.bootstrap.servers=127.0.0.1:9093,127.0.0.1:9095"},
		{"both voters and bootstrap servers", combinedNode1 + "controller.quorum.bootstrap.servers=127.0.0.1:9093"},
		{"a controller advertised where it is reached (NAT)", combinedNode1 +
			"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:19093\n" +
			"advertised.listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"},
		{"a broker-only node with its own map", brokerNode4 + "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"},
		{"a broker-only node with two controller listener names", brokerNode4 + "controller.listener.names=CONTROLLER,QUORUM"},
		{"renamed listeners", combinedNode1 +
			"listeners=CLIENTS://127.0.0.1:9092,QUORUM://127.0.0.1:9093\ncontroller.listener.names=QUORUM\n" +
			"inter.broker.listener.name=CLIENTS\nlistener.security.protocol.map=CLIENTS:PLAINTEXT,QUORUM:PLAINTEXT"},
		{"metadata.log.dir spelt like log.dirs", "log.dirs=/var/lib/sluice\nmetadata.log.dir=/var/lib/sluice/"},
		{"any replication factor beside broker-only nodes", brokerNode4 + "default.replication.factor=5"},
		{"a replication factor of every voter", combinedNode1 + "default.replication.factor=3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, parse(t, tc.text).Validate())
		})
	}
}

// What the lead's wiring reads: the roles, the voters, the listeners of
// each side, and how many brokers the cluster may have.
func TestKRaftHelpers(t *testing.T) {
	voters := []Voter{{1, "127.0.0.1", 9093}, {2, "127.0.0.1", 9095}, {3, "127.0.0.1", 9097}}
	plaintext := Listener{"PLAINTEXT", "127.0.0.1", 9092}
	controller := Listener{"CONTROLLER", "127.0.0.1", 9093}
	for _, tc := range []struct {
		name       string
		text       string
		roles      Roles
		voters     []Voter
		controller *Listener
		brokers    []Listener
		advertised []Listener
		brokersMax int
	}{
		{"single-node", "", Roles{true, true}, []Voter{{1, SingleNodeVoterHost, 0}}, nil,
			[]Listener{plaintext}, []Listener{plaintext}, 1},
		{"combined", combinedNode1, Roles{true, true}, voters, &controller,
			[]Listener{plaintext}, []Listener{plaintext}, 3},
		{"combined advertising its controller listener", combinedNode1 +
			"advertised.listeners=CONTROLLER://c1.example:9093,PLAINTEXT://b1.example:9092", Roles{true, true}, voters, &controller,
			[]Listener{plaintext}, []Listener{{"PLAINTEXT", "b1.example", 9092}}, 3},
		{"broker-only", brokerNode4, Roles{Broker: true}, voters, nil,
			[]Listener{{"PLAINTEXT", "127.0.0.1", 9098}}, []Listener{{"PLAINTEXT", "127.0.0.1", 9098}}, BrokersUnknown},
		{"controller-only", controllerNode1, Roles{Controller: true}, voters, &controller, nil, nil, BrokersUnknown},
		{"dynamic", combinedNode1 + "controller.quorum.voters=\ncontroller.quorum.bootstrap.servers=127.0.0.1:9093",
			Roles{true, true}, nil, &controller, []Listener{plaintext}, []Listener{plaintext}, BrokersUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := parse(t, tc.text)
			require.NoError(t, cfg.Validate())
			require.Equal(t, tc.roles, cfg.Roles())
			require.Equal(t, tc.roles.IsBroker(), cfg.Roles().IsBroker())
			require.Equal(t, tc.roles.IsController(), cfg.Roles().IsController())
			require.Equal(t, tc.voters, cfg.Voters())
			l, ok := cfg.ControllerListener()
			require.Equal(t, tc.controller != nil, ok)
			if tc.controller != nil {
				require.Equal(t, *tc.controller, l)
			}
			require.Equal(t, tc.brokers, cfg.BrokerListeners())
			require.Equal(t, tc.advertised, cfg.Advertised())
			require.Equal(t, tc.brokersMax, cfg.BrokersMax())
		})
	}
	cfg := parse(t, combinedNode1+"advertised.listeners=PLAINTEXT://b1.example:9092,CONTROLLER://c1.example:9093")
	adv, ok := cfg.AdvertisedControllerListener()
	require.True(t, ok)
	require.Equal(t, Listener{"CONTROLLER", "c1.example", 9093}, adv)
	require.Equal(t, "CONTROLLER", cfg.ControllerListenerName())
	require.Equal(t, "CONTROLLER", parse(t, brokerNode4).ControllerListenerName(), "a broker reaches the controllers with it")
	require.Equal(t, "", DefaultConfig().ControllerListenerName())
	require.Greater(t, BrokersUnknown, 32767, "above any replication factor")

	// The voters are a copy: changing them changes no configuration.
	cfg = parse(t, combinedNode1)
	cfg.Voters()[0].Port = 1
	require.Equal(t, int32(9093), cfg.ControllerQuorumVoters[0].Port)
}

// Kafka's default listener.security.protocol.map names the security
// protocols only; with process.roles set and no SSL or SASL listener, it
// maps the controller listener names to PLAINTEXT too. A map that is set is
// taken as written.
func TestSecurityProtocolMapsControllerListenersAsKafkaDoes(t *testing.T) {
	for _, tc := range []struct {
		name, text, listener, want string
	}{
		{"a protocol's own name", "", "SASL_SSL", "SASL_SSL"},
		{"any case", "", "plaintext", "PLAINTEXT"},
		{"no CONTROLLER in single-node mode", "", "CONTROLLER", ""},
		{"CONTROLLER with process.roles", combinedNode1, "CONTROLLER", "PLAINTEXT"},
		{"CONTROLLER of a broker-only node", brokerNode4, "CONTROLLER", "PLAINTEXT"},
		{"not with an SSL listener", combinedNode1 + "listeners=SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093", "CONTROLLER", ""},
		{"not with a SASL controller listener", brokerNode4 + "controller.listener.names=CONTROLLER,SASL_SSL", "CONTROLLER", ""},
		{"not another name", combinedNode1, "CLIENTS", ""},
		{"a map that is set", "listener.security.protocol.map=CLIENTS:SSL", "CLIENTS", "SSL"},
		{"a map that is set replaces the default", "listener.security.protocol.map=CLIENTS:PLAINTEXT", "SSL", ""},
		{"a map that is set adds no CONTROLLER", combinedNode1 + "listener.security.protocol.map=PLAINTEXT:PLAINTEXT", "CONTROLLER", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := ParseProperties(tc.text, DefaultConfig())
			require.NoError(t, err)
			got, ok := cfg.SecurityProtocol(tc.listener)
			require.Equal(t, tc.want != "", ok)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestRolesString(t *testing.T) {
	require.Equal(t, "", Roles{}.String())
	require.Equal(t, "broker", Roles{Broker: true}.String())
	require.Equal(t, "controller", Roles{Controller: true}.String())
	require.Equal(t, "broker,controller", Roles{Broker: true, Controller: true}.String())
	for _, s := range []string{"broker", "controller", "broker,controller", "controller,broker", " broker , controller "} {
		r, err := parseRoles(s)
		require.NoError(t, err, s)
		back, err := parseRoles(r.String())
		require.NoError(t, err)
		require.Equal(t, r, back, s)
	}
}

// DescribeConfigs shows the KRaft keys as the file set them, the rest at
// their defaults.
func TestBrokerConfigEntriesShowKRaftKeys(t *testing.T) {
	entries := func(cfg Config) map[string]configEntry {
		out := map[string]configEntry{}
		for _, e := range cfg.brokerConfigEntries() {
			out[e.name] = e
		}
		return out
	}
	single := entries(DefaultConfig())
	for name, want := range map[string]string{
		"process.roles":                           "",
		"controller.quorum.voters":                "",
		"controller.listener.names":               "",
		"inter.broker.listener.name":              "PLAINTEXT",
		"controller.quorum.election.timeout.ms":   "500",
		"broker.session.timeout.ms":               "2000",
		"leader.imbalance.check.interval.seconds": "300",
		"listener.security.protocol.map":          "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
	} {
		require.Equal(t, want, single[name].value, name)
		require.Equal(t, kmsg.ConfigSourceDefaultConfig, single[name].source, name)
	}
	cluster := entries(parse(t, kafkaKRaftServer+"broker.rack=r1\nleader.imbalance.check.interval.seconds=60\nreplica.selector.class="+RackAwareSelectorClass))
	for name, want := range map[string]string{
		"process.roles":                           "broker,controller",
		"controller.quorum.voters":                "1@localhost:9093",
		"controller.listener.names":               "CONTROLLER",
		"advertised.listeners":                    "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
		"listener.security.protocol.map":          "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
		"broker.rack":                             "r1",
		"replica.selector.class":                  RackAwareSelectorClass,
		"leader.imbalance.check.interval.seconds": "60",
	} {
		require.Equal(t, want, cluster[name].value, name)
		require.Equal(t, kmsg.ConfigSourceStaticBrokerConfig, cluster[name].source, name)
	}
}
