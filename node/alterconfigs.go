package node

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// What AlterConfigs (33) and IncrementalAlterConfigs (44) share: both check
// each resource as Kafka's broker and controller do, turn the topic changes
// into ConfigRecords, and commit them as one metadata change.
//
// Checks, in order, each failing only its resource:
//   - a resource named twice: INVALID_REQUEST for each occurrence;
//   - a config named twice in one resource: INVALID_REQUEST;
//   - a null value (except to DELETE): INVALID_REQUEST;
//   - an unknown operation: INVALID_REQUEST;
//   - BROKER: the name must be empty or this broker's id (INVALID_REQUEST);
//     the dynamic broker configs are the replication throttle rates
//     (throttle.go: leader. and follower.replication.throttled.rate, a
//     LONG at least 0, else INVALID_CONFIG), set on the cluster default
//     ("") or a broker; any other change is INVALID_REQUEST, as Kafka
//     answers for a key it cannot change dynamically;
//   - TOPIC: the empty name is INVALID_REQUEST, an invalid one
//     INVALID_TOPIC_EXCEPTION; the configs as they would be must be known
//     topic configs with valid values (INVALID_CONFIG); then the topic must
//     exist (UNKNOWN_TOPIC_OR_PARTITION);
//   - BROKER_LOGGER: INVALID_REQUEST (log levels are fixed at start);
//   - any other type: INVALID_REQUEST.
//
// A change that leaves a value as it is writes no record. A topic with a
// deletion or another config change in flight is waited for, and the request
// starts over, so each change is checked against the configs it replaces.

// alterResource is one resource a request alters.
type alterResource struct {
	typ  kmsg.ConfigResourceType
	name string
	ops  []alterOp
	// replace makes the listed configs the resource's whole set
	// (AlterConfigs); otherwise the ops apply one by one.
	replace bool
}

// alterOp is one change of one config.
type alterOp struct {
	key   string
	op    kmsg.IncrementalAlterConfigOp
	value *string
}

// alterResult is one resource's outcome.
type alterResult struct {
	err *kerr.Error
	msg string
}

// codeAndMessage is the result as a response carries it.
func (res alterResult) codeAndMessage() (int16, *string) {
	if res.err == nil {
		return 0, nil
	}
	msg := res.msg
	if msg == "" {
		msg = res.err.Description
	}
	return res.err.Code, &msg
}

// alterConfigs plans and applies resources for either alter API, then calls
// answer with one result per resource. A plan that must first wait for
// another change to the same resource reruns retry (the whole handler) once
// that change is done.
func (b *Broker) alterConfigs(resources []alterResource, validateOnly bool, retry func(), answer func([]alterResult)) {
	plan := b.planAlterConfigs(resources)
	if plan.waitFor != nil {
		plan.waitFor(retry)
		return
	}
	b.applyAlterPlan(plan, validateOnly, answer)
}

// alterPlan is what a request will do.
type alterPlan struct {
	results []alterResult
	records []raftmeta.Record
	topics  []string // the topics records change
	slots   []int    // results that depend on the commit
	// waitFor, when set, is a change in flight the request must wait for.
	waitFor func(func())
}

// planAlterConfigs checks every resource and collects the records.
func (b *Broker) planAlterConfigs(resources []alterResource) alterPlan {
	type resourceKey struct {
		typ  kmsg.ConfigResourceType
		name string
	}
	seen := map[resourceKey]int{}
	for _, res := range resources {
		seen[resourceKey{res.typ, res.name}]++
	}
	var plan alterPlan
	for _, res := range resources {
		unique := seen[resourceKey{res.typ, res.name}] == 1
		if res.typ == kmsg.ConfigResourceTypeTopic && unique {
			if wait := b.topicChangeInFlight(res.name); wait != nil {
				return alterPlan{waitFor: wait}
			}
		}
		var records []raftmeta.Record
		result := alterResult{kerr.InvalidRequest, "Each resource must appear at most once."}
		if unique {
			if result.err, result.msg = checkAlterOps(res.ops); result.err == nil {
				records, result.err, result.msg = b.planAlterResource(res)
			}
		}
		if len(records) > 0 {
			plan.slots = append(plan.slots, len(plan.results))
			plan.records = append(plan.records, records...)
			if res.typ == kmsg.ConfigResourceTypeTopic {
				plan.topics = append(plan.topics, res.name)
			}
		}
		plan.results = append(plan.results, result)
	}
	return plan
}

