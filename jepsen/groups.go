package jepsen

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// A GroupHistory is what consumer-group members saw: the assignments the
// coordinator gave them, the partitions they stopped owning, the commits
// they sent and how they ended, the committed offsets they fetched, and,
// once the faults have healed and the members are stable, what each owns.
// Events are recorded in the order they happened, each with a counter
// stamp (no ties) and the virtual time at which it happened, which the
// KIP-848 ownership check needs for session leases.
type GroupHistory struct {
	events []GroupEvent
	clock  int64
}

// GroupProtocol is the protocol a group's members speak.
type GroupProtocol string

const (
	GroupClassic  GroupProtocol = "classic"
	GroupConsumer GroupProtocol = "consumer" // KIP-848
)

// GroupEventKind says what a GroupEvent records.
type GroupEventKind string

const (
	// GroupAssigned: the member received Partitions as its whole
	// assignment in Generation (classic: a SyncGroup answer; KIP-848: a
	// heartbeat answer carrying an assignment, Generation the member
	// epoch). It owns them from now.
	GroupAssigned GroupEventKind = "assigned"
	// GroupHeartbeat (KIP-848): a heartbeat sent at Time was answered
	// without error; the member's session lasts at least Lease from the
	// send, so what it owns is its own until then even if it hears
	// nothing more.
	GroupHeartbeat GroupEventKind = "heartbeat"
	// GroupReleased: the member stopped owning Partitions (it sent the
	// heartbeat that no longer lists them, it left, rejoined, was fenced,
	// or its node crashed).
	GroupReleased GroupEventKind = "released"
	// GroupCommitInvoke, GroupCommitOk, GroupCommitFail, GroupCommitInfo:
	// an OffsetCommit of Offsets in Generation, and its end (Op links
	// them): acknowledged, refused, or unknown.
	GroupCommitInvoke GroupEventKind = "commit"
	GroupCommitOk     GroupEventKind = "commit_ok"
	GroupCommitFail   GroupEventKind = "commit_fail"
	GroupCommitInfo   GroupEventKind = "commit_info"
	// GroupFetchInvoke and GroupFetchOk: an OffsetFetch of Partitions
	// and its answer, Offsets (-1: none committed).
	GroupFetchInvoke GroupEventKind = "fetch"
	GroupFetchOk     GroupEventKind = "fetch_ok"
	// GroupProcessed: the member processed the records of Ranges (before
	// the commit that follows them), for the check that no record below
	// a committed offset was skipped.
	GroupProcessed GroupEventKind = "processed"
	// GroupReset: an operator's reset of the group's offsets of
	// Partitions to Offsets (an OffsetCommit of an empty group), or their
	// deletion where Offsets names no offset for a partition (a
	// DeleteGroups): nothing may be held against the offsets committed
	// before it. GroupResetOk, GroupResetFail and GroupResetInfo end it
	// (Op links them): acknowledged, refused, or unknown.
	GroupReset     GroupEventKind = "reset"
	GroupResetOk   GroupEventKind = "reset_ok"
	GroupResetFail GroupEventKind = "reset_fail"
	GroupResetInfo GroupEventKind = "reset_info"
	// GroupFinal: the members are stable after the heal; Partitions is
	// what Member owns then. One per member, and a final with no member
	// and Total partitions per group.
	GroupFinal GroupEventKind = "final"
)

// PartitionOffset is one partition's offset.
type PartitionOffset struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// PartitionRange is the offsets [From, To) of one partition.
type PartitionRange struct {
	Partition int32 `json:"partition"`
	From      int64 `json:"from"`
	To        int64 `json:"to"`
}

// GroupEvent is one event of a GroupHistory. Its JSON form is a line of
// GroupHistoryFile.
type GroupEvent struct {
	Time     int64          `json:"time"`    // the history's counter
	Virtual  int64          `json:"virtual"` // virtual time, nanoseconds
	Kind     GroupEventKind `json:"kind"`
	Group    string         `json:"group"`
	Protocol GroupProtocol  `json:"protocol,omitempty"`
	Member   string         `json:"member,omitempty"`
	// Generation is the classic generation or the KIP-848 member epoch.
	Generation int32 `json:"generation,omitempty"`
	// Leader is the classic generation's leader (a GroupAssigned's), which
	// tells a generation from the one of the same number after the group
	// was deleted and made again.
	Leader     string            `json:"leader,omitempty"`
	Partitions []int32           `json:"partitions,omitempty"`
	Offsets    []PartitionOffset `json:"offsets,omitempty"`
	Ranges     []PartitionRange  `json:"ranges,omitempty"`
	// Op links a commit's or fetch's end to its invocation.
	Op int64 `json:"op,omitempty"`
	// Lease is a GroupHeartbeat's session timeout, nanoseconds; Total a
	// group's GroupFinal partition count.
	Lease int64 `json:"lease,omitempty"`
	Total int32 `json:"total,omitempty"`
}

