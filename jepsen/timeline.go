package jepsen

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// TimelineFile is the name WriteTimeline's output takes among a run's
// artifacts.
const TimelineFile = "timeline.html"

// A Timeline is what a run did over time, for a reader to see at a
// glance: lanes of spans (a node down or paused, a node leading the
// metadata quorum, a partition's leader, epoch and ISR, a client's
// operations) and of points (faults, group generations), with the
// violations marked and linked to the history lines that show them.
// WriteTimeline draws it as one self-contained HTML file: no script, no
// network, an SVG a browser shows as it is.
type Timeline struct {
	Title string
	// End is the run's length; nothing is drawn past it.
	End   time.Duration
	Lanes []Lane
	Marks []Mark
	// Notes are lines printed above the drawing: the run's summary, its
	// failures.
	Notes []string
	// History is the run's data history: the marks' Lines index it
	// (history.jsonl's lines, from 1), and WriteTimeline prints those
	// lines under the drawing.
	History []Event
}

// A Lane is one row: a node, a partition, a group, a client. Group heads
// the rows that share it.
type Lane struct {
	Group, Name string
	Spans       []Span
	Points      []Point
}

// A Span is a state that lasted, from From to To. Class picks its colour
// (see timelineStyle): down, killed, paused, disk, leader, partition, ok,
// fail, info, pending.
type Span struct {
	From, To     time.Duration
	Label, Class string
	// Line is the history line (from 1) the span stands for, 0 if none.
	Line int
}

// A Point is a moment: a fault, a group generation.
type Point struct {
	At           time.Duration
	Label, Class string
}

// A Mark is a violation, drawn across every lane at At: when the first of
// the history lines that show it (Lines, from 1) happened, or the run's
// end for one no line shows.
type Mark struct {
	At    time.Duration
	Label string
	Lines []int
}

// Lane returns the lane of that group and name, adding it (last) if it is
// new.
func (t *Timeline) Lane(group, name string) *Lane {
	for i := range t.Lanes {
		if t.Lanes[i].Group == group && t.Lanes[i].Name == name {
			return &t.Lanes[i]
		}
	}
	t.Lanes = append(t.Lanes, Lane{Group: group, Name: name})
	return &t.Lanes[len(t.Lanes)-1]
}

// AddHistory adds a lane per client of the data history, a span per
// operation from its invoke to its completion (pending to the end), and a
// mark per violation of the check's result, at the virtual time of the
// first of its events (a lost write's acknowledgement, a stale fetch). The events must carry virtual times (History.SetClock).
func (t *Timeline) AddHistory(events []Event, result Result) {
	t.History = events
	line := make(map[int64]int, len(events)) // logical time -> line
	invokes := map[int]int{}                 // op -> index of its invoke
	for i, e := range events {
		line[e.Time] = i + 1
		if e.Kind == KindInvoke {
			invokes[e.Op] = i
		}
	}
	done := map[int]bool{}
	for _, e := range events {
		if e.Kind == KindInvoke || e.Kind == KindNote {
			continue
		}
		inv, ok := invokes[e.Op]
		if !ok {
			continue
		}
		done[e.Op] = true
		class := map[Kind]string{KindOk: "ok", KindFail: "fail", KindInfo: "info"}[e.Kind]
		start := events[inv]
		lane := t.Lane("clients", fmt.Sprintf("client %d", start.Client))
		lane.Spans = append(lane.Spans, Span{
			From: time.Duration(start.Virtual), To: time.Duration(e.Virtual), Class: class,
			Label: start.String() + " => " + e.String(), Line: line[start.Time],
		})
	}
	for i, e := range events {
		if e.Kind == KindInvoke && !done[e.Op] {
			lane := t.Lane("clients", fmt.Sprintf("client %d", e.Client))
			lane.Spans = append(lane.Spans, Span{From: time.Duration(e.Virtual), To: t.End, Class: "pending", Label: e.String() + " (never completed)", Line: i + 1})
		}
	}
	for _, v := range result.Violations {
		m := Mark{Label: v.Check + ": " + v.Message, At: t.End}
		for _, e := range v.Events {
			if l, ok := line[e.Time]; ok {
				m.Lines = append(m.Lines, l)
			}
		}
		slices.Sort(m.Lines)
		m.Lines = slices.Compact(m.Lines)
		if len(m.Lines) > 0 {
			m.At = time.Duration(events[m.Lines[0]-1].Virtual)
		}
		t.Marks = append(t.Marks, m)
	}
}

