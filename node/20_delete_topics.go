package node

import (
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopics, versions 0-6.
//
//   - Topics are named by TopicNames before v6, and by name or by id in
//     Topics from v6. An unknown name gets UNKNOWN_TOPIC_OR_PARTITION, an
//     unknown id UNKNOWN_TOPIC_ID. As in Kafka, an entry with both a name
//     and an id, or neither, gets INVALID_REQUEST; a name or id given twice
//     gets one INVALID_REQUEST result and is not deleted; a name whose topic
//     is also named by id gets INVALID_REQUEST while the id deletes it.
//     Results follow the request's order (Kafka shuffles them).
//   - The deletions are one metadata change. The answer comes once it is
//     committed and the topics' partitions are removed from this broker's
//     disk, so a client can recreate the name at once; until then the name
//     is reserved (TOPIC_ALREADY_EXISTS to another client's CreateTopics).
//     Errors closing or removing files are logged: the topic is deleted all
//     the same. A partition directory that cannot be removed keeps the name
//     reserved until a restart removes it, so that a new topic of that name
//     never opens the deleted one's records.
//   - A topic whose deletion another request has in flight is waited for,
//     and the request is then handled afresh, so it sees the topic gone
//     (UNKNOWN_TOPIC_OR_PARTITION) and never commits a second deletion. A
//     topic still being created is not yet known, so it is unknown here.
//   - A TimeoutMillis of zero or less gets REQUEST_TIMED_OUT for every entry
//     and deletes nothing, as Kafka's controller does.
//   - Results carry the name (v0+), the id (v6+), and ErrorMessage (v5+).
func (b *Broker) handleDeleteTopics(r *request) {
	req := r.body.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	targets := req.Topics
	if req.Version < 6 {
		targets = make([]kmsg.DeleteTopicsRequestTopic, len(req.TopicNames))
		for i := range req.TopicNames {
			targets[i].Topic = &req.TopicNames[i]
		}
	}
	if req.TimeoutMillis <= 0 {
		for _, t := range targets {
			resp.Topics = append(resp.Topics, deleteTopicResult(t.Topic, t.TopicID, kerr.RequestTimedOut,
				"The request's timeout passed before it ran: TimeoutMillis must be positive."))
		}
		r.respond(resp)
		return
	}
	plan := b.planDeletions(targets)
	if plan.waitFor != nil {
		b.deleting.onFinish(*plan.waitFor, func() { b.handleDeleteTopics(r) })
		return
	}
	resp.Topics = plan.results
	b.deleteTopics(plan.topics, func(err error) {
		if err != nil {
			for _, i := range plan.slots {
				msg := err.Error()
				resp.Topics[i].ErrorCode, resp.Topics[i].ErrorMessage = commitErrorCode(err).Code, &msg
			}
		}
		r.respond(resp)
	})
}

// deletionPlan is what a DeleteTopics request will do.
type deletionPlan struct {
	results []kmsg.DeleteTopicsResponseTopic
	topics  []*raftmeta.Topic // to delete
	slots   []int             // slots[i] is the result of topics[i]
	// waitFor, when set, is a topic another request is deleting: the
	// request must wait for that deletion before it can be planned.
	waitFor *raftmeta.TopicID
}

// planDeletions resolves every entry against the image.
func (b *Broker) planDeletions(targets []kmsg.DeleteTopicsRequestTopic) deletionPlan {
	var plan deletionPlan
	names, ids := map[string]int{}, map[raftmeta.TopicID]int{}
	for _, t := range targets {
		switch {
		case t.Topic != nil && t.TopicID == [16]byte{}:
			names[*t.Topic]++
		case t.Topic == nil && t.TopicID != [16]byte{}:
			ids[t.TopicID]++
		}
	}
	add := func(t kmsg.DeleteTopicsRequestTopic, err *kerr.Error, msg string) {
		plan.results = append(plan.results, deleteTopicResult(t.Topic, t.TopicID, err, msg))
	}
	answeredNames, answeredIDs := map[string]bool{}, map[raftmeta.TopicID]bool{}
	for _, t := range targets {
		switch {
		case t.Topic != nil && t.TopicID != [16]byte{}:
			add(t, kerr.InvalidRequest, "You may not specify both topic name and topic id.")
			continue
		case t.Topic == nil && t.TopicID == [16]byte{}:
			add(t, kerr.InvalidRequest, "Neither topic name nor id were specified.")
			continue
		case t.Topic != nil && names[*t.Topic] > 1:
			if !answeredNames[*t.Topic] {
				add(t, kerr.InvalidRequest, "Duplicate topic name.")
				answeredNames[*t.Topic] = true
			}
			continue
		case t.Topic == nil && ids[t.TopicID] > 1:
			if !answeredIDs[t.TopicID] {
				add(t, kerr.InvalidRequest, "Duplicate topic id.")
				answeredIDs[t.TopicID] = true
			}
			continue
		}
		topic, err, msg := b.resolveDeletion(t, ids)
		if err != nil {
			if topic != nil {
				t.TopicID = topic.ID
			}
			add(t, err, msg)
			continue
		}
		if b.deleting.pending(topic.ID) {
			id := topic.ID
			return deletionPlan{waitFor: &id}
		}
		name := topic.Name
		plan.slots = append(plan.slots, len(plan.results))
		plan.results = append(plan.results, deleteTopicResult(&name, topic.ID, nil, ""))
		plan.topics = append(plan.topics, topic)
	}
	return plan
}

// resolveDeletion finds the topic an entry names; ids counts the topics
// named by id in the request.
func (b *Broker) resolveDeletion(t kmsg.DeleteTopicsRequestTopic, ids map[raftmeta.TopicID]int) (*raftmeta.Topic, *kerr.Error, string) {
	if t.Topic == nil {
		if topic := b.image.Topics[t.TopicID]; topic != nil {
			return topic, nil, ""
		}
		return nil, kerr.UnknownTopicID, ""
	}
	topic := b.image.TopicByName(*t.Topic)
	switch {
	case topic == nil:
		return nil, kerr.UnknownTopicOrPartition, ""
	case ids[topic.ID] > 0:
		return topic, kerr.InvalidRequest, "The provided topic name maps to an ID that was already supplied."
	}
	return topic, nil, ""
}

func deleteTopicResult(name *string, id [16]byte, err *kerr.Error, msg string) kmsg.DeleteTopicsResponseTopic {
	rt := kmsg.NewDeleteTopicsResponseTopic()
	if name != nil {
		n := *name
		rt.Topic = &n
	}
	rt.TopicID = id
	if err != nil {
		rt.ErrorCode = err.Code
		if msg == "" {
			msg = err.Description
		}
		rt.ErrorMessage = &msg
	}
	return rt
}

// deleteTopics commits the deletion of topics as one metadata change, then
// removes their partitions, then calls done with the commit's error.
func (b *Broker) deleteTopics(topics []*raftmeta.Topic, done func(error)) {
	if len(topics) == 0 {
		b.env.Loop.Post(func() { done(nil) })
		return
	}
	if b.ctl == nil {
		b.env.Loop.Post(func() { done(errNotController) })
		return
	}
	ids := make([]raftmeta.TopicID, len(topics))
	for i, t := range topics {
		ids[i] = t.ID
		b.deleting.start(t.ID)
	}
	// The topics were resolved against the view just now, so the
	// controller finds each of them.
	_, records := b.ctl.DeleteTopics(ids)
	finish := func(err error) {
		for _, t := range topics {
			b.deleting.finish(t.ID)
		}
		done(err)
	}
	// Applying the deletion removes the partitions on every broker that
	// has them (metadata_apply.go).
	b.propose(records, finish)
}