// GroupHistoryFile is the name a run gives its group history.
const GroupHistoryFile = "group-history.jsonl"

// WriteGroupArtifacts writes a group history as GroupHistoryFile through
// create, as WriteArtifacts writes a data history.
func WriteGroupArtifacts(events []GroupEvent, create func(name string) (io.Writer, error)) error {
	return writeArtifact(GroupHistoryFile, create, func(w io.Writer) error { return WriteGroupJSONL(w, events) })
}

// WriteGroupJSONL writes a group history as JSON lines, one event a line.
func WriteGroupJSONL(w io.Writer, events []GroupEvent) error {
	return writeJSONL(w, events, "group event")
}

// NewGroupHistory returns an empty history.
func NewGroupHistory() *GroupHistory { return &GroupHistory{} }

// Events returns the events in order.
func (h *GroupHistory) Events() []GroupEvent { return h.events }

// Add records e, stamping its Time, and returns that stamp (the Op of a
// commit or fetch invocation).
func (h *GroupHistory) Add(e GroupEvent) int64 {
	h.clock++
	e.Time = h.clock
	e.Partitions = slices.Clone(e.Partitions)
	slices.Sort(e.Partitions)
	e.Offsets = slices.Clone(e.Offsets)
	slices.SortFunc(e.Offsets, func(a, b PartitionOffset) int { return int(a.Partition - b.Partition) })
	e.Ranges = slices.Clone(e.Ranges)
	h.events = append(h.events, e)
	return e.Time
}

// CheckGroups judges a group history; each violation reads
// "groups: ...".
func CheckGroups(events []GroupEvent) []string {
	var out []string
	out = append(out, checkClassicOwners(events)...)
	out = append(out, checkConsumerOwners(events)...)
	out = append(out, checkCommits(events)...)
	out = append(out, checkNoSkips(events)...)
	out = append(out, checkFinalOwned(events)...)
	return out
}

// checkClassicOwners: in each classic generation no partition is assigned
// to two members. A generation is known by its number and its leader's
// member id: a deleted group starts its generations again.
func checkClassicOwners(events []GroupEvent) []string {
	type key struct {
		group, leader string
		gen           int32
		p             int32
	}
	owner := map[key]string{}
	var out []string
	for _, e := range events {
		if e.Kind != GroupAssigned || e.Protocol != GroupClassic {
			continue
		}
		for _, p := range e.Partitions {
			k := key{e.Group, e.Leader, e.Generation, p}
			if m, ok := owner[k]; ok && m != e.Member {
				out = append(out, fmt.Sprintf("groups: %s generation %d assigns partition %d to both %s and %s", e.Group, e.Generation, p, m, e.Member))
				continue
			}
			owner[k] = e.Member
		}
	}
	return out
}

