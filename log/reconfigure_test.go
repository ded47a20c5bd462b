package log

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestReconfigureAppliesToTheNextAppend(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config("t-0")
	l := h.open(cfg)
	big := spec(string(bytes.Repeat([]byte("x"), 500))).build()
	if _, err := l.AppendLeader(big, 0); err != nil {
		t.Fatalf("append under the default max.message.bytes: %v", err)
	}
	cfg.MaxMessageBytes = 100
	if err := l.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	big = spec(string(bytes.Repeat([]byte("x"), 500))).build()
	if _, err := l.AppendLeader(big, 0); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("append over the new max.message.bytes: %v, want MESSAGE_TOO_LARGE", err)
	}
	cfg.SegmentBytes = 10 // below the minimum: refused, the old config stays
	if err := l.Reconfigure(cfg); err == nil {
		t.Fatal("Reconfigure accepted segment bytes 10")
	}
	if _, err := l.AppendLeader(spec("small").build(), 0); err != nil {
		t.Fatalf("append after a refused Reconfigure: %v", err)
	}
}
