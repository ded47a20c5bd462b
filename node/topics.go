package node

import (
	"fmt"
	"strings"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kerr"
)

// maxTopicNameLength is Kafka's limit: 249, so that "<topic>-<partition>"
// plus a deletion suffix still fits in a 255-byte file name.
const maxTopicNameLength = 249

// validateTopicName applies Kafka's topic name rules (see topicNameProblem).
func validateTopicName(name string) *kerr.Error {
	_, err := topicNameProblem(name)
	return err
}

// topicNameProblem applies Kafka's topic name rules: 1 to 249 of
// [a-zA-Z0-9._-], and not "." or "..". It returns INVALID_TOPIC_EXCEPTION
// with a message saying which rule failed.
func topicNameProblem(name string) (string, *kerr.Error) {
	var why string
	switch {
	case name == "":
		why = "Topic name is illegal, it can't be empty"
	case name == "." || name == "..":
		why = "Topic name cannot be \".\" or \"..\""
	case len(name) > maxTopicNameLength:
		why = fmt.Sprintf("Topic name is illegal, it can't be longer than %d characters, topic name: %s", maxTopicNameLength, name)
	default:
		for i := 0; i < len(name); i++ {
			c := name[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
				why = fmt.Sprintf("Topic name %q is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'", name)
				break
			}
		}
	}
	if why == "" {
		return "", nil
	}
	return why, kerr.InvalidTopicException
}

// collisionName is the name with '.' replaced by '_': Kafka refuses a topic
// whose collision name equals an existing topic's, because both would map to
// the same metric names.
func collisionName(name string) string { return strings.ReplaceAll(name, ".", "_") }

// newTopicID draws a topic id that is neither zero nor Kafka's reserved
// metadata topic id, and not already taken.
func (b *Broker) newTopicID() raftmeta.TopicID {
	for {
		var id raftmeta.TopicID
		env.Fill(b.env.Rand, id[:])
		id[6] = id[6]&0x0f | 0x40 // version 4 UUID
		id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
		if !id.IsZero() && b.view().Topics[id] == nil {
			return id
		}
	}
}

// maxPartitionsPerTopic bounds one topic's partitions. Kafka's controller
// refuses an operation of more than 10,000 records for the same reason: a
// client asking for hundreds of thousands of partitions (a typo, or a
// fuzzer) must get an error, not a broker that spends minutes creating
// directories.
const maxPartitionsPerTopic = 10000

// topicSpec is a topic someone asked to create.
type topicSpec struct {
	name              string
	partitions        int32
	replicationFactor int16
	// assignment, when set, places each partition's replicas by hand
	// (CreateTopics' ReplicaAssignment); partitions and replicationFactor
	// are then -1.
	assignment [][]int32
	configs    map[string]string
}

// topicResult is the outcome of one topicSpec.
type topicResult struct {
	name  string
	err   *kerr.Error // nil on success
	msg   string      // the error message for the client, if any
	topic *raftmeta.Topic
}

// defaultTopicSpec is an auto-created topic: broker defaults throughout.
func (b *Broker) defaultTopicSpec(name string) topicSpec {
	return topicSpec{name: name, partitions: b.cfg.NumPartitions, replicationFactor: b.cfg.DefaultReplicationFactor}
}

