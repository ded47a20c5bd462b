package guard

import "strings"

// The package layers of DESIGN.md section 9. Dependencies point one way:
//
//	cmd → node → groups, raftmeta, isr, wire, log, env
//	raftmeta → isr, wire, env      isr → log      log, wire → env
//
// sim and jepsen sit beside cmd: they build nodes and drive them. env
// imports nothing of ours (osenv does not know wire), so storage, the wire
// and the broker all build on the environment and it knows none of them.
// internal/invariants is a leaf anyone may use; the rest of internal holds
// tools of the repository that nothing in the product imports.
//
// layerImports maps each top-level directory to the top-level directories
// its non-test code may import. Test files are free: a log test may run on
// the simulator's disk.
var layerImports = map[string][]string{
	"env":      {"env"},
	"wire":     {"wire", "env"},
	"log":      {"log", "env"},
	"isr":      {"isr", "log", "env"},
	"raftmeta": {"raftmeta", "isr", "log", "wire", "env"},
	"groups":   {"groups", "wire", "env"},
	"node":     {"node", "groups", "raftmeta", "isr", "wire", "log", "env"},
	"sim":      {"sim", "node", "groups", "raftmeta", "isr", "wire", "log", "env"},
	"jepsen":   {"jepsen", "sim", "node", "groups", "raftmeta", "isr", "wire", "log", "env"},
	"cmd":      {"cmd", "jepsen", "sim", "node", "groups", "raftmeta", "isr", "wire", "log", "env"},
	"internal": {"internal"},
}

// invariantsPkg may be imported from anywhere: it is only a constant and a
// panic.
const invariantsPkg = Module + "/internal/invariants"

// ImportProblem returns why the package at path from may not import the
// package at path to, or "" if it may. Paths outside the module are not
// its business; a package of the module in a directory the layers do not
// name is refused until the table names it.
func ImportProblem(from, to string) string {
	fromTop, ok1 := topDir(from)
	toTop, ok2 := topDir(to)
	if !ok1 || !ok2 || to == invariantsPkg {
		return ""
	}
	allowed, known := layerImports[fromTop]
	if !known {
		return fromTop + "/ is not a layer of DESIGN.md section 9 (add it to layerImports with the arrows it may follow)"
	}
	for _, a := range allowed {
		if a == toTop {
			return ""
		}
	}
	if fromTop == "env" && toTop == "wire" {
		return "env imports nothing of ours: the environment must not know the protocols built on it"
	}
	return fromTop + "/ may import only " + strings.Join(allowed, ", ") + " (DESIGN.md section 9), not " + toTop + "/"
}

// topDir returns the module's top-level directory that path lies in.
func topDir(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, Module+"/")
	if !ok {
		return "", false
	}
	top, _, _ := strings.Cut(rest, "/")
	return top, true
}
