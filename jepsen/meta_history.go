package jepsen

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The metadata history: what clients saw of topics being created, deleted,
// grown, reconfigured and described. It is a history of its own (MetaHistory, MetaEvent),
// beside the data path's History, not more Kinds of Event: its operations
// name a node and a topic, never a partition or a value, and a separate
// type keeps both JSON-lines formats small and each checker's validation
// strict (an Event of an unknown type is a malformed data history). The
// two share Kind, OpID and the classification of errors; a run that
// records both writes two files (HistoryFile, MetaHistoryFile), each with
// its own counter.
//
//	time  kind    op  client  node  what
//	1     invoke  0   0       2     create_topic "t" 3 partitions
//	2     invoke  1   1       1     describe_topic "t"
//	3     ok      1   1       1     describe_topic "t" -> absent       (node 1 lags: allowed)
//	4     ok      0   0       2     create_topic "t" -> id 5f3c...
//	5     invoke  2   1       2     describe_topic "t"
//	6     ok      2   1       2     describe_topic "t" -> id 5f3c... 3 partitions
//	7     invoke  3   0       3     delete_topic "t"
//	8     info    3   0       3     delete_topic "t": NOT_CONTROLLER   (may or may not be deleted)
//
// One JSON object a line (WriteMetaJSONL), fields as MetaEvent's tags:
//
//	{"time":4,"kind":"ok","op":0,"client":0,"type":"create_topic","node":2,"topic":"t","partitions":3,"id":"5f3c0d9e-..."}
//	{"time":6,"kind":"ok","op":2,"client":1,"type":"describe_topic","node":2,"topic":"t","partitions":3,"id":"5f3c0d9e-..."}
//	{"time":3,"kind":"ok","op":1,"client":1,"type":"describe_topic","node":1,"topic":"t","absent":true}
//	{"time":9,"kind":"invoke","op":4,"client":0,"type":"add_partitions","node":1,"topic":"t","partitions":5}
//	{"time":11,"kind":"invoke","op":5,"client":1,"type":"alter_config","node":2,"topic":"t","key":"retention.ms","value":"3600000"}
//	{"time":14,"kind":"ok","op":6,"client":1,"type":"describe_config","node":2,"topic":"t","key":"retention.ms","value":"3600000"}
//
// What the events promise and how they are judged is in meta_model.go.

// MetaHistoryFile is the name a run gives the metadata history.
const MetaHistoryFile = "meta-history.jsonl"

// MetaType says what a metadata operation or note is.
type MetaType string

const (
	// MetaCreate creates a topic (CreateTopics, one topic): the invoke
	// carries the partitions asked for; ok carries the topic id and the
	// partitions made, as the answer gave them.
	MetaCreate MetaType = "create_topic"
	// MetaDelete deletes a topic by name (DeleteTopics, one topic).
	MetaDelete MetaType = "delete_topic"
	// MetaDescribe asks one node what it knows of a topic (a Metadata
	// request naming it); ok says the topic is absent, or carries its id
	// and partition count.
	MetaDescribe MetaType = "describe_topic"
	// MetaAddPartitions grows a topic to a partition count (CreatePartitions,
	// one topic): the invoke carries the count asked for, the new total
	// (Kafka's CreatePartitions count); ok carries nothing.
	MetaAddPartitions MetaType = "add_partitions"
	// MetaAlterConfig sets one config of a topic, or deletes it back to
	// its default (IncrementalAlterConfigs, one topic, one key): the
	// invoke carries the key and the value ("" deletes); ok carries
	// nothing.
	MetaAlterConfig MetaType = "alter_config"
	// MetaDescribeConfig asks one node for one config of a topic
	// (DescribeConfigs naming the key): the invoke carries the key; ok
	// says the topic is absent, or carries the value set on the topic
	// ("" when it is not set there: the default applies).
	MetaDescribeConfig MetaType = "describe_config"
	// MetaExisting notes a topic that existed before the history began
	// (made by the harness, unrecorded): its id and partition count.
	MetaExisting MetaType = "existing_topic"
)

