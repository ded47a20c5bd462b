package node

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Replication throttling (KIP-73), the leader's side: a leader limits the
// bytes it serves, per second, to followers fetching a throttled replica
// (a partition its topic's leader.replication.throttled.replicas names
// with this broker's id, or "*") while they are out of the ISR, at the
// broker's leader.replication.throttled.rate (its dynamic config, else
// the cluster default; unset is unlimited). In-sync followers are never
// throttled, as in Kafka, so a throttle slows a reassignment's catch-up
// and never the acks=all path.
//
// One token bucket per broker holds the bytes a throttled read may still
// take: it refills at the rate on the node's clock (env.Clock; a clock
// that steps back refills nothing until it passes the last refill), up to one second's
// worth, and a read takes what the bucket holds (at least one batch for
// the first partition of a response, KIP-74) and may leave it in debt.
// While it is empty, a throttled partition's part of a fetch carries no
// records (the fetch is not an error; a follower's fetch then waits its
// MaxWait and comes back). Kafka's quota manager measures the rate over a
// window of samples and delays whole responses; a bucket keeps the same
// average with fewer moving parts.
//
// The follower's side (follower.replication.throttled.*) is validated and
// stored but not enforced: the leader's limit alone bounds a catch-up.

// Throttle config names, as Kafka's.
const (
	leaderThrottledRateConfig       = "leader.replication.throttled.rate"
	followerThrottledRateConfig     = "follower.replication.throttled.rate"
	leaderThrottledReplicasConfig   = "leader.replication.throttled.replicas"
	followerThrottledReplicasConfig = "follower.replication.throttled.replicas"
)

// tokenBucket is a rate limit in bytes per second on a monotonic clock.
type tokenBucket struct {
	rate int64
	// tokens are the bytes a read may take now; below zero after a read
	// larger than what was there.
	tokens int64
	// last is when tokens were last refilled: it advances by the time the
	// whole bytes refilled stand for, so no fraction is lost.
	last time.Time
}

// newTokenBucket starts full.
func newTokenBucket(rate int64, now time.Time) *tokenBucket {
	return &tokenBucket{rate: rate, tokens: rate, last: now}
}

// refill adds what the time since the last refill earned, up to one
// second's worth.
func (tb *tokenBucket) refill(now time.Time) {
	elapsed := now.Sub(tb.last)
	if elapsed <= 0 {
		return
	}
	if elapsed >= time.Second {
		tb.tokens, tb.last = tb.rate, now
		return
	}
	ns := int64(elapsed)
	// rate*ns/1e9 without overflow: ns < 1e9.
	earned := tb.rate/1e9*ns + (tb.rate%1e9)*ns/1e9
	if earned <= 0 {
		return
	}
	tb.tokens += earned
	if tb.tokens >= tb.rate {
		tb.tokens, tb.last = tb.rate, now
		return
	}
	// The time the earned bytes stand for, rounded up so the bucket never
	// earns faster than the rate.
	spent := elapsed
	if earned < math.MaxInt64/int64(time.Second) {
		byteNs := earned * int64(time.Second)
		spent = time.Duration(byteNs / tb.rate)
		if byteNs%tb.rate != 0 {
			spent++
		}
	}
	tb.last = tb.last.Add(min(spent, elapsed))
}

// available is what a read may take at now.
func (tb *tokenBucket) available(now time.Time) int64 {
	tb.refill(now)
	return max(tb.tokens, 0)
}

// take records a read of n bytes.
func (tb *tokenBucket) take(n int64) { tb.tokens -= n }

// setRate changes the rate, keeping at most one second's worth.
func (tb *tokenBucket) setRate(rate int64, now time.Time) {
	tb.refill(now)
	tb.rate = rate
	tb.tokens = min(tb.tokens, rate)
}

// leaderThrottleRate is this broker's leader.replication.throttled.rate:
// its own dynamic config, else the cluster default; ok false when unset
// (unlimited) or unparsable (the node validates what it writes).
func (b *Broker) leaderThrottleRate() (int64, bool) {
	for _, name := range []string{strconv.Itoa(int(b.cfg.NodeID)), ""} {
		if v, ok := b.image.BrokerConfigs[name][leaderThrottledRateConfig]; ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil && n < math.MaxInt64
		}
	}
	return 0, false
}

// leaderThrottled reports whether this leader throttles replica's fetch of
// p: the topic names the partition on this broker (or "*") and the
// follower is out of the ISR.
func (b *Broker) leaderThrottled(p *partition, replica int32) bool {
	t := b.image.Topics[p.topicID]
	if t == nil || slices.Contains(p.rep.Metadata().ISR, replica) {
		return false
	}
	return throttledReplicasName(t.Configs[leaderThrottledReplicasConfig], p.index, b.cfg.NodeID)
}

