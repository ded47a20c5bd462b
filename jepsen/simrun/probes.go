package simrun

import (
	"slices"
	"strconv"
	"strings"
)

// probes counts how often named things happened in a run: faults injected,
// rare client paths taken, disk faults that struck. A sweep adds them up
// across seeds; a probe that never fires marks a part of the system the
// simulation does not reach.
type probes struct {
	counts map[string]int
}

func (p *probes) add(name string) { p.addN(name, 1) }

func (p *probes) addN(name string, n int) {
	if n == 0 {
		return
	}
	if p.counts == nil {
		p.counts = make(map[string]int)
	}
	p.counts[name] += n
}

// Count is one probe's count.
type Count struct {
	Name  string
	Count int
}

// sorted returns the counts ordered by name.
func (p *probes) sorted() []Count {
	out := make([]Count, 0, len(p.counts))
	for name, n := range p.counts {
		out = append(out, Count{Name: name, Count: n})
	}
	slices.SortFunc(out, func(a, b Count) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// formatCounts renders counts as "a:1,b:2", or "none".
func formatCounts(cs []Count) string {
	if len(cs) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, c := range cs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(c.Name)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(c.Count))
	}
	return b.String()
}

// KnownProbes lists the probes a long enough sweep should see fire: every
// fault, and the client and disk paths they are meant to reach.
func KnownProbes() []string {
	return append([]string{
		"fault.crash", "fault.restart", "fault.powerloss", "fault.pause", "fault.reset", "fault.partition", "fault.stall",
		"fault.disk", "fault.bitflip", "fault.clock", "fault.kill", "fault.moment", "fault.slowsync",
		"produce.multi_partition", "produce.retry", "produce.ok_after_retry", "produce.info", "produce.fail", "producer.reset",
		"produce.pipelined", "produce.pipeline_resend", "produce.pipeline_skipped", "produce.pipeline_given_up", "producer.epoch_bump",
		"consumer.seek", "consumer.list_offsets", "consumer.list_offsets_by_time", "consumer.out_of_range",
		"consumer.delete_records", "consumer.delete_records_ok", "consumer.below_log_start", "final.from_log_start", "final.lookup_by_time",
		"disk.eio", "disk.enospc", "disk.sync_lost", "disk.write_torn", "disk.read_flip", "disk.lost_after_kill", "disk.segment_deleted",
		"broker.start_failed", "broker.operator_restart",
		"net.sendfile", "net.sendfile_failed",
		"oracle.fetch", "oracle.ack", "oracle.offsets", "oracle.delete_records",
	}, momentProbes()...)
}

// KnownClusterProbes lists the probes a long enough sweep of cluster runs
// should see fire.
func KnownClusterProbes(metaOnly bool) []string {
	known := []string{
		"fault.crash", "fault.kill", "fault.restart", "fault.pause", "fault.partition", "fault.partition_one_way",
		"fault.partition_client", "fault.partition_controller", "fault.pause_controller", "fault.pause_controller_steered", "meta.controller_unconfirmed", "fault.clock", "fault.disk", "fault.powerloss", "fault.long_outage", "fault.stall_connection",
		"meta.retry", "meta.live_retry", "meta.partitions_added", "meta.partitions_refused", "meta.read_back", "meta.config_altered", "meta.config_seen_set", "voter.removed", "voter.added", "voter.change_failed", "voter.change_during_fault", "client.dial_failed", "disk.eio",
		"node.fatal", "node.start_failed", "node.operator_restart",
		"observe.raft_samples", "observe.applied_samples", "meta.snapshot_taken", "meta.snapshot_restored",
	}
	if !metaOnly {
		known = append(known, "data.metadata_refresh", "data.leader_hint", "oracle.ack", "oracle.fetch",
			"data.acks1", "data.not_enough_replicas", "data.not_enough_replicas_after_append",
			"data.preferred_replica", "data.follower_fetch", "data.page_cache", "data.replica_compared", "data.reassignment", "data.reassignment_during_fault",
			"moment.follower_sync_inflight.armed", "moment.follower_sync_inflight.fired",
			"repl.truncation", "repl.isr_shrink", "repl.isr_expand", "repl.isr_refused", "repl.isr_stale_partition_epoch", "repl.fenced_epoch", "repl.unclean_refused", "fault.stall_connection_isr", "fault.stall_connection_isr_released",
			"fault.kill_lagging_leader", "fault.kill_lagging_leader_struck",
			"fault.stale_follower", "fault.stale_follower_bumped", "fault.stale_follower_fenced", "meta.lease_withheld",
			"fault.lagging_image", "fault.lagging_image_moved", "fault.lagging_image_served",
			// Idempotent producers (cluster_idempotent.go) and the
			// retries their leaders dedupe.
			"data.idempotent", "data.idempotent_retry", "data.idempotent_retry_new_leader", "data.idempotent_ok_after_retry",
			"data.idempotent_ok_after_leader_change", "data.idempotent_given_up", "data.idempotent_epoch_bump",
			"data.idempotent_new_producer_id", "data.idempotent_init_retry", "repl.retry_deduped", "repl.retry_deduped_across_epochs",
			// The group workload (cluster_groups.go).
			"group.late_join", "group.leave", "group.crash", "group.stall", "group.lease_lost", "group.rejoin",
			"group.coordinator_moved", "group.failover_during_rebalance", "group.revocation_racing_assignment",
			"group.offset_fetch", "group.commit_acknowledged", "group.commit_refused", "group.commit_unknown",
			"group.static_rejoin", "group.fenced_static_member", "group.zombie_refused", "group.unreleased_instance",
			"group.reset", "group.deleted", "group.reset_refused")
	}
	return known
}