// createTopics validates specs, and unless validateOnly, has the
// controller create the valid ones (placing their replicas) as one metadata
// change. done gets one result per spec, in order, once the change is
// applied here and the partitions this node leads accept appends. Names must
// be distinct (callers answer duplicates themselves). Runs on the active
// controller.
func (b *Broker) createTopics(specs []topicSpec, validateOnly bool, done func([]topicResult)) {
	for _, spec := range specs {
		if b.creating[spec.name] {
			// A creation of that name is in flight: its outcome decides
			// this one's, so this one waits for it. Answering
			// TOPIC_ALREADY_EXISTS at once would name a topic that may never
			// exist, should the creation in flight be lost with a change of
			// controller (Kafka's QuorumController holds such an answer
			// until what it read from is committed, too).
			if b.creatingDone[spec.name] == nil {
				b.creatingDone[spec.name] = &waiters{}
			}
			b.creatingDone[spec.name].add(func(error) { b.createTopics(specs, validateOnly, done) })
			return
		}
	}
	results := make([]topicResult, len(specs))
	var wanted []raftmeta.TopicSpec
	var created []int
	for i, spec := range specs {
		topic, err, msg := b.planTopic(spec)
		results[i] = topicResult{name: spec.name, err: err, msg: msg, topic: topic}
		if err == nil && !validateOnly {
			wanted = append(wanted, raftmeta.TopicSpec{
				Name: spec.name, Partitions: int32(len(topic.Partitions)), ReplicationFactor: int16(len(topic.Partitions[0].Replicas)),
				Assignment: spec.assignment, Configs: topic.Configs,
			})
			created = append(created, i)
		}
	}
	if len(wanted) == 0 {
		// Refusals decided against the controller's view wait for what
		// it holds in flight (propose); a node that is not the controller
		// answers from its image (validateOnly).
		if b.ctl == nil {
			b.env.Loop.Post(func() { done(results) })
			return
		}
		b.propose(nil, func(err error) {
			if err != nil {
				for i := range results {
					results[i].err, results[i].msg, results[i].topic = commitErrorCode(err), err.Error(), nil
				}
			}
			done(results)
		})
		return
	}
	if b.ctl == nil {
		for _, i := range created {
			results[i].err, results[i].msg, results[i].topic = kerr.NotController, kerr.NotController.Description, nil
		}
		b.env.Loop.Post(func() { done(results) })
		return
	}
	decided, records := b.ctl.CreateTopics(wanted)
	var committing []int
	for j, res := range decided {
		i := created[j]
		if res.Err != nil {
			results[i].err, results[i].msg, results[i].topic = res.Err, res.Message, nil
			continue
		}
		// The answer describes the topic as this change creates it: by the
		// time the change is applied here, later ones (partitions added,
		// configs altered, even a deletion) may have been applied with it.
		results[i].topic.ID = res.ID
		committing = append(committing, i)
		b.creating[specs[i].name] = true
	}
	b.propose(records, func(err error) {
		// Answer once every new partition's log here accepts appends.
		all := newJoin(func(error) { done(results) })
		for _, i := range committing {
			delete(b.creating, specs[i].name)
			if w := b.creatingDone[specs[i].name]; w != nil {
				delete(b.creatingDone, specs[i].name)
				defer w.wake(nil) // after this answer's results are filled in
			}
			if err != nil {
				results[i].err, results[i].msg, results[i].topic = commitErrorCode(err), err.Error(), nil
				continue
			}
			// Applying the record opened the partitions this node leads
			// (metadata_apply.go); other brokers open theirs as they apply it.
			t := b.image.Topics[results[i].topic.ID]
			if t == nil {
				continue // deleted since, by a change applied with this one
			}
			for _, mp := range t.Partitions {
				if perr := b.offline[partitionKey{t.ID, mp.Index}]; perr != nil {
					results[i].err, results[i].msg = kerr.KafkaStorageError, perr.Error()
				}
			}
			b.awaitTopicReady(t, all.add())
		}
		all.wait()
	})
}

// view is the image the controller decides from: the committed image and
// the changes it has proposed, on the active controller; the committed
// image elsewhere.
func (b *Broker) view() *raftmeta.Image {
	if b.ctl != nil {
		return b.ctl.View()
	}
	return b.image
}

// awaitTopicReady calls done once each partition of t that this node leads
// serves (a new log is ready once its first files are durable: see
// Log.Ready and recover), including one whose open waits for the removal
// of a deleted topic's directory of the same name.
func (b *Broker) awaitTopicReady(t *raftmeta.Topic, done func(error)) {
	all := newJoin(done)
	for _, mp := range t.Partitions {
		key := partitionKey{t.ID, mp.Index}
		if p := b.partitions[key]; p != nil {
			b.whenRecovered(p, all.add())
		} else if w := b.removing[partitionDir(t.Name, mp.Index)]; w != nil && mp.Leader == b.cfg.NodeID {
			// servePartitions waits on the same removal, ahead of this.
			ready := all.add()
			w.add(func(error) {
				if p := b.partitions[key]; p != nil {
					b.whenRecovered(p, ready)
					return
				}
				ready(nil)
			})
		}
	}
	all.wait()
}

