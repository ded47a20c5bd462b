// Package sim is the one package where crypto/rand.Reader may be touched:
// the simulator swaps it for a seeded reader during a run.
package sim

import (
	"crypto/rand"
	"io"
)

// swap installs a seeded reader and returns a function that restores the
// real one: reading and assigning rand.Reader is the exemption.
func swap(seeded io.Reader) (restore func()) {
	saved := rand.Reader
	rand.Reader = seeded
	return func() { rand.Reader = saved }
}