// throttledReplicasName reports whether a throttled-replicas value names
// the partition on the broker: "*", or a "partition:broker" entry.
func throttledReplicasName(v string, partition, broker int32) bool {
	v = strings.TrimSpace(v)
	if v == "*" {
		return true
	}
	want := strconv.Itoa(int(partition)) + ":" + strconv.Itoa(int(broker))
	for _, entry := range strings.Split(v, ",") {
		if strings.TrimSpace(entry) == want {
			return true
		}
	}
	return false
}

// throttledRoom limits a follower fetch's read of p to what the leader's
// bucket holds, when the read is throttled: it returns the room and
// whether one batch may exceed it.
func (b *Broker) throttledRoom(p *partition, replica int32, room int64, minOneBatch bool) (int64, bool) {
	rate, ok := b.leaderThrottleRate()
	if !ok || !b.leaderThrottled(p, replica) {
		return room, minOneBatch
	}
	tb := b.leaderBucket(rate)
	tokens := tb.available(b.env.Clock.Now())
	if tokens <= 0 {
		return 0, false
	}
	return min(room, tokens), minOneBatch
}

// chargeThrottle takes the bytes a follower fetch of p read from the
// leader's bucket, when the read was throttled.
func (b *Broker) chargeThrottle(p *partition, replica int32, n int64) {
	if replica < 0 {
		return
	}
	rate, ok := b.leaderThrottleRate()
	if !ok || !b.leaderThrottled(p, replica) {
		return
	}
	b.replStats.ThrottledFetches++
	b.leaderBucket(rate).take(n)
}

// leaderBucket is the broker's bucket, at the rate.
func (b *Broker) leaderBucket(rate int64) *tokenBucket {
	now := b.env.Clock.Now()
	if b.leaderThrottle == nil {
		b.leaderThrottle = newTokenBucket(rate, now)
	} else if b.leaderThrottle.rate != rate {
		b.leaderThrottle.setRate(rate, now)
	}
	return b.leaderThrottle
}

// throttleRateEntries describes the throttle rates: the cluster defaults
// set (defaults), or this broker's rates in force with their synonyms.
func (b *Broker) throttleRateEntries(defaults bool) []configEntry {
	own := b.image.BrokerConfigs[strconv.Itoa(int(b.cfg.NodeID))]
	cluster := b.image.BrokerConfigs[""]
	unlimited := strconv.FormatInt(math.MaxInt64, 10)
	var entries []configEntry
	for _, name := range []string{followerThrottledRateConfig, leaderThrottledRateConfig} {
		e := configEntry{name: name, kind: kindLong,
			doc: "The bytes per second replication of throttled replicas may use (KIP-73); Sluice enforces the leader's."}
		if v, ok := own[name]; ok && !defaults {
			e.synonyms = append(e.synonyms, configSynonym{name, v, kmsg.ConfigSourceDynamicBrokerConfig})
		}
		if v, ok := cluster[name]; ok {
			e.synonyms = append(e.synonyms, configSynonym{name, v, kmsg.ConfigSourceDynamicDefaultBrokerConfig})
		}
		if defaults && len(e.synonyms) == 0 {
			continue
		}
		if !defaults {
			e.synonyms = append(e.synonyms, configSynonym{name, unlimited, kmsg.ConfigSourceDefaultConfig})
		}
		e.value, e.source = e.synonyms[0].value, e.synonyms[0].source
		entries = append(entries, e)
	}
	return entries
}

// throttledReplicasProblem checks a *.replication.throttled.replicas
// value as Kafka's ThrottledReplicaListValidator does.
func throttledReplicasProblem(name string) func(string) string {
	return func(v string) string {
		if v == "*" || v == "" {
			return ""
		}
		for _, entry := range strings.Split(v, ",") {
			p, br, ok := strings.Cut(strings.TrimSpace(entry), ":")
			if !ok || !allDigits(p) || !allDigits(br) {
				return name + " must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
			}
		}
		return ""
	}
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// throttleRateProblem checks a *.replication.throttled.rate value (a LONG,
// at least 0), worded as Kafka's ConfigException.
func throttleRateProblem(name, v string) string {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	switch {
	case err != nil:
		return "Invalid value " + v + " for configuration " + name + ": Not a number of type LONG"
	case n < 0:
		return "Invalid value " + v + " for configuration " + name + ": Value must be at least 0"
	}
	return ""
}
