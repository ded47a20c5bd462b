// Package guard keeps Sluice's core packages deterministic.
//
// The simulator runs whole clusters in one goroutine and promises that one
// seed gives one trace, byte for byte. That promise holds only if the code it
// runs reaches the outside world through env (Clock, Rand, FS, Net, Loop)
// and nowhere else. This package is an analysis.Analyzer that rejects the
// ways around it; TestCorePackagesAreDeterministic runs it over every package
// of the module, so `make lint` fails on a violation.
//
// # Scope
//
// Core packages are every package of the module except env/osenv and
// cmd/... with their subpackages (see Exempt). _test.go files are never
// checked: tests may use real time, goroutines and the OS.
//
// # Rules
//
//  1. real-time: no reference, call or value, to time.Now, Since, Until,
//     Sleep, After, Tick, NewTimer, NewTicker or AfterFunc; they read or wait
//     on the machine's clock, which the simulator cannot skew, drift or jump.
//     Use env.Clock. time.Local, time.LoadLocation and Time.Local are also
//     out: they depend on the machine's time zone, so a trace would differ
//     between two machines. time.Duration, Time values and their other
//     methods, time.Unix and time.Date are fine.
//  2. forbidden-import: math/rand, math/rand/v2, golang.org/x/exp/rand and
//     crypto/rand (use env.Rand); hash/maphash (seeded at random per
//     process); weak (a weak pointer turns nil when the collector happens
//     to run); os, os/..., io/ioutil, log and log/syslog (the OS by other
//     doors; use env.FS and env.Env.Log); net and net/... (use env.Net),
//     except net/netip, whose address types are pure values with no I/O,
//     no global state and no randomness; crypto/tls (sockets and the system's
//     randomness; TLS lives in osenv); syscall and golang.org/x/sys/...;
//     sync, sync/atomic and golang.org/x/sync/... (a node is one loop, so
//     there is nothing to lock, and a lock would hide a goroutine); unsafe
//     (addresses differ from run to run, and anything derived from them, a
//     hash or an order, would too; zero-copy tricks belong in osenv);
//     runtime/... (profiles, traces, GC tuning and stacks full of goroutine
//     IDs and addresses).
//     forbidden-call: a few functions of allowed packages leak the same
//     things: runtime.Gosched, Goexit, GOMAXPROCS, NumCPU, NumGoroutine,
//     NumCgoCall, GC, ReadMemStats, SetFinalizer, AddCleanup, LockOSThread,
//     UnlockOSThread and Stack (scheduler and collector state); context
//     WithTimeout, WithDeadline, their Cause forms and AfterFunc (real timers
//     and goroutines); log/slog's package-level Debug, Info, Warn, Error,
//     Log, LogAttrs, their Context forms, Default and SetDefault (a process
//     global writing to stderr; use env.Env.Log); fmt.Print, Printf,
//     Println, Scan, Scanf and Scanln (stdout and stdin); path/filepath's
//     Abs, EvalSymlinks, Glob, Walk and WalkDir (the real file system).
//  3. go-statement: no go statements. A node is one event loop; work that
//     must leave it goes through the environment, and its result comes back
//     with env.Loop.Post.
//  4. select: no select with more than one communication clause; when
//     several are ready the runtime picks one at random. One communication
//     with a default is a deterministic poll and is allowed.
//  5. map-order: no range over a map (or over maps.Keys, maps.Values,
//     maps.All of one) unless the loop cannot observe the order; see below.
//     Go randomizes map order on purpose, and an order that reaches a
//     message, a file or a decision breaks replay. reflect.Value's MapKeys
//     and MapRange, called or taken as method values, walk a map the same
//     way and are always reported.
//  6. print-address: no %p verb in a constant format string passed to
//     fmt.Sprintf, Printf, Errorf, Fprintf or Appendf. An address differs
//     from run to run; print an ID the code assigns. (A format built at
//     run time is not checked.)
//
// # Order-insensitive map loops
//
// A range over a map passes when the loop has neither key nor value
// variable (`for range m`), or when every statement of its body is one of:
//
//   - (a) collect then sort: `s = append(s, e...)` where s is a variable
//     that a call to sort.Strings, sort.Ints, sort.Float64s, sort.Sort,
//     sort.Stable, sort.Slice, sort.SliceStable, slices.Sort, slices.SortFunc
//     or slices.SortStableFunc takes as its first argument after the loop, in
//     the same function. The sort must order the elements totally: an
//     unstable sort leaves equal elements in map order.
//   - (b) commutative updates: `delete(m, e)`; `m[k] = e` where k is the
//     loop's own key variable of a map loop (distinct every iteration);
//     `x = c` where c is a constant, nil or an empty composite literal (the
//     same value whichever iteration writes last); x++, x--, and x op= e
//     with op one of + - * & | ^ &^ on an integer x; x = x op e with the
//     same ops, or && and || on a bool x; x = min(x, e) and x = max(x, e).
//     Floating-point sums are not commutative and are rejected.
//     Such updates commute only with each other. The storage an
//     accumulation updates (x++, x op= e, x = x op e, min, max, and the s of
//     form (a)) may appear in the body only in its own update statements,
//     as their target and the operand that names the target again; any
//     other appearance, in an expression, an index, a condition or a call
//     argument, reads a running value that depends on the elements before
//     it (`ids[k] = next; next++`). Storage overlaps when one path contains
//     the other (st and st.n) or both index one thing (h[a] and h[b]). A
//     constant may be written to an accumulator only where it absorbs
//     every update (`x = true` beside `x = x || e`), and two different
//     constants may not be written to overlapping storage: the last
//     iteration would win. Exempt is m[k] for the loop's key k, which
//     belongs to one iteration: where every access to it is spelled so, it
//     may be reset, updated and read (`out[k] = 0; out[k] += x`).
//   - (c) iteration-local work: declarations and assignments of variables
//     declared inside the body; if, switch and type switch statements,
//     nested loops and blocks whose parts pass these rules; continue, and a
//     break that leaves a nested loop or switch (not the map loop itself).
//   - (d) panic(...): a failed invariant ends the run whichever element
//     trips it first.
//
// Expressions in these statements must not have effects: they may use
// variables, constants, operators, field and index access, conversions,
// composite literals, the builtins len, cap, min, max, complex, real and
// imag, and a short list of pure standard-library functions (package
// functions of strings, bytes, strconv, math, math/bits, unicode,
// unicode/utf8, cmp and errors.Is; read-only functions of slices; package
// functions and Time and Duration methods of time). Any other call,
// a channel receive or a function literal makes the loop order-sensitive,
// because the callee might carry the order out. Everything else is
// reported: range over slices.Sorted(maps.Keys(m)) instead.
//
// maps.Keys, maps.Values and maps.All may appear only as the range
// expression of a loop judged as above, or as the direct argument of
// slices.Sorted, slices.SortedFunc, slices.SortedStableFunc, maps.Collect
// or maps.Insert.
//
// # The exemption
//
// There is exactly one, in the constants below: the root sim package may read
// and assign crypto/rand.Reader, because etcd raft draws its election
// timeouts from that variable and the simulator swaps it for a reader seeded
// from the run's seed. Its import of crypto/rand is then allowed, but any
// other use of crypto/rand there is still reported, and sim's subpackages
// get no exemption at all.
package guard

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// Module is the import path of the module the guard protects.
const Module = "github.com/sluicemq/sluice"

