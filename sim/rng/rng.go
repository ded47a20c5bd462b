// Package rng is the simulator's deterministic randomness.
//
// One run has one seed. Every component that needs randomness (each node, each
// disk, each link, the workload, the fault schedule) gets its own stream,
// derived from the run's seed and a label such as "node/2/disk". Streams are
// derived from labels, never from the order in which they are created or drawn
// from, so a new draw in one component leaves every other stream untouched and
// a seed keeps meaning the same run as the code grows.
//
// The generator is xoshiro256** seeded through SplitMix64: small, fast, and
// specified independently of Go's standard library, so a seed means the same
// thing across Go releases.
package rng

import (
	"encoding/binary"
	"math/bits"
)

// Rand is one deterministic stream. It implements env.Rand and io.Reader.
// The zero value is not usable; use New or Fork.
type Rand struct {
	key uint64 // identifies the stream; Fork derives children from it
	s   [4]uint64
}

// New returns the root stream of a run.
func New(seed uint64) *Rand {
	return fromKey(splitmix(seed ^ 0x736c75696365)) // "sluice"
}

// Fork returns the stream named label beneath r. It depends only on r's
// identity and label, never on how much has been drawn from r.
func (r *Rand) Fork(label string) *Rand {
	return fromKey(splitmix(r.key ^ hashString(label)))
}

func fromKey(key uint64) *Rand {
	r := &Rand{key: key}
	x := key
	for i := range r.s {
		x += 0x9e3779b97f4a7c15
		r.s[i] = splitmix(x)
	}
	return r
}

// Uint64 returns the next 64 random bits.
func (r *Rand) Uint64() uint64 {
	s := &r.s
	result := bits.RotateLeft64(s[1]*5, 7) * 9
	t := s[1] << 17
	s[2] ^= s[0]
	s[3] ^= s[1]
	s[1] ^= s[2]
	s[0] ^= s[3]
	s[2] ^= t
	s[3] = bits.RotateLeft64(s[3], 45)
	return result
}

// Intn returns a uniform integer in [0, n). It panics if n <= 0.
func (r *Rand) Intn(n int) int {
	if n <= 0 {
		panic("rng: Intn with n <= 0")
	}
	return int(r.Uint64n(uint64(n)))
}

// Uint64n returns a uniform integer in [0, n), without bias. It panics if n == 0.
func (r *Rand) Uint64n(n uint64) uint64 {
	if n == 0 {
		panic("rng: Uint64n with n == 0")
	}
	threshold := -n % n
	for {
		hi, lo := bits.Mul64(r.Uint64(), n)
		if lo >= threshold {
			return hi
		}
	}
}

// Float64 returns a uniform number in [0, 1).
func (r *Rand) Float64() float64 {
	return float64(r.Uint64()>>11) / (1 << 53)
}

// Chance reports true with probability p.
func (r *Rand) Chance(p float64) bool {
	return r.Float64() < p
}

// Read fills p with random bytes; it never fails. It lets a stream stand in
// for crypto/rand.Reader during a run.
func (r *Rand) Read(p []byte) (int, error) {
	var buf [8]byte
	for i := 0; i < len(p); i += 8 {
		binary.LittleEndian.PutUint64(buf[:], r.Uint64())
		copy(p[i:], buf[:])
	}
	return len(p), nil
}

// splitmix is SplitMix64's output function: a strong 64-bit mixer.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// hashString is FNV-1a, 64 bits.
func hashString(s string) uint64 {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 0x100000001b3
	}
	return h
}
