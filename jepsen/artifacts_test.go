package jepsen

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestHistoryRoundTripsThroughJSONLines(t *testing.T) {
	h := genHistory(3, genSmall)
	h.Position(1, t0, 4)
	h.Assigned(1, "g", 2, []TopicPartition{t0, t1})
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, h.Events()); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "\n"); n != len(h.Events()) {
		t.Fatalf("%d lines for %d events", n, len(h.Events()))
	}
	back, err := ReadHistory(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, h.Events()) {
		t.Fatal("events changed in the round trip")
	}
	if a, b := Check(h, checkConfig()).String(), CheckEvents(back, checkConfig()).String(); a != b {
		t.Fatalf("verdicts differ:\n%s\n%s", a, b)
	}
}

func TestReadHistoryRejectsBadLines(t *testing.T) {
	for _, in := range []string{
		`{"time":1,"kind":"invoke"`,
		`{"time":1,"kind":"invoke","surprise":true}`,
		`{"time":"one"}`,
	} {
		if _, err := ReadHistory(strings.NewReader(in)); err == nil {
			t.Errorf("ReadHistory(%s) accepted", in)
		}
	}
}

func TestArtifactsHoldHistoryAndVisualizations(t *testing.T) {
	h := NewHistory()
	produced(h, t0, 1, "a")
	produced(h, t0, 0, "b")
	produced(h, TopicPartition{Topic: "odd/name", Partition: 3}, 0, "c")
	arts, err := Artifacts(h.Events(), checkConfig())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range arts {
		names = append(names, a.Name)
	}
	want := []string{HistoryFile, "linearizability-odd_name-3.html", "linearizability-t-0.html"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("artifacts %v, want %v", names, want)
	}
	for _, a := range arts[1:] {
		if !bytes.Contains(a.Data, []byte("<html")) {
			t.Errorf("%s is not HTML", a.Name)
		}
	}
	// The model's descriptions are embedded as JSON ('>' escaped).
	if !bytes.Contains(arts[2].Data, []byte(`produce [\"a\"] -\u003e 1`)) {
		t.Errorf("%s does not describe the operations", arts[2].Name)
	}
	events, err := ReadHistory(bytes.NewReader(arts[0].Data))
	if err != nil || len(events) != len(h.Events()) {
		t.Fatalf("history artifact: %d events, %v", len(events), err)
	}
}

type closeRecorder struct {
	bytes.Buffer
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func TestWriteArtifactsClosesAndReportsErrors(t *testing.T) {
	h := NewHistory()
	produced(h, t0, 0, "a")
	var files []*closeRecorder
	err := WriteArtifacts(h.Events(), checkConfig(), func(name string) (io.Writer, error) {
		f := &closeRecorder{}
		files = append(files, f)
		return f, nil
	})
	if err != nil || len(files) != 2 || !files[0].closed || !files[1].closed {
		t.Fatalf("err %v, %d files", err, len(files))
	}
	boom := errors.New("disk full")
	err = WriteArtifacts(h.Events(), checkConfig(), func(name string) (io.Writer, error) { return nil, boom })
	if !errors.Is(err, boom) {
		t.Fatalf("create error lost: %v", err)
	}
	bad := []Event{{Time: 2}, {Time: 1}}
	var got []string
	err = WriteArtifacts(bad, checkConfig(), func(name string) (io.Writer, error) {
		got = append(got, name)
		return io.Discard, nil
	})
	if err == nil || len(got) != 1 || got[0] != HistoryFile {
		t.Fatalf("malformed history: err %v, wrote %v", err, got)
	}
}
