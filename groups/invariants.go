package groups

import (
	"github.com/sluicemq/sluice/internal/invariants"
)

// checkInvariants asserts, under the invariants build tag, what the
// handlers rely on of every group, and that the snapshot counters match
// the state they count. Ready runs it, so every test and simulator step
// does.
func (s *Shard) checkInvariants() {
	if !invariants.Enabled {
		return
	}
	offsets, persisted := 0, 0
	for _, id := range s.sortedGroupIDs() {
		g := s.groups[id]
		offsets += len(g.offsets)
		if g.persisted != nil {
			persisted++
		}
		g.checkInvariants(s.cfg.Partition)
	}
	if offsets != s.liveOffsets || persisted != s.liveGroups {
		invariants.Panicf("groups %d: counted %d offsets and %d group records, hold %d and %d",
			s.cfg.Partition, s.liveOffsets, s.liveGroups, offsets, persisted)
	}
}

func (g *group) checkInvariants(partition int32) {
	if len(g.byID) != len(g.members) {
		invariants.Panicf("groups %d: group %q indexes %d members, lists %d", partition, g.id, len(g.byID), len(g.members))
	}
	for _, m := range g.members {
		if g.byID[m.id] != m || g.pending[m.id] {
			invariants.Panicf("groups %d: group %q member %q is not indexed, or also pending", partition, g.id, m.id)
		}
		if m.instanceID != nil && g.byInstance[*m.instanceID] != m.id {
			invariants.Panicf("groups %d: group %q instance %q maps to %q, not its member %q",
				partition, g.id, *m.instanceID, g.byInstance[*m.instanceID], m.id)
		}
		// A JoinGroup is parked only while the join phase collects
		// members, a SyncGroup only while the leader's assignment is
		// awaited.
		if m.join != nil && g.state != statePreparingRebalance || m.sync != nil && g.state != stateCompletingRebalance {
			invariants.Panicf("groups %d: group %q in %s has member %q parked (join %v, sync %v)",
				partition, g.id, g.state, m.id, m.join != nil, m.sync != nil)
		}
	}
	awaited := 0
	for _, m := range g.members {
		if g.pendingSync[m.id] {
			awaited++
		}
	}
	if awaited != len(g.pendingSync) {
		invariants.Panicf("groups %d: group %q awaits %d syncs, %d of them from members", partition, g.id, len(g.pendingSync), awaited)
	}
	switch {
	case len(g.members) == 0 && g.state != stateEmpty && g.state != statePreparingRebalance:
		invariants.Panicf("groups %d: group %q is %s with no members", partition, g.id, g.state)
	case len(g.members) > 0 && (g.state == stateEmpty || g.byID[g.leader] == nil):
		invariants.Panicf("groups %d: group %q is %s with %d members and leader %q", partition, g.id, g.state, len(g.members), g.leader)
	case (g.state == stateCompletingRebalance || g.state == stateStable) && (g.generation <= 0 || g.protocol == ""):
		invariants.Panicf("groups %d: group %q is %s at generation %d with protocol %q", partition, g.id, g.state, g.generation, g.protocol)
	}
}