// NodeUnknown is the node of a create or delete when the client does not
// know which node took the request: the checker then holds no node to
// having applied the change when it answered.
const NodeUnknown int32 = -1

// PartitionsDefault is the partition count a CreateTopics asks for to get
// the broker's default (num.partitions), as Kafka encodes it.
const PartitionsDefault int32 = -1

// MetaEvent is one line of a metadata history. Which fields mean something
// depends on Kind and Type; the rest are zero (and absent from JSON, but
// for node, which 0 names).
type MetaEvent struct {
	// Time is the logical timestamp: strictly increasing along a history.
	Time int64 `json:"time"`
	Kind Kind  `json:"kind"`
	// Op ties an invoke to its completion. Notes carry an op id of their
	// own.
	Op     int      `json:"op"`
	Client int      `json:"client"`
	Type   MetaType `json:"type"`
	// Node is the node the request went to (Kafka's node.id): the one
	// whose image a describe reads, the one that forwarded a create or a
	// delete to the controller (NodeUnknown if the client cannot say).
	Node  int32  `json:"node"`
	Topic string `json:"topic"`
	// Create invoke: the partitions asked for (PartitionsDefault: the
	// broker's default). Add-partitions invoke: the count to grow to. Create ok: the partitions made (0 when the answer
	// did not say). Describe ok of a topic that exists, existing note: its
	// partition count (0 when unknown).
	Partitions int32 `json:"partitions,omitempty"`
	// Create ok, describe ok, existing note: the topic id, as
	// raftmeta.TopicID.String formats it; "" when the answer carried none
	// (Kafka's zero UUID: CreateTopics before v7, Metadata before v10).
	ID string `json:"id,omitempty"`
	// Describe ok: the node answered that the topic does not exist.
	Absent bool `json:"absent,omitempty"`
	// Config operations: the config's name; the value set (alter
	// invoke) or shown (describe_config ok), "" for none set on the
	// topic. Topics are created with none set (a create records no
	// configs).
	Key   string `json:"key,omitempty"`
	Value string `json:"value,omitempty"`
	// Describe invoke: a final read, made once the cluster has converged
	// and every other operation has completed or been given up: it must
	// show the latest state.
	Final bool `json:"final,omitempty"`
	// Fail and info: what went wrong, and the Kafka error code if the
	// broker answered with one (0 for a transport failure).
	Error string `json:"error,omitempty"`
	Code  int16  `json:"code,omitempty"`
}

func (e MetaEvent) String() string {
	head := fmt.Sprintf("#%d %s op %d client %d", e.Time, e.Kind, e.Op, e.Client)
	what := fmt.Sprintf("%s %q on node %d", e.Type, e.Topic, e.Node)
	if e.Type == MetaExisting {
		what = fmt.Sprintf("%s %q", e.Type, e.Topic)
	}
	switch {
	case e.Kind == KindFail || e.Kind == KindInfo:
		return fmt.Sprintf("%s %s: %s", head, what, e.Error)
	case e.Kind == KindInvoke && e.Type == MetaCreate:
		return fmt.Sprintf("%s %s, %s", head, what, describePartitions(e.Partitions))
	case e.Kind == KindInvoke && e.Type == MetaAddPartitions:
		return fmt.Sprintf("%s %s, to %s", head, what, describePartitions(e.Partitions))
	case e.Kind == KindInvoke && e.Type == MetaAlterConfig:
		return fmt.Sprintf("%s %s, %s", head, what, describeConfig(e.Key, e.Value))
	case e.Kind == KindInvoke && e.Type == MetaDescribeConfig && e.Final:
		return fmt.Sprintf("%s %s, %s (final read)", head, what, e.Key)
	case e.Kind == KindInvoke && e.Type == MetaDescribeConfig:
		return fmt.Sprintf("%s %s, %s", head, what, e.Key)
	case e.Kind == KindInvoke && e.Final:
		return fmt.Sprintf("%s %s (final read)", head, what)
	case e.Kind == KindInvoke:
		return head + " " + what
	case e.Type == MetaDelete:
		return head + " " + what + " -> deleted"
	case e.Type == MetaAddPartitions:
		return head + " " + what + " -> grown"
	case e.Type == MetaAlterConfig:
		return head + " " + what + " -> altered"
	case e.Absent:
		return head + " " + what + " -> absent"
	case e.Type == MetaDescribeConfig:
		return head + " " + what + " -> " + describeConfig(e.Key, e.Value)
	}
	return fmt.Sprintf("%s %s -> %s", head, what, describeTopicState(e.ID, e.Partitions))
}

