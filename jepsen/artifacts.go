package jepsen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/anishathalye/porcupine"
)

// HistoryFile is the name WriteArtifacts gives the history.
const HistoryFile = "history.jsonl"

// WriteJSONL writes events as JSON lines, one event a line.
func WriteJSONL(w io.Writer, events []Event) error { return writeJSONL(w, events, "event") }

// writeJSONL writes each of events as a JSON line (what names them in an
// error): the data, metadata and group histories' files alike.
func writeJSONL[E any](w io.Writer, events []E, what string) error {
	enc := json.NewEncoder(w) // Encode ends each value with a newline
	for i, e := range events {
		if err := enc.Encode(e); err != nil {
			return fmt.Errorf("write %s %d: %w", what, i, err)
		}
	}
	return nil
}

// ReadHistory reads events written by WriteJSONL. It checks only the JSON;
// CheckEvents validates the history itself.
func ReadHistory(r io.Reader) ([]Event, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var events []Event
	for {
		var e Event
		err := dec.Decode(&e)
		if errors.Is(err, io.EOF) {
			return events, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read event %d: %w", len(events), err)
		}
		events = append(events, e)
	}
}

// Artifact is one file of a check's output: its name and its contents.
type Artifact struct {
	Name string
	Data []byte
}

// Artifacts renders what a person needs to study a history: the history as
// JSON lines (HistoryFile), and for each partition porcupine's HTML
// visualization, "linearizability-<topic>-<partition>.html", which shows
// the longest legal orders and where they get stuck. It reruns porcupine
// with the details kept, so it costs a second search per partition.
func Artifacts(events []Event, cfg Config) ([]Artifact, error) {
	var out []Artifact
	err := WriteArtifacts(events, cfg, func(name string) (io.Writer, error) {
		return &artifactBuffer{name: name, out: &out}, nil
	})
	return out, err
}

// artifactBuffer collects one artifact and adds it to out when closed.
type artifactBuffer struct {
	name string
	buf  bytes.Buffer
	out  *[]Artifact
}

func (b *artifactBuffer) Write(p []byte) (int, error) { return b.buf.Write(p) }

func (b *artifactBuffer) Close() error {
	*b.out = append(*b.out, Artifact{Name: b.name, Data: b.buf.Bytes()})
	return nil
}

// WriteArtifacts writes the files Artifacts describes, each to a writer
// that create returns for its name (the caller decides where: a directory,
// a zip, memory). A writer that is also an io.Closer is closed once its file
// is written. A malformed history still gets its history file, then the
// error.
func WriteArtifacts(events []Event, cfg Config, create func(name string) (io.Writer, error)) error {
	if err := writeArtifact(HistoryFile, create, func(w io.Writer) error { return WriteJSONL(w, events) }); err != nil {
		return err
	}
	a, err := analyze(events)
	if err != nil {
		return fmt.Errorf("malformed history: %w", err)
	}
	cfg = cfg.withDefaults()
	model := LogModel()
	for _, tp := range a.partitions {
		ops := a.porcupineOps(tp)
		_, info := porcupine.CheckOperationsVerbose(model, ops, cfg.Timeout)
		name := "linearizability-" + fileSafe(tp.Topic) + "-" + fmt.Sprint(tp.Partition) + ".html"
		if err := writeArtifact(name, create, func(w io.Writer) error { return porcupine.Visualize(model, info, w) }); err != nil {
			return err
		}
	}
	return nil
}

func writeArtifact(name string, create func(string) (io.Writer, error), write func(io.Writer) error) error {
	w, err := create(name)
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	err = write(w)
	if c, ok := w.(io.Closer); ok {
		err = errors.Join(err, c.Close())
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// fileSafe keeps a topic name usable as part of a file name. Kafka's legal
// topic characters ([a-zA-Z0-9._-]) pass unchanged.
func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, s)
}
