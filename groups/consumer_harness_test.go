package groups

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/groups/assign"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cgClient is a KIP-848 member as a transcript or workload drives it: the
// id and epoch it was given and the partitions it owns. A real consumer
// revokes what its new assignment leaves out and then owns the new
// assignment; held is an assignment it was told but has not acted on yet
// (it is still revoking).
type cgClient struct {
	memberID string
	epoch    int32
	owned    assign.Assignment
	held     *assign.Assignment
}

// topicID is a test topic's id: its name's bytes, so ids sort by name.
func topicID(name string) assign.TopicID {
	var id assign.TopicID
	copy(id[:], name)
	return id
}

// clusterTopics is a harness's cluster: topic name -> partitions.
type clusterTopics map[string]int32

func (c clusterTopics) list() []TopicInfo {
	var out []TopicInfo
	for _, name := range sortedKeys(c) {
		out = append(out, TopicInfo{Name: name, ID: topicID(name), Partitions: c[name]})
	}
	return out
}

// parseTopics reads (t:3,u:2).
func parseTopics(vals []string) clusterTopics {
	c := clusterTopics{}
	for _, v := range vals {
		name, n, _ := strings.Cut(v, ":")
		p, _ := strconv.Atoi(n)
		c[name] = int32(p)
	}
	return c
}

func (h *harness) topicName(id assign.TopicID) string {
	return strings.TrimRight(string(id[:]), "\x00")
}

func (h *harness) formatAssignment(a assign.Assignment) string {
	var ts []string
	for _, tp := range a {
		var ps []string
		for _, p := range tp.Partitions {
			ps = append(ps, strconv.Itoa(int(p)))
		}
		ts = append(ts, h.topicName(tp.Topic)+":"+strings.Join(ps, ","))
	}
	return "(" + strings.Join(ts, " ") + ")"
}

func (h *harness) formatConsumerRecord(k recordKey, value []byte) string {
	who := k.group
	if k.member != "" {
		who += " " + h.name(k.member)
	}
	kind := map[int16]string{keyCGMetadata: "epoch", keyCGPartitions: "partitions", keyCGMember: "member",
		keyCGTargetMetadata: "target-epoch", keyCGTargetMember: "target", keyCGCurrent: "current"}[k.version]
	if value == nil {
		return fmt.Sprintf("cg %s %s tombstone", kind, who)
	}
	var body string
	var err error
	switch k.version {
	case keyCGMetadata, keyCGTargetMetadata:
		var e int32
		e, err = decodeEpochValue(kind, value)
		body = strconv.Itoa(int(e))
	case keyCGPartitions:
		var ts []topicMeta
		ts, err = decodePartitionMetadata(value)
		var out []string
		for _, t := range ts {
			out = append(out, fmt.Sprintf("%s:%d", t.name, t.partitions))
		}
		body = "(" + strings.Join(out, " ") + ")"
	case keyCGMember:
		var m memberSubscription
		m, err = decodeMemberSubscription(value)
		body = fmt.Sprintf("topics=(%s)", strings.Join(m.topicNames, ","))
		if m.regex != nil {
			body += fmt.Sprintf(" regex=%q", *m.regex)
		}
		if m.instanceID != nil {
			body += " instance=" + *m.instanceID
		}
		if m.assignor != nil {
			body += " assignor=" + *m.assignor
		}
	case keyCGTargetMember:
		var a assign.Assignment
		a, err = decodeTargetMember(value)
		body = h.formatAssignment(a)
	case keyCGCurrent:
		var m memberAssignment
		m, err = decodeMemberAssignment(value)
		body = fmt.Sprintf("epoch=%d prev=%d %s assigned=%s", m.epoch, m.previousEpoch, m.state, h.formatAssignment(m.assigned))
		if len(m.revoking) > 0 {
			body += " revoking=" + h.formatAssignment(m.revoking)
		}
	}
	require.NoError(h.t, err)
	return fmt.Sprintf("cg %s %s %s", kind, who, body)
}

func (h *harness) formatConsumerResponse(resp kmsg.Response) (string, bool) {
	switch r := resp.(type) {
	case *kmsg.ConsumerGroupHeartbeatResponse:
		if r.ErrorCode != 0 {
			return errName(r.ErrorCode), true
		}
		s := fmt.Sprintf("ok id=%s epoch=%d", h.name(deref(r.MemberID)), r.MemberEpoch)
		if r.Assignment != nil {
			var a assign.Assignment
			for _, t := range r.Assignment.Topics {
				a = append(a, assign.TopicPartitions{Topic: t.TopicID, Partitions: t.Partitions})
			}
			s += " assigned=" + h.formatAssignment(a)
		}
		return s, true
	case *kmsg.ConsumerGroupDescribeResponse:
		var gs []string
		for _, g := range r.Groups {
			if g.ErrorCode != 0 {
				gs = append(gs, g.Group+" "+errName(g.ErrorCode))
				continue
			}
			var ms []string
			for _, m := range g.Members {
				ms = append(ms, fmt.Sprintf("%s@%d%s->%s", h.name(m.MemberID), m.MemberEpoch,
					h.formatDescribedAssignment(m.Assignment), h.formatDescribedAssignment(m.TargetAssignment)))
			}
			gs = append(gs, fmt.Sprintf("%s %s epoch=%d assignment-epoch=%d assignor=%s members=(%s)", g.Group, g.State,
				g.Epoch, g.AssignmentEpoch, g.AssignorName, strings.Join(ms, " ")))
		}
		return strings.Join(gs, "; "), true
	case *kmsg.OffsetFetchResponse:
		var gs []string
		for _, g := range r.Groups {
			s := g.Group + " " + errName(g.ErrorCode)
			for _, t := range g.Topics {
				for _, p := range t.Partitions {
					s += fmt.Sprintf(" %s/%d=%d", t.Topic, p.Partition, p.Offset)
				}
			}
			gs = append(gs, s)
		}
		return strings.Join(gs, "; "), true
	}
	return "", false
}