// The guard's only exemption. In package exemptPackage (exactly that
// package, not its subpackages) the variable exemptImport.exemptObject may be
// read and assigned, and exemptImport may be imported for it. The simulator
// replaces crypto/rand.Reader with a seeded reader for the length of a run,
// because etcd raft draws its randomized election timeouts from it; without
// the swap, raft elections would not replay.
const (
	exemptPackage = Module + "/sim"
	exemptImport  = "crypto/rand"
	exemptObject  = "Reader"
)

// Analyzer reports the nondeterminism that core packages must not contain.
var Analyzer = &analysis.Analyzer{
	Name: "sluiceguard",
	Doc:  "reports real time, OS access, goroutines, racy selects, map-order dependence and printed addresses in Sluice's core packages",
	URL:  "https://pkg.go.dev/github.com/sluicemq/sluice/internal/guard",
	Run:  run,
	// The syntactic rules hold even where types are missing; the test
	// reports packages that do not type-check separately.
	RunDespiteErrors: true,
}

// Exempt reports whether the package with the given import path is outside
// the guard: the OS implementation of the environment and the binary's
// wiring, with their subpackages.
func Exempt(path string) bool {
	return within(path, Module+"/env/osenv") || within(path, Module+"/cmd")
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/")
}

func run(pass *analysis.Pass) (any, error) {
	// A path ending in .test is the main package that go test generates.
	if path := pass.Pkg.Path(); Exempt(path) || strings.HasSuffix(path, ".test") {
		return nil, nil
	}
	for _, file := range pass.Files {
		name := pass.Fset.File(file.Pos()).Name()
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		c := &checker{pass: pass, sanctioned: make(map[*ast.Ident]bool)}
		c.imports(file)
		ast.Inspect(file, c.visit)
	}
	return nil, nil
}

// checker walks one file.
type checker struct {
	pass *analysis.Pass
	// funcs is the stack of enclosing function bodies, innermost last; the
	// collect-then-sort form of a map loop looks for its sort there.
	funcs []*ast.BlockStmt
	// stack mirrors ast.Inspect's path from the file to the current node.
	stack []ast.Node
	// sanctioned holds the identifiers of maps.Keys, maps.Values and
	// maps.All calls found in an allowed position.
	sanctioned map[*ast.Ident]bool
}

// report reports a violation of rule at n. The rule's name leads the
// message and is the diagnostic's category.
func (c *checker) report(n ast.Node, rule, format string, args ...any) {
	c.pass.Report(analysis.Diagnostic{
		Pos:      n.Pos(),
		Category: rule,
		Message:  rule + ": " + fmt.Sprintf(format, args...),
	})
}

