package groups

import (
	"slices"

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
	offsets, persisted, consumer := 0, 0, 0
	for _, id := range s.sortedGroupIDs() {
		g := s.groups[id]
		offsets += len(g.offsets)
		if g.persisted != nil {
			persisted++
		}
		consumer += g.consumer.liveRecords()
		g.checkInvariants(s.cfg.Partition)
		if g.consumer != nil {
			g.checkConsumerInvariants(s.cfg.Partition)
		}
	}
	if offsets != s.liveOffsets || persisted != s.liveGroups || consumer != s.liveConsumer {
		invariants.Panicf("groups %d: counted %d offsets, %d group records and %d consumer group records, hold %d, %d and %d",
			s.cfg.Partition, s.liveOffsets, s.liveGroups, s.liveConsumer, offsets, persisted, consumer)
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

// checkConsumerInvariants asserts KIP-848's safety rule, found afresh from
// the members rather than from the owners index the handlers use: no
// partition is held by two members at once, counting a partition pending
// revocation as held by its old owner until its heartbeat gives it up.
// And the index agrees; members' states match what they hold; epochs are
// ordered member <= assignment <= group.
func (g *group) checkConsumerInvariants(partition int32) {
	cg := g.consumer
	if len(g.members) > 0 || g.state != stateEmpty || len(cg.members) > 0 && !cg.hasMetadata {
		invariants.Panicf("groups %d: consumer group %q has %d classic members in %s, metadata %v",
			partition, g.id, len(g.members), g.state, cg.hasMetadata)
	}
	if cg.assignmentEpoch > cg.epoch {
		invariants.Panicf("groups %d: consumer group %q has assignment epoch %d past group epoch %d", partition, g.id, cg.assignmentEpoch, cg.epoch)
	}
	holder := map[partitionRef]string{}
	for _, id := range cg.sortedMemberIDs() {
		m := cg.members[id]
		// A static member gone with -2 keeps its state but gives up what
		// it was revoking, as in Kafka.
		if m.epoch > cg.assignmentEpoch || m.epoch >= 0 && (m.state == memberUnrevoked) != (len(m.revoking) > 0) {
			invariants.Panicf("groups %d: consumer group %q member %q at epoch %d (assignment epoch %d) is %s revoking %v",
				partition, g.id, id, m.epoch, cg.assignmentEpoch, m.state, m.revoking)
		}
		for _, r := range append(refsOf(m.assigned), refsOf(m.revoking)...) {
			if other, ok := holder[r]; ok {
				invariants.Panicf("groups %d: consumer group %q partition %s/%d is held by %q and %q",
					partition, g.id, r.topic, r.partition, other, id)
			}
			holder[r] = id
		}
	}
	if len(holder) != len(cg.owners) {
		invariants.Panicf("groups %d: consumer group %q indexes %d held partitions, members hold %d", partition, g.id, len(cg.owners), len(holder))
	}
	for _, r := range sortedRefs(holder) {
		if id := holder[r]; cg.owners[r] != id {
			invariants.Panicf("groups %d: consumer group %q indexes %s/%d as %q's, held by %q", partition, g.id, r.topic, r.partition, cg.owners[r], id)
		}
	}
}

func sortedRefs(m map[partitionRef]string) []partitionRef {
	refs := make([]partitionRef, 0, len(m))
	for r := range m {
		refs = append(refs, r)
	}
	slices.SortFunc(refs, compareRefs)
	return refs
}
