package guard_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/analysistest"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/packages"

	"github.com/sluicemq/sluice/internal/guard"
)

// TestRulesOnFixtures runs the guard over the fixtures in testdata/src,
// one package per rule, each with code that breaks the rule and code that
// keeps it. A `// want` comment names a diagnostic its line must get; a line
// without one must get none. The packages are loaded in one go because
// analysistest type-checks the standard library from source each time.
//
//	realtime        rule 1, real time
//	imports, calls  rule 2, forbidden imports and calls; calls also holds
//	                rule 5's reflect walks and rule 6, %p
//	gostmt          rule 3, go statements
//	selectstmt      rule 4, select on several channels
//	maporder        rule 5, map order (bad.go and ok.go)
//	.../sim         the crypto/rand.Reader exemption, and .../sim/simsub
//	                beneath it, which has none
//	.../env         a core package beside osenv; osenv and cmd are skipped
//	testfiles       _test.go files are skipped
func TestRulesOnFixtures(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), guard.Analyzer,
		"realtime", "imports", "calls", "gostmt", "selectstmt", "maporder", "testfiles",
		guard.Module+"/sim", guard.Module+"/sim/simsub",
		guard.Module+"/env", guard.Module+"/env/osenv/...", guard.Module+"/cmd/...")
}

func TestExempt(t *testing.T) {
	for path, want := range map[string]bool{
		guard.Module + "/env/osenv":      true,
		guard.Module + "/env/osenv/sub":  true,
		guard.Module + "/cmd/sluice":     true,
		guard.Module + "/env":            false,
		guard.Module + "/env/osenvtools": false,
		guard.Module + "/cmdline":        false,
		guard.Module + "/sim":            false,
		guard.Module + "/internal/guard": false,
	} {
		if got := guard.Exempt(path); got != want {
			t.Errorf("Exempt(%q) = %v, want %v", path, got, want)
		}
	}
}

// TestCorePackagesAreDeterministic runs the guard over every package of the
// module (two directories up) that Exempt does not skip.
func TestCorePackagesAreDeterministic(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := loadCore(t, root, nil, "./...")
	checked := len(pkgs)
	if !slices.ContainsFunc(pkgs, func(p *packages.Package) bool { return p.PkgPath == guard.Module+"/env" }) {
		t.Fatalf("loaded %d packages from %s, but not env: the guard is looking in the wrong place", checked, root)
	}
	findings := analyze(t, root, pkgs)

	// Files behind the invariants build tag are left out of a plain load;
	// load the packages that have any once more with the tag.
	var tagged []string
	for _, p := range pkgs {
		if slices.ContainsFunc(p.IgnoredFiles, isNonTest) {
			tagged = append(tagged, p.PkgPath)
		}
	}
	if len(tagged) > 0 {
		pkgs = loadCore(t, root, []string{"-tags=invariants"}, tagged...)
		findings = append(findings, analyze(t, root, pkgs)...)
	}

	slices.Sort(findings)
	findings = slices.Compact(findings)
	if len(findings) > 0 {
		t.Errorf("%d violations of the determinism rules (see package internal/guard):\n%s",
			len(findings), strings.Join(findings, "\n"))
	}
	t.Logf("checked %d packages (%d again with -tags=invariants)", checked, len(tagged))
}

func isNonTest(name string) bool {
	return strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")
}

// loadCore loads the packages matching patterns in the module at root,
// without their tests, and keeps those the guard covers. Dependencies come
// from export data, so only the module's own packages are parsed.
func loadCore(t *testing.T, root string, buildFlags []string, patterns ...string) []*packages.Package {
	t.Helper()
	cfg := &packages.Config{
		Mode:       packages.LoadSyntax | packages.NeedModule,
		Dir:        root,
		BuildFlags: buildFlags,
	}
	all, err := packages.Load(cfg, patterns...)
	if err != nil {
		t.Fatalf("load %s: %v", root, err)
	}
	var core []*packages.Package
	for _, p := range all {
		if guard.Exempt(p.PkgPath) {
			continue
		}
		// A package that does not type-check cannot be fully checked:
		// the map rule needs types. Say so rather than pass quietly.
		if len(p.Errors) > 0 {
			t.Errorf("%s does not type-check (%d errors, first: %v), so the guard cannot vouch for it",
				p.PkgPath, len(p.Errors), p.Errors[0])
		}
		core = append(core, p)
	}
	return core
}

// analyze runs the guard over pkgs and returns its findings as
// "file:line: rule: message", with file relative to root.
func analyze(t *testing.T, root string, pkgs []*packages.Package) []string {
	t.Helper()
	graph, err := checker.Analyze([]*analysis.Analyzer{guard.Analyzer}, pkgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	var findings []string
	for act := range graph.All() {
		if act.Err != nil {
			t.Errorf("%s: %v", act.Package.PkgPath, act.Err)
		}
		for _, d := range act.Diagnostics {
			pos := act.Package.Fset.Position(d.Pos)
			file, err := filepath.Rel(root, pos.Filename)
			if err != nil {
				file = pos.Filename
			}
			findings = append(findings, fmt.Sprintf("%s:%d: %s", filepath.ToSlash(file), pos.Line, d.Message))
		}
	}
	return findings
}