// describeConfig says what a config is set to: "retention.ms=60000", or
// "retention.ms unset".
func describeConfig(key, value string) string {
	if value == "" {
		return key + " unset"
	}
	return key + "=" + value
}

// isMetaRead reports whether operations of type t read the metadata and
// change nothing.
func isMetaRead(t MetaType) bool { return t == MetaDescribe || t == MetaDescribeConfig }

func describePartitions(n int32) string {
	switch {
	case n == PartitionsDefault:
		return "default partitions"
	case n == 1:
		return "1 partition"
	}
	return fmt.Sprintf("%d partitions", n)
}

// describeTopicState names an existing topic by its id and partition
// count, either possibly unknown.
func describeTopicState(id string, partitions int32) string {
	s := "id " + shortTopicID(id)
	if id == "" {
		s = "id unknown"
	}
	if partitions > 0 {
		s += ", " + describePartitions(partitions)
	}
	return s
}

// shortTopicID is the first group of a canonical UUID, enough to tell a
// history's topics apart.
func shortTopicID(id string) string {
	if i := strings.IndexByte(id, '-'); i > 0 {
		return id[:i]
	}
	return id
}

// topicIDString is the history's form of a topic id: canonical, "" for the
// zero UUID.
func topicIDString(id raftmeta.TopicID) string {
	if id.IsZero() {
		return ""
	}
	return id.String()
}

// MetaHistory is a recording of metadata operations. The zero value is
// ready to use. It is not safe for concurrent use.
//
// As with History, recording methods never fail loudly: a misuse is
// remembered, Err returns the first, and CheckMeta reports it.
type MetaHistory struct {
	events []MetaEvent
	clock  int64
	opNext int
	// open maps an invoked, not yet completed operation to its invoke.
	open map[OpID]int
	// topics are the names operated on, in order of first appearance.
	topics []string
	// configKeys are the config keys operated on, by topic, sorted: the
	// final images are described for them.
	configKeys map[string][]string
	err        error
}

// NewMetaHistory returns an empty metadata history.
func NewMetaHistory() *MetaHistory { return &MetaHistory{} }

// Events returns the recorded events, in time order. The caller must not
// modify them.
func (h *MetaHistory) Events() []MetaEvent { return h.events }

// Err returns the first misuse of the recording methods, or nil.
func (h *MetaHistory) Err() error { return h.err }

func (h *MetaHistory) fail(format string, args ...any) {
	if h.err == nil {
		h.err = fmt.Errorf(format, args...)
	}
}

func (h *MetaHistory) append(e MetaEvent) {
	h.clock++
	e.Time = h.clock
	if !slices.Contains(h.topics, e.Topic) {
		h.topics = append(h.topics, e.Topic)
	}
	h.events = append(h.events, e)
}

func (h *MetaHistory) invoke(e MetaEvent) OpID {
	if h.open == nil {
		h.open = make(map[OpID]int)
	}
	if e.Topic == "" {
		h.fail("%s by client %d names no topic", e.Type, e.Client)
	}
	id := OpID(h.opNext)
	h.opNext++
	e.Kind = KindInvoke
	e.Op = int(id)
	h.open[id] = len(h.events)
	h.append(e)
	return id
}

// InvokeCreate records a client's call, sent to node, to create topic with
// partitions partitions (PartitionsDefault for the broker's default).
func (h *MetaHistory) InvokeCreate(client int, node int32, topic string, partitions int32) OpID {
	return h.invoke(MetaEvent{Client: client, Type: MetaCreate, Node: node, Topic: topic, Partitions: partitions})
}

