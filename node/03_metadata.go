package node

import (
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metadata, versions 0-12.
//
//   - Which topics: v0 treats an empty list as "all topics"; v1+ uses a null
//     list for all and an empty one for none. v10+ carries topic ids, and
//     v12+ may ask by id alone; an unknown id gets UNKNOWN_TOPIC_ID.
//   - Auto-creation: when auto.create.topics.enable is on and the request
//     allows it (always before v4, AllowAutoTopicCreation from v4), an unknown
//     topic with a valid name is created with num.partitions and
//     default.replication.factor. The request waits for the creation to
//     commit and then describes the topic, so the client needs no retry; a
//     topic that another request is creating at that moment is answered with
//     LEADER_NOT_AVAILABLE, which clients retry. A creation that fails (a
//     replication factor above the registered brokers:
//     INVALID_REPLICATION_FACTOR) answers the topic, by name and without
//     partitions, with the creation's error, as Kafka's broker does when it
//     creates the topic itself (ZooKeeper mode); Kafka's KRaft broker
//     forwards the creation to its controller without waiting and answers
//     UNKNOWN_TOPIC_OR_PARTITION, but Sluice's broker is its own controller
//     and knows. The failure is logged once per topic per
//     autoCreateLogInterval, however often clients retry.
//   - An invalid name gets INVALID_TOPIC_EXCEPTION; an unknown topic
//     UNKNOWN_TOPIC_OR_PARTITION.
//   - Authorized operations (v8+) are reported when asked; with no ACLs yet,
//     every operation is allowed.
//   - Brokers: only unfenced ones, as Kafka's KRaft broker lists them, so a
//     client forgets a dead broker once the controller fences it (sarama
//     keeps a group coordinator by id while Metadata lists it, and would
//     dial the dead one forever). Replicas and ISR keep their ids.
func (b *Broker) handleMetadata(r *request) {
	req := r.body.(*kmsg.MetadataRequest)
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	autoCreate := b.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	var create []string
	if !all && autoCreate {
		for _, t := range req.Topics {
			if t.Topic != nil && b.image.TopicByName(*t.Topic) == nil && validateTopicName(*t.Topic) == nil && !b.creating[*t.Topic] {
				create = append(create, *t.Topic)
			}
		}
	}
	if len(create) == 0 {
		r.respond(b.metadataResponse(req, all))
		return
	}
	names := dedupe(create)
	specs := make([]topicSpec, len(names))
	for i, name := range names {
		specs[i] = b.defaultTopicSpec(name)
	}
	b.autoCreate(specs, func(results []topicResult) {
		// Describing the topics now tells the client what happened: created,
		// being created by another request, or the creation's error.
		failed := map[string]*kerr.Error{}
		for _, res := range results {
			if res.err != nil && res.err != kerr.TopicAlreadyExists && b.image.TopicByName(res.name) == nil {
				failed[res.name] = res.err
				b.autoCreates.failed(b.env, res)
			}
		}
		resp := b.metadataResponse(req, all)
		for i, mt := range resp.Topics {
			if err := failed[derefName(mt.Topic)]; err != nil && mt.ErrorCode == kerr.UnknownTopicOrPartition.Code {
				resp.Topics[i].ErrorCode = err.Code
			}
		}
		r.respond(resp)
	})
}

func derefName(name *string) string {
	if name == nil {
		return ""
	}
	return *name
}

// autoCreateLogInterval is how often a topic's failing auto-creation is
// logged again while clients keep asking for it.
const autoCreateLogInterval = 10 * time.Minute

// autoCreateFailures rate-limits the log lines of failed auto-creations:
// a client retries Metadata for its topic every few hundred milliseconds,
// and one line per request would bury everything else.
type autoCreateFailures struct {
	// logged holds each topic's last logged failure, at most
	// autoCreateFailuresMax topics (then it starts over, which only logs
	// some failures again).
	logged map[string]autoCreateFailure
}

type autoCreateFailure struct {
	code   int16
	at     time.Time
	repeat int // failures since the line was logged
}

const autoCreateFailuresMax = 1000

// failed logs res's failure unless the same failure of the same topic was
// logged less than autoCreateLogInterval ago.
func (a *autoCreateFailures) failed(e env.Env, res topicResult) {
	now := e.Clock.Now()
	last, seen := a.logged[res.name]
	if seen && last.code == res.err.Code && now.Sub(last.at) < autoCreateLogInterval {
		last.repeat++
		a.logged[res.name] = last
		return
	}
	if a.logged == nil || (!seen && len(a.logged) >= autoCreateFailuresMax) {
		a.logged = map[string]autoCreateFailure{}
	}
	a.logged[res.name] = autoCreateFailure{code: res.err.Code, at: now}
	e.Log.Warn("auto-creation of a topic failed", "topic", res.name, "error", res.err.Message, "reason", res.msg,
		"failures_since_last_logged", last.repeat, "logged_again_after", autoCreateLogInterval.String())
}

// rackOf is a broker's rack as Metadata and DescribeCluster carry it: null
// when it has none.
func rackOf(rack string) *string {
	if rack == "" {
		return nil
	}
	return &rack
}

// metadataResponse describes the brokers and the requested topics as the
// image has them now.
func (b *Broker) metadataResponse(req *kmsg.MetadataRequest, all bool) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	for _, id := range b.image.BrokerIDs() {
		br := b.image.Brokers[id]
		if br.Fenced {
			continue // Kafka lists alive brokers only (getAliveBrokerNodes)
		}
		rb := kmsg.NewMetadataResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.Rack = br.ID, br.Host, br.Port, rackOf(br.Rack)
		resp.Brokers = append(resp.Brokers, rb)
	}
	clusterID := b.image.ClusterID
	resp.ClusterID = &clusterID
	resp.ControllerID = b.controllerIDForClients()
	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = clusterOperationsAll
	}
	if all {
		for _, name := range b.image.TopicNames() {
			resp.Topics = append(resp.Topics, b.describeTopic(req, b.image.TopicByName(name)))
		}
		return resp
	}
	for _, rt := range req.Topics {
		resp.Topics = append(resp.Topics, b.describeRequestedTopic(req, rt))
	}
	return resp
}

