package env

import "math/bits"

// Helpers over Rand, so that every caller draws the same way and the number
// of draws per value is fixed (the simulator's replay depends on it).

// Intn returns a uniform integer in [0, n). It panics if n <= 0.
func Intn(r Rand, n int) int {
	if n <= 0 {
		panic("env.Intn: n must be positive")
	}
	return int(Uint64n(r, uint64(n)))
}

// Uint64n returns a uniform integer in [0, n) by Lemire's multiply-shift
// method with rejection, so it is unbiased. It panics if n == 0.
func Uint64n(r Rand, n uint64) uint64 {
	if n == 0 {
		panic("env.Uint64n: n must be positive")
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
func Float64(r Rand) float64 {
	return float64(r.Uint64()>>11) / (1 << 53)
}

// Fill fills p with random bytes.
func Fill(r Rand, p []byte) {
	for i := 0; i < len(p); i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < len(p); j++ {
			p[i+j] = byte(v >> (8 * j))
		}
	}
}
