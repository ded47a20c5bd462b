package guard_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"

	"github.com/sluicemq/sluice/internal/guard"
)

func TestImportProblem(t *testing.T) {
	m := guard.Module + "/"
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{m + "log", m + "env", true},
		{m + "log", m + "node", false},
		{m + "log", m + "wire", false},
		{m + "env/osenv", m + "wire", false},
		{m + "env/osenv", m + "env", true},
		{m + "wire", m + "log", false},
		{m + "node", m + "log", true},
		{m + "node", m + "sim", false},
		{m + "raftmeta", m + "node", false},
		{m + "isr", m + "raftmeta", false},
		{m + "groups", m + "isr", false},
		{m + "jepsen/simrun", m + "node", true},
		{m + "cmd/sluice", m + "jepsen/simrun", true},
		{m + "log", m + "internal/invariants", true},
		{m + "log", m + "internal/guard", false},
		{m + "log", "github.com/twmb/franz-go/pkg/kmsg", true},
		{m + "docs", m + "env", false}, // a directory the layers do not name
	} {
		got := guard.ImportProblem(tc.from, tc.to)
		if (got == "") != tc.ok {
			t.Errorf("ImportProblem(%s, %s) = %q, want ok=%v", tc.from, tc.to, got, tc.ok)
		}
	}
}

// TestImportArrows checks every package of the module against the layers
// of DESIGN.md section 9: go list -deps ./log, say, must show nothing of
// node/.
func TestImportArrows(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	for _, tags := range [][]string{nil, {"-tags=invariants"}} {
		cfg := &packages.Config{Mode: packages.NeedName | packages.NeedImports, Dir: root, BuildFlags: tags}
		pkgs, err := packages.Load(cfg, "./...")
		if err != nil {
			t.Fatal(err)
		}
		if len(pkgs) < 10 {
			t.Fatalf("loaded %d packages from %s: the test is looking in the wrong place", len(pkgs), root)
		}
		for _, p := range pkgs {
			for imp := range p.Imports {
				if why := guard.ImportProblem(p.PkgPath, imp); why != "" {
					problems = append(problems, p.PkgPath+" imports "+imp+": "+why)
				}
			}
		}
	}
	slices.Sort(problems)
	problems = slices.Compact(problems)
	if len(problems) > 0 {
		t.Errorf("%d imports against the layers:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}