func (h *harness) formatDescribedAssignment(a kmsg.Assignment) string {
	var out assign.Assignment
	for _, t := range a.TopicPartitions {
		require.Equal(h.t, h.topicName(t.TopicID), t.Topic, "described topic names its id")
		out = append(out, assign.TopicPartitions{Topic: t.TopicID, Partitions: t.Partitions})
	}
	return h.formatAssignment(out)
}

// formatConsumerState prints a consumer group's whole state: what replay
// must rebuild.
func (h *harness) formatConsumerState(g *group) string {
	cg := g.consumer
	var b strings.Builder
	fmt.Fprintf(&b, "  consumer %s epoch=%d assignment-epoch=%d metadata=%v topics=(", cg.state(), cg.epoch, cg.assignmentEpoch, cg.hasMetadata)
	for i, t := range cg.topics {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s:%d", t.name, t.partitions)
	}
	b.WriteString(")\n")
	for _, id := range cg.sortedMemberIDs() {
		m := cg.members[id]
		fmt.Fprintf(&b, "  member %s epoch=%d prev=%d %s assigned=%s revoking=%s target=%s topics=(%s) regex=%s instance=%s client=%s\n",
			h.name(id), m.epoch, m.previousEpoch, m.state, h.formatAssignment(m.assigned), h.formatAssignment(m.revoking),
			h.formatAssignment(cg.target[id]), strings.Join(m.topicNames, ","), deref(m.regex), deref(m.instanceID), m.clientID)
	}
	return b.String()
}

// cgRequest builds a heartbeat of client name.
func (h *harness) cgClient(name string) *cgClient {
	if h.consumers == nil {
		h.consumers = map[string]*cgClient{}
	}
	c := h.consumers[name]
	if c == nil {
		c = &cgClient{}
		h.consumers[name] = c
	}
	return c
}

// cgLearn follows a heartbeat answer as a real consumer does.
func (h *harness) cgLearn(c *cgClient, r *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse, hold bool) {
	switch {
	case resp.ErrorCode != 0:
		if resp.ErrorCode != 0 && r.MemberEpoch >= 0 {
			// FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID and the like: abandon
			// everything and rejoin.
			c.epoch, c.owned, c.held = 0, nil, nil
		}
		return
	case r.MemberEpoch < 0:
		c.epoch, c.owned, c.held = 0, nil, nil
		return
	}
	if id := deref(resp.MemberID); id != "null" {
		c.memberID = id
	}
	c.epoch = resp.MemberEpoch
	if resp.Assignment == nil {
		return
	}
	var a assign.Assignment
	for _, t := range resp.Assignment.Topics {
		a = append(a, assign.TopicPartitions{Topic: t.TopicID, Partitions: slices.Clone(t.Partitions)})
	}
	a = normalize(a)
	if hold {
		c.held = &a
		return
	}
	c.owned, c.held = a, nil
}

func ownedTopics(a assign.Assignment) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for _, tp := range a {
		out = append(out, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tp.Topic, Partitions: slices.Clone(tp.Partitions)})
	}
	return out
}

// consumerCommand runs the KIP-848 transcript commands:
//
//	topics set=(t:3,u:2)                                   the cluster's topics now
//	cg-join name=a [v=1] [topics=(t,u)] [regex=R] [instance=i] [assignor=A] [rebalance=30s] [id=x|none]
//	cg-hb name=a [v=1] [epoch=N] [owned=(t:0.1,u:2)|owned=null] [topics=(..)] [regex=R] [assignor=A] [hold]
//	    the member's heartbeat: its epoch and what it owns; hold: it does not
//	    act on the answer yet (a slow revocation); a later cg-hb acts first
//	cg-leave name=a [epoch=-1|-2] [instance=i]
//	cg-describe [groups=(g,...)]
//	cg-fetch [name=a] [epoch=N] [member=none]               OffsetFetch v9 of every offset
//	state                                                  every group's state
func (tr *transcript) consumerCommand(group, name string) (string, bool) {
	h := tr.h
	switch tr.td.Cmd {
	case "topics":
		for k := range h.topics {
			delete(h.topics, k)
		}
		for k, v := range parseTopics(tr.vals("set")) {
			h.topics[k] = v
		}
		return "", true
	case "cg-join", "cg-hb", "cg-leave":
		return tr.consumerHeartbeat(group, name), true
	case "cg-describe":
		r := kmsg.NewPtrConsumerGroupDescribeRequest()
		r.Version, r.Groups = int16(tr.int("v", 1)), tr.vals("groups")
		if r.Groups == nil {
			r.Groups = []string{group}
		}
		h.send("cg-describe", r, Client{})
		return tr.effects(h.ready()), true
	case "cg-fetch":
		r := kmsg.NewPtrOffsetFetchRequest()
		r.Version = 9
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = group
		if name != "" {
			c := h.cgClient(name)
			rg.MemberID, rg.MemberEpoch = kmsg.StringPtr(c.memberID), int32(tr.int("epoch", int64(c.epoch)))
		}
		r.Groups = []kmsg.OffsetFetchRequestGroup{rg}
		h.send("cg-fetch", r, Client{})
		return tr.effects(h.ready()), true
	case "state":
		return h.view(h.s), true
	}
	return "", false
}

