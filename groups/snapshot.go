package groups

// maybeSnapshot restates the live state as one Write flagged SnapshotStart
// once the records written since the last snapshot pass max(the floor,
// twice the live records): the log then holds at most about three times
// its live state between snapshots, and loading takes time proportional to
// the live state, not the history.
//
// The snapshot holds, for each group in id order, its metadata as last
// written (not its in-memory state, which may be mid-rebalance) and then
// its offsets in topic and partition order. A consumer group (KIP-848) is
// restated from its state, which is exactly its records (they are the
// only way it changes): every member's subscription, target and
// assignment, and the group's epochs and subscription metadata. Every record is an upsert, so
// replaying from the snapshot's first offset gives exactly the state that
// replaying the whole log gives; nothing before it is needed.
func (s *Shard) maybeSnapshot() {
	live := s.liveGroups + s.liveOffsets + s.liveConsumer
	if s.recordsSince <= max(s.cfg.SnapshotMinRecords, 2*live) {
		return
	}
	recs := s.snapshotRecords()
	s.effects = append(s.effects, Effect{Write: recs, SnapshotStart: true})
	s.recordsSince = len(recs)
}

func (s *Shard) snapshotRecords() []Record {
	recs := make([]Record, 0, s.liveGroups+s.liveOffsets+s.liveConsumer) // never nil: see Effect.SnapshotStart
	for _, id := range s.sortedGroupIDs() {
		g := s.groups[id]
		if g.persisted != nil {
			recs = append(recs, Record{Key: groupKey(g.id), Value: g.persisted})
		}
		recs = append(recs, g.consumer.snapshotRecords(g.id)...)
		for _, tp := range g.sortedOffsets() {
			recs = append(recs, Record{Key: offsetKey(g.id, tp.topic, tp.partition), Value: encodeOffsetValue(g.offsets[tp])})
		}
	}
	return recs
}