// topicChangeInFlight returns, when the named topic has a deletion or a
// config change in flight, how to wait for it; nil otherwise.
func (b *Broker) topicChangeInFlight(name string) func(func()) {
	if t := b.image.TopicByName(name); t != nil && b.deleting.pending(t.ID) {
		return func(f func()) { b.deleting.onFinish(t.ID, f) }
	}
	if b.altering.pending(name) {
		return func(f func()) { b.altering.onFinish(name, f) }
	}
	return nil
}

// checkAlterOps applies the checks that do not depend on the resource.
func checkAlterOps(ops []alterOp) (*kerr.Error, string) {
	keys := map[string]bool{}
	var nulls []string
	for _, op := range ops {
		if keys[op.key] {
			return kerr.InvalidRequest, "Error due to duplicate config keys"
		}
		keys[op.key] = true
		if op.value == nil && op.op != kmsg.IncrementalAlterConfigOpDelete {
			nulls = append(nulls, op.key)
		}
	}
	if len(nulls) > 0 {
		return kerr.InvalidRequest, "Null value not supported for : " + strings.Join(nulls, ", ")
	}
	for _, op := range ops {
		if op.op < kmsg.IncrementalAlterConfigOpSet || op.op > kmsg.IncrementalAlterConfigOpSubtract {
			return kerr.InvalidRequest, fmt.Sprintf("Unknown operations type %d", op.op)
		}
	}
	return nil, ""
}

// planAlterResource checks one resource and returns its records.
func (b *Broker) planAlterResource(res alterResource) ([]raftmeta.Record, *kerr.Error, string) {
	switch res.typ {
	case kmsg.ConfigResourceTypeTopic:
		return b.planAlterTopic(res)
	case kmsg.ConfigResourceTypeBroker:
		if len(res.ops) > 0 && throttleRatesOnly(res.ops) {
			// Any broker's: the controller writes them for every broker.
			if id, err := strconv.ParseInt(res.name, 10, 32); res.name != "" && (err != nil || id < 0) {
				return nil, kerr.InvalidRequest, "Node id must be an integer, but it is: " + res.name
			}
			return b.planAlterBroker(res)
		}
		if res.name != "" {
			if err, msg := b.checkBrokerName(res.name, "Node id must be an integer, but it is: ",
				"Unexpected broker id, expected %d, but received %s"); err != nil {
				return nil, err, msg
			}
		}
		if len(res.ops) == 0 {
			return nil, nil, ""
		}
		keys := make([]string, len(res.ops))
		for i, op := range res.ops {
			keys[i] = op.key
		}
		return nil, kerr.InvalidRequest, "Cannot update these configs dynamically: " + strings.Join(sortedStrings(keys), ", ")
	case kmsg.ConfigResourceTypeBrokerLogger:
		if res.replace {
			break // AlterConfigs does not know the type: unknown, as in Kafka
		}
		return nil, kerr.InvalidRequest, "Sluice cannot change its log level at runtime."
	case kmsg.ConfigResourceTypeGroupConfig, kmsg.ConfigResourceTypeClientMetrics:
		return nil, kerr.InvalidRequest, fmt.Sprintf("Resource type %s is not supported.", res.typ)
	}
	return nil, kerr.InvalidRequest, fmt.Sprintf("Unknown resource type %d", int8(res.typ))
}

// throttleRatesOnly reports whether every op is on a throttle rate.
func throttleRatesOnly(ops []alterOp) bool {
	for _, op := range ops {
		if op.key != leaderThrottledRateConfig && op.key != followerThrottledRateConfig {
			return false
		}
	}
	return true
}

