package simnet

import (
	"fmt"
	"math/bits"
	"slices"
	"time"

	"github.com/sluicemq/sluice/sim/rng"
)

// Distribution draws the one-way latency of a segment on a link.
type Distribution interface {
	Sample(r *rng.Rand) time.Duration
	String() string
}

// Fixed is a latency that never varies.
func Fixed(d time.Duration) Distribution { return fixed(max(d, 0)) }

type fixed time.Duration

func (f fixed) Sample(*rng.Rand) time.Duration { return time.Duration(f) }
func (f fixed) String() string                 { return fmt.Sprintf("fixed(%v)", time.Duration(f)) }

// Uniform draws latencies uniformly from [lo, hi].
func Uniform(lo, hi time.Duration) Distribution {
	lo = max(lo, 0)
	return uniform{lo: lo, hi: max(hi, lo)}
}

type uniform struct{ lo, hi time.Duration }

func (u uniform) Sample(r *rng.Rand) time.Duration {
	return u.lo + time.Duration(r.Uint64n(uint64(u.hi-u.lo)+1))
}

func (u uniform) String() string { return fmt.Sprintf("uniform(%v, %v)", u.lo, u.hi) }

// LongTail draws latencies of at least base with a Pareto-like tail of index
// 2, capped at limit: three draws in four fall below 2*base, about one in
// 100 exceeds 10*base and one in 1000 exceeds 30*base. It draws with
// integers only, so a seed gives the same latencies on every machine.
func LongTail(base, limit time.Duration) Distribution {
	base = max(base, 1)
	return longTail{base: base, limit: max(limit, base)}
}

type longTail struct{ base, limit time.Duration }

func (l longTail) Sample(r *rng.Rand) time.Duration {
	// k is geometric with P(k >= j) = 4^-j; the draw is uniform in
	// [base*2^k, base*2^(k+1)), so P(draw > base*2^j) is about (2^j)^-2.
	k := bits.TrailingZeros64(r.Uint64()|1<<62) / 2
	if bits.Len64(uint64(l.base))+k >= 62 {
		return l.limit
	}
	lo := l.base << k
	if lo >= l.limit {
		return l.limit
	}
	return min(lo+time.Duration(r.Uint64n(uint64(lo))), l.limit)
}

func (l longTail) String() string { return fmt.Sprintf("longtail(%v, %v)", l.base, l.limit) }

type linkKey struct{ from, to string }

// link is the one-way path from one host to another.
type link struct {
	from, to string
	latency  Distribution
	r        *rng.Rand
	cut      bool
	// cutPorts cuts the link for the connections to these ports only (the
	// acceptor's port, on either host): a node cut off from one service of
	// its peers, such as the controller quorum, while its other links work.
	cutPorts []int
	// stallUntil holds back every arrival before it.
	stallUntil time.Duration
}

func (n *Network) link(from, to string) *link {
	k := linkKey{from, to}
	if l := n.links[k]; l != nil {
		return l
	}
	l := &link{from: from, to: to, r: n.r.Fork("link/" + from + "->" + to)}
	l.latency = defaultLatency
	if from == to {
		l.latency = loopbackLatency
	}
	n.links[k] = l
	n.linkList = append(n.linkList, l)
	return l
}

// blocks reports whether the link drops the segments of a connection to
// port (its acceptor's).
func (l *link) blocks(port int) bool {
	return l.cut || slices.Contains(l.cutPorts, port)
}

func (l *link) sample() time.Duration { return l.latency.Sample(l.r) }

// draw returns a uniform integer in [0, n] (n >= 0) from the link's stream.
func (l *link) draw(n int64) int64 {
	return int64(l.r.Uint64n(uint64(n) + 1))
}
