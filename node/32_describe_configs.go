package node

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeConfigs, versions 0-4.
//
//   - TOPIC resources list every topic config in force (configentries.go):
//     the topic's own value (source TOPIC_CONFIG), else the broker's
//     (STATIC_BROKER_CONFIG), else Kafka's default (DEFAULT_CONFIG). An
//     invalid name gets INVALID_TOPIC_EXCEPTION, an unknown topic
//     UNKNOWN_TOPIC_OR_PARTITION.
//   - BROKER resources named by this broker's id list the broker's configs,
//     read-only (Sluice reads its configuration once, at start) but for
//     the dynamic replication throttle rates (throttle.go: the broker's
//     own, DYNAMIC_BROKER_CONFIG, else the cluster default,
//     DYNAMIC_DEFAULT_BROKER_CONFIG, else unlimited). The empty name asks,
//     as in Kafka, for the cluster-wide dynamic defaults: the throttle
//     rates set there. Another id, or a name that is not a number, gets
//     INVALID_REQUEST.
//   - BROKER_LOGGER resources named by this broker's id list one logger,
//     "root", at the level the broker logs (source
//     DYNAMIC_BROKER_LOGGER_CONFIG); the empty name or another id gets
//     INVALID_REQUEST, as in Kafka.
//   - Other resource types (GROUP, CLIENT_METRICS, unknown) get
//     INVALID_REQUEST for that resource.
//   - ConfigNames null or empty asks for every config; names the resource
//     does not have are left out.
//   - Synonyms when IncludeSynonyms (v1+); documentation when
//     IncludeDocumentation (v3+); config types always (v3+). v0's IsDefault
//     is true for a value the resource does not set itself.
func (b *Broker) handleDescribeConfigs(r *request) {
	req := r.body.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		res := kmsg.NewDescribeConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		entries, err, msg := b.describeResource(rr)
		if err != nil {
			res.ErrorCode = err.Code
			if msg != "" {
				res.ErrorMessage = &msg
			}
		}
		wanted := map[string]bool{}
		for _, name := range rr.ConfigNames {
			wanted[name] = true
		}
		for _, e := range entries {
			if len(wanted) == 0 || wanted[e.name] {
				res.Configs = append(res.Configs, describeConfigEntry(req, rr.ResourceType, e))
			}
		}
		resp.Resources = append(resp.Resources, res)
	}
	r.respond(resp)
}

// describeResource returns the configs of one resource, or why not.
func (b *Broker) describeResource(rr kmsg.DescribeConfigsRequestResource) ([]configEntry, *kerr.Error, string) {
	switch rr.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		if why, err := topicNameProblem(rr.ResourceName); err != nil {
			return nil, err, why
		}
		t := b.image.TopicByName(rr.ResourceName)
		if t == nil {
			return nil, kerr.UnknownTopicOrPartition, ""
		}
		return b.topicConfigEntries(t.Configs), nil, ""
	case kmsg.ConfigResourceTypeBroker:
		if rr.ResourceName == "" {
			return b.throttleRateEntries(true), nil, ""
		}
		if err, msg := b.checkBrokerName(rr.ResourceName, "Broker id must be an integer, but it is: ",
			"Unexpected broker id, expected %d or empty string, but received %s"); err != nil {
			return nil, err, msg
		}
		entries := append(b.cfg.brokerConfigEntries(), b.throttleRateEntries(false)...)
		sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
		return entries, nil, ""
	case kmsg.ConfigResourceTypeBrokerLogger:
		if rr.ResourceName == "" {
			return nil, kerr.InvalidRequest, "Broker id must not be empty"
		}
		if err, msg := b.checkBrokerName(rr.ResourceName, "Broker id must be an integer, but it is: ",
			"Unexpected broker id, expected %d but received %s"); err != nil {
			return nil, err, msg
		}
		return []configEntry{b.rootLoggerEntry()}, nil, ""
	}
	return nil, kerr.InvalidRequest, fmt.Sprintf("Unsupported resource type: %s", rr.ResourceType)
}

// checkBrokerName checks that a broker resource names this broker, with
// Kafka's messages: notNumber is followed by the name, other is formatted
// with this broker's id and the name.
func (b *Broker) checkBrokerName(name, notNumber, other string) (*kerr.Error, string) {
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return kerr.InvalidRequest, notNumber + name
	}
	if int32(id) != b.cfg.NodeID {
		return kerr.InvalidRequest, fmt.Sprintf(other, b.cfg.NodeID, name)
	}
	return nil, ""
}

// rootLoggerEntry reports the broker's log level as Kafka reports its root
// logger's. Sluice cannot change it at runtime, so it is read-only.
func (b *Broker) rootLoggerEntry() configEntry {
	level := "OFF"
	for _, l := range []struct {
		level slog.Level
		name  string
	}{{slog.LevelDebug, "DEBUG"}, {slog.LevelInfo, "INFO"}, {slog.LevelWarn, "WARN"}, {slog.LevelError, "ERROR"}} {
		if b.env.Log != nil && b.env.Log.Enabled(context.Background(), l.level) {
			level = l.name
			break
		}
	}
	return configEntry{name: "root", value: level, source: kmsg.ConfigSourceDynamicBrokerLoggerConfig,
		kind: kindString, readOnly: true}
}

// describeConfigEntry encodes one entry for the request's version and asks.
func describeConfigEntry(req *kmsg.DescribeConfigsRequest, typ kmsg.ConfigResourceType, e configEntry) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	value := e.value
	c.Name, c.Value, c.ReadOnly, c.Source = e.name, &value, e.readOnly, e.source
	c.ConfigType = kmsg.ConfigType(e.kind)
	// IsDefault (v0 only) is "not set on the resource itself": Kafka's v0
	// clients read a false as TOPIC_CONFIG for topics and as
	// STATIC_BROKER_CONFIG for brokers.
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		c.IsDefault = e.source != kmsg.ConfigSourceDynamicTopicConfig
	default:
		c.IsDefault = e.source == kmsg.ConfigSourceDefaultConfig
	}
	if req.IncludeSynonyms {
		for _, s := range e.synonyms {
			syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			v := s.value
			syn.Name, syn.Value, syn.Source = s.name, &v, s.source
			c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
		}
	}
	if req.IncludeDocumentation && e.doc != "" {
		doc := e.doc
		c.Documentation = &doc
	}
	return c
}
