package jepsen

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A history's operations become spans on their clients' lanes, from the
// invoke's virtual time to the completion's, coloured by outcome; a
// violation is marked at its first event and linked to its lines.
func TestTimelineDrawsTheHistory(t *testing.T) {
	var now time.Duration
	h := NewHistory()
	h.SetClock(func() time.Duration { return now })
	tp := TopicPartition{Topic: "t", Partition: 0}
	now = time.Second
	a := h.InvokeProduce(1, tp, false, "a")
	now = 2 * time.Second
	h.ProduceOk(a, 0)
	b := h.InvokeProduce(2, tp, false, "b")
	now = 3 * time.Second
	h.Fail(b, errors.New("<refused>"))
	h.InvokeFetch(2, tp, 0, 0) // never completes
	events := h.Events()
	require.Equal(t, int64(time.Second), events[0].Virtual)

	tl := Timeline{Title: "run <1>", End: 4 * time.Second}
	tl.Lane("nodes", "broker").Spans = []Span{{From: 500 * time.Millisecond, To: 1500 * time.Millisecond, Class: "down", Label: "crashed"}}
	tl.Lane("nodes", "broker").Points = []Point{{At: 500 * time.Millisecond, Class: "fault", Label: "fault crash"}}
	tl.AddHistory(events, Result{Violations: []Violation{{Check: "lost-write", Message: `"a" lost`, Events: []Event{events[1], events[0]}}}})

	client1 := tl.Lane("clients", "client 1")
	require.Equal(t, []Span{{From: time.Second, To: 2 * time.Second, Class: "ok", Label: client1.Spans[0].Label, Line: 1}}, client1.Spans)
	client2 := tl.Lane("clients", "client 2")
	require.Len(t, client2.Spans, 2)
	require.Equal(t, "fail", client2.Spans[0].Class)
	require.Equal(t, Span{From: 3 * time.Second, To: 4 * time.Second, Class: "pending", Label: client2.Spans[1].Label, Line: 5}, client2.Spans[1])
	require.Equal(t, []Mark{{At: time.Second, Label: `lost-write: "a" lost`, Lines: []int{1, 2}}}, tl.Marks)

	var out strings.Builder
	require.NoError(t, WriteTimeline(&out, tl))
	page := out.String()
	for _, want := range []string{"<svg", ">broker<", ">client 2<", `class=down`, `class=fault`, `href="#h1"`, "<tr id=h5>", `href="#v1"`, "<h3 id=v1>violation 1 at 1.000s", "&lt;refused&gt;", "run &lt;1&gt;"} {
		require.Contains(t, page, want)
	}
	// Self-contained: nothing to fetch, nothing to run.
	for _, never := range []string{"<script", "src=", "http://", "https://"} {
		if never == "http://" {
			page = strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, "")
		}
		require.NotContains(t, page, never)
	}
}

func TestTimelineAxisSteps(t *testing.T) {
	for in, want := range map[float64]float64{0.3: 0.5, 1: 1, 1.5: 2, 3: 5, 7: 10, 0: 1} {
		require.InDelta(t, want, niceStep(in), 1e-9, "%g", in)
	}
}
