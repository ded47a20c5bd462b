package assign

import (
	"slices"

	"github.com/sluicemq/sluice/internal/invariants"
)

// Uniform is Kafka's "uniform" server-side assignor (UniformAssignor):
// balance first, then stickiness. When every member subscribes to the same
// topics it runs the homogeneous builder, otherwise the heterogeneous one.
type Uniform struct{}

// Name implements Assignor.
func (Uniform) Name() string { return "uniform" }

// Assign implements Assignor.
func (Uniform) Assign(spec GroupSpec, topics TopicDescriber) (GroupAssignment, error) {
	g, err := newGroup(spec, topics)
	if err != nil {
		return GroupAssignment{}, err
	}
	g.keepCurrent()
	if g.homogeneous() {
		g.uniformHomogeneous()
	} else {
		g.uniformHeterogeneous()
	}
	return g.result(), nil
}

// homogeneous reports whether every member subscribes to the same topics.
func (g *group) homogeneous() bool {
	for m := 1; m < len(g.subs); m++ {
		if !slices.Equal(g.subs[m], g.subs[0]) {
			return false
		}
	}
	return true
}

// uniformHomogeneous balances a group whose members share one subscription:
// every member ends with total/n or total/n+1 partitions, keeping as many
// of its current ones as those quotas allow.
//
// Kafka hands the quotas of total/n+1 to the first members it iterates,
// whatever they hold, so a member holding one partition more than the
// others can lose it while another member gains one. Here the larger quotas
// go first to members that hold more than total/n, which revokes as little
// as any balanced assignment can: adding a member to a balanced group moves
// only the partitions the new member needs.
func (g *group) uniformHomogeneous() {
	n := len(g.members)
	if n == 0 {
		return
	}
	total := 0
	for _, c := range g.partitions {
		total += int(c)
	}
	quotaMin, extra := total/n, total%n
	quota := make([]int, n)
	for m := range quota {
		quota[m] = quotaMin
		if extra > 0 && g.load[m] > quotaMin {
			quota[m]++
			extra--
		}
	}
	for m := range quota {
		if extra > 0 && quota[m] == quotaMin {
			quota[m]++
			extra--
		}
	}
	g.revokeBeyond(quota)
	g.fillTo(quota)
}

// revokeBeyond takes from every member the partitions past its quota,
// keeping its first ones in topic and partition order.
func (g *group) revokeBeyond(quota []int) {
	kept := make([]int, len(quota))
	for t, owners := range g.owner {
		for p, m := range owners {
			if m < 0 {
				continue
			}
			if kept[m] == quota[m] {
				g.clear(t, int32(p))
				continue
			}
			kept[m]++
		}
	}
}

// fillTo hands the partitions without an owner, in topic and partition
// order, to the members below their quota, in member order, each taking a
// run up to its quota. The quotas add up to the partitions, so none is left.
func (g *group) fillTo(quota []int) {
	m := 0
	for t, owners := range g.owner {
		for p, o := range owners {
			if o >= 0 {
				continue
			}
			for m < len(quota) && g.load[m] >= quota[m] {
				m++
			}
			if m == len(quota) {
				if invariants.Enabled {
					invariants.Panicf("assign: quotas %v leave partition %d of topic %s without an owner", quota, p, g.topics[t])
				}
				return
			}
			g.set(t, int32(p), m)
		}
	}
}
