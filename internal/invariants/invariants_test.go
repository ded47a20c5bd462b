package invariants_test

import (
	"strings"
	"testing"

	"github.com/sluicemq/sluice/internal/invariants"
)

func TestPanicfNamesTheValues(t *testing.T) {
	defer func() {
		msg, _ := recover().(string)
		if !strings.HasPrefix(msg, "invariant violated: ") || !strings.Contains(msg, "hw 7 > durable 5") {
			t.Fatalf("Panicf panicked with %q", msg)
		}
	}()
	invariants.Panicf("hw %d > durable %d", 7, 5)
	t.Fatal("Panicf returned")
}