// InvokeDelete records a client's call, sent to node, to delete topic by
// name.
func (h *MetaHistory) InvokeDelete(client int, node int32, topic string) OpID {
	return h.invoke(MetaEvent{Client: client, Type: MetaDelete, Node: node, Topic: topic})
}

// InvokeAddPartitions records a client's call, sent to node, to grow
// topic to count partitions in all (CreatePartitions).
func (h *MetaHistory) InvokeAddPartitions(client int, node int32, topic string, count int32) OpID {
	return h.invoke(MetaEvent{Client: client, Type: MetaAddPartitions, Node: node, Topic: topic, Partitions: count})
}

// InvokeAlterConfig records a client's call, sent to node, to set topic's
// config key to value, or to delete it (value "") so that its default
// applies (IncrementalAlterConfigs with one SET or DELETE).
func (h *MetaHistory) InvokeAlterConfig(client int, node int32, topic, key, value string) OpID {
	h.noteKey(topic, key)
	return h.invoke(MetaEvent{Client: client, Type: MetaAlterConfig, Node: node, Topic: topic, Key: key, Value: value})
}

// AlterConfigOk records that config change id succeeded.
func (h *MetaHistory) AlterConfigOk(id OpID) { h.ok(id, MetaAlterConfig, MetaEvent{}) }

// InvokeDescribeConfig records a client's DescribeConfigs request to node
// for topic's config key.
func (h *MetaHistory) InvokeDescribeConfig(client int, node int32, topic, key string) OpID {
	h.noteKey(topic, key)
	return h.invoke(MetaEvent{Client: client, Type: MetaDescribeConfig, Node: node, Topic: topic, Key: key})
}

// DescribeConfigValue records that describe_config id found the topic
// with its config set to value ("" when it is not set on the topic).
func (h *MetaHistory) DescribeConfigValue(id OpID, value string) {
	h.ok(id, MetaDescribeConfig, MetaEvent{Value: value})
}

func (h *MetaHistory) noteKey(topic, key string) {
	if h.configKeys == nil {
		h.configKeys = make(map[string][]string)
	}
	if keys := h.configKeys[topic]; !slices.Contains(keys, key) {
		h.configKeys[topic] = slices.Insert(keys, sortedIndex(keys, key), key)
	}
}

func sortedIndex(keys []string, key string) int {
	i, _ := slices.BinarySearch(keys, key)
	return i
}

// InvokeDescribe records a client's Metadata request to node about topic.
// A Metadata request naming several topics is recorded as one describe per
// topic, invoked before and completed after it. The request must not
// create topics (allow_auto_topic_creation false, and the brokers'
// auto.create.topics.enable off): a describe is a read.
func (h *MetaHistory) InvokeDescribe(client int, node int32, topic string) OpID {
	return h.invoke(MetaEvent{Client: client, Type: MetaDescribe, Node: node, Topic: topic})
}

// InvokeFinalDescribe records a final read of topic on node: a describe
// made once the faults have stopped, the cluster has converged, and every
// other operation has completed or been given up. It must show the latest
// state of the topic: what every acknowledged change, and those of unknown
// outcome that took effect, left.
func (h *MetaHistory) InvokeFinalDescribe(client int, node int32, topic string) OpID {
	return h.invoke(MetaEvent{Client: client, Type: MetaDescribe, Node: node, Topic: topic, Final: true})
}

// complete closes operation id with e and returns the invoke event.
func (h *MetaHistory) complete(id OpID, e MetaEvent) (MetaEvent, bool) {
	at, ok := h.open[id]
	if !ok {
		h.fail("metadata operation %d completed (%s) but is not open: never invoked or already completed", id, e.Kind)
		return MetaEvent{}, false
	}
	delete(h.open, id)
	inv := h.events[at]
	e.Op, e.Client, e.Type, e.Node, e.Topic, e.Key = inv.Op, inv.Client, inv.Type, inv.Node, inv.Topic, inv.Key
	h.append(e)
	return inv, true
}

