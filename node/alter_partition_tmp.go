package node

import "github.com/sluicemq/sluice/raftmeta"

// alterPartition is a stand-in until AlterPartition (key 56) is served:
// only the active controller's own partitions change their ISR.
func (b *Broker) alterPartition(req raftmeta.AlterPartition, done func(raftmeta.AlterPartitionReply, error)) {
	if b.meta.activeTerm == 0 || b.ctl == nil {
		b.env.Loop.Post(func() { done(raftmeta.AlterPartitionReply{}, errNotController) })
		return
	}
	reply, records := b.ctl.AlterPartition(req)
	if reply.Err != nil || len(records) == 0 {
		b.env.Loop.Post(func() { done(reply, nil) })
		return
	}
	b.propose(records, func(err error) { done(reply, err) })
}