// planTopic checks a spec against the image and Kafka's rules and returns
// the topic it would create, or the error code and message.
func (b *Broker) planTopic(spec topicSpec) (*raftmeta.Topic, *kerr.Error, string) {
	if why, err := topicNameProblem(spec.name); err != nil {
		return nil, err, why
	}
	view := b.view()
	if view.TopicByName(spec.name) != nil || b.creating[spec.name] {
		return nil, kerr.TopicAlreadyExists, "Topic '" + spec.name + "' already exists."
	}
	for _, other := range view.TopicNames() {
		if collisionName(other) == collisionName(spec.name) {
			return nil, kerr.InvalidTopicException, "Topic '" + spec.name + "' collides with existing topic: " + other
		}
	}
	assignment, err, why := b.placeReplicas(spec)
	if err != nil {
		return nil, err, why
	}
	if why := topicConfigsProblem(checkedConfigs(spec)); why != "" {
		return nil, kerr.InvalidConfig, why
	}
	t := &raftmeta.Topic{Name: spec.name, ID: b.newTopicID(), Configs: trimmedConfigs(spec.configs)}
	for i, replicas := range assignment {
		t.Partitions = append(t.Partitions, raftmeta.Partition{
			Index:    int32(i),
			Replicas: replicas,
			ISR:      append([]int32(nil), replicas...),
			Leader:   replicas[0],
		})
	}
	return t, nil, ""
}

// placeReplicas returns each partition's replicas: the spec's own
// assignment, checked, or a round-robin over the registered brokers.
func (b *Broker) placeReplicas(spec topicSpec) ([][]int32, *kerr.Error, string) {
	brokers := b.view().BrokerIDs()
	if spec.assignment != nil {
		return checkAssignment(spec.assignment, b.view())
	}
	switch {
	case spec.partitions <= 0:
		return nil, kerr.InvalidPartitions, "Number of partitions was set to an invalid non-positive value."
	case spec.partitions > maxPartitionsPerTopic:
		return nil, kerr.InvalidPartitions, fmt.Sprintf("Number of partitions %d is above the limit of %d per topic.", spec.partitions, maxPartitionsPerTopic)
	case spec.replicationFactor <= 0:
		return nil, kerr.InvalidReplicationFactor, "Replication factor must be larger than 0."
	case int(spec.replicationFactor) > len(brokers):
		return nil, kerr.InvalidReplicationFactor, fmt.Sprintf(
			"Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only %d broker(s) are registered.",
			spec.replicationFactor, spec.replicationFactor, len(brokers))
	}
	assignment := make([][]int32, spec.partitions)
	for p := range assignment {
		replicas := make([]int32, spec.replicationFactor)
		for r := range replicas {
			replicas[r] = brokers[(p+r)%len(brokers)]
		}
		assignment[p] = replicas
	}
	return assignment, nil, ""
}

// checkAssignment validates a manual replica assignment as Kafka does.
func checkAssignment(assignment [][]int32, image *raftmeta.Image) ([][]int32, *kerr.Error, string) {
	if len(assignment) == 0 {
		return nil, kerr.InvalidReplicaAssignment, "Replica assignment is empty."
	}
	if len(assignment) > maxPartitionsPerTopic {
		return nil, kerr.InvalidPartitions, fmt.Sprintf("Number of partitions %d is above the limit of %d per topic.", len(assignment), maxPartitionsPerTopic)
	}
	out := make([][]int32, len(assignment))
	for p, replicas := range assignment {
		if len(replicas) == 0 || len(replicas) != len(assignment[0]) {
			return nil, kerr.InvalidReplicaAssignment, "All partitions should have the same number of replicas."
		}
		seen := map[int32]bool{}
		for _, id := range replicas {
			if seen[id] {
				return nil, kerr.InvalidReplicaAssignment, fmt.Sprintf("Duplicate replica assignment found: %v", replicas)
			}
			seen[id] = true
			if _, ok := image.Brokers[id]; !ok {
				return nil, kerr.InvalidReplicaAssignment, fmt.Sprintf("The manual partition assignment includes broker %d, but no such broker is registered.", id)
			}
		}
		out[p] = append([]int32(nil), replicas...)
	}
	return out, nil, ""
}

// trimmedConfigs copies configs with surrounding spaces cut from each value,
// the form they were validated in.
func trimmedConfigs(m map[string]string) map[string]string {
	out := copyMap(m)
	for _, k := range sortedKeys(out) {
		out[k] = strings.TrimSpace(out[k])
	}
	return out
}

func copyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