func (c *checker) imports(file *ast.File) {
	for _, spec := range file.Imports {
		path := strings.Trim(spec.Path.Value, "`\"")
		if c.pass.Pkg.Path() == exemptPackage && path == exemptImport {
			continue
		}
		if why := forbiddenImport(path); why != "" {
			c.report(spec, "forbidden-import", "import of %s: %s", path, why)
		}
	}
}

func (c *checker) visit(n ast.Node) bool {
	if n == nil {
		top := c.stack[len(c.stack)-1]
		c.stack = c.stack[:len(c.stack)-1]
		if body := funcBody(top); body != nil {
			c.funcs = c.funcs[:len(c.funcs)-1]
		}
		return false
	}
	c.stack = append(c.stack, n)
	if body := funcBody(n); body != nil {
		c.funcs = append(c.funcs, body)
	}
	switch n := n.(type) {
	case *ast.GoStmt:
		c.report(n, "go-statement", "go statement: a node is one event loop; hand work to the environment and come back with env.Loop.Post")
	case *ast.SelectStmt:
		c.selectStmt(n)
	case *ast.RangeStmt:
		c.rangeStmt(n)
	case *ast.CallExpr:
		c.sanction(n)
		c.printAddress(n)
	case *ast.Ident:
		c.ident(n)
	}
	return true
}

// funcBody returns the body of a function declaration or literal, or nil.
// A declaration without a body (an assembly function) also yields nil.
func funcBody(n ast.Node) *ast.BlockStmt {
	switch n := n.(type) {
	case *ast.FuncDecl:
		return n.Body
	case *ast.FuncLit:
		return n.Body
	}
	return nil
}

func (c *checker) selectStmt(s *ast.SelectStmt) {
	comms := 0
	for _, clause := range s.Body.List {
		if clause.(*ast.CommClause).Comm != nil {
			comms++
		}
	}
	if comms > 1 {
		c.report(s, "select", "select with %d communication clauses: the runtime picks a ready one at random; receive events one at a time through env.Loop", comms)
	}
}

// printAddress reports a fmt call whose constant format prints a pointer
// with %p.
func (c *checker) printAddress(call *ast.CallExpr) {
	i := printfFormat(calleeName(c.pass.TypesInfo, call))
	if i < 0 || i >= len(call.Args) {
		return
	}
	tv := c.pass.TypesInfo.Types[call.Args[i]]
	if tv.Value == nil || tv.Value.Kind() != constant.String {
		return
	}
	if hasAddressVerb(constant.StringVal(tv.Value)) {
		c.report(call.Args[i], "print-address", "%%p prints an address, which differs from run to run; print an ID the code assigns")
	}
}

// ident reports a use of a forbidden function or variable, and enforces the
// exemption's limits in the exempt package.
func (c *checker) ident(id *ast.Ident) {
	obj := c.pass.TypesInfo.Uses[id]
	if obj == nil || obj.Pkg() == nil {
		return
	}
	name := fullName(obj)
	if name == "" {
		return
	}
	if rule, why := forbiddenRef(name); rule != "" {
		c.report(id, rule, "%s: %s", name, why)
		return
	}
	if isMapsIter(name) && !c.sanctioned[id] {
		c.report(id, "map-order", "%s yields in random order: use slices.Sorted(%s(m)), or range over it with an order-insensitive body", name, name)
		return
	}
	if c.pass.Pkg.Path() == exemptPackage && obj.Pkg().Path() == exemptImport && obj.Name() != exemptObject {
		c.report(id, "forbidden-import", "%s: the simulator may only swap %s.%s; draw randomness from env.Rand", name, exemptImport, exemptObject)
	}
}

// fullName names a package-level function or variable, or a method, as
// types.Func.FullName does ("time.Now", "(time.Time).Local"). Other objects
// get "".
func fullName(obj types.Object) string {
	switch obj := obj.(type) {
	case *types.Func:
		return obj.Origin().FullName()
	case *types.Var:
		if obj.IsField() || obj.Pkg().Scope().Lookup(obj.Name()) != obj {
			return ""
		}
		return obj.Pkg().Path() + "." + obj.Name()
	}
	return ""
}

// calleeName returns the full name of the function or method that call
// invokes statically (see fullName), the name of a builtin, or "".
func calleeName(info *types.Info, call *ast.CallExpr) string {
	id := calleeIdent(call)
	if id == nil {
		return ""
	}
	switch obj := info.Uses[id].(type) {
	case *types.Builtin:
		return obj.Name()
	case *types.Func:
		return obj.Origin().FullName()
	}
	return ""
}

// calleeIdent returns the identifier naming call's function, or nil when
// the function is a more complex expression.
func calleeIdent(call *ast.CallExpr) *ast.Ident {
	fun := ast.Unparen(call.Fun)
	switch f := fun.(type) {
	case *ast.IndexExpr:
		fun = f.X
	case *ast.IndexListExpr:
		fun = f.X
	}
	switch f := fun.(type) {
	case *ast.Ident:
		return f
	case *ast.SelectorExpr:
		return f.Sel
	}
	return nil
}