// checkConsumerOwners: with KIP-848, no partition is owned by two members
// at once. A member owns a partition from the heartbeat answer assigning
// it until it releases it, or until its lease runs out: the coordinator
// may fence a member only a session timeout after the last heartbeat it
// received, which was sent no earlier than the last one answered.
func checkConsumerOwners(events []GroupEvent) []string {
	type key = ownKey
	type span struct {
		member     string
		start, end int64
	}
	open := map[key]int64{}        // owned since (virtual)
	lease := map[[2]string]int64{} // member's lease end (virtual)
	spans := map[string]map[int32][]span{}
	closeSpan := func(k key, at int64) {
		start, ok := open[k]
		if !ok {
			return
		}
		delete(open, k)
		if l, ok := lease[[2]string{k.group, k.member}]; ok && l < at {
			at = max(l, start)
		}
		if at <= start {
			// Owned for no time: an answer that came after the lease
			// its heartbeat began had run out (delayed in the network),
			// and was given up at once.
			return
		}
		if spans[k.group] == nil {
			spans[k.group] = map[int32][]span{}
		}
		spans[k.group][k.p] = append(spans[k.group][k.p], span{k.member, start, at})
	}
	var last int64
	for _, e := range events {
		last = max(last, e.Virtual)
		if e.Protocol != GroupConsumer {
			continue
		}
		m := [2]string{e.Group, e.Member}
		switch e.Kind {
		case GroupHeartbeat:
			lease[m] = max(lease[m], e.Virtual+e.Lease)
		case GroupAssigned:
			now := map[int32]bool{}
			for _, p := range e.Partitions {
				now[p] = true
				k := key{e.Group, e.Member, p}
				if _, ok := open[k]; !ok {
					open[k] = e.Virtual
				}
			}
			for _, k := range sortedOpen(open, e.Group, e.Member) {
				if !now[k.p] {
					closeSpan(k, e.Virtual)
				}
			}
		case GroupReleased:
			for _, p := range e.Partitions {
				closeSpan(key{e.Group, e.Member, p}, e.Virtual)
			}
		}
	}
	for _, k := range sortedOpen(open, "", "") {
		closeSpan(k, last)
	}
	var out []string
	for _, g := range slices.Sorted(maps.Keys(spans)) {
		for _, p := range slices.Sorted(maps.Keys(spans[g])) {
			ss := spans[g][p]
			slices.SortFunc(ss, func(a, b span) int { return cmpInt64(a.start, b.start) })
			for i := 1; i < len(ss); i++ {
				for j := range i {
					a, b := ss[j], ss[i]
					if a.member != b.member && b.start < a.end && a.start < b.end {
						out = append(out, fmt.Sprintf("groups: %s partition %d owned by %s (from %dns to %dns) and %s (from %dns to %dns) at once", g, p, a.member, a.start, a.end, b.member, b.start, b.end))
					}
				}
			}
		}
	}
	return out
}

