package node

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim"
	"github.com/sluicemq/sluice/wire"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sendFrom dials the broker from node host and writes raw, n times, period
// apart, each time on a new connection (as a client that reconnects after
// every failure does).
func (s *simBroker) sendFrom(host string, raw []byte, n int, period time.Duration) {
	node := s.world.Node(host)
	if node == nil {
		node = s.world.AddNode(host, func(env.Env) {})
	}
	e := node.Env()
	var attempt func(i int)
	attempt = func(i int) {
		e.Net.Dial("n1:9092", func(c env.Conn, err error) env.ConnHandler {
			require.NoError(s.t, err)
			require.NoError(s.t, c.Write(raw))
			return discard{}
		})
		if i+1 < n {
			e.Clock.AfterFunc(period, func() { attempt(i + 1) })
		}
	}
	node.Post(func() { attempt(0) })
}

// warnLines returns the logged lines that carry msg.
func warnLines(logs *bytes.Buffer, msg string) []string {
	var out []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `msg="`+msg+`"`) {
			out = append(out, line)
		}
	}
	return out
}

// unservedV0 is a request of an API Sluice does not serve (DescribeACLs
// v0), sent as kafka-python retried FindCoordinator v0 before groups were
// served.
func unservedV0() []byte {
	req := kmsg.NewPtrDescribeACLsRequest()
	return wire.AppendRequest(nil, 1, "kafka-python", req)
}

// TestRepeatedWarningIsLoggedOnceAMinutePerHost replays kafka-python
// retrying an unserved request seven times a second for 30 s (as it
// retried FindCoordinator v0 before groups were served),
// on a new connection each time: one warning, then one line a minute later
// counting the rest, while another host and another reason are logged at
// once.
func TestRepeatedWarningIsLoggedOnceAMinutePerHost(t *testing.T) {
	s := newSimBroker(t, 51, nil)
	var logs bytes.Buffer
	s.world.SetLog(&logs, slog.LevelWarn)
	const unsupported = "closing connection: unsupported request"
	start := s.world.Now()
	s.sendFrom("c1", unservedV0(), 210, time.Second/7)
	s.world.Run(30 * time.Second)
	require.Len(t, warnLines(&logs, unsupported), 1, "identical warnings from one host in 30 s")
	require.Contains(t, warnLines(&logs, unsupported)[0], "DescribeACLs v0")

	// Another host, and another reason from the same host, are their own.
	s.sendFrom("c2", unservedV0(), 1, 0)
	s.sendFrom("c1", []byte{0xff, 0xff, 0xff, 0xff}, 1, 0)
	s.world.Run(time.Second)
	require.Len(t, warnLines(&logs, unsupported), 2)
	require.Contains(t, warnLines(&logs, unsupported)[1], "remote=c2:")
	require.Len(t, warnLines(&logs, "closing connection: bad frame"), 1)

	// A minute after the first warning, the count of the rest.
	s.world.RunUntil(func() bool { return len(warnLines(&logs, unsupported)) > 2 }, 2*time.Minute)
	lines := warnLines(&logs, unsupported)
	require.Len(t, lines, 3)
	require.InDelta(t, float64(time.Minute), float64(s.world.Now()-start), float64(clockSlack))
	require.Contains(t, lines[2], "host=c1 suppressed=209 window=1m0s last.conn=")
	require.Contains(t, lines[2], "last.err=\"unsupported request: DescribeACLs v0")

	// A quiet minute ends the entry: the next one is logged at once.
	s.world.Run(2 * time.Minute)
	s.sendFrom("c1", unservedV0(), 1, 0)
	s.world.Run(time.Second)
	lines = warnLines(&logs, unsupported)
	require.Len(t, lines, 4)
	require.NotContains(t, lines[3], "suppressed")
}

// TestMalformedBodyIsLoggedWithItsRequest: the warning of a body that ends
// early names the request, not kmsg's "response did not contain enough
// data".
func TestMalformedBodyIsLoggedWithItsRequest(t *testing.T) {
	s := newSimBroker(t, 52, nil)
	var logs bytes.Buffer
	s.world.SetLog(&logs, slog.LevelWarn)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	req.Topics = append(req.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr("orders")})
	raw := wire.AppendRequest(nil, 9, "short", req)
	raw = raw[:len(raw)-3]
	binary.BigEndian.PutUint32(raw, uint32(len(raw)-4))
	s.sendFrom("c1", raw, 1, 0)
	s.world.Run(time.Second)
	lines := warnLines(&logs, "closing connection: malformed request")
	require.Len(t, lines, 1)
	require.Contains(t, lines[0], `Metadata v12 (key 3, correlation id 9, client id \"short\"): the body ended early`)
	require.NotContains(t, lines[0], "response did not contain")
}

// limiterOnSimClock returns a warnLimiter on a simulated node's clock,
// logging into logs, and that node.
func limiterOnSimClock(t *testing.T, logs *bytes.Buffer) (*warnLimiter, *sim.World, *sim.Node) {
	t.Helper()
	w := sim.New(53)
	var e env.Env
	n := w.AddNode("n", func(x env.Env) { e = x })
	require.True(t, w.RunUntil(func() bool { return e.Clock != nil }, time.Second))
	return newWarnLimiter(e.Clock, slog.New(slog.NewTextHandler(logs, nil))), w, n
}

func TestWarnLimiterMemoryIsBoundedAgainstManyHosts(t *testing.T) {
	var logs bytes.Buffer
	l, w, n := limiterOnSimClock(t, &logs)
	const hosts = 5000
	n.Post(func() {
		for i := range hosts {
			l.warn(fmt.Sprintf("10.0.%d.%d", i/256, i%256), "closing connection: bad frame", "i", i)
		}
	})
	w.Run(time.Second)
	require.LessOrEqual(t, len(l.entries), warnHostsMax+1)
	// Each tracked host's first, and the first of the hosts beyond.
	require.Len(t, warnLines(&logs, "closing connection: bad frame"), warnHostsMax+1)

	w.Run(time.Minute)
	lines := warnLines(&logs, "closing connection: bad frame")
	require.Len(t, lines, warnHostsMax+2)
	require.Contains(t, lines[len(lines)-1], fmt.Sprintf(`host="(hosts beyond the %d tracked)" suppressed=%d`, warnHostsMax, hosts-warnHostsMax-1))
	require.Contains(t, lines[len(lines)-1], fmt.Sprintf("last.i=%d", hosts-1))

	w.Run(2 * time.Minute)
	require.Empty(t, l.entries, "entries outlived two quiet windows")
}

func TestWarnLimiterFlushLogsWhatItHolds(t *testing.T) {
	var logs bytes.Buffer
	l, w, n := limiterOnSimClock(t, &logs)
	n.Post(func() {
		for range 3 {
			l.warn("c1", "closing connection: bad frame")
		}
		l.flush()
	})
	w.Run(5 * time.Minute) // the flushed entry's timer does nothing
	lines := warnLines(&logs, "closing connection: bad frame")
	require.Len(t, lines, 2)
	require.Contains(t, lines[1], "host=c1 suppressed=2")
	require.Empty(t, l.entries)
}

func TestHostOf(t *testing.T) {
	for addr, want := range map[string]string{
		"10.0.0.5:51234": "10.0.0.5",
		"[::1]:9092":     "::1",
		"c1:40000":       "c1",
		"broker.example": "broker.example",
	} {
		require.Equal(t, want, hostOf(addr), addr)
	}
}