// planAlterBroker checks a broker resource's throttle rates and returns the
// records that set them (for AlterConfigs, the resource's whole set).
func (b *Broker) planAlterBroker(res alterResource) ([]raftmeta.Record, *kerr.Error, string) {
	current := b.image.BrokerConfigs[res.name]
	next := map[string]string{}
	for _, k := range []string{leaderThrottledRateConfig, followerThrottledRateConfig} {
		if v, ok := current[k]; ok && !res.replace {
			next[k] = v
		}
	}
	for _, op := range res.ops {
		switch op.op {
		case kmsg.IncrementalAlterConfigOpSet:
			if why := throttleRateProblem(op.key, *op.value); why != "" {
				return nil, kerr.InvalidConfig, why
			}
			next[op.key] = strings.TrimSpace(*op.value)
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(next, op.key)
		default:
			return nil, kerr.InvalidConfig, fmt.Sprintf("Can't %s to key %s because its type is not LIST.", op.op, op.key)
		}
	}
	var records []raftmeta.Record
	for _, k := range []string{leaderThrottledRateConfig, followerThrottledRateConfig} {
		old, had := current[k]
		v, has := next[k]
		switch {
		case has && (!had || old != v):
			records = append(records, raftmeta.ConfigRecord{Resource: raftmeta.ConfigBroker, Name: res.name, Key: k, Value: &v})
		case !has && had:
			records = append(records, raftmeta.ConfigRecord{Resource: raftmeta.ConfigBroker, Name: res.name, Key: k})
		}
	}
	return records, nil, ""
}

// planAlterTopic computes a topic's configs after the change, checks them,
// and returns the records that make the change.
func (b *Broker) planAlterTopic(res alterResource) ([]raftmeta.Record, *kerr.Error, string) {
	if res.name == "" {
		return nil, kerr.InvalidRequest, "Default topic resources are not allowed."
	}
	if why, err := topicNameProblem(res.name); err != nil {
		return nil, err, why
	}
	t := b.image.TopicByName(res.name)
	var current map[string]string
	if t != nil {
		current = t.Configs
	}
	next, err, msg := b.alteredConfigs(current, res)
	if err != nil {
		return nil, err, msg
	}
	if why := topicConfigsProblem(checkedConfigs(topicSpec{name: res.name, configs: next})); why != "" {
		return nil, kerr.InvalidConfig, why
	}
	if t == nil {
		return nil, kerr.UnknownTopicOrPartition, ""
	}
	return configRecords(res.name, current, next), nil, ""
}

// alteredConfigs applies a resource's ops to a copy of current.
func (b *Broker) alteredConfigs(current map[string]string, res alterResource) (map[string]string, *kerr.Error, string) {
	next := map[string]string{}
	if !res.replace {
		for _, k := range sortedKeys(current) {
			next[k] = current[k]
		}
	}
	for _, op := range res.ops {
		switch op.op {
		case kmsg.IncrementalAlterConfigOpSet:
			next[op.key] = *op.value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(next, op.key)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			def, ok := lookupTopicConfig(op.key)
			if !ok || def.kind != kindList {
				return nil, kerr.InvalidConfig, fmt.Sprintf("Can't %s to key %s because its type is not LIST.", op.op, op.key)
			}
			old, ok := next[op.key]
			if !ok {
				old = def.defaultValue(b.cfg)
			}
			next[op.key] = editList(old, *op.value, op.op == kmsg.IncrementalAlterConfigOpAppend)
		}
	}
	return next, nil, ""
}

// editList adds (append) or removes the comma-separated items of change
// to or from the list old, as Kafka does: appending skips items already
// there, and the result keeps the original order.
func editList(old, change string, append_ bool) string {
	var items []string
	for _, item := range strings.Split(old, ",") {
		if item != "" {
			items = append(items, item)
		}
	}
	for _, item := range strings.Split(change, ",") {
		i := indexOf(items, item)
		switch {
		case append_ && i < 0:
			items = append(items, item)
		case !append_ && i >= 0:
			items = append(items[:i], items[i+1:]...)
		}
	}
	return strings.Join(items, ",")
}

func indexOf(items []string, s string) int {
	for i, item := range items {
		if item == s {
			return i
		}
	}
	return -1
}

