package raftmeta

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// AlterPartitions decides the partitions of one AlterPartition request of
// broker brokerID, as Kafka's ReplicationControlManager.alterPartition
// does: the requester is checked first, and an unknown id or another
// epoch answers the whole request (BROKER_ID_NOT_REGISTERED,
// STALE_BROKER_EPOCH, with no replies), even one that names no partition;
// then each partition is decided as AlterPartition decides it, in request
// order, each against the view the ones before it left. (Each req's
// BrokerID and BrokerEpoch are taken to be the requester's.) The records
// of all of them form one batch, for one proposal.
//
// Kafka validates every partition of a request against the state before
// the request, so a partition named twice writes two records from the
// same epochs; here the second is decided after the first, and with the
// same epochs it is INVALID_UPDATE_VERSION when the first changed the
// partition.
func (c *Controller) AlterPartitions(brokerID int32, brokerEpoch int64, reqs []AlterPartition) (*kerr.Error, string, []AlterPartitionReply, []Record) {
	if c.failed != nil {
		err, msg := c.failedErr()
		return err, msg, nil, nil
	}
	if err, msg := c.requesterProblem(brokerID, brokerEpoch); err != nil {
		return err, msg, nil, nil
	}
	replies := make([]AlterPartitionReply, len(reqs))
	var records []Record
	for i, req := range reqs {
		req.BrokerID, req.BrokerEpoch = brokerID, brokerEpoch
		var batch []Record
		replies[i], batch = c.AlterPartition(req)
		records = append(records, batch...)
	}
	// Each AlterPartition is a batch of its own, pending until the
	// committed image passes its end; one proposal of them all ends
	// where the last ends, so they stop pending together.
	return nil, "", replies, records
}

// requesterProblem checks the broker that sends AlterPartition.
func (c *Controller) requesterProblem(id int32, epoch int64) (*kerr.Error, string) {
	br, ok := c.view.Brokers[id]
	switch {
	case !ok:
		return kerr.BrokerIDNotRegistered, fmt.Sprintf("broker %d is not registered", id)
	case br.Epoch != epoch:
		return kerr.StaleBrokerEpoch, fmt.Sprintf("broker %d has epoch %d, not %d", id, br.Epoch, epoch)
	}
	return nil, ""
}
