package raftmeta

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Record is one change to the image. The set of records is closed: each type
// below, encoded by EncodeRecord and decoded by DecodeRecord.
type Record interface {
	recordType() string
	applyTo(im *Image) error
}

// ClusterIDRecord names the cluster; it is the first record of every log.
type ClusterIDRecord struct {
	ClusterID string `json:"cluster_id"`
}

// RegisterBrokerRecord adds a broker or records its new incarnation.
type RegisterBrokerRecord struct {
	Broker Broker `json:"broker"`
}

// CreateTopicRecord creates a topic with all its partitions at once, so a
// topic is never seen half-made.
type CreateTopicRecord struct {
	Topic Topic `json:"topic"`
}

// DeleteTopicRecord removes a topic.
type DeleteTopicRecord struct {
	ID TopicID `json:"id"`
}

// ConfigRecord sets (Value non-nil) or removes (Value nil) one config of a
// topic or a broker.
type ConfigRecord struct {
	Resource ConfigResource `json:"resource"`
	Name     string         `json:"name"`
	Key      string         `json:"key"`
	Value    *string        `json:"value"`
}

// ConfigResource is what a ConfigRecord applies to.
type ConfigResource string

const (
	ConfigTopic  ConfigResource = "topic"
	ConfigBroker ConfigResource = "broker"
)

// ProducerIDsRecord allocates the block [First, First+Count) of producer IDs.
type ProducerIDsRecord struct {
	First int64 `json:"first"`
	Count int64 `json:"count"`
}

func (ClusterIDRecord) recordType() string      { return "cluster_id" }
func (RegisterBrokerRecord) recordType() string { return "register_broker" }
func (CreateTopicRecord) recordType() string    { return "create_topic" }
func (DeleteTopicRecord) recordType() string    { return "delete_topic" }
func (ConfigRecord) recordType() string         { return "config" }
func (ProducerIDsRecord) recordType() string    { return "producer_ids" }

func (r ClusterIDRecord) applyTo(im *Image) error {
	if r.ClusterID == "" {
		return errors.New("empty cluster id")
	}
	if im.ClusterID != "" && im.ClusterID != r.ClusterID {
		return fmt.Errorf("cluster id %q already set to %q", r.ClusterID, im.ClusterID)
	}
	im.ClusterID = r.ClusterID
	return nil
}

func (r RegisterBrokerRecord) applyTo(im *Image) error {
	if old, ok := im.Brokers[r.Broker.ID]; ok && r.Broker.Epoch <= old.Epoch {
		return fmt.Errorf("broker %d epoch %d is not after %d", r.Broker.ID, r.Broker.Epoch, old.Epoch)
	}
	im.Brokers[r.Broker.ID] = r.Broker
	return nil
}

func (r CreateTopicRecord) applyTo(im *Image) error {
	t := r.Topic
	switch {
	case t.Name == "":
		return errors.New("empty topic name")
	case t.ID.IsZero():
		return fmt.Errorf("topic %q has the zero id", t.Name)
	case im.TopicByName(t.Name) != nil:
		return fmt.Errorf("topic %q exists", t.Name)
	case im.Topics[t.ID] != nil:
		return fmt.Errorf("topic id %s is taken", t.ID)
	case len(t.Partitions) == 0:
		return fmt.Errorf("topic %q has no partitions", t.Name)
	}
	for i, p := range t.Partitions {
		if p.Index != int32(i) {
			return fmt.Errorf("topic %q partition at position %d has index %d", t.Name, i, p.Index)
		}
	}
	copied := t
	copied.Partitions = append([]Partition(nil), t.Partitions...)
	copied.Configs = copyConfigs(t.Configs)
	im.Topics[t.ID] = &copied
	im.topicNames[t.Name] = t.ID
	return nil
}

func (r DeleteTopicRecord) applyTo(im *Image) error {
	t := im.Topics[r.ID]
	if t == nil {
		return fmt.Errorf("no topic with id %s", r.ID)
	}
	delete(im.Topics, r.ID)
	delete(im.topicNames, t.Name)
	return nil
}

func (r ConfigRecord) applyTo(im *Image) error {
	var configs map[string]string
	switch r.Resource {
	case ConfigTopic:
		t := im.TopicByName(r.Name)
		if t == nil {
			return fmt.Errorf("no topic %q", r.Name)
		}
		if t.Configs == nil {
			t.Configs = map[string]string{}
		}
		configs = t.Configs
	case ConfigBroker:
		if im.BrokerConfigs[r.Name] == nil {
			im.BrokerConfigs[r.Name] = map[string]string{}
		}
		configs = im.BrokerConfigs[r.Name]
	default:
		return fmt.Errorf("unknown config resource %q", r.Resource)
	}
	if r.Value == nil {
		delete(configs, r.Key)
	} else {
		configs[r.Key] = *r.Value
	}
	return nil
}

func (r ProducerIDsRecord) applyTo(im *Image) error {
	if r.Count <= 0 || r.First != im.NextProducerID {
		return fmt.Errorf("producer id block [%d, +%d) does not follow %d", r.First, r.Count, im.NextProducerID)
	}
	im.NextProducerID = r.First + r.Count
	return nil
}

func copyConfigs(c map[string]string) map[string]string {
	if len(c) == 0 {
		return nil
	}
	out := make(map[string]string, len(c))
	for k, v := range c {
		out[k] = v
	}
	return out
}

// envelope is a record's encoding: its type tag and its body.
type envelope struct {
	Type string          `json:"type"`
	Body json.RawMessage `json:"body"`
}

// EncodeRecord encodes r for the journal or the quorum's log.
func EncodeRecord(r Record) ([]byte, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode %s record: %w", r.recordType(), err)
	}
	return json.Marshal(envelope{Type: r.recordType(), Body: body})
}

// DecodeRecord decodes what EncodeRecord produced.
func DecodeRecord(p []byte) (Record, error) {
	var e envelope
	if err := json.Unmarshal(p, &e); err != nil {
		return nil, fmt.Errorf("decode record envelope: %w", err)
	}
	switch e.Type {
	case "cluster_id":
		return decodeBody[ClusterIDRecord](e)
	case "register_broker":
		return decodeBody[RegisterBrokerRecord](e)
	case "create_topic":
		return decodeBody[CreateTopicRecord](e)
	case "delete_topic":
		return decodeBody[DeleteTopicRecord](e)
	case "config":
		return decodeBody[ConfigRecord](e)
	case "producer_ids":
		return decodeBody[ProducerIDsRecord](e)
	}
	return nil, fmt.Errorf("decode record: unknown type %q", e.Type)
}

func decodeBody[R Record](e envelope) (Record, error) {
	var r R
	if err := json.Unmarshal(e.Body, &r); err != nil {
		return nil, fmt.Errorf("decode %s record: %w", e.Type, err)
	}
	return r, nil
}
