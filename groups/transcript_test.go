package groups

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTranscripts runs testdata/*.txt: rebalances as scripts. Each command
// sends one request (or moves the clock) and prints the effects the shard
// then asks for, in order, and when it next wants a Tick. Member ids print
// as the client (or instance) name that got them; a name given a second id
// prints with a quote (a'). go test -rewrite regenerates the output.
//
// Commands (group=g unless given; v is the API version):
//
//	new [delay=3s] [max-size=N] [retention=168h]
//	join name=a [v=5] [id=a|none] [instance=i] [session=10s] [rebalance=30s]
//	     [type=consumer] [protocols=(range,...)] [meta=M]    metadata M:protocol, M defaults to name
//	sync name=a [v=3] [gen=N] [id=a] [instance=i] [assign=(a=x,b=y)]
//	heartbeat name=a [v=3] [gen=N] [id=a] [instance=i]
//	leave name=a [v=0]  |  leave [v=3] members=(a,b/i,/i)  (name/instance; an empty name sends no member id)
//	commit [name=a] [v=8] [gen=N] topic=t [partition=0] offset=O
//	fetch [v=5] topic=t [partition=0]
//	describe [groups=(g,...)]
//	list [v=5] [states=(...)] [types=(...)]
//	delete [groups=(g,...)]
//	tick by=D                                              the clock moves, then Tick
//	replay                                                 a fresh shard replays the log: same answers?
//
// and KIP-848's (consumerCommand): topics, cg-join, cg-hb, cg-leave,
// cg-describe, cg-fetch, state; new takes topics=(t:3,...), cg-session=D,
// cg-max-size=N and assignors=(...).
func TestTranscripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var h *harness
		var gens map[string]int32
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			if td.Cmd == "new" {
				h = newHarness(t, transcriptConfig(t, td))
				gens = map[string]int32{}
				for k, v := range parseTopics((&transcript{td: td, t: t}).vals("topics")) {
					h.topics[k] = v
				}
				return ""
			}
			require.NotNil(t, h, "%s: new first", td.Pos)
			tr := &transcript{h: h, td: td, t: t, gens: gens}
			return tr.run()
		})
	})
}

type transcript struct {
	h    *harness
	td   *datadriven.TestData
	t    *testing.T
	gens map[string]int32 // name -> the generation its last join answer gave
}

func transcriptConfig(t *testing.T, td *datadriven.TestData) Config {
	tr := &transcript{td: td, t: t}
	cfg := Config{InitialRebalanceDelay: tr.dur("delay", 3*time.Second)}
	if cfg.InitialRebalanceDelay == 0 {
		cfg.InitialRebalanceDelay = -1
	}
	cfg.GroupMaxSize = int32(tr.int("max-size", 0))
	cfg.OffsetsRetention = tr.dur("retention", 0)
	cfg.ConsumerSessionTimeout = tr.dur("cg-session", 0)
	cfg.ConsumerSessionTimeoutMin = min(cfg.ConsumerSessionTimeout, DefaultConsumerSessionTimeoutMin)
	cfg.ConsumerGroupMaxSize = int32(tr.int("cg-max-size", 0))
	cfg.ConsumerAssignors = tr.vals("assignors")
	return cfg
}

func (tr *transcript) arg(key, def string) string {
	for _, a := range tr.td.CmdArgs {
		if a.Key == key {
			if len(a.Vals) == 0 {
				return ""
			}
			return a.Vals[0]
		}
	}
	return def
}

func (tr *transcript) has(key string) bool { return tr.td.HasArg(key) }

func (tr *transcript) vals(key string) []string {
	for _, a := range tr.td.CmdArgs {
		if a.Key == key {
			return a.Vals
		}
	}
	return nil
}

func (tr *transcript) int(key string, def int64) int64 {
	v := tr.arg(key, "")
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	require.NoError(tr.t, err, "%s: %s", tr.td.Pos, key)
	return n
}

func (tr *transcript) dur(key string, def time.Duration) time.Duration {
	v := tr.arg(key, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	require.NoError(tr.t, err, "%s: %s", tr.td.Pos, key)
	return d
}

// memberID is the id a request of name sends: id=none sends "", id=x
// sends x's id, and by default name's own (or "" if it has none yet).
func (tr *transcript) memberID(name string) string {
	switch who := tr.arg("id", name); who {
	case "none":
		return ""
	default:
		if id, ok := tr.h.ids[who]; ok {
			return id
		}
		if who != name {
			return who // an id nobody was given
		}
		return ""
	}
}

func (tr *transcript) instance() *string {
	if tr.has("instance") {
		return kmsg.StringPtr(tr.arg("instance", ""))
	}
	return nil
}

func (tr *transcript) run() string {
	h, td := tr.h, tr.td
	group := tr.arg("group", "g")
	name := tr.arg("name", "")
	label := td.Cmd
	if name != "" {
		label += " " + name
	}
	var req kmsg.Request
	switch td.Cmd {
	case "join":
		req = tr.join(group, name)
	case "sync":
		r := kmsg.NewPtrSyncGroupRequest()
		r.Version, r.Group, r.MemberID, r.InstanceID = int16(tr.int("v", 3)), group, tr.memberID(name), tr.instance()
		r.Generation = int32(tr.int("gen", int64(tr.gens[name])))
		for _, a := range tr.vals("assign") {
			who, what, _ := strings.Cut(a, "=")
			r.GroupAssignment = append(r.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{
				MemberID: tr.h.ids[who], MemberAssignment: []byte(what)})
		}
		req = r
	case "heartbeat":
		r := kmsg.NewPtrHeartbeatRequest()
		r.Version, r.Group, r.MemberID, r.InstanceID = int16(tr.int("v", 3)), group, tr.memberID(name), tr.instance()
		r.Generation = int32(tr.int("gen", int64(tr.gens[name])))
		req = r
	case "leave":
		req = tr.leave(group, name)
	case "commit":
		r := commitReq(int16(tr.int("v", 8)), group, int32(tr.int("gen", int64(tr.gens[name]))), tr.memberID(name),
			tr.arg("topic", "t"), int32(tr.int("partition", 0)), tr.int("offset", 0))
		if name == "" {
			r.Generation = int32(tr.int("gen", -1))
		}
		r.InstanceID = tr.instance()
		req = r
	case "fetch":
		p := fetchOne(h, int16(tr.int("v", 5)), group, tr.arg("topic", "t"), int32(tr.int("partition", 0)))
		return fmt.Sprintf("offset=%d epoch=%d meta=%q %s\n", p.Offset, p.LeaderEpoch, deref(p.Metadata), errName(p.ErrorCode))
	case "describe":
		r := kmsg.NewPtrDescribeGroupsRequest()
		r.Version, r.Groups = 5, tr.vals("groups")
		if r.Groups == nil {
			r.Groups = []string{group}
		}
		req = r
	case "list":
		r := kmsg.NewPtrListGroupsRequest()
		r.Version, r.StatesFilter, r.TypesFilter = int16(tr.int("v", 5)), tr.vals("states"), tr.vals("types")
		resp := h.do(r).(*kmsg.ListGroupsResponse)
		var b strings.Builder
		for _, g := range resp.Groups {
			fmt.Fprintf(&b, "%s %s type=%q %s\n", g.Group, g.GroupState, g.ProtocolType, g.GroupType)
		}
		return b.String()
	case "delete":
		r := kmsg.NewPtrDeleteGroupsRequest()
		r.Version, r.Groups = 2, tr.vals("groups")
		if r.Groups == nil {
			r.Groups = []string{group}
		}
		id := h.send(label, r, Client{})
		rd := h.ready()
		rd.Effects = withoutResponse(rd.Effects, id)
		out := h.formatEffects(rd)
		for _, g := range h.answers[id].(*kmsg.DeleteGroupsResponse).Groups {
			out += fmt.Sprintf("respond delete %s: %s\n", g.Group, errName(g.ErrorCode))
		}
		return out
	case "tick":
		rd := h.advance(tr.dur("by", 0))
		return tr.effects(rd)
	case "replay":
		live, replayed := h.view(h.s), h.view(h.replayed(0))
		if live != replayed {
			return "replay differs:\nlive:\n" + live + "replayed:\n" + replayed
		}
		return "replay: same\n" + live
	default:
		if out, ok := tr.consumerCommand(group, name); ok {
			return out
		}
		tr.t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
	}
	h.send(label, req, Client{ID: tr.clientID(name), Host: "/10.0.0.1"})
	return tr.effects(h.ready())
}

func withoutResponse(effects []Effect, id RequestID) []Effect {
	var out []Effect
	for _, e := range effects {
		if e.Respond == nil || e.Respond.ID != id {
			out = append(out, e)
		}
	}
	return out
}

// clientID names the member ids a client is given after it (dynamic
// members; static ones are named after their instance).
func (tr *transcript) clientID(name string) string {
	n, _, _ := strings.Cut(name, "'")
	return n
}

// effects prints Ready and remembers the generations join answers gave.
func (tr *transcript) effects(rd Ready) string {
	for _, e := range rd.Effects {
		if e.Respond == nil {
			continue
		}
		if j, ok := e.Respond.Resp.(*kmsg.JoinGroupResponse); ok && j.ErrorCode == 0 {
			tr.gens[tr.h.name(j.MemberID)] = j.Generation
		}
	}
	return tr.h.formatEffects(rd)
}

func (tr *transcript) join(group, name string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version, r.Group, r.MemberID, r.InstanceID = int16(tr.int("v", 5)), group, tr.memberID(name), tr.instance()
	r.SessionTimeoutMillis = int32(tr.dur("session", 10*time.Second).Milliseconds())
	r.RebalanceTimeoutMillis = int32(tr.dur("rebalance", 30*time.Second).Milliseconds())
	r.ProtocolType = tr.arg("type", "consumer")
	meta := tr.arg("meta", name)
	protocols := tr.vals("protocols")
	if protocols == nil {
		protocols = []string{"range"}
	}
	for _, p := range protocols {
		r.Protocols = append(r.Protocols, kmsg.JoinGroupRequestProtocol{Name: p, Metadata: []byte(meta + ":" + p)})
	}
	return r
}

func (tr *transcript) leave(group, name string) *kmsg.LeaveGroupRequest {
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Version, r.Group = int16(tr.int("v", 3)), group
	if r.Version < 3 {
		r.MemberID = tr.memberID(name)
		return r
	}
	if name != "" {
		r.Members = append(r.Members, kmsg.LeaveGroupRequestMember{MemberID: tr.memberID(name), InstanceID: tr.instance()})
	}
	for _, m := range tr.vals("members") {
		who, inst, static := strings.Cut(m, "/")
		lm := kmsg.LeaveGroupRequestMember{MemberID: tr.h.ids[who]}
		if lm.MemberID == "" && who != "" {
			lm.MemberID = who
		}
		if static {
			lm.InstanceID = kmsg.StringPtr(inst)
		}
		r.Members = append(r.Members, lm)
	}
	return r
}
