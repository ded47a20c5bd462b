package node

import (
	"fmt"
	"math"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The configuration of a node in a KRaft cluster, read as Kafka reads it
// (KafkaConfig, KRaftConfigs, QuorumConfig, SocketServerConfigs).
//
// A node plays one or both roles of process.roles. Controllers are the
// voters of the metadata quorum (controller.quorum.voters, or found through
// controller.quorum.bootstrap.servers in a dynamic quorum) and serve it on
// the listeners named by controller.listener.names; brokers serve clients on
// the other listeners and reach the controllers through the first of those
// names. Without process.roles a node runs Sluice's single-node mode: it is
// broker and controller of a one-voter quorum of itself, so it needs no
// voters and no controller listener, and the example configuration and
// `make run` work as they always have.
//
//	process.roles        listeners                 the node
//	(not set)            PLAINTEXT                 single-node: broker and sole voter
//	broker,controller    PLAINTEXT, CONTROLLER     a voter that also serves clients
//	controller           CONTROLLER only           a voter, no clients
//	broker               PLAINTEXT, no CONTROLLER  serves clients, follows the quorum
//
// Each key's own value is checked when it is read (ApplyProperties); what
// needs several keys is checked by Validate, which refuses, naming the key,
// what Kafka refuses at start and a few things Sluice cannot serve yet.

// Roles is process.roles: the parts a node plays. The zero value is
// process.roles not set (single-node mode); Config.Roles reports the roles
// in force.
type Roles struct {
	Broker     bool
	Controller bool
}

// IsBroker reports whether the node serves clients and holds partitions.
func (r Roles) IsBroker() bool { return r.Broker }

// IsController reports whether the node is a voter of the metadata quorum.
func (r Roles) IsController() bool { return r.Controller }

// String writes the roles as process.roles does: "broker",
// "controller", "broker,controller", or "" for none.
func (r Roles) String() string {
	switch {
	case r.Broker && r.Controller:
		return "broker,controller"
	case r.Broker:
		return "broker"
	case r.Controller:
		return "controller"
	}
	return ""
}

// Voter is one voter of the metadata quorum: its node.id and the address
// of its controller listener.
type Voter struct {
	ID   int32
	Host string
	Port int32
}

// Addr is host:port, an IPv6 host in brackets.
func (v Voter) Addr() string { return joinHostPort(v.Host, v.Port) }

// String writes the voter as controller.quorum.voters does: id@host:port.
func (v Voter) String() string { return strconv.Itoa(int(v.ID)) + "@" + v.Addr() }

// ListenerProtocol is one entry of listener.security.protocol.map.
type ListenerProtocol struct {
	Listener string // upper case
	Protocol string // PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
}

// securityProtocols returns Kafka's security protocols, PLAINTEXT first.
// Sluice serves PLAINTEXT only.
func securityProtocols() []string { return []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"} }

// SingleNodeVoterHost is the host of the one voter Voters reports in
// single-node mode. The quorum of one node is never reached over a network;
// the name is in the .invalid domain (RFC 2606), which never resolves, and
// the port is 0, on which nothing listens, so no one can dial it by mistake.
const SingleNodeVoterHost = "single-node.invalid"

// BrokersUnknown is BrokersMax when a configuration sets no bound on the
// brokers of its cluster: larger than any replication factor (an int16),
// so no check against it refuses anything.
const BrokersUnknown = math.MaxInt32

// SingleNode reports whether the node runs Sluice's single-node mode:
// process.roles is not set.
func (c Config) SingleNode() bool { return !c.ProcessRoles.Broker && !c.ProcessRoles.Controller }

// Roles returns the roles the node plays: process.roles, or broker and
// controller in single-node mode.
func (c Config) Roles() Roles {
	if c.SingleNode() {
		return Roles{Broker: true, Controller: true}
	}
	return c.ProcessRoles
}

// Voters returns the voters of a static quorum: controller.quorum.voters,
// or, in single-node mode, the node itself at SingleNodeVoterHost:0. It is
// nil for a dynamic quorum (only controller.quorum.bootstrap.servers set),
// whose voters are learnt from the quorum itself.
func (c Config) Voters() []Voter {
	if c.SingleNode() {
		return []Voter{{ID: c.NodeID, Host: SingleNodeVoterHost, Port: 0}}
	}
	return slices.Clone(c.ControllerQuorumVoters)
}

// ControllerListenerName returns the first of controller.listener.names:
// the listener a broker reaches the controllers with, and the one a
// controller's voter address stands for. Empty in single-node mode.
func (c Config) ControllerListenerName() string {
	if len(c.ControllerListenerNames) == 0 {
		return ""
	}
	return c.ControllerListenerNames[0]
}

// ControllerListener returns the listener a node with the controller role
// serves the quorum on (the one named by ControllerListenerName), and false
// for a broker-only node and in single-node mode, which listen on none.
func (c Config) ControllerListener() (Listener, bool) {
	name := c.ControllerListenerName()
	if name == "" || !c.ProcessRoles.Controller {
		return Listener{}, false
	}
	return findListener(c.Listeners, name)
}

// AdvertisedControllerListener returns the address a controller tells
// others to reach its controller listener at: its entry in
// advertised.listeners if there is one, else the listener itself (Kafka's
// effectiveAdvertisedControllerListeners). False where ControllerListener
// is.
func (c Config) AdvertisedControllerListener() (Listener, bool) {
	l, ok := c.ControllerListener()
	if !ok {
		return Listener{}, false
	}
	if adv, ok := findListener(c.AdvertisedListeners, l.Name); ok {
		return adv, true
	}
	return l, true
}

// BrokerListeners returns the listeners that serve clients and other
// brokers: listeners without the controller listeners. A controller-only
// node has none.
func (c Config) BrokerListeners() []Listener {
	return c.withoutControllerListeners(c.Listeners)
}

// Advertised returns the broker listeners clients are told to connect to:
// advertised.listeners, or listeners when it is not set, without the
// controller listeners (Kafka's effectiveAdvertisedBrokerListeners). The
// first is the address a broker registers with.
func (c Config) Advertised() []Listener {
	ls := c.AdvertisedListeners
	if len(ls) == 0 {
		ls = c.Listeners
	}
	return c.withoutControllerListeners(ls)
}

// BrokersMax is the number of brokers a cluster with this configuration can
// ever have; every start-up check of a replication factor compares with
// this, and only this. In single-node mode it is 1. With a static quorum
// of combined broker,controller nodes it is the number of voters: Kafka
// would still let broker-only nodes join such a cluster, but a node
// configured this way says its cluster is its voters, and Sluice takes it
// at its word (a broker-only node would then be one too many). Otherwise
// (broker-only or controller-only nodes, which imply brokers elsewhere, or
// a dynamic quorum) the configuration bounds nothing: BrokersUnknown.
func (c Config) BrokersMax() int {
	switch {
	case c.SingleNode():
		return 1
	case c.ProcessRoles.Broker && c.ProcessRoles.Controller && len(c.ControllerQuorumVoters) > 0:
		return len(c.ControllerQuorumVoters)
	}
	return BrokersUnknown
}

// SecurityProtocol returns the security protocol listener.security.protocol.map
// maps a listener name to, in effect (see ListenerSecurityProtocolMap), and
// false if it maps it to none.
func (c Config) SecurityProtocol(name string) (string, bool) {
	if c.ListenerSecurityProtocolMap != nil {
		for _, e := range c.ListenerSecurityProtocolMap {
			if strings.EqualFold(e.Listener, name) {
				return e.Protocol, true
			}
		}
		return "", false
	}
	for _, p := range securityProtocols() {
		if strings.EqualFold(p, name) {
			return p, true
		}
	}
	if !c.SingleNode() && c.isControllerName(name) && !c.usesSSLOrSASLName() {
		return "PLAINTEXT", true
	}
	return "", false
}

// usesSSLOrSASLName reports whether a controller listener or a listener is
// named after a security protocol other than PLAINTEXT: Kafka then adds no
// default mapping for the controller listeners, since it cannot tell they
// are meant to be PLAINTEXT.
func (c Config) usesSSLOrSASLName() bool {
	names := slices.Clone(c.ControllerListenerNames)
	for _, l := range c.Listeners {
		names = append(names, l.Name)
	}
	for _, n := range names {
		for _, p := range securityProtocols()[1:] {
			if strings.EqualFold(n, p) {
				return true
			}
		}
	}
	return false
}

func (c Config) isControllerName(name string) bool {
	for _, n := range c.ControllerListenerNames {
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}

func (c Config) withoutControllerListeners(ls []Listener) []Listener {
	var out []Listener
	for _, l := range ls {
		if !c.isControllerName(l.Name) {
			out = append(out, l)
		}
	}
	return out
}

func findListener(ls []Listener, name string) (Listener, bool) {
	for _, l := range ls {
		if strings.EqualFold(l.Name, name) {
			return l, true
		}
	}
	return Listener{}, false
}

func listenerNames(ls []Listener) string {
	names := make([]string, len(ls))
	for i, l := range ls {
		names[i] = l.Name
	}
	return strings.Join(names, ",")
}

// Validate checks what no single key can: a configuration that could never
// work is refused at start rather than failing every request that uses it.
// Each key's own value was checked when it was read (ApplyProperties); the
// lists are checked again here, for configurations built in code.
func (c Config) Validate() error {
	for _, check := range []func() error{
		c.validateListenerLists,
		c.validateSingleNode,
		c.validateQuorum,
		c.validateRoleListeners,
		c.validateAdvertisedNames,
		c.validateSecurityProtocols,
		c.validateAdvertisedAddrs,
		c.validateMetadataLogDir,
		c.validateTimeouts,
		c.validateReplicationFactor,
		c.validateReplicaSelector,
		c.validateGroups,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateReplicaSelector refuses a replica.selector.class set other than
// by ParseProperties (which refuses it as it reads it).
func (c Config) validateReplicaSelector() error {
	if c.ReplicaSelectorClass != "" && c.ReplicaSelectorClass != RackAwareSelectorClass {
		return fmt.Errorf("config replica.selector.class=%s: unknown replica selector class: the one supported is %s",
			c.ReplicaSelectorClass, RackAwareSelectorClass)
	}
	return nil
}

func (c Config) validateListenerLists() error {
	if len(c.Listeners) == 0 {
		return fmt.Errorf("config listeners: no listener configured")
	}
	if err := checkListenerList(c.Listeners, true); err != nil {
		return fmt.Errorf("config listeners: %w", err)
	}
	if err := checkListenerList(c.AdvertisedListeners, false); err != nil {
		return fmt.Errorf("config advertised.listeners: %w", err)
	}
	if err := checkVoters(c.ControllerQuorumVoters); err != nil {
		return fmt.Errorf("config controller.quorum.voters: %w", err)
	}
	return nil
}

// validateSingleNode refuses the quorum keys without process.roles: they
// say the node was meant to join a quorum, and in single-node mode it
// would quietly run a cluster of its own instead. (Kafka refused
// controller.listener.names without process.roles for the same reason.)
func (c Config) validateSingleNode() error {
	if !c.SingleNode() {
		return nil
	}
	for _, k := range []struct {
		key string
		set bool
	}{
		{"controller.quorum.voters", len(c.ControllerQuorumVoters) > 0},
		{"controller.quorum.bootstrap.servers", len(c.ControllerQuorumBootstrapServers) > 0},
		{"controller.listener.names", len(c.ControllerListenerNames) > 0},
	} {
		if k.set {
			return fmt.Errorf("config %s is set but process.roles is not: without process.roles the node runs on its own, "+
				"as a one-voter quorum of itself; set process.roles (broker, controller or broker,controller) to join a quorum, "+
				"or remove %s", k.key, k.key)
		}
	}
	return nil
}

// validateQuorum checks the node's place in the quorum, as Kafka does, and
// that a controller's voter entry has its controller listener's port
// (Kafka leaves that to the operator: a voter address that is not the
// node's own makes the quorum unreachable at that voter).
func (c Config) validateQuorum() error {
	if c.SingleNode() {
		return nil
	}
	if len(c.ControllerQuorumVoters) == 0 && len(c.ControllerQuorumBootstrapServers) == 0 {
		return fmt.Errorf("config controller.quorum.voters: process.roles=%s needs the metadata quorum: set controller.quorum.voters "+
			"(id@host:port of each voter) or controller.quorum.bootstrap.servers (host:port of some controllers)", c.ProcessRoles)
	}
	if len(c.ControllerListenerNames) == 0 {
		return fmt.Errorf("config controller.listener.names: process.roles=%s needs the name of the listener that reaches the controllers "+
			"(for example controller.listener.names=CONTROLLER)", c.ProcessRoles)
	}
	if len(c.ControllerQuorumVoters) == 0 {
		return nil
	}
	self, isVoter := c.voter(c.NodeID)
	switch {
	case c.ProcessRoles.Controller && !isVoter:
		return fmt.Errorf("config controller.quorum.voters=%s: process.roles=%s contains the controller role, so node.id %d must be one of the voters",
			votersString(c.ControllerQuorumVoters), c.ProcessRoles, c.NodeID)
	case !c.ProcessRoles.Controller && isVoter:
		return fmt.Errorf("config controller.quorum.voters=%s: process.roles=broker, so node.id %d must not be one of the voters "+
			"(a voter is a controller)", votersString(c.ControllerQuorumVoters), c.NodeID)
	case !c.ProcessRoles.Controller:
		return nil
	}
	adv, ok := c.AdvertisedControllerListener()
	if ok && adv.Port != self.Port {
		return fmt.Errorf("config controller.quorum.voters=%s: node.id %d is voter %s, but its controller listener %s is on port %d: "+
			"the voter's address must be the node's own controller listener (advertised)", votersString(c.ControllerQuorumVoters),
			c.NodeID, self, adv.Name, adv.Port)
	}
	return nil
}

func (c Config) voter(id int32) (Voter, bool) {
	for _, v := range c.ControllerQuorumVoters {
		if v.ID == id {
			return v, true
		}
	}
	return Voter{}, false
}

// validateRoleListeners checks which listeners each role may have, as
// Kafka does.
func (c Config) validateRoleListeners() error {
	if c.SingleNode() {
		return nil
	}
	if c.ProcessRoles.Controller {
		for _, name := range c.ControllerListenerNames {
			if _, ok := findListener(c.Listeners, name); !ok {
				return fmt.Errorf("config listeners: process.roles=%s contains the controller role, so the controller listener %s "+
					"(controller.listener.names) must be one of listeners (%s)", c.ProcessRoles, name, listenerNames(c.Listeners))
			}
		}
	}
	switch brokers := c.BrokerListeners(); {
	case !c.ProcessRoles.Broker && len(brokers) > 0:
		return fmt.Errorf("config listeners: process.roles=controller, so listeners may only be controller listeners "+
			"(controller.listener.names=%s), not %s", strings.Join(c.ControllerListenerNames, ","), brokers[0])
	case c.ProcessRoles.Broker && len(brokers) == 0:
		return fmt.Errorf("config listeners: process.roles=%s contains the broker role, so it needs a listener for clients "+
			"besides the controller listeners (controller.listener.names=%s)", c.ProcessRoles, strings.Join(c.ControllerListenerNames, ","))
	case !c.ProcessRoles.Controller:
		for _, l := range c.Listeners {
			if c.isControllerName(l.Name) {
				return fmt.Errorf("config listeners: process.roles=broker, so the node must not listen on the controller listener %s "+
					"(controller.listener.names): only controllers serve it", l)
			}
		}
	}
	return nil
}

// validateSecurityProtocols checks that every listener the node serves or
// dials maps to a security protocol, and that it is PLAINTEXT, the only
// one Sluice serves.
func (c Config) validateSecurityProtocols() error {
	for _, k := range []struct {
		key string
		ls  []Listener
	}{{"listeners", c.Listeners}, {"advertised.listeners", c.AdvertisedListeners}} {
		for _, l := range k.ls {
			if err := c.plaintext(l.Name); err != nil {
				return fmt.Errorf("config %s: listener %s: %w", k.key, l, err)
			}
		}
	}
	if !c.SingleNode() {
		for _, name := range c.ControllerListenerNames {
			if err := c.plaintext(name); err != nil {
				return fmt.Errorf("config controller.listener.names: controller listener %s: %w", name, err)
			}
		}
	}
	if c.Roles().IsBroker() {
		if err := c.plaintext(c.InterBrokerListenerName); err != nil {
			return fmt.Errorf("config inter.broker.listener.name: listener %s: %w", c.InterBrokerListenerName, err)
		}
	}
	return nil
}

func (c Config) plaintext(name string) error {
	p, ok := c.SecurityProtocol(name)
	switch {
	case !ok && c.ListenerSecurityProtocolMap != nil:
		return fmt.Errorf("no security protocol for it in listener.security.protocol.map (add %s:PLAINTEXT; a map that is set "+
			"must name every listener, the controller listeners too)", strings.ToUpper(name))
	case !ok:
		return fmt.Errorf("no security protocol for it in listener.security.protocol.map (Kafka's default maps only PLAINTEXT, SSL, "+
			"SASL_PLAINTEXT and SASL_SSL to themselves; set listener.security.protocol.map=%s:PLAINTEXT,PLAINTEXT:PLAINTEXT)", strings.ToUpper(name))
	case p != "PLAINTEXT":
		return fmt.Errorf("listener.security.protocol.map makes it %s, and Sluice serves only PLAINTEXT for now", p)
	}
	return nil
}

// validateAdvertisedNames checks the names of what a node tells others, as
// Kafka does.
func (c Config) validateAdvertisedNames() error {
	for _, l := range c.AdvertisedListeners {
		if !c.ProcessRoles.Controller && c.isControllerName(l.Name) {
			return fmt.Errorf("config advertised.listeners: process.roles=broker, so the node must not advertise the controller listener %s", l)
		}
		if _, ok := findListener(c.Listeners, l.Name); !ok {
			return fmt.Errorf("config advertised.listeners: listener %s is not one of listeners (%s): an advertised listener names "+
				"a listener the node has", l, listenerNames(c.Listeners))
		}
	}
	return nil
}

// validateAdvertisedAddrs checks the addresses a node tells others, and
// that other brokers can reach it, as Kafka does.
func (c Config) validateAdvertisedAddrs() error {
	advertised := c.Advertised()
	if ctrl, ok := c.AdvertisedControllerListener(); ok {
		advertised = append(advertised, ctrl)
	}
	for _, l := range advertised {
		if a, err := netip.ParseAddr(l.Host); err == nil && a.IsUnspecified() {
			key := "listeners" // advertised as it listens
			if _, ok := findListener(c.AdvertisedListeners, l.Name); ok {
				key = "advertised.listeners"
			}
			return fmt.Errorf("config %s: %s would be advertised, and %s is not an address anyone can connect to; "+
				"set advertised.listeners to a routable host", key, l, l.Host)
		}
	}
	if c.Roles().IsBroker() {
		if _, ok := findListener(c.Advertised(), c.InterBrokerListenerName); !ok {
			return fmt.Errorf("config inter.broker.listener.name=%s: must be one of the broker's advertised listeners (%s)",
				c.InterBrokerListenerName, listenerNames(c.Advertised()))
		}
	}
	return nil
}

// validateMetadataLogDir refuses a metadata.log.dir inside log.dirs (its
// files would sit among the partitions' directories) or holding it.
func (c Config) validateMetadataLogDir() error {
	if !c.separateMetadataLogDir() {
		return nil
	}
	meta, data := filepath.Clean(c.MetadataLogDir), filepath.Clean(c.LogDir)
	switch {
	case within(meta, data):
		return fmt.Errorf("config metadata.log.dir=%s: is inside log.dirs (%s); give it a directory of its own, or set it to log.dirs", c.MetadataLogDir, c.LogDir)
	case within(data, meta):
		return fmt.Errorf("config metadata.log.dir=%s: holds log.dirs (%s); give it a directory of its own, or set it to log.dirs", c.MetadataLogDir, c.LogDir)
	}
	return nil
}

// within says path dir lies inside root (or is it).
func within(dir, root string) bool {
	rel, err := filepath.Rel(root, dir)
	return err == nil && !strings.HasPrefix(rel, "..")
}

// separateMetadataLogDir says the metadata log has a directory of its own.
func (c Config) separateMetadataLogDir() bool {
	return c.MetadataLogDir != "" && filepath.Clean(c.MetadataLogDir) != filepath.Clean(c.LogDir)
}

// MetadataDir is the directory the metadata log lives in: metadata.log.dir,
// or log.dirs.
func (c Config) MetadataDir() string {
	if c.separateMetadataLogDir() {
		return c.MetadataLogDir
	}
	return c.LogDir
}

func (c Config) validateTimeouts() error {
	if c.ReplicaFetchWaitMax >= c.ReplicaLagTimeMax {
		return fmt.Errorf("config replica.fetch.wait.max.ms=%d: must be below replica.lag.time.max.ms=%d, or followers waiting at their leader "+
			"would leave the ISR", c.ReplicaFetchWaitMax.Milliseconds(), c.ReplicaLagTimeMax.Milliseconds())
	}
	if c.BrokerHeartbeatInterval >= c.BrokerSessionTimeout {
		return fmt.Errorf("config broker.heartbeat.interval.ms=%d: must be below broker.session.timeout.ms=%d, or every broker's "+
			"session would end between two heartbeats", c.BrokerHeartbeatInterval.Milliseconds(), c.BrokerSessionTimeout.Milliseconds())
	}
	return nil
}

func (c Config) validateReplicationFactor() error {
	n := c.BrokersMax()
	if int(c.DefaultReplicationFactor) <= n {
		return nil
	}
	why := "process.roles is not set, so the node is a cluster of its own"
	if !c.SingleNode() {
		why = fmt.Sprintf("a static quorum of %d broker,controller nodes (controller.quorum.voters)", n)
	}
	return fmt.Errorf("config default.replication.factor=%d: a cluster with this configuration has at most %d broker(s) (%s), "+
		"so no topic could be created with the default replication factor; set default.replication.factor=%d",
		c.DefaultReplicationFactor, n, why, n)
}

// setKRaft sets one of the keys of config_kraft.go; known is false for any
// other key.
func (c *Config) setKRaft(key, value string) (known bool, err error) {
	switch key {
	case "process.roles":
		c.ProcessRoles, err = parseRoles(value)
	case "controller.quorum.voters":
		c.ControllerQuorumVoters, err = parseVoters(value)
	case "controller.quorum.bootstrap.servers":
		c.ControllerQuorumBootstrapServers, err = parseBootstrapServers(value)
	case "listener.security.protocol.map":
		c.ListenerSecurityProtocolMap, err = parseProtocolMap(value)
	case "controller.listener.names":
		c.ControllerListenerNames, err = parseListenerNames(value)
	case "inter.broker.listener.name":
		c.InterBrokerListenerName = strings.ToUpper(strings.TrimSpace(value))
		if c.InterBrokerListenerName == "" {
			err = fmt.Errorf("empty listener name")
		}
	case "metadata.log.dir":
		c.MetadataLogDir = strings.TrimSpace(value)
	case "broker.session.timeout.ms":
		err = parseMsInt32(value, 1, &c.BrokerSessionTimeout)
	case "broker.heartbeat.interval.ms":
		err = parseMsInt32(value, 1, &c.BrokerHeartbeatInterval)
	case "replica.lag.time.max.ms":
		err = parseMsInt64(value, 1, 1, &c.ReplicaLagTimeMax)
	case "replica.fetch.wait.max.ms":
		err = parseMsInt32(value, 0, &c.ReplicaFetchWaitMax)
	case "replica.fetch.backoff.ms":
		err = parseMsInt32(value, 0, &c.ReplicaFetchBackoff)
	case "replica.socket.timeout.ms":
		err = parseMsInt32(value, 1, &c.ReplicaSocketTimeout)
	case "controller.quorum.election.timeout.ms":
		err = parseMsInt32(value, 1, &c.ControllerQuorumElectionTimeout)
	case "controller.quorum.fetch.timeout.ms":
		err = parseMsInt32(value, 1, &c.ControllerQuorumFetchTimeout)
	case "controller.quorum.request.timeout.ms":
		err = parseMsInt32(value, 1, &c.ControllerQuorumRequestTimeout)
	case "metadata.log.max.record.bytes.between.snapshots":
		err = parseInt64(value, 1, &c.MetadataLogMaxRecordBytesBetweenSnapshots)
	case "metadata.log.max.snapshot.interval.ms":
		err = parseMsInt64(value, 1, 0, &c.MetadataLogMaxSnapshotInterval)
	case "auto.leader.rebalance.enable":
		err = parseBool(value, &c.AutoLeaderRebalanceEnable)
	case "leader.imbalance.check.interval.seconds":
		err = parseMsInt64(value, 1000, 1, &c.LeaderImbalanceCheckInterval)
	case "leader.imbalance.per.broker.percentage":
		err = parseInt32(value, 0, &c.LeaderImbalancePerBrokerPercentage)
		if err == nil && c.LeaderImbalancePerBrokerPercentage > 100 {
			err = fmt.Errorf("above 100")
		}
	case "broker.rack":
		c.BrokerRack = strings.TrimSpace(value)
	case "replica.selector.class":
		c.ReplicaSelectorClass, err = parseReplicaSelector(value)
	default:
		return false, nil
	}
	return true, err
}

// parseReplicaSelector reads replica.selector.class. Kafka loads any class
// implementing ReplicaSelector; Sluice knows the one Kafka ships, and
// refuses any other name rather than serve every fetch from the leader
// while the operator believes otherwise.
func parseReplicaSelector(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s != "" && s != RackAwareSelectorClass {
		return "", fmt.Errorf("unknown replica selector class %q: the one supported is %s (or none: consumers read from the leader)",
			s, RackAwareSelectorClass)
	}
	return s, nil
}

// parseRoles reads process.roles: broker, controller, or both, in either
// order; empty is not set. Kafka's names are lower case, and Kafka refuses
// any other spelling.
func parseRoles(s string) (Roles, error) {
	var r Roles
	for _, part := range strings.Split(s, ",") {
		role := strings.TrimSpace(part)
		var dst *bool
		switch role {
		case "":
			continue
		case "broker":
			dst = &r.Broker
		case "controller":
			dst = &r.Controller
		default:
			return Roles{}, fmt.Errorf("unknown role %q: the roles are broker and controller", role)
		}
		if *dst {
			return Roles{}, fmt.Errorf("role %s is listed twice", role)
		}
		*dst = true
	}
	return r, nil
}

// parseVoters reads controller.quorum.voters: id@host:port entries.
func parseVoters(s string) ([]Voter, error) {
	var out []Voter
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "@")
		if !ok {
			return nil, fmt.Errorf("entry %q is not id@host:port", part)
		}
		v, err := strconv.ParseInt(strings.TrimSpace(id), 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("entry %q: the id is not a node id (an integer from 0)", part)
		}
		host, port, err := splitDialAddr(strings.TrimSpace(addr))
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", part, err)
		}
		out = append(out, Voter{ID: int32(v), Host: host, Port: port})
	}
	return out, checkVoters(out)
}

// checkVoters refuses a voter id twice and an address twice: two voters
// behind one address would be one node counted twice towards a majority.
func checkVoters(voters []Voter) error {
	for i, a := range voters {
		for _, b := range voters[:i] {
			switch {
			case a.ID == b.ID:
				return fmt.Errorf("voter id %d appears twice (%s and %s)", a.ID, b, a)
			case strings.EqualFold(a.Host, b.Host) && a.Port == b.Port:
				return fmt.Errorf("voters %s and %s have the same address", b, a)
			}
		}
	}
	return nil
}

// parseBootstrapServers reads controller.quorum.bootstrap.servers:
// host:port entries, kept as written.
func parseBootstrapServers(s string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		host, port, err := splitDialAddr(part)
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", part, err)
		}
		out = append(out, joinHostPort(host, port))
	}
	return out, nil
}