// configRecords returns the records that turn a topic's configs from
// current into next, in key order.
func configRecords(topic string, current, next map[string]string) []raftmeta.Record {
	var records []raftmeta.Record
	for _, k := range sortedKeys(current) {
		if _, ok := next[k]; !ok {
			records = append(records, raftmeta.ConfigRecord{Resource: raftmeta.ConfigTopic, Name: topic, Key: k})
		}
	}
	for _, k := range sortedKeys(next) {
		if v := strings.TrimSpace(next[k]); current[k] != v {
			records = append(records, raftmeta.ConfigRecord{Resource: raftmeta.ConfigTopic, Name: topic, Key: k, Value: &v})
		}
	}
	return records
}

// applyAlterPlan commits the plan's records unless validateOnly, then calls
// done with every resource's result.
func (b *Broker) applyAlterPlan(plan alterPlan, validateOnly bool, done func([]alterResult)) {
	if validateOnly || len(plan.records) == 0 {
		// Decided against the controller's view, with nothing to write:
		// answered once that view is known to be the controller's
		// (propose), as CreateTopics answers its refusals.
		if b.ctl == nil {
			b.env.Loop.Post(func() { done(plan.results) })
			return
		}
		b.propose(nil, func(err error) {
			if err != nil {
				for i := range plan.results {
					plan.results[i] = alterResult{commitErrorCode(err), err.Error()}
				}
			}
			done(plan.results)
		})
		return
	}
	for _, name := range plan.topics {
		b.altering.start(name)
	}
	if b.ctl == nil {
		b.env.Loop.Post(func() {
			for _, i := range plan.slots {
				plan.results[i] = alterResult{kerr.NotController, kerr.NotController.Description}
			}
			done(plan.results)
		})
		return
	}
	errs, records := b.ctl.AlterConfigs(configAlterations(plan.records))
	for _, e := range errs {
		if e != nil {
			// The plan was checked against the view just now; a refusal
			// is a resource gone in between.
			for _, i := range plan.slots {
				plan.results[i] = alterResult{e, e.Description}
			}
			b.env.Loop.Post(func() { done(plan.results) })
			return
		}
	}
	b.propose(records, func(err error) {
		if err != nil {
			for _, i := range plan.slots {
				plan.results[i] = alterResult{commitErrorCode(err), err.Error()}
			}
		}
		for _, name := range plan.topics {
			b.altering.finish(name)
			if err == nil {
				b.reconfigureTopic(name)
			}
		}
		done(plan.results)
	})
}

// reconfigureTopic applies a topic's committed configs to its open
// partition logs, so a change takes effect at once, as in Kafka.
func (b *Broker) reconfigureTopic(name string) {
	t := b.image.TopicByName(name)
	if t == nil {
		return
	}
	for _, mp := range t.Partitions {
		p := b.partitions[partitionKey{t.ID, mp.Index}]
		if p == nil {
			continue
		}
		if err := p.log.Reconfigure(b.logConfig(t, mp.Index)); err != nil {
			b.env.Log.Error("apply topic config to partition", "topic", name, "partition", mp.Index, "err", err)
		}
		b.setFlushMessages(p, b.flushMessagesOf(t))
		p.rep.SetMinInSync(b.minInSync(t))
		b.replicaReady(p)
		b.failUnderMinISR(p)
	}
}

// sortedStrings returns the strings sorted, for messages that list names.
func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// configAlterations groups config records by resource, in order, as the
// controller takes them.
func configAlterations(records []raftmeta.Record) []raftmeta.ConfigAlteration {
	var alts []raftmeta.ConfigAlteration
	for _, r := range records {
		c := r.(raftmeta.ConfigRecord)
		if n := len(alts); n == 0 || alts[n-1].Resource != c.Resource || alts[n-1].Name != c.Name {
			alts = append(alts, raftmeta.ConfigAlteration{Resource: c.Resource, Name: c.Name})
		}
		alts[len(alts)-1].Changes = append(alts[len(alts)-1].Changes, raftmeta.ConfigEntry{Key: c.Key, Value: c.Value})
	}
	return alts
}
