// Package testfiles is clean; its test file may use anything.
package testfiles

// Double doubles n.
func Double(n int) int { return 2 * n }
