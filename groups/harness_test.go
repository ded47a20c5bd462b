package groups

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// harness drives one shard with a virtual clock, keeps every Write as the
// partition's log, and prints effects with member ids replaced by the
// names tests gave their members.
type harness struct {
	t     testing.TB
	s     *Shard
	cfg   Config
	now   time.Time
	next  RequestID
	log   []Record          // every record written, in order (the partition)
	names map[string]string // member id -> name
	ids   map[string]string // name -> member id
	reqs  map[RequestID]string
	// answers holds every response by request id.
	answers map[RequestID]kmsg.Response
	// topics is the cluster Config.Topics lists (unless the test set its
	// own), and consumers the KIP-848 clients of transcripts by name.
	topics    clusterTopics
	consumers map[string]*cgClient
}

var epoch = time.Unix(1_700_000_000, 0)

func newHarness(t testing.TB, cfg Config) *harness {
	h := &harness{t: t, cfg: cfg, now: epoch, names: map[string]string{}, ids: map[string]string{},
		reqs: map[RequestID]string{}, answers: map[RequestID]kmsg.Response{}, topics: clusterTopics{}}
	if cfg.Topics == nil {
		cfg.Topics = h.topics.list
		h.cfg = cfg
	}
	h.s = NewShard(cfg)
	h.s.Loaded(h.now)
	return h
}

// send hands a request to the shard and returns its id.
func (h *harness) send(label string, req kmsg.Request, c Client) RequestID {
	h.next++
	h.reqs[h.next] = label
	h.s.HandleFrom(h.now, h.next, c, req)
	return h.next
}

// ready takes the shard's Ready, appends its Writes to the log and records
// its answers.
func (h *harness) ready() Ready {
	rd := h.s.Ready()
	for _, e := range rd.Effects {
		if e.Respond != nil {
			require.NoError(h.t, e.Respond.Err)
			_, dup := h.answers[e.Respond.ID]
			require.False(h.t, dup, "request %d answered twice", e.Respond.ID)
			h.answers[e.Respond.ID] = e.Respond.Resp
			h.learn(e.Respond.Resp)
		} else {
			require.NotNil(h.t, e.Write)
			h.log = append(h.log, e.Write...)
		}
	}
	return rd
}

// do sends one request and returns its answer, which must be in the Ready.
func (h *harness) do(req kmsg.Request) kmsg.Response {
	id := h.send(fmt.Sprintf("%T", req), req, Client{ID: "client", Host: "/127.0.0.1"})
	h.ready()
	resp, ok := h.answers[id]
	require.True(h.t, ok, "request %d not answered", id)
	return resp
}

func (h *harness) advance(d time.Duration) Ready {
	h.now = h.now.Add(d)
	h.s.Tick(h.now)
	return h.ready()
}

// learn names member ids handed out in join answers.
func (h *harness) learn(resp kmsg.Response) {
	if j, ok := resp.(*kmsg.JoinGroupResponse); ok && j.MemberID != "" {
		if _, known := h.names[j.MemberID]; !known {
			name, _, _ := strings.Cut(j.MemberID, "-")
			if prev, taken := h.ids[name]; taken && prev != j.MemberID {
				name += "'"
				for _, taken := h.ids[name]; taken; _, taken = h.ids[name] {
					name += "'"
				}
			}
			h.names[j.MemberID], h.ids[name] = name, j.MemberID
		}
	}
}

func (h *harness) name(id string) string {
	if n, ok := h.names[id]; ok {
		return n
	}
	if id == "" {
		return `""`
	}
	return id
}

func errName(code int16) string {
	if code == 0 {
		return "ok"
	}
	return kerr.ErrorForCode(code).(*kerr.Error).Message
}

// formatEffects prints effects one a line.
func (h *harness) formatEffects(rd Ready) string {
	var b strings.Builder
	for _, e := range rd.Effects {
		if e.Respond != nil {
			fmt.Fprintf(&b, "respond %s: %s\n", h.reqs[e.Respond.ID], h.formatResponse(e.Respond.Resp))
			continue
		}
		if e.SnapshotStart {
			fmt.Fprintf(&b, "snapshot of %d records\n", len(e.Write))
			continue
		}
		for _, r := range e.Write {
			fmt.Fprintf(&b, "write %s\n", h.formatRecord(r))
		}
	}
	if !rd.Deadline.IsZero() {
		fmt.Fprintf(&b, "next tick in %s\n", rd.Deadline.Sub(h.now))
	}
	return b.String()
}

