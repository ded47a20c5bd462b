//go:build !invariants

package log

func (l *Log) checkInvariants() {}
