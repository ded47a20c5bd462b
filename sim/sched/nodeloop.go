package sched

import "time"

// NodeLoop runs functions on one simulated node's loop, in virtual time.
// Simulated disks and links deliver their completions through it, so that
// the simulator's node (package sim) can hold back a paused node's events
// until it resumes and drop a crashed node's events altogether.
type NodeLoop interface {
	// Schedule runs f on the node's loop d from now, traced under label.
	Schedule(d time.Duration, label Label, f func())
}

// Direct returns a NodeLoop that schedules straight onto s, for tests of one
// component (a disk, a log) without the whole simulated node around it.
func Direct(s *Scheduler, node string) NodeLoop {
	return direct{s: s, node: node}
}

type direct struct {
	s    *Scheduler
	node string
}

func (d direct) Schedule(delay time.Duration, label Label, f func()) {
	label.Node = d.node
	d.s.After(delay, label, f)
}