// checkCommits: every acknowledged commit survives (an OffsetFetch
// invoked after it was acknowledged returns its offset or a later one),
// and committed offsets never go backwards except by a reset: neither
// from one acknowledged commit or fetched offset to a later fetched one,
// nor to a later acknowledged commit invoked after it. An acknowledged
// reset survives too: a fetch invoked after it answers the reset's
// offset, or that of a commit that may have been applied after it.
func checkCommits(events []GroupEvent) []string {
	type seen struct {
		offset int64
		what   string
	}
	invokes := map[int64]GroupEvent{}
	floor := map[groupPartition]seen{} // the highest offset known committed
	var out []string
	raise := func(k groupPartition, o int64, what string) {
		if f, ok := floor[k]; !ok || o > f.offset {
			floor[k] = seen{o, what}
		}
	}
	// Known commits count for requests invoked after they were known:
	// the floor as of each invocation. A reset drops what fetches in
	// flight knew, since it may be applied before they are answered.
	at := map[int64]map[groupPartition]seen{}
	fetching := map[int64]bool{}
	// The reset each partition had last, while it holds, and the commits
	// since that may have been applied after it.
	type reset struct {
		offset  int64
		invoked int64
		allowed map[int64]bool
	}
	resets := map[groupPartition]*reset{}
	// resetAt is when each partition's last reset was invoked: a commit
	// invoked before it and acknowledged after may have been applied
	// before it (its answer held in the network or by a paused client),
	// so its acknowledgement says nothing of what is committed now.
	resetAt := map[groupPartition]int64{}
	ended := map[int64]GroupEventKind{}
	ackedAt := map[int64]int64{}
	var commits []int64 // commit invocations, in order
	for _, e := range events {
		switch e.Kind {
		case GroupCommitInvoke, GroupFetchInvoke:
			invokes[e.Time] = e
			snap := map[groupPartition]seen{}
			for _, po := range e.Offsets {
				k := groupPartition{e.Group, po.Partition}
				if f, ok := floor[k]; ok {
					snap[k] = f
				}
			}
			for _, p := range e.Partitions {
				k := groupPartition{e.Group, p}
				if f, ok := floor[k]; ok {
					snap[k] = f
				}
			}
			at[e.Time] = snap
			if e.Kind == GroupFetchInvoke {
				fetching[e.Time] = true
			} else {
				commits = append(commits, e.Time)
			}
		case GroupCommitOk, GroupCommitFail, GroupCommitInfo:
			ended[e.Op] = e.Kind
			ackedAt[e.Op] = e.Time
		}
		switch e.Kind {
		case GroupReset:
			invokes[e.Time] = e
			saved := map[groupPartition]seen{}
			for _, p := range e.Partitions {
				k := groupPartition{e.Group, p}
				if f, ok := floor[k]; ok {
					saved[k] = f
				}
				delete(floor, k)
				for op := range fetching {
					delete(at[op], k)
				}
			}
			at[e.Time] = saved
			for _, p := range e.Partitions {
				resetAt[groupPartition{e.Group, p}] = e.Time
			}
		case GroupResetFail:
			// Not applied: what was known committed still is.
			inv := invokes[e.Op]
			for _, p := range inv.Partitions {
				k := groupPartition{inv.Group, p}
				if f, ok := at[e.Op][k]; ok {
					raise(k, f.offset, f.what)
				}
				delete(resets, k)
			}
		case GroupResetInfo:
			inv := invokes[e.Op]
			for _, p := range inv.Partitions {
				delete(resets, groupPartition{inv.Group, p})
			}
		case GroupResetOk:
			inv := invokes[e.Op]
			for _, p := range inv.Partitions {
				k := groupPartition{inv.Group, p}
				x := resetOffset(inv, p)
				raise(k, x, "an acknowledged reset")
				rs := &reset{offset: x, invoked: inv.Time, allowed: map[int64]bool{}}
				// A commit of k not refused and not acknowledged before
				// the reset was invoked may have been applied after it.
				for _, c := range commits {
					ci := invokes[c]
					end := ended[c]
					if end == GroupCommitFail {
						continue
					}
					for _, po := range ci.Offsets {
						if ci.Group == inv.Group && po.Partition == p && !(end == GroupCommitOk && ackedAt[c] < inv.Time) {
							rs.allowed[po.Offset] = true
						}
					}
				}
				resets[k] = rs
			}
		case GroupCommitInvoke:
			for _, po := range e.Offsets {
				if rs := resets[groupPartition{e.Group, po.Partition}]; rs != nil {
					rs.allowed[po.Offset] = true
				}
			}
		case GroupCommitOk:
			inv := invokes[e.Op]
			for _, po := range inv.Offsets {
				k := groupPartition{inv.Group, po.Partition}
				if f, ok := at[e.Op][k]; ok && po.Offset < f.offset {
					out = append(out, fmt.Sprintf("groups: %s partition %d: %s's commit of %d (generation %d) acknowledged after %s had made %d committed: the offset went backwards",
						inv.Group, po.Partition, inv.Member, po.Offset, inv.Generation, f.what, f.offset))
				}
				if resetAt[k] < inv.Time {
					raise(k, po.Offset, fmt.Sprintf("%s's acknowledged commit", inv.Member))
				}
			}
		case GroupFetchOk:
			delete(fetching, e.Op)
			inv := invokes[e.Op]
			for _, po := range e.Offsets {
				k := groupPartition{inv.Group, po.Partition}
				if f, ok := at[e.Op][k]; ok && po.Offset < f.offset {
					out = append(out, fmt.Sprintf("groups: %s partition %d: %s's offset fetch answered %d after %s had made %d committed: an acknowledged commit was lost or the offset went backwards",
						inv.Group, po.Partition, inv.Member, po.Offset, f.what, f.offset))
				}
				if rs := resets[k]; rs != nil && inv.Time > rs.invoked && po.Offset != rs.offset && !rs.allowed[po.Offset] {
					out = append(out, fmt.Sprintf("groups: %s partition %d: %s's offset fetch answered %d after a reset to %d was acknowledged: the reset was lost",
						inv.Group, po.Partition, inv.Member, po.Offset, rs.offset))
				}
				if po.Offset >= 0 {
					raise(k, po.Offset, fmt.Sprintf("a fetch by %s", inv.Member))
				}
			}
		}
	}
	return out
}

// groupPartition is one partition's offsets in one group.
type groupPartition struct {
	group string
	p     int32
}

// resetOffset is the offset a reset sets partition p to: -1 (none) for a
// deletion.
func resetOffset(reset GroupEvent, p int32) int64 {
	for _, po := range reset.Offsets {
		if po.Partition == p {
			return po.Offset
		}
	}
	return -1
}