// splitDialAddr reads the host:port of a node to dial: the host is named
// and routable, the port is not 0.
func splitDialAddr(addr string) (string, int32, error) {
	host, port, err := splitHostPort(addr)
	switch {
	case err != nil:
		return "", 0, fmt.Errorf("%w (want host:port)", err)
	case host == "":
		return "", 0, fmt.Errorf("no host (want host:port)")
	case port == 0:
		return "", 0, fmt.Errorf("port 0 cannot be dialled")
	}
	if a, err := netip.ParseAddr(host); err == nil && a.IsUnspecified() {
		return "", 0, fmt.Errorf("%s is not routable", host)
	}
	return host, port, nil
}

// parseProtocolMap reads listener.security.protocol.map: NAME:PROTOCOL
// entries, each name once.
func parseProtocolMap(s string) ([]ListenerProtocol, error) {
	out := []ListenerProtocol{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, proto, ok := strings.Cut(part, ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || name == "" {
			return nil, fmt.Errorf("entry %q is not LISTENER_NAME:SECURITY_PROTOCOL", part)
		}
		if !slices.Contains(securityProtocols(), proto) {
			return nil, fmt.Errorf("entry %q: unknown security protocol %q (Kafka's are %s)", part, proto, strings.Join(securityProtocols(), ", "))
		}
		for _, e := range out {
			if e.Listener == name {
				return nil, fmt.Errorf("listener %s is mapped twice", name)
			}
		}
		out = append(out, ListenerProtocol{Listener: name, Protocol: proto})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no entry: leave the key out for Kafka's default")
	}
	return out, nil
}

// parseListenerNames reads controller.listener.names, upper-cased.
func parseListenerNames(s string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		name := strings.ToUpper(strings.TrimSpace(part))
		switch {
		case name == "":
			continue
		case slices.Contains(out, name):
			return nil, fmt.Errorf("listener name %s is listed twice", name)
		}
		out = append(out, name)
	}
	return out, nil
}

