package simrun

import (
	"fmt"

	"github.com/sluicemq/sluice/jepsen"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The metadata workload's operations, shared by the simulated metadata
// clients (cluster_clients.go) and the real-process runner (sluice
// jepsen), so that both send the same requests and record their answers
// into a jepsen.MetaHistory the same way.

// MetaOp is one logical metadata operation: what an attempt asks.
type MetaOp struct {
	Type  jepsen.MetaType
	Topic string
	// Partitions is a create's partition count, or the count a
	// CreatePartitions asks for.
	Partitions int32
	// Value is a config change's value of MetaConfigKey ("" deletes it).
	Value string
}

// MetaConfigKey is the topic config the metadata workload changes and
// reads: one a topic of the metadata workload (which holds no records) may
// have any value of.
const MetaConfigKey = "retention.ms"

// Intn is the random source DrawMetaOp draws from (the simulator's
// rng.Rand; a runner adapts its own).
type Intn interface{ Intn(n int) int }

// DrawMetaOp draws the next operation on one of names: creates and
// deletes a quarter of the time each, partition adds, config changes, and
// reads.
func DrawMetaOp(r Intn, names []string) MetaOp {
	op := MetaOp{Topic: names[r.Intn(len(names))]}
	switch x := r.Intn(20); {
	case x < 5:
		op.Type, op.Partitions = jepsen.MetaCreate, int32(1+r.Intn(3))
	case x < 10:
		op.Type = jepsen.MetaDelete
	case x < 13:
		// To 2-5 partitions: often more than the topic has, sometimes
		// not (INVALID_PARTITIONS, a read).
		op.Type, op.Partitions = jepsen.MetaAddPartitions, int32(2+r.Intn(4))
	case x < 15:
		op.Type = jepsen.MetaAlterConfig
		// Two values or a delete: few enough that changes of unknown
		// outcome often restate the value (porcupine's states stay
		// few), enough that a lost or stale change shows.
		if x := r.Intn(3); x > 0 {
			op.Value = fmt.Sprint(3600000 * x)
		}
	case x < 16:
		op.Type = jepsen.MetaDescribeConfig
	default:
		op.Type = jepsen.MetaDescribe
	}
	return op
}

// Invoke records an attempt of op by client on node in h and returns its
// id and the request to send to that node, which means the same at any
// version a client may negotiate. Creates ask for replication
// factor 1, so that a topic can be made while most nodes are down.
func (op MetaOp) Invoke(h *jepsen.MetaHistory, client int, node int32) (jepsen.OpID, kmsg.Request) {
	switch op.Type {
	case jepsen.MetaCreate:
		q := kmsg.NewPtrCreateTopicsRequest()
		q.Version = 7
		q.TimeoutMillis = 10000
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = op.Topic, op.Partitions, 1
		q.Topics = append(q.Topics, t)
		return h.InvokeCreate(client, node, op.Topic, op.Partitions), q
	case jepsen.MetaDelete:
		q := kmsg.NewPtrDeleteTopicsRequest()
		q.Version = 4
		q.TimeoutMillis = 10000
		// Both fields: v6 names topics in Topics, earlier versions in
		// TopicNames, and a client that negotiates the version (franz-go
		// sends the highest both ends speak) may send either.
		q.TopicNames = []string{op.Topic}
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = kmsg.StringPtr(op.Topic)
		q.Topics = append(q.Topics, dt)
		return h.InvokeDelete(client, node, op.Topic), q
	case jepsen.MetaAddPartitions:
		q := kmsg.NewPtrCreatePartitionsRequest()
		q.Version = 3
		q.TimeoutMillis = 10000
		t := kmsg.NewCreatePartitionsRequestTopic()
		t.Topic, t.Count = op.Topic, op.Partitions
		q.Topics = append(q.Topics, t)
		return h.InvokeAddPartitions(client, node, op.Topic, op.Partitions), q
	case jepsen.MetaAlterConfig:
		q := kmsg.NewPtrIncrementalAlterConfigsRequest()
		q.Version = 1
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, op.Topic
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Op = MetaConfigKey, kmsg.IncrementalAlterConfigOpDelete
		if op.Value != "" {
			cfg.Op, cfg.Value = kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(op.Value)
		}
		rr.Configs = append(rr.Configs, cfg)
		q.Resources = append(q.Resources, rr)
		return h.InvokeAlterConfig(client, node, op.Topic, MetaConfigKey, op.Value), q
	case jepsen.MetaDescribeConfig:
		return h.InvokeDescribeConfig(client, node, op.Topic, MetaConfigKey), describeConfigRequest(op.Topic)
	default:
		return h.InvokeDescribe(client, node, op.Topic), describeTopicRequest(op.Topic)
	}
}

func describeConfigRequest(topic string) *kmsg.DescribeConfigsRequest {
	q := kmsg.NewPtrDescribeConfigsRequest()
	q.Version = 4
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{MetaConfigKey}
	q.Resources = append(q.Resources, rr)
	return q
}

func describeTopicRequest(topic string) *kmsg.MetadataRequest {
	q := kmsg.NewPtrMetadataRequest()
	q.Version = 12
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = &topic
	q.Topics = append(q.Topics, t)
	q.AllowAutoTopicCreation = false
	return q
}

// RecordMetaAnswer records in h the answer resp to the attempt id of op,
// and returns its error (nil for success); probe, if not nil, is told of
// the answers a coverage probe counts.
func RecordMetaAnswer(h *jepsen.MetaHistory, op MetaOp, id jepsen.OpID, resp kmsg.Response, probe func(string)) error {
	if probe == nil {
		probe = func(string) {}
	}
	fail := func(err error) error {
		h.Complete(id, err)
		return err
	}
	switch resp := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		if len(resp.Topics) != 1 || resp.Topics[0].Topic != op.Topic {
			return fail(fmt.Errorf("CreateTopics answered %d topics, not %s", len(resp.Topics), op.Topic))
		}
		t := resp.Topics[0]
		if t.ErrorCode != 0 {
			return fail(kerr.ErrorForCode(t.ErrorCode))
		}
		h.CreateOk(id, raftmeta.TopicID(t.TopicID), t.NumPartitions)
		return nil
	case *kmsg.DeleteTopicsResponse:
		if len(resp.Topics) != 1 || resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != op.Topic {
			return fail(fmt.Errorf("DeleteTopics answered %d topics, not %s", len(resp.Topics), op.Topic))
		}
		if code := resp.Topics[0].ErrorCode; code != 0 {
			return fail(kerr.ErrorForCode(code))
		}
		h.DeleteOk(id)
		return nil
	case *kmsg.CreatePartitionsResponse:
		if len(resp.Topics) != 1 || resp.Topics[0].Topic != op.Topic {
			return fail(fmt.Errorf("CreatePartitions answered %d topics, not %s", len(resp.Topics), op.Topic))
		}
		if code := resp.Topics[0].ErrorCode; code != 0 {
			if code == kerr.InvalidPartitions.Code {
				probe("meta.partitions_refused")
			}
			return fail(kerr.ErrorForCode(code))
		}
		probe("meta.partitions_added")
		h.AddPartitionsOk(id)
		return nil
	case *kmsg.IncrementalAlterConfigsResponse:
		if len(resp.Resources) != 1 || resp.Resources[0].ResourceName != op.Topic {
			return fail(fmt.Errorf("IncrementalAlterConfigs answered %d resources, not %s", len(resp.Resources), op.Topic))
		}
		if code := resp.Resources[0].ErrorCode; code != 0 {
			return fail(kerr.ErrorForCode(code))
		}
		probe("meta.config_altered")
		h.AlterConfigOk(id)
		return nil
	case *kmsg.DescribeConfigsResponse:
		value, err := DescribedConfig(resp, op.Topic)
		if err != nil {
			return fail(err)
		}
		if value != "" {
			probe("meta.config_seen_set")
		}
		h.DescribeConfigValue(id, value)
		return nil
	case *kmsg.MetadataResponse:
		if len(resp.Topics) != 1 || resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != op.Topic {
			return fail(fmt.Errorf("metadata answered %d topics, not %s", len(resp.Topics), op.Topic))
		}
		t := resp.Topics[0]
		if t.ErrorCode != 0 {
			return fail(kerr.ErrorForCode(t.ErrorCode))
		}
		h.DescribeExists(id, raftmeta.TopicID(t.TopicID), int32(len(t.Partitions)))
		return nil
	}
	return fail(fmt.Errorf("unexpected response %T", resp))
}

// DescribedConfig is the value of MetaConfigKey set on topic in a
// DescribeConfigs answer, "" if none is (a default is none).
func DescribedConfig(resp *kmsg.DescribeConfigsResponse, topic string) (string, error) {
	if len(resp.Resources) != 1 || resp.Resources[0].ResourceName != topic {
		return "", fmt.Errorf("DescribeConfigs answered %d resources, not %s", len(resp.Resources), topic)
	}
	res := resp.Resources[0]
	if res.ErrorCode != 0 {
		return "", kerr.ErrorForCode(res.ErrorCode)
	}
	value := ""
	for _, cfg := range res.Configs {
		if cfg.Name == MetaConfigKey && cfg.Source == kmsg.ConfigSourceDynamicTopicConfig && cfg.Value != nil {
			value = *cfg.Value
		}
	}
	return value, nil
}