// timelineStyle colours the classes; the page needs nothing else.
const timelineStyle = `body{font:13px system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:17px} pre{font-size:12px;white-space:pre-wrap;background:#f6f6f6;padding:6px}
.lanes text{font-size:11px} .head{font-weight:bold} .axis{stroke:#ccc} .tick{font-size:10px;fill:#666}
.down{fill:#c0392b} .killed{fill:#922b21} .paused{fill:#e67e22} .disk{fill:#8e44ad} .partition{fill:#7f8c8d} .latency{fill:#48c9b0} .loss{fill:#a04000}
.leader{fill:#27ae60} .part{fill:#5dade2;stroke:#fff;stroke-width:.5} .ok{fill:#58d68d} .fail{fill:#ec7063} .info{fill:#f4d03f} .pending{fill:#bbb}
.fault{fill:#000} .generation{fill:#2471a3} .mark{stroke:#e00;stroke-width:1.5;stroke-dasharray:4 3}
.marklabel{fill:#e00;font-size:11px}
tr:target{background:#fde} td{vertical-align:top;padding:2px 6px;font:12px monospace}`

// WriteTimelineArtifact writes t as TimelineFile through create, as
// WriteArtifacts writes a history.
func WriteTimelineArtifact(t Timeline, create func(name string) (io.Writer, error)) error {
	return writeArtifact(TimelineFile, create, func(w io.Writer) error { return WriteTimeline(w, t) })
}

