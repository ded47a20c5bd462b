package raftmeta

import (
	"fmt"
	"strings"
)

// One-line forms of records and image parts, for logs and the controller's
// transcripts. Ids print as their first 8 hex digits.

func shortID(id [16]byte) string { return formatUUID(id)[:8] }

func formatIDs(ids []int32) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, id)
	}
	b.WriteByte(']')
	return b.String()
}

func (p Partition) String() string {
	s := fmt.Sprintf("%d: replicas=%s isr=%s leader=%d epochs=%d/%d",
		p.Index, formatIDs(p.Replicas), formatIDs(p.ISR), p.Leader, p.LeaderEpoch, p.PartitionEpoch)
	if len(p.ELR) > 0 {
		s += " elr=" + formatIDs(p.ELR)
	}
	if len(p.LastKnownELR) > 0 {
		s += " last_known_elr=" + formatIDs(p.LastKnownELR)
	}
	if len(p.AddingReplicas) > 0 {
		s += " adding=" + formatIDs(p.AddingReplicas)
	}
	if len(p.RemovingReplicas) > 0 {
		s += " removing=" + formatIDs(p.RemovingReplicas)
	}
	return s
}

func (b Broker) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "%d epoch=%d", b.ID, b.Epoch)
	if !b.IncarnationID.IsZero() {
		fmt.Fprintf(&s, " inc=%s", shortID(b.IncarnationID))
	}
	if b.Rack != "" {
		fmt.Fprintf(&s, " rack=%s", b.Rack)
	}
	for _, l := range b.Listeners {
		fmt.Fprintf(&s, " %s://%s:%d", l.Name, l.Host, l.Port)
	}
	if b.Fenced {
		s.WriteString(" fenced")
	}
	if b.InControlledShutdown {
		s.WriteString(" shutting-down")
	}
	return s.String()
}

func (r ClusterIDRecord) String() string { return "cluster_id " + r.ClusterID }
func (r RegisterBrokerRecord) String() string {
	return "register_broker " + normalizeBroker(r.Broker).String()
}

func (r BrokerChangeRecord) String() string {
	return fmt.Sprintf("broker_change %d epoch=%d %s", r.BrokerID, r.BrokerEpoch, r.Change)
}

func (r UnregisterBrokerRecord) String() string {
	return fmt.Sprintf("unregister_broker %d epoch=%d", r.BrokerID, r.BrokerEpoch)
}

func (r CreateTopicRecord) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "create_topic %s id=%s", r.Topic.Name, shortID(r.Topic.ID))
	for _, k := range sortedKeys(r.Topic.Configs) {
		fmt.Fprintf(&s, " %s=%s", k, r.Topic.Configs[k])
	}
	for _, p := range r.Topic.Partitions {
		fmt.Fprintf(&s, " (%s)", p)
	}
	return s.String()
}

func (r DeleteTopicRecord) String() string { return "delete_topic " + shortID(r.ID) }

func (r CreatePartitionsRecord) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "create_partitions %s", shortID(r.Topic))
	for _, p := range r.Partitions {
		fmt.Fprintf(&s, " (%s)", p)
	}
	return s.String()
}

func (r PartitionChangeRecord) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "partition_change %s-%d leader=%d", shortID(r.Topic), r.Partition, r.Leader)
	if r.ISR != nil {
		fmt.Fprintf(&s, " isr=%s", formatIDs(r.ISR))
	}
	if r.Replicas != nil {
		fmt.Fprintf(&s, " replicas=%s", formatIDs(r.Replicas))
	}
	if r.ELR != nil {
		fmt.Fprintf(&s, " elr=%s", formatIDs(r.ELR))
	}
	if r.LastKnownELR != nil {
		fmt.Fprintf(&s, " last_known_elr=%s", formatIDs(r.LastKnownELR))
	}
	if r.AddingReplicas != nil {
		fmt.Fprintf(&s, " adding=%s", formatIDs(r.AddingReplicas))
	}
	if r.RemovingReplicas != nil {
		fmt.Fprintf(&s, " removing=%s", formatIDs(r.RemovingReplicas))
	}
	fmt.Fprintf(&s, " epochs=%d/%d", r.LeaderEpoch, r.PartitionEpoch)
	return s.String()
}

func (r ConfigRecord) String() string {
	if r.Value == nil {
		return fmt.Sprintf("config %s %q delete %s", r.Resource, r.Name, r.Key)
	}
	return fmt.Sprintf("config %s %q set %s=%s", r.Resource, r.Name, r.Key, *r.Value)
}

func (r ProducerIDsRecord) String() string {
	return fmt.Sprintf("producer_ids [%d, %d)", r.First, r.First+r.Count)
}