func votersString(voters []Voter) string {
	parts := make([]string, len(voters))
	for i, v := range voters {
		parts[i] = v.String()
	}
	return strings.Join(parts, ",")
}

// parseMsInt32 reads a count of milliseconds that Kafka keeps in an INT,
// at least min, as a duration.
func parseMsInt32(s string, min int32, dst *time.Duration) error {
	var v int32
	if err := parseInt32(s, min, &v); err != nil {
		return err
	}
	*dst = time.Duration(v) * time.Millisecond
	return nil
}

// parseMsInt64 reads a count of units of unitMs milliseconds that Kafka
// keeps in a LONG, at least min, as a duration.
func parseMsInt64(s string, unitMs, min int64, dst *time.Duration) error {
	var v int64
	if err := parseInt64(s, min, &v); err != nil {
		return err
	}
	if v > int64(math.MaxInt64/time.Millisecond)/unitMs {
		return fmt.Errorf("too large")
	}
	*dst = time.Duration(v*unitMs) * time.Millisecond
	return nil
}

func parseInt64(s string, min int64, dst *int64) error {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	switch {
	case err != nil:
		return fmt.Errorf("not an integer")
	case v < min:
		return fmt.Errorf("below the minimum %d", min)
	}
	*dst = v
	return nil
}
