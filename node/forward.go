package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Requests for the controller (KIP-590's forwarding, as KRaft brokers do).
//
// A request that changes metadata (CreateTopics, DeleteTopics, ...) may
// reach any broker. The active controller serves it itself; any other node
// wraps the client's request, frame and all, in an Envelope (key 58) to the
// controller's CONTROLLER listener, which runs the very same handler and
// wraps its answer in the Envelope's response. The controller answers once
// the change is committed and applied there; the forwarding broker answers
// the client once it has applied the change too (the controller names the
// index in a tagged field of the Envelope's response), so the client's next
// Metadata on the broker it asked already shows it.

// appliedIndexTag is the tagged field, in the responses of one Sluice node
// to another (Envelope, BrokerRegistration), that names the metadata index
// the answer reflects. Tags above 10,000 are far from any Kafka assigns.
const appliedIndexTag = 10001

// setAppliedIndex writes index into tags.
func setAppliedIndex(tags *kmsg.Tags, index uint64) {
	tags.Set(appliedIndexTag, binary.AppendUvarint(nil, index))
}

// appliedIndexOf reads what setAppliedIndex wrote; 0 if absent.
func appliedIndexOf(tags kmsg.Tags) uint64 {
	var index uint64
	tags.Each(func(key uint32, val []byte) {
		if key == appliedIndexTag {
			index, _ = binary.Uvarint(val)
		}
	})
	return index
}

// forwardedKeys are the APIs a broker forwards to the active controller.
var forwardedKeys = map[int16]bool{
	19: true, // CreateTopics
	20: true, // DeleteTopics
	33: true, // AlterConfigs
	37: true, // CreatePartitions
	43: true, // ElectLeaders
	44: true, // IncrementalAlterConfigs
	45: true, // AlterPartitionReassignments
	46: true, // ListPartitionReassignments
	80: true, // AddRaftVoter
	81: true, // RemoveRaftVoter
}

// controllerRequestTimeout bounds a wait for the controller: the client's
// own timeout where its request has one, this otherwise.
const controllerRequestTimeout = 30 * time.Second

// forControllers wraps the handler of an API that changes metadata: the
// active controller runs it, any other node forwards the request.
func (b *Broker) forControllers(handle func(*request)) func(*request) {
	return func(r *request) {
		switch {
		case b.meta.activeTerm != 0:
			handle(r)
		case r.forwarded != nil || r.c.controller:
			// Sent to a node that is not (or no longer) the controller:
			// the sender finds the new one and retries.
			r.respond(errorResponse(r.body, kerr.NotController))
		default:
			b.forward(r)
		}
	}
}

// forward sends r to the active controller in an Envelope and answers the
// client with the controller's answer, once this node has applied it.
func (b *Broker) forward(r *request) {
	env := kmsg.NewPtrEnvelopeRequest()
	env.RequestData = r.raw
	timeout := forwardTimeout(r.body)
	start := b.mono.now
	b.toController(env, timeout, func(resp kmsg.Response, err error) {
		if err == nil {
			er := resp.(*kmsg.EnvelopeResponse)
			if er.ErrorCode != 0 {
				err = kerr.ErrorForCode(er.ErrorCode)
			} else {
				b.answerWhenApplied(r, er, timeout-b.mono.now.Sub(start))
				return
			}
		}
		if errors.Is(err, errBecameController) {
			b.dispatch(r) // forControllers now serves it here
			return
		}
		b.env.Log.Debug("forwarding to the controller failed", "request", r.header.String(), "err", err)
		code := kerr.NotController
		if errors.Is(err, errControllerTimeout) {
			code = kerr.RequestTimedOut
		}
		r.respond(errorResponse(r.body, code))
	})
}

// answerWhenApplied answers a forwarded request with the controller's
// answer once this node has applied the change, so that the client's next
// request here already sees it. If this node has not applied it within
// what is left of the request's timeout (it cannot hear the quorum), the
// answer is REQUEST_TIMED_OUT, retriable: the change is committed, but a
// success would promise what this node's image does not show yet (a
// describe here right after would not find the topic; the simulator's
// model caught it, sim run --nodes 5 --broker-only 2 --seed 938). A retry
// finds the change made (TOPIC_ALREADY_EXISTS for a creation).
func (b *Broker) answerWhenApplied(r *request, er *kmsg.EnvelopeResponse, left time.Duration) {
	index := appliedIndexOf(er.UnknownTags)
	if index <= b.meta.applied {
		r.respondFrame(er.ResponseData)
		return
	}
	answered := false
	b.whenApplied(index, func(error) {
		if !answered {
			answered = true
			r.respondFrame(er.ResponseData)
		}
	})
	b.env.Clock.AfterFunc(max(left, time.Millisecond), func() {
		if !answered {
			answered = true
			b.env.Log.Debug("a forwarded request timed out before this node applied its change", "request", r.header.String(), "index", index)
			r.respond(errorResponse(r.body, kerr.RequestTimedOut))
		}
	})
}

// forwardTimeout is how long a forwarded request may wait for the
// controller: the client's own timeout where the request carries one,
// controllerRequestTimeout otherwise.
func forwardTimeout(req kmsg.Request) time.Duration {
	var ms int32
	switch req := req.(type) {
	case *kmsg.CreateTopicsRequest:
		ms = req.TimeoutMillis
	case *kmsg.DeleteTopicsRequest:
		ms = req.TimeoutMillis
	case *kmsg.CreatePartitionsRequest:
		ms = req.TimeoutMillis
	case *kmsg.ElectLeadersRequest:
		ms = req.TimeoutMillis
	case *kmsg.AlterPartitionAssignmentsRequest:
		ms = req.TimeoutMillis
	case *kmsg.ListPartitionReassignmentsRequest:
		ms = req.TimeoutMillis
	case *kmsg.AddRaftVoterRequest:
		ms = req.TimeoutMillis
	}
	if ms <= 0 {
		return controllerRequestTimeout
	}
	return time.Duration(ms) * time.Millisecond
}

// errBecameController is a request for the controller that waited for one
// while this node became it.
var errBecameController = errors.New("node: this node became the active controller")

// errControllerTimeout is a request to the controller that got no answer
// within its timeout: REQUEST_TIMED_OUT for the client, which retries.
var errControllerTimeout = errors.New("node: no answer from the controller in time")

// handleEnvelope serves, on the active controller, a request another node
// forwarded: it runs the request's own handler and wraps the answer.
func (b *Broker) handleEnvelope(r *request) {
	req := r.body.(*kmsg.EnvelopeRequest)
	resp := req.ResponseKind().(*kmsg.EnvelopeResponse)
	inner, err := b.table.ParseRequest(req.RequestData)
	if err != nil || !forwardedKeys[inner.Header.Key] {
		resp.ErrorCode = kerr.InvalidRequest.Code
		r.respond(resp)
		return
	}
	fr := &request{header: inner.Header, body: inner.Body}
	fr.forwarded = func(frame []byte) {
		resp.ResponseData = frame
		setAppliedIndex(&resp.UnknownTags, b.meta.applied)
		r.respond(resp)
	}
	b.dispatch(fr)
}

// toController sends req to the active controller and calls done with its
// answer, or with an error once controllerRequestTimeout has passed without
// one (no controller known, or one that does not answer): the caller
// answers a retriable error, and its client retries.
func (b *Broker) toController(req kmsg.Request, timeout time.Duration, done func(kmsg.Response, error)) {
	answered := false
	finish := func(resp kmsg.Response, err error) {
		if !answered {
			answered = true
			done(resp, err)
		}
	}
	timer := b.env.Clock.AfterFunc(timeout, func() {
		if answered {
			return
		}
		// Answered before the close below, which fails the request still
		// pending on the connection and would answer first, with a
		// closed connection instead of the timeout.
		finish(nil, fmt.Errorf("%w (%v)", errControllerTimeout, timeout))
		if b.ctlConn != nil {
			// The connection may be stuck behind a partition: the next
			// request dials afresh.
			b.ctlConn.Close()
			b.ctlConn = nil
		}
	})
	b.controllerClient(func(c *wire.Client, err error) {
		if answered {
			return
		}
		if err != nil {
			timer.Stop()
			finish(nil, err)
			return
		}
		c.Request(req, func(resp kmsg.Response, err error) {
			timer.Stop()
			if err != nil && b.ctlConn == c {
				b.ctlConn = nil
			}
			finish(resp, err)
		})
	})
}

// controllerClient calls done with a connection to the active controller's
// CONTROLLER listener, dialing it if need be.
func (b *Broker) controllerClient(done func(*wire.Client, error)) {
	leader := nodeIDOfRaft(b.meta.leader)
	if leader < 0 && (!b.cfg.Roles().IsController() || b.removedFromQuorum()) {
		// A broker that is not yet a learner (or a controller removed from
		// the quorum) hears nothing of the quorum: it asks the voters in
		// turn, and those that do not lead answer NOT_CONTROLLER.
		voters := b.cfg.Voters()
		if len(voters) > 0 {
			b.ctlProbe++
			leader = voters[b.ctlProbe%len(voters)].ID
		}
	}
	if leader < 0 || leader == b.cfg.NodeID {
		// No controller known, or this node leads but is not active yet:
		// wait for the quorum to say more. Should this node become the
		// active controller meanwhile, the caller serves the request
		// itself (errBecameController): waiting again for a leader other
		// than itself held such a request until its timeout.
		b.meta.leaderWaiters.add(func(error) {
			if b.meta.activeTerm != 0 {
				done(nil, errBecameController)
				return
			}
			b.controllerClient(done)
		})
		return
	}
	if c := b.ctlConn; c != nil && b.ctlConnTo == leader {
		b.env.Loop.Post(func() { done(c, nil) })
		return
	}
	if b.ctlConn != nil {
		b.ctlConn.Close()
		b.ctlConn = nil
	}
	addr, ok := b.voterAddr(leader)
	if !ok {
		b.env.Loop.Post(func() { done(nil, fmt.Errorf("node: no address for controller %d", leader)) })
		return
	}
	wire.Dial(b.env.Net, addr, fmt.Sprintf("sluice-broker-%d", b.cfg.NodeID), func(c *wire.Client, err error) {
		if err != nil {
			done(nil, fmt.Errorf("node: dial controller %d at %s: %w", leader, addr, err))
			return
		}
		b.ctlConn, b.ctlConnTo = c, leader
		done(c, nil)
	})
}

// voterAddr is a voter's CONTROLLER address: from controller.quorum.voters,
// or learned from the quorum for a voter added since (AddRaftVoter).
func (b *Broker) voterAddr(id int32) (string, bool) { return b.voterAddrOf(raftIDOf(id)) }

// errorResponse answers every part of a forwarded kind of request with
// code.
func errorResponse(req kmsg.Request, code *kerr.Error) kmsg.Response {
	msg := code.Description
	switch req := req.(type) {
	case *kmsg.CreateTopicsRequest:
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, t := range req.Topics {
			resp.Topics = append(resp.Topics, createTopicError(t.Topic, code, msg))
		}
		return resp
	case *kmsg.DeleteTopicsRequest:
		resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
		for _, t := range req.Topics {
			resp.Topics = append(resp.Topics, deleteTopicResult(t.Topic, t.TopicID, code, msg))
		}
		for _, name := range req.TopicNames {
			name := name
			resp.Topics = append(resp.Topics, deleteTopicResult(&name, [16]byte{}, code, msg))
		}
		return resp
	case *kmsg.AlterConfigsRequest:
		resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
		for _, res := range req.Resources {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = res.ResourceType, res.ResourceName, code.Code, &msg
			resp.Resources = append(resp.Resources, rr)
		}
		return resp
	case *kmsg.IncrementalAlterConfigsRequest:
		resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		for _, res := range req.Resources {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = res.ResourceType, res.ResourceName, code.Code, &msg
			resp.Resources = append(resp.Resources, rr)
		}
		return resp
	case *kmsg.CreatePartitionsRequest:
		resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code.Code, &msg
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.ElectLeadersRequest:
		resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
		resp.ErrorCode = code.Code
		return resp
	case *kmsg.AlterPartitionAssignmentsRequest:
		resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
		resp.ErrorCode, resp.ErrorMessage = code.Code, &msg
		return resp
	case *kmsg.ListPartitionReassignmentsRequest:
		resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
		resp.ErrorCode, resp.ErrorMessage = code.Code, &msg
		return resp
	case *kmsg.AddRaftVoterRequest:
		resp := req.ResponseKind().(*kmsg.AddRaftVoterResponse)
		resp.ErrorCode, resp.ErrorMessage = code.Code, &msg
		return resp
	case *kmsg.RemoveRaftVoterRequest:
		resp := req.ResponseKind().(*kmsg.RemoveRaftVoterResponse)
		resp.ErrorCode, resp.ErrorMessage = code.Code, &msg
		return resp
	}
	panic(fmt.Sprintf("node: no error response for %T", req))
}

// autoCreate creates topics for Metadata's auto-creation: here on the
// active controller, else by a CreateTopics forwarded to it. done gets each
// spec's outcome (only the name and error are set for a forwarded one).
func (b *Broker) autoCreate(specs []topicSpec, done func([]topicResult)) {
	if b.meta.activeTerm != 0 {
		b.createTopics(specs, false, done)
		return
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(controllerRequestTimeout / time.Millisecond)
	for _, spec := range specs {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = spec.name, -1, -1
		req.Topics = append(req.Topics, rt)
	}
	b.forwardRequest(req, func(resp kmsg.Response, err error) {
		results := make([]topicResult, len(specs))
		byName := map[string]int16{}
		if err == nil {
			for _, rt := range resp.(*kmsg.CreateTopicsResponse).Topics {
				byName[rt.Topic] = rt.ErrorCode
			}
		}
		for i, spec := range specs {
			results[i].name = spec.name
			switch code, ok := byName[spec.name]; {
			case err != nil || !ok:
				results[i].err = kerr.LeaderNotAvailable
			case code != 0:
				results[i].err = kerr.ErrorForCode(code).(*kerr.Error)
			}
		}
		done(results)
	})
}

// forwardRequest sends a request of this node's own to the active
// controller in an Envelope, as forward does a client's, and calls done
// with the answer once this node has applied it.
func (b *Broker) forwardRequest(req kmsg.Request, done func(kmsg.Response, error)) {
	req.SetVersion(b.servedMax(req.Key()))
	env := kmsg.NewPtrEnvelopeRequest()
	env.RequestData = wire.AppendRequest(nil, 0, fmt.Sprintf("sluice-broker-%d", b.cfg.NodeID), req)[4:]
	b.toController(env, controllerRequestTimeout, func(resp kmsg.Response, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		er := resp.(*kmsg.EnvelopeResponse)
		if er.ErrorCode != 0 {
			done(nil, kerr.ErrorForCode(er.ErrorCode))
			return
		}
		if len(er.ResponseData) < 4 {
			done(nil, fmt.Errorf("node: the controller's answer to %s is %d bytes", kmsg.NameForKey(req.Key()), len(er.ResponseData)))
			return
		}
		_, body, err := wire.ParseResponse(er.ResponseData[4:], req.Key(), req.GetVersion())
		if err != nil {
			done(nil, err)
			return
		}
		inner := req.ResponseKind()
		if err := inner.ReadFrom(body); err != nil {
			done(nil, fmt.Errorf("node: decode the controller's %s answer: %w", kmsg.NameForKey(req.Key()), err))
			return
		}
		b.whenApplied(appliedIndexOf(er.UnknownTags), func(error) { done(inner, nil) })
	})
}

// servedMax is the highest version this node serves of an API.
func (b *Broker) servedMax(key int16) int16 {
	v, _ := b.table.Versions(key)
	return v.Max
}

// controllerIDForClients is the controller id Metadata and DescribeCluster
// report: the active controller when it is a broker clients can reach (a
// combined node), else, as Kafka's KRaft brokers answer, some live broker
// (the lowest unfenced id; Kafka picks one at random), -1 when none.
// Clients send their admin requests there, and any broker forwards them.
func (b *Broker) controllerIDForClients() int32 {
	if id := nodeIDOfRaft(b.meta.leader); id >= 0 {
		if br, ok := b.image.Brokers[id]; ok && !br.Fenced {
			return id
		}
	}
	for _, id := range b.image.BrokerIDs() {
		if !b.image.Brokers[id].Fenced {
			return id
		}
	}
	return -1
}