// checkNoSkips: with commits after processing, no record is skipped:
// every offset below a committed one (acknowledged, or answered by a
// fetch) was processed by some member, from the group's start (offset 0,
// the members' reset policy being the earliest) or from the last reset.
// A reset of unknown outcome may or may not have moved the start, so the
// check asks only what both cases ask.
func checkNoSkips(events []GroupEvent) []string {
	type need struct {
		from, to int64
		what     string
	}
	needs := map[groupPartition]*need{}
	get := func(k groupPartition) *need {
		if needs[k] == nil {
			needs[k] = &need{}
		}
		return needs[k]
	}
	processed := map[groupPartition][]PartitionRange{}
	invokes := map[int64]GroupEvent{}
	resetAt := map[groupPartition]int64{} // as in checkCommits
	var out []string
	for _, e := range events {
		switch e.Kind {
		case GroupCommitInvoke, GroupFetchInvoke, GroupReset:
			invokes[e.Time] = e
			if e.Kind == GroupReset {
				for _, p := range e.Partitions {
					resetAt[groupPartition{e.Group, p}] = e.Time
				}
			}
		case GroupProcessed:
			for _, r := range e.Ranges {
				k := groupPartition{e.Group, r.Partition}
				processed[k] = append(processed[k], r)
			}
		case GroupCommitOk:
			inv := invokes[e.Op]
			for _, po := range inv.Offsets {
				k := groupPartition{inv.Group, po.Partition}
				if n := get(k); po.Offset > n.to && resetAt[k] < inv.Time {
					n.to, n.what = po.Offset, fmt.Sprintf("%s's acknowledged commit", inv.Member)
				}
			}
		case GroupFetchOk:
			inv := invokes[e.Op]
			for _, po := range e.Offsets {
				if n := get(groupPartition{inv.Group, po.Partition}); po.Offset > n.to {
					n.to, n.what = po.Offset, fmt.Sprintf("a fetch by %s", inv.Member)
				}
			}
		case GroupResetOk, GroupResetInfo:
			inv := invokes[e.Op]
			for _, p := range inv.Partitions {
				n, x := get(groupPartition{inv.Group, p}), max(resetOffset(inv, p), 0)
				if e.Kind == GroupResetOk {
					n.from, n.to = x, x
				} else {
					n.from = max(n.from, x)
				}
			}
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(needs), func(a, b groupPartition) int {
		if c := strings.Compare(a.group, b.group); c != 0 {
			return c
		}
		return int(a.p - b.p)
	}) {
		n := needs[k]
		if gap, ok := firstGap(processed[k], n.from, n.to); ok {
			out = append(out, fmt.Sprintf("groups: %s partition %d: offset %d, below %d that %s made committed, was processed by no member: a record was skipped",
				k.group, k.p, gap, n.to, n.what))
		}
	}
	return out
}

// firstGap returns the first offset of [from, to) that no range covers.
func firstGap(ranges []PartitionRange, from, to int64) (int64, bool) {
	rs := slices.Clone(ranges)
	slices.SortFunc(rs, func(a, b PartitionRange) int { return cmpInt64(a.From, b.From) })
	next := from
	for _, r := range rs {
		if next >= to {
			break
		}
		if r.From > next {
			return next, true
		}
		next = max(next, r.To)
	}
	if next < to {
		return next, true
	}
	return 0, false
}

// checkFinalOwned: when the members are stable at the end, every
// partition of the subscribed topic is owned, and by one member.
func checkFinalOwned(events []GroupEvent) []string {
	total := map[string]int32{}
	owners := map[string]map[int32][]string{}
	for _, e := range events {
		if e.Kind != GroupFinal {
			continue
		}
		if e.Member == "" {
			total[e.Group] = e.Total
			continue
		}
		if owners[e.Group] == nil {
			owners[e.Group] = map[int32][]string{}
		}
		for _, p := range e.Partitions {
			owners[e.Group][p] = append(owners[e.Group][p], e.Member)
		}
	}
	var out []string
	for _, g := range slices.Sorted(maps.Keys(total)) {
		var unowned []string
		for p := range total[g] {
			switch o := owners[g][p]; {
			case len(o) == 0:
				unowned = append(unowned, fmt.Sprint(p))
			case len(o) > 1:
				out = append(out, fmt.Sprintf("groups: %s partition %d owned by %s at the end", g, p, strings.Join(o, " and ")))
			}
		}
		if len(unowned) > 0 {
			out = append(out, fmt.Sprintf("groups: %s partitions %s owned by no member once the members were stable", g, strings.Join(unowned, ",")))
		}
	}
	return out
}

// ownKey is one member's ownership of one partition of a group.
type ownKey struct {
	group, member string
	p             int32
}

// sortedOpen lists open's keys of member in group (every key when group
// is ""), in order.
func sortedOpen(open map[ownKey]int64, group, member string) []ownKey {
	var ks []ownKey
	for k := range open {
		if group == "" || (k.group == group && k.member == member) {
			ks = append(ks, k)
		}
	}
	slices.SortFunc(ks, func(a, b ownKey) int {
		if c := strings.Compare(a.group, b.group); c != 0 {
			return c
		}
		if c := strings.Compare(a.member, b.member); c != 0 {
			return c
		}
		return int(a.p - b.p)
	})
	return ks
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