// ok closes operation id, which must be of type want, with the result in e.
func (h *MetaHistory) ok(id OpID, want MetaType, e MetaEvent) {
	e.Kind = KindOk
	inv, ok := h.complete(id, e)
	if ok && inv.Type != want {
		h.fail("metadata operation %d is a %s, completed as a %s", id, inv.Type, want)
	}
}

// CreateOk records that create id succeeded: the topic's id and the
// partitions made, as the answer gave them (the zero id and 0 when it
// did not).
func (h *MetaHistory) CreateOk(id OpID, topicID raftmeta.TopicID, partitions int32) {
	h.ok(id, MetaCreate, MetaEvent{ID: topicIDString(topicID), Partitions: max(partitions, 0)})
}

// DeleteOk records that delete id succeeded.
func (h *MetaHistory) DeleteOk(id OpID) { h.ok(id, MetaDelete, MetaEvent{}) }

// AddPartitionsOk records that add-partitions id succeeded: the topic has
// the count its invoke asked for.
func (h *MetaHistory) AddPartitionsOk(id OpID) { h.ok(id, MetaAddPartitions, MetaEvent{}) }

// DescribeExists records that describe id found the topic, with its id
// (zero if the answer carried none) and its partition count.
func (h *MetaHistory) DescribeExists(id OpID, topicID raftmeta.TopicID, partitions int32) {
	h.ok(id, MetaDescribe, MetaEvent{ID: topicIDString(topicID), Partitions: max(partitions, 0)})
}

// DescribeAbsent records that describe or describe_config id found no such
// topic (UNKNOWN_TOPIC_OR_PARTITION for it).
func (h *MetaHistory) DescribeAbsent(id OpID) {
	want := MetaDescribe
	if at, ok := h.open[id]; ok && h.events[at].Type == MetaDescribeConfig {
		want = MetaDescribeConfig
	}
	h.ok(id, want, MetaEvent{Absent: true})
}

// Fail records that operation id definitely did not take effect.
func (h *MetaHistory) Fail(id OpID, err error) { h.end(id, KindFail, err) }

// Info records that nobody knows whether operation id took effect.
func (h *MetaHistory) Info(id OpID, err error) { h.end(id, KindInfo, err) }

// Complete records the error that ended operation id as ClassifyMeta
// judges it for the operation's type. For a describe, an
// UNKNOWN_TOPIC_OR_PARTITION answer is not a failure but the answer
// "absent" (DescribeAbsent), and any other error a failed read. A nil err
// is a misuse: success needs its result (CreateOk, DeleteOk, ...).
func (h *MetaHistory) Complete(id OpID, err error) {
	at, open := h.open[id]
	switch {
	case err == nil:
		h.fail("metadata operation %d completed with a nil error; use CreateOk, DeleteOk or a Describe result", id)
		h.end(id, KindInfo, errors.New("completed with a nil error"))
	case !open:
		h.end(id, KindInfo, err) // complete reports the misuse
	case isMetaRead(h.events[at].Type) && isCode(err, kerr.UnknownTopicOrPartition.Code):
		h.DescribeAbsent(id)
	case isMetaRead(h.events[at].Type) || ClassifyMeta(h.events[at].Type, err) == Failed:
		h.end(id, KindFail, err)
	default:
		h.end(id, KindInfo, err)
	}
}

// isCode reports whether err is the Kafka error with code, and only it,
// as the broker answered it.
func isCode(err error, code int16) bool {
	if _, notSent := errors.AsType[*notSentError](err); notSent {
		return false
	}
	ke, ok := errors.AsType[*kerr.Error](err)
	return ok && ke.Code == code && Classify(err) == Failed
}

func (h *MetaHistory) end(id OpID, kind Kind, err error) {
	e := MetaEvent{Kind: kind}
	if err != nil {
		e.Error = err.Error()
		if ke, ok := errors.AsType[*kerr.Error](err); ok {
			e.Code = ke.Code
		}
	}
	h.complete(id, e)
}