// WriteTimeline draws t as a self-contained HTML page.
func WriteTimeline(w io.Writer, t Timeline) error {
	const (
		labelW = 190
		laneH  = 16
		headH  = 18
		top    = 34
	)
	end := max(t.End, time.Millisecond)
	secs := end.Seconds()
	plotW := math.Max(1400, secs*60) // at least 60 px a second: ops stay apart
	x := func(d time.Duration) float64 { return labelW + plotW*min(max(d.Seconds(), 0), secs)/secs }
	var b strings.Builder
	esc := html.EscapeString
	fmt.Fprintf(&b, "<!doctype html><html><head><meta charset=utf-8><title>%s</title><style>%s</style></head><body>\n", esc(t.Title), timelineStyle)
	fmt.Fprintf(&b, "<h1>%s</h1>\n", esc(t.Title))
	for _, n := range t.Notes {
		fmt.Fprintf(&b, "<pre>%s</pre>\n", esc(n))
	}
	b.WriteString(`<p class=legend>`)
	for _, c := range [][2]string{{"down", "crashed"}, {"killed", "killed"}, {"paused", "paused"}, {"disk", "disk faults"}, {"partition", "cut off"},
		{"leader", "quorum leader"}, {"part", "partition leader, epoch, ISR"}, {"ok", "op ok"}, {"fail", "op failed"}, {"info", "op unknown"},
		{"pending", "op pending"}, {"fault", "fault (triangle)"}, {"generation", "generation (dot)"}} {
		fmt.Fprintf(&b, `<svg width=22 height=10><rect class=%s x=8 width=12 height=10 /></svg>%s`, c[0], c[1])
	}
	b.WriteString("</p>\n")
	// Lay the lanes out: a head row per group, then its lanes.
	type row struct {
		y    float64
		lane *Lane
		head string
	}
	var rows []row
	y := float64(top)
	group := "\x00"
	for i := range t.Lanes {
		l := &t.Lanes[i]
		if l.Group != group {
			group = l.Group
			rows = append(rows, row{y: y, head: group})
			y += headH
		}
		rows = append(rows, row{y: y, lane: l})
		y += laneH
	}
	height := y + 10
	fmt.Fprintf(&b, `<div style="overflow-x:auto"><svg class=lanes xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f">`+"\n", labelW+plotW+20, height)
	// The time axis: a tick every nice step.
	step := niceStep(secs / 20)
	for s := 0.0; s <= secs+1e-9; s += step {
		px := labelW + plotW*s/secs
		fmt.Fprintf(&b, `<line class=axis x1="%.1f" x2="%.1f" y1="%d" y2="%.0f"/><text class=tick x="%.1f" y="%d">%gs</text>`+"\n", px, px, top-4, height, px+2, top-8, math.Round(s*1000)/1000)
	}
	for _, r := range rows {
		if r.lane == nil {
			fmt.Fprintf(&b, `<text class=head x="2" y="%.0f">%s</text>`+"\n", r.y+13, esc(r.head))
			continue
		}
		fmt.Fprintf(&b, `<text x="10" y="%.0f">%s</text>`+"\n", r.y+12, esc(r.lane.Name))
		for _, s := range r.lane.Spans {
			x0, x1 := x(s.From), x(max(s.To, s.From))
			wd := math.Max(x1-x0, 1)
			rect := fmt.Sprintf(`<rect class=%s x="%.1f" y="%.0f" width="%.1f" height="%d"><title>%s</title></rect>`,
				s.Class, x0, r.y+2, wd, laneH-4, esc(fmt.Sprintf("%s-%s %s", fmtSecs(s.From), fmtSecs(s.To), s.Label)))
			if s.Line > 0 {
				rect = fmt.Sprintf(`<a href="#h%d">%s</a>`, s.Line, rect)
			}
			b.WriteString(rect)
			if s.Class != "ok" && s.Class != "fail" && s.Class != "info" && s.Class != "pending" && wd > float64(6*len(s.Label)) {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" style="font-size:10px;fill:#fff">%s</text>`, x0+2, r.y+12, esc(s.Label))
			}
			b.WriteString("\n")
		}
		for _, p := range r.lane.Points {
			px := x(p.At)
			if p.Class == "generation" {
				fmt.Fprintf(&b, `<circle class=generation cx="%.1f" cy="%.0f" r="3"><title>%s</title></circle>`+"\n", px, r.y+laneH/2, esc(fmtSecs(p.At)+" "+p.Label))
				continue
			}
			fmt.Fprintf(&b, `<path class=%s d="M%.1f %.0f l-4 -7 h8 z"><title>%s</title></path>`+"\n", p.Class, px, r.y+laneH-2, esc(fmtSecs(p.At)+" "+p.Label))
		}
	}
	labelled := []float64{} // where a mark's number is written, so that none overlap
	for i, m := range t.Marks {
		px := x(m.At)
		text := ""
		if !slices.ContainsFunc(labelled, func(l float64) bool { return math.Abs(l-px) < 70 }) {
			labelled = append(labelled, px)
			text = fmt.Sprintf(`<text class=marklabel x="%.1f" y="%d">violation %d</text>`, min(px+3, labelW+plotW-60), top-20, i+1)
		}
		fmt.Fprintf(&b, `<a href="#v%d"><line class=mark x1="%.1f" x2="%.1f" y1="%d" y2="%.0f"><title>violation %d: %s</title></line>%s</a>`+"\n",
			i+1, px, px, top-20, height, i+1, esc(m.Label), text)
	}
	b.WriteString("</svg></div>\n")
	if len(t.Marks) > 0 {
		b.WriteString("<h2>Violations</h2>\n")
	}
	for i, m := range t.Marks {
		fmt.Fprintf(&b, "<h3 id=v%d>violation %d at %s</h3><pre>%s</pre>\n", i+1, i+1, fmtSecs(m.At), esc(m.Label))
		if len(m.Lines) > 0 {
			fmt.Fprintf(&b, "<p>The history lines that show it (%s, line numbers from 1):</p><table>\n", HistoryFile)
			for _, l := range m.Lines {
				fmt.Fprintf(&b, "<tr><td><a href=\"#h%d\">%d</a></td><td>%s</td><td>%s</td></tr>\n", l, l, fmtSecs(time.Duration(t.History[l-1].Virtual)), esc(t.History[l-1].String()))
			}
			b.WriteString("</table>\n")
		}
	}
	// Every operation a span links to has its row, so that a click on any
	// span lands on its history line.
	if len(t.History) > 0 {
		fmt.Fprintf(&b, "<h2>History</h2><p>%s, one line an event, as the spans above link to them.</p><table>\n", HistoryFile)
		for i, e := range t.History {
			fmt.Fprintf(&b, "<tr id=h%d><td>%d</td><td>%s</td><td>%s</td></tr>\n", i+1, i+1, fmtSecs(time.Duration(e.Virtual)), esc(e.String()))
		}
		b.WriteString("</table>\n")
	}
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// niceStep rounds a step of seconds up to 1, 2 or 5 times a power of ten.
func niceStep(s float64) float64 {
	if s <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(s)))
	for _, m := range []float64{1, 2, 5, 10} {
		if s <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func fmtSecs(d time.Duration) string { return fmt.Sprintf("%.3fs", d.Seconds()) }