// describeRequestedTopic answers one requested topic, by name or by id.
func (b *Broker) describeRequestedTopic(req *kmsg.MetadataRequest, rt kmsg.MetadataRequestTopic) kmsg.MetadataResponseTopic {
	if rt.Topic == nil {
		t := b.image.Topics[raftmeta.TopicID(rt.TopicID)]
		if t == nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.TopicID = rt.TopicID
			mt.ErrorCode = kerr.UnknownTopicID.Code
			return mt
		}
		return b.describeTopic(req, t)
	}
	name := *rt.Topic
	if t := b.image.TopicByName(name); t != nil {
		return b.describeTopic(req, t)
	}
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = &name
	switch {
	case validateTopicName(name) != nil:
		mt.ErrorCode = kerr.InvalidTopicException.Code
	case b.creating[name]:
		mt.ErrorCode = kerr.LeaderNotAvailable.Code
	default:
		mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
	}
	return mt
}

func (b *Broker) describeTopic(req *kmsg.MetadataRequest, t *raftmeta.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = t.Name == offsetsTopic
	if req.IncludeTopicAuthorizedOperations {
		mt.AuthorizedOperations = topicOperationsAll
	}
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.Index
		mp.Leader = p.Leader
		mp.LeaderEpoch = p.LeaderEpoch
		mp.Replicas = append([]int32(nil), p.Replicas...)
		mp.ISR = append([]int32(nil), p.ISR...)
		mp.OfflineReplicas = []int32{}
		if b.offline[partitionKey{t.ID, p.Index}] != nil {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
			mp.OfflineReplicas = append(mp.OfflineReplicas, b.cfg.NodeID)
		} else if _, ok := b.image.Brokers[p.Leader]; !ok {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// The authorized-operations bit sets Kafka reports when every operation is
// allowed: bit n set for AclOperation code n.
const (
	// READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
	topicOperationsAll int32 = 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11
	// CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
	// IDEMPOTENT_WRITE, CREATE_TOKENS, DESCRIBE_TOKENS
	clusterOperationsAll int32 = 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12 | 1<<13 | 1<<14
)

func dedupe(names []string) []string {
	seen := make(map[string]bool, len(names))
	out := names[:0:0]
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}
