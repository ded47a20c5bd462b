//go:build invariants

package invariants_test

import (
	"testing"

	"github.com/sluicemq/sluice/internal/invariants"
)

// make test builds with the invariants tag; this test exists only in such a
// build and fails if the tag and the constant ever disagree.
func TestEnabledUnderTheTag(t *testing.T) {
	if !invariants.Enabled {
		t.Fatal("built with -tags invariants, but invariants.Enabled is false")
	}
}