func (h *harness) formatRecord(r Record) string {
	k, err := decodeKey(r.Key)
	require.NoError(h.t, err)
	if k.kind == keyConsumer {
		return h.formatConsumerRecord(k, r.Value)
	}
	if k.kind == keyOffset {
		if r.Value == nil {
			return fmt.Sprintf("offset %s %s/%d tombstone", k.group, k.topic, k.partition)
		}
		o, err := decodeOffsetValue(r.Value)
		require.NoError(h.t, err)
		return fmt.Sprintf("offset %s %s/%d=%d epoch=%d meta=%q", k.group, k.topic, k.partition, o.offset, o.leaderEpoch, o.metadata)
	}
	if r.Value == nil {
		return fmt.Sprintf("group %s tombstone", k.group)
	}
	v, err := decodeGroupValue(r.Value)
	require.NoError(h.t, err)
	var ms []string
	for _, m := range v.Members {
		ms = append(ms, fmt.Sprintf("%s:%s", h.name(m.MemberID), m.Assignment))
	}
	proto, leader := "", ""
	if v.Protocol != nil {
		proto = *v.Protocol
	}
	if v.Leader != nil {
		leader = h.name(*v.Leader)
	}
	return fmt.Sprintf("group %s type=%q gen=%d protocol=%q leader=%s members=(%s)", k.group, v.ProtocolType,
		v.Generation, proto, leader, strings.Join(ms, ","))
}

func (h *harness) formatResponse(resp kmsg.Response) string {
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		s := fmt.Sprintf("%s id=%s", errName(r.ErrorCode), h.name(r.MemberID))
		if r.ErrorCode == 0 {
			s += fmt.Sprintf(" gen=%d protocol=%s leader=%s", r.Generation, deref(r.Protocol), h.name(r.LeaderID))
			if len(r.Members) > 0 {
				var ms []string
				for _, m := range r.Members {
					ms = append(ms, h.name(m.MemberID)+":"+string(m.ProtocolMetadata))
				}
				s += " members=(" + strings.Join(ms, ",") + ")"
			}
			if r.SkipAssignment {
				s += " skip-assignment"
			}
		}
		return s
	case *kmsg.SyncGroupResponse:
		if r.ErrorCode != 0 {
			return errName(r.ErrorCode)
		}
		return fmt.Sprintf("ok assignment=%q", r.MemberAssignment)
	case *kmsg.HeartbeatResponse:
		return errName(r.ErrorCode)
	case *kmsg.LeaveGroupResponse:
		s := errName(r.ErrorCode)
		for _, m := range r.Members {
			who := h.name(m.MemberID)
			if m.InstanceID != nil {
				who += "/" + *m.InstanceID
			}
			s += fmt.Sprintf(" %s=%s", who, errName(m.ErrorCode))
		}
		return s
	case *kmsg.OffsetCommitResponse:
		var ps []string
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				ps = append(ps, fmt.Sprintf("%s/%d=%s", t.Topic, p.Partition, errName(p.ErrorCode)))
			}
		}
		return strings.Join(ps, " ")
	case *kmsg.DescribeGroupsResponse:
		var gs []string
		for _, g := range r.Groups {
			gs = append(gs, h.formatDescribed(g))
		}
		return strings.Join(gs, "; ")
	default:
		if s, ok := h.formatConsumerResponse(resp); ok {
			return s
		}
		return fmt.Sprintf("%+v", resp)
	}
}

func (h *harness) formatDescribed(g kmsg.DescribeGroupsResponseGroup) string {
	var ms []string
	for _, m := range g.Members {
		s := h.name(m.MemberID)
		if m.InstanceID != nil {
			s += "/" + *m.InstanceID
		}
		if sub, as, ok := consumerProtocol(m); ok {
			s += fmt.Sprintf("[%s|%s]", sub, as)
		} else if len(m.ProtocolMetadata) > 0 || len(m.MemberAssignment) > 0 {
			s += fmt.Sprintf("[%s|%s]", m.ProtocolMetadata, m.MemberAssignment)
		}
		ms = append(ms, s)
	}
	return fmt.Sprintf("%s %s %s type=%q protocol=%q members=(%s)", g.Group, errName(g.ErrorCode), g.State,
		g.ProtocolType, g.Protocol, strings.Join(ms, ","))
}

func deref(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}

// replayed returns a fresh shard loaded from the harness's log.
func (h *harness) replayed(from int) *Shard {
	s := NewShard(h.cfg)
	for i, r := range h.log[from:] {
		require.NoError(h.t, s.Replay(int64(from+i), r.Key, r.Value))
	}
	s.Loaded(h.now)
	return s
}

// view is what a shard answers about every group it knows: DescribeGroups
// and OffsetFetch of all offsets, printed.
func (h *harness) view(s *Shard) string {
	ids := s.sortedGroupIDs()
	var b strings.Builder
	for _, id := range ids {
		d := s.describe(id)
		fmt.Fprintln(&b, h.formatDescribed(d))
		if g := s.groups[id]; g.consumer != nil {
			b.WriteString(h.formatConsumerState(g))
		}
		for _, t := range s.fetchOffsets(id, nil, true) {
			for _, f := range t.partitions {
				fmt.Fprintf(&b, "  %s/%d=%d epoch=%d meta=%q\n", f.tp.topic, f.tp.partition, f.offset, f.leaderEpoch, f.metadata)
			}
		}
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