// Existing notes that topic existed, with its id and partition count,
// before the history began (the harness made it and did not record how),
// applied on every node: the harness waits until each node's image holds
// it before the history starts, so no describe may show it absent without
// a deletion. It must come before any operation on the topic.
func (h *MetaHistory) Existing(topic string, topicID raftmeta.TopicID, partitions int32) {
	if slices.Contains(h.topics, topic) {
		h.fail("existing topic %q noted after operations on it", topic)
	}
	e := MetaEvent{Kind: KindNote, Op: h.opNext, Client: -1, Type: MetaExisting, Node: NodeUnknown,
		Topic: topic, ID: topicIDString(topicID), Partitions: max(partitions, 0)}
	h.opNext++
	h.append(e)
}

// FinalImage records, as final describes on img.Node, what that node's
// image holds once the cluster has converged: one for every topic the
// history names and every topic of the image, in name order, and for a
// present topic one final describe_config of each config key the history
// names for it. The
// simulator, which can read a node's image directly, calls it for each
// node that is up at the end of the liveness phase; CheckConverged judges
// the same images without the model.
func (h *MetaHistory) FinalImage(client int, img FinalImage) {
	names := append([]string(nil), h.topics...)
	for _, name := range img.topicNames() {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		id := h.InvokeFinalDescribe(client, img.Node, name)
		t, ok := img.Topics[name]
		if !ok {
			h.DescribeAbsent(id)
			continue
		}
		h.DescribeExists(id, t.ID, t.Partitions)
		for _, key := range h.configKeys[name] {
			id := h.invoke(MetaEvent{Client: client, Type: MetaDescribeConfig, Node: img.Node, Topic: name, Key: key, Final: true})
			h.DescribeConfigValue(id, t.Configs[key])
		}
	}
}

// Pending returns the operations invoked and not yet completed, in invoke
// order. The checker treats them as info.
func (h *MetaHistory) Pending() []OpID {
	var ids []OpID
	for _, e := range h.events {
		if e.Kind != KindInvoke {
			continue
		}
		if _, open := h.open[OpID(e.Op)]; open {
			ids = append(ids, OpID(e.Op))
		}
	}
	return ids
}

// WriteMetaJSONL writes a metadata history as JSON lines, one event a line.
func WriteMetaJSONL(w io.Writer, events []MetaEvent) error {
	return writeJSONL(w, events, "metadata event")
}

// ReadMetaHistory reads events written by WriteMetaJSONL. It checks only
// the JSON; CheckMetaEvents validates the history itself.
func ReadMetaHistory(r io.Reader) ([]MetaEvent, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var events []MetaEvent
	for {
		var e MetaEvent
		err := dec.Decode(&e)
		if errors.Is(err, io.EOF) {
			return events, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read metadata event %d: %w", len(events), err)
		}
		events = append(events, e)
	}
}

// WriteMetaArtifacts writes what a person needs to study a metadata
// history, each file to a writer that create returns for its name (see
// WriteArtifacts): the history as JSON lines (MetaHistoryFile), and for
// each topic name porcupine's HTML visualization,
// "meta-linearizability-<topic>.html". A malformed history still gets its
// history file, then the error.
func WriteMetaArtifacts(events []MetaEvent, cfg MetaConfig, create func(name string) (io.Writer, error)) error {
	if err := writeArtifact(MetaHistoryFile, create, func(w io.Writer) error { return WriteMetaJSONL(w, events) }); err != nil {
		return err
	}
	a, err := analyzeMeta(events)
	if err != nil {
		return fmt.Errorf("malformed metadata history: %w", err)
	}
	cfg.Config = cfg.Config.withDefaults()
	model := MetaModel(cfg.StrictRefusals)
	for _, topic := range a.topics {
		_, info := porcupine.CheckOperationsVerbose(model, a.porcupineOps(topic), cfg.Timeout)
		name := "meta-linearizability-" + fileSafe(topic) + ".html"
		if err := writeArtifact(name, create, func(w io.Writer) error { return porcupine.Visualize(model, info, w) }); err != nil {
			return err
		}
	}
	return nil
}