func (tr *transcript) consumerHeartbeat(group, name string) string {
	h := tr.h
	c := h.cgClient(name)
	if c.held != nil && !tr.has("hold") {
		c.owned, c.held = *c.held, nil // the revocation is done
	}
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.InstanceID = int16(tr.int("v", 1)), group, tr.instance()
	r.MemberID = c.memberID
	if r.MemberID == "" && r.Version >= 1 {
		r.MemberID = name
	}
	if tr.has("id") {
		r.MemberID = tr.arg("id", "")
		if r.MemberID == "none" {
			r.MemberID = ""
		}
	}
	switch tr.td.Cmd {
	case "cg-join":
		r.MemberEpoch = 0
		r.RebalanceTimeoutMillis = int32(tr.dur("rebalance", 30*time.Second).Milliseconds())
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		r.SubscribedTopicNames = tr.vals("topics")
		if r.SubscribedTopicNames == nil && !tr.has("regex") {
			r.SubscribedTopicNames = []string{"t"}
		}
	case "cg-hb":
		r.MemberEpoch = int32(tr.int("epoch", int64(c.epoch)))
		r.Topics = ownedTopics(c.owned)
		r.SubscribedTopicNames = tr.vals("topics")
	case "cg-leave":
		r.MemberEpoch = int32(tr.int("epoch", -1))
	}
	if tr.has("owned") {
		r.Topics = nil
		if vals := tr.vals("owned"); len(vals) == 0 || vals[0] != "null" {
			r.Topics = ownedTopics(parseOwned(vals))
		}
	}
	if tr.has("regex") {
		r.SubscribedTopicRegex = kmsg.StringPtr(tr.arg("regex", ""))
	}
	if tr.has("assignor") {
		r.ServerAssignor = kmsg.StringPtr(tr.arg("assignor", ""))
	}
	id := h.send(tr.td.Cmd+" "+name, r, Client{ID: name, Host: "/10.0.0.1"})
	rd := h.ready()
	if resp, ok := h.answers[id].(*kmsg.ConsumerGroupHeartbeatResponse); ok {
		if resp.ErrorCode == 0 && resp.MemberID != nil {
			if _, known := h.names[*resp.MemberID]; !known {
				h.names[*resp.MemberID], h.ids[name] = name, *resp.MemberID
			}
		}
		h.cgLearn(c, r, resp, tr.has("hold"))
	}
	return tr.effects(rd)
}

// parseOwned reads (t:0.1,u:2): partitions joined by dots.
func parseOwned(vals []string) assign.Assignment {
	var a assign.Assignment
	for _, v := range vals {
		name, ps, _ := strings.Cut(v, ":")
		tp := assign.TopicPartitions{Topic: topicID(name)}
		for _, p := range strings.Split(ps, ".") {
			if p == "" {
				continue
			}
			n, _ := strconv.Atoi(p)
			tp.Partitions = append(tp.Partitions, int32(n))
		}
		a = append(a, tp)
	}
	return normalize(a)
}

// consumerProtocol decodes a KIP-848 member as DescribeGroups shows it
// (ConsumerProtocol version 3, which no transcript's raw metadata starts
// with).
func consumerProtocol(m kmsg.DescribeGroupsResponseGroupMember) (string, string, bool) {
	var meta kmsg.ConsumerMemberMetadata
	var as kmsg.ConsumerMemberAssignment
	if len(m.ProtocolMetadata) < 2 || m.ProtocolMetadata[0] != 0 || m.ProtocolMetadata[1] != 3 ||
		meta.ReadFrom(m.ProtocolMetadata) != nil || as.ReadFrom(m.MemberAssignment) != nil {
		return "", "", false
	}
	var ts []string
	for _, t := range as.Topics {
		var ps []string
		for _, p := range t.Partitions {
			ps = append(ps, strconv.Itoa(int(p)))
		}
		ts = append(ts, t.Topic+":"+strings.Join(ps, ","))
	}
	return strings.Join(meta.Topics, ","), strings.Join(ts, " "), true
}
