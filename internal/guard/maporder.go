package guard

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"slices"
	"strings"
)

// This file holds rule 5, map-order: which loops over a map cannot let the
// map's random order out. The package documentation lists the forms.

// sanction marks the maps iterator calls passed straight to a function that
// sorts them or builds a map from them.
func (c *checker) sanction(call *ast.CallExpr) {
	if !takesMapsIter(calleeName(c.pass.TypesInfo, call)) {
		return
	}
	for _, arg := range call.Args {
		if inner, ok := ast.Unparen(arg).(*ast.CallExpr); ok && isMapsIter(calleeName(c.pass.TypesInfo, inner)) {
			c.sanctioned[calleeIdent(inner)] = true
		}
	}
}

func (c *checker) rangeStmt(rs *ast.RangeStmt) {
	info := c.pass.TypesInfo
	l := &loopCheck{info: info, loop: rs}
	switch {
	case isMap(info.TypeOf(rs.X)):
		l.key = keyVar(info, rs)
	default:
		call, ok := ast.Unparen(rs.X).(*ast.CallExpr)
		if !ok {
			return
		}
		name := calleeName(info, call)
		if !isMapsIter(name) {
			return
		}
		c.sanctioned[calleeIdent(call)] = true
		if name != "maps.Values" {
			l.key = keyVar(info, rs)
		}
	}
	if isBlank(rs.Key) && isBlank(rs.Value) {
		return // the body cannot tell one element from another
	}
	const fix = "range over slices.Sorted(maps.Keys(m)) instead"
	if rs.Tok == token.ASSIGN {
		c.report(rs, "map-order", "range over a map assigns its elements to variables declared outside the loop, which keep the last one in random order; %s", fix)
		return
	}
	if bad := l.stmts(rs.Body.List, false); bad != nil {
		c.report(rs, "map-order", "range over a map: its order is random and %s at line %d depends on it; %s",
			describe(bad), c.pass.Fset.Position(bad.Pos()).Line, fix)
		return
	}
	if bad, why := l.leak(rs.Body); bad != nil {
		c.report(rs, "map-order", "range over a map: its order is random and reaches line %d, where %s; %s",
			c.pass.Fset.Position(bad.Pos()).Line, why, fix)
		return
	}
	for _, s := range l.appended {
		if !c.sortedAfter(s, rs) {
			c.report(rs, "map-order", "range over a map appends to %s in random order, and %s is not sorted after the loop in this function; %s",
				s.Name(), s.Name(), fix)
		}
	}
}

// keyVar returns the variable that holds a map loop's key, which differs on
// every iteration, or nil.
func keyVar(info *types.Info, rs *ast.RangeStmt) types.Object {
	id, ok := rs.Key.(*ast.Ident)
	if !ok || id.Name == "_" {
		return nil
	}
	return info.ObjectOf(id)
}

// isMap reports whether ranging over a value of type t ranges over a map:
// t is a map, or a type parameter whose type set includes one.
func isMap(t types.Type) bool {
	if t == nil {
		return false
	}
	if tp, ok := types.Unalias(t).(*types.TypeParam); ok {
		return constraintHasMap(tp.Constraint())
	}
	_, ok := t.Underlying().(*types.Map)
	return ok
}

func constraintHasMap(constraint types.Type) bool {
	iface, ok := constraint.Underlying().(*types.Interface)
	if !ok {
		return false
	}
	for i := 0; i < iface.NumEmbeddeds(); i++ {
		switch e := iface.EmbeddedType(i).(type) {
		case *types.Union:
			for j := 0; j < e.Len(); j++ {
				if isMap(e.Term(j).Type()) {
					return true
				}
			}
		default:
			if _, ok := e.Underlying().(*types.Interface); ok {
				if constraintHasMap(e) {
					return true
				}
			} else if isMap(e) {
				return true
			}
		}
	}
	return false
}

// sortedAfter reports whether a sort call after the loop rs, in the function
// enclosing it, takes s as its first argument.
func (c *checker) sortedAfter(s types.Object, rs *ast.RangeStmt) bool {
	if len(c.funcs) == 0 {
		return false
	}
	sorted := false
	ast.Inspect(c.funcs[len(c.funcs)-1], func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if sorted || !ok || call.Pos() < rs.End() || len(call.Args) == 0 {
			return !sorted
		}
		if isSort(calleeName(c.pass.TypesInfo, call)) && mentions(c.pass.TypesInfo, call.Args[0], s) {
			sorted = true
		}
		return !sorted
	})
	return sorted
}

// mentions reports whether e refers to obj.
func mentions(info *types.Info, e ast.Expr, obj types.Object) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && info.Uses[id] == obj {
			found = true
		}
		return !found
	})
	return found
}

// loopCheck judges the body of one map loop.
type loopCheck struct {
	info *types.Info
	loop *ast.RangeStmt
	// key is the loop's key variable when it is distinct on every
	// iteration (the key of a map), or nil.
	key types.Object
	// appended lists the variables outside the loop that the body appends
	// to; each must be sorted after the loop.
	appended []types.Object
	// accs lists the body's updates of storage outside the loop that fold
	// a value in (x++, x += e, x = max(x, e), s = append(s, e)), and consts
	// its assignments of constants to such storage. self holds the
	// occurrences of that storage that an update may contain: the target,
	// and the operand naming it again. Any other occurrence reads a value
	// that depends on how many elements came before.
	accs, consts []update
	self         map[ast.Expr]bool
}

// update is one statement's write to storage declared outside the loop.
type update struct {
	target ast.Expr
	// root is the variable at the base of target, and key spells target
	// as a path from it (see pathKey).
	root types.Object
	key  string
	// op is the accumulation's operator (token.INC for ++, token.ADD for
	// += and x = x + e, token.LOR for x = x || e, token.ILLEGAL for min,
	// max and append), or for a constant its value.
	op    token.Token
	value string
	// keyed says the target is m[k] for the loop's key k.
	keyed bool
}

// stmts returns the first node in list through which the map's order could
// leave the loop, or nil. breakOK says whether an unlabeled break would
// leave a nested loop or switch rather than the map loop itself.
func (l *loopCheck) stmts(list []ast.Stmt, breakOK bool) ast.Node {
	for _, s := range list {
		if bad := l.stmt(s, breakOK); bad != nil {
			return bad
		}
	}
	return nil
}

func (l *loopCheck) stmt(s ast.Stmt, breakOK bool) ast.Node {
	switch s := s.(type) {
	case nil, *ast.EmptyStmt:
		return nil
	case *ast.BlockStmt:
		return l.stmts(s.List, breakOK)
	case *ast.LabeledStmt:
		return l.stmt(s.Stmt, breakOK)
	case *ast.ExprStmt:
		return l.exprStmt(s)
	case *ast.IncDecStmt:
		if l.expr(s.X) == nil && l.localOrBlank(s.X) {
			return nil
		}
		if l.expr(s.X) == nil && isInteger(l.info.TypeOf(s.X)) {
			l.accumulate(s.X, s.Tok)
			return nil
		}
	case *ast.AssignStmt:
		return l.assign(s)
	case *ast.DeclStmt:
		return l.decl(s)
	case *ast.IfStmt:
		return first(l.stmt(s.Init, breakOK), l.expr(s.Cond), l.stmts(s.Body.List, breakOK), l.stmt(s.Else, breakOK))
	case *ast.SwitchStmt:
		return first(l.stmt(s.Init, breakOK), l.expr(s.Tag), l.clauses(s.Body))
	case *ast.TypeSwitchStmt:
		return first(l.stmt(s.Init, breakOK), l.expr(typeSwitchSubject(s)), l.clauses(s.Body))
	case *ast.ForStmt:
		return first(l.stmt(s.Init, breakOK), l.expr(s.Cond), l.stmt(s.Post, breakOK), l.stmts(s.Body.List, true))
	case *ast.RangeStmt:
		if s.Tok == token.ASSIGN && !(l.localOrBlank(s.Key) && l.localOrBlank(s.Value)) {
			return s
		}
		return first(l.expr(s.X), l.stmts(s.Body.List, true))
	case *ast.BranchStmt:
		if s.Label == nil && (s.Tok == token.CONTINUE || s.Tok == token.FALLTHROUGH || s.Tok == token.BREAK && breakOK) {
			return nil
		}
	}
	return s
}

// clauses checks the case clauses of a switch; a break in them leaves the
// switch.
func (l *loopCheck) clauses(body *ast.BlockStmt) ast.Node {
	for _, s := range body.List {
		clause := s.(*ast.CaseClause)
		for _, e := range clause.List {
			if bad := l.expr(e); bad != nil {
				return bad
			}
		}
		if bad := l.stmts(clause.Body, true); bad != nil {
			return bad
		}
	}
	return nil
}

// typeSwitchSubject returns x in `switch x.(type)` or `switch v := x.(type)`.
func typeSwitchSubject(s *ast.TypeSwitchStmt) ast.Expr {
	var e ast.Expr
	switch a := s.Assign.(type) {
	case *ast.ExprStmt:
		e = a.X
	case *ast.AssignStmt:
		e = a.Rhs[0]
	}
	if ta, ok := ast.Unparen(e).(*ast.TypeAssertExpr); ok {
		return ta.X
	}
	return e
}

func (l *loopCheck) exprStmt(s *ast.ExprStmt) ast.Node {
	call, ok := ast.Unparen(s.X).(*ast.CallExpr)
	if !ok {
		return s
	}
	switch calleeName(l.info, call) {
	case "panic":
		return nil
	case "delete":
		return l.exprs(call.Args)
	}
	return s
}

func (l *loopCheck) decl(s *ast.DeclStmt) ast.Node {
	gen, ok := s.Decl.(*ast.GenDecl)
	if !ok {
		return s
	}
	for _, spec := range gen.Specs {
		if vs, ok := spec.(*ast.ValueSpec); ok {
			if bad := l.exprs(vs.Values); bad != nil {
				return bad
			}
		}
	}
	return nil
}

func (l *loopCheck) assign(s *ast.AssignStmt) ast.Node {
	switch {
	case s.Tok == token.DEFINE:
		// := declares variables of the body (it may redeclare only
		// variables of the same block), so only the values matter.
		return l.exprs(s.Rhs)
	case s.Tok != token.ASSIGN:
		return l.opAssign(s)
	case len(s.Lhs) != len(s.Rhs):
		// v, ok = m[k] and the like: allowed into the body's variables.
		for _, lhs := range s.Lhs {
			if !l.localOrBlank(lhs) {
				return s
			}
		}
		return l.exprs(s.Rhs)
	}
	for i, lhs := range s.Lhs {
		if bad := l.assignOne(lhs, s.Rhs[i]); bad != nil {
			return bad
		}
	}
	return nil
}

// opAssign allows x op= e for a commutative integer op, and any op into a
// variable of the body.
func (l *loopCheck) opAssign(s *ast.AssignStmt) ast.Node {
	lhs, rhs := s.Lhs[0], s.Rhs[0]
	if bad := first(l.expr(lhs), l.expr(rhs)); bad != nil {
		return bad
	}
	if l.localOrBlank(lhs) {
		return nil
	}
	switch s.Tok {
	case token.ADD_ASSIGN, token.SUB_ASSIGN, token.MUL_ASSIGN, token.AND_ASSIGN,
		token.OR_ASSIGN, token.XOR_ASSIGN, token.AND_NOT_ASSIGN:
		if isInteger(l.info.TypeOf(lhs)) {
			l.accumulate(lhs, s.Tok)
			return nil
		}
	}
	return s
}

func (l *loopCheck) assignOne(lhs, rhs ast.Expr) ast.Node {
	if bad := l.expr(lhs); bad != nil {
		return bad
	}
	if call, ok := ast.Unparen(rhs).(*ast.CallExpr); ok && calleeName(l.info, call) == "append" {
		return l.appendTo(lhs, call)
	}
	if bad := l.expr(rhs); bad != nil {
		return bad
	}
	if l.localOrBlank(lhs) {
		return nil
	}
	if l.idempotent(rhs) {
		l.constant(lhs, rhs)
		return nil
	}
	if l.keyedByLoop(lhs) {
		return nil
	}
	if op, operands := l.accumulates(lhs, rhs); operands != nil {
		l.accumulate(lhs, op, operands...)
		return nil
	}
	return lhs
}

// appendTo allows local = append(...), and s = append(s, ...) for a slice s
// that must then be sorted after the loop.
func (l *loopCheck) appendTo(lhs ast.Expr, call *ast.CallExpr) ast.Node {
	if bad := l.exprs(call.Args); bad != nil {
		return bad
	}
	if l.localOrBlank(lhs) {
		return nil
	}
	id, ok := ast.Unparen(lhs).(*ast.Ident)
	if !ok || len(call.Args) == 0 || types.ExprString(call.Args[0]) != id.Name {
		return lhs
	}
	obj := l.info.ObjectOf(id)
	if obj == nil {
		return lhs // unresolved: the package does not type-check
	}
	if !slices.Contains(l.appended, obj) {
		l.appended = append(l.appended, obj)
	}
	l.accumulate(lhs, token.ILLEGAL, call.Args[0])
	return nil
}

// idempotent reports whether e has the same value whichever iteration
// evaluates it: a constant, nil, or an empty composite literal.
func (l *loopCheck) idempotent(e ast.Expr) bool {
	tv := l.info.Types[e]
	if tv.Value != nil || tv.IsNil() {
		return true
	}
	lit, ok := ast.Unparen(e).(*ast.CompositeLit)
	return ok && len(lit.Elts) == 0
}

// keyedByLoop reports whether lhs is m[k] for a map m and the loop's key k.
func (l *loopCheck) keyedByLoop(lhs ast.Expr) bool {
	ix, ok := ast.Unparen(lhs).(*ast.IndexExpr)
	if !ok || l.key == nil || !isMap(l.info.TypeOf(ix.X)) {
		return false
	}
	id, ok := ast.Unparen(ix.Index).(*ast.Ident)
	return ok && l.info.Uses[id] == l.key
}

// accumulates reports whether lhs = rhs folds a value into lhs with a
// commutative, associative operation: x = x op e for integer or boolean
// ops, or x = min(x, e), x = max(x, e). It returns the operator and the
// operands of rhs that name lhs again, or nil operands if not.
func (l *loopCheck) accumulates(lhs, rhs ast.Expr) (token.Token, []ast.Expr) {
	target := types.ExprString(lhs)
	same := func(e ast.Expr) bool { return types.ExprString(e) == target }
	switch r := ast.Unparen(rhs).(type) {
	case *ast.BinaryExpr:
		t := l.info.TypeOf(lhs)
		var ok bool
		switch r.Op {
		case token.ADD, token.MUL, token.AND, token.OR, token.XOR:
			ok = isInteger(t)
		case token.SUB, token.AND_NOT:
			ok = isInteger(t) && same(r.X)
		case token.LAND, token.LOR:
			ok = isBool(t)
		}
		switch {
		case !ok:
		case same(r.X):
			return r.Op, []ast.Expr{r.X}
		case same(r.Y):
			return r.Op, []ast.Expr{r.Y}
		}
	case *ast.CallExpr:
		if name := calleeName(l.info, r); name == "min" || name == "max" {
			var operands []ast.Expr
			for _, arg := range r.Args {
				if same(arg) {
					operands = append(operands, arg)
				}
			}
			return token.ILLEGAL, operands
		}
	}
	return token.ILLEGAL, nil
}

// accumulate records an update of target by op; operands are the
// occurrences of target in the new value.
func (l *loopCheck) accumulate(target ast.Expr, op token.Token, operands ...ast.Expr) {
	target = ast.Unparen(target)
	if l.self == nil {
		l.self = make(map[ast.Expr]bool)
	}
	l.self[target] = true
	for _, e := range operands {
		l.self[ast.Unparen(e)] = true
	}
	l.accs = append(l.accs, update{target: target, root: l.root(target), key: pathKey(target), op: op, keyed: l.keyedByLoop(target)})
}

// constant records the assignment of the constant c to target.
func (l *loopCheck) constant(target, c ast.Expr) {
	target = ast.Unparen(target)
	value := types.ExprString(c)
	if tv := l.info.Types[c]; tv.Value != nil {
		value = tv.Value.ExactString()
	}
	l.consts = append(l.consts, update{target: target, root: l.root(target), key: pathKey(target), value: value, keyed: l.keyedByLoop(target)})
}

// leak returns the first place in body where the loop's order reaches a
// value through the updates recorded while checking it, and says how; or
// nil. Each update commutes with the others, but a read of the updated
// storage in between sees how many elements came before (ids[k] = next;
// next++), and two constants written to one place leave the last.
func (l *loopCheck) leak(body *ast.BlockStmt) (ast.Node, string) {
	for i, a := range l.consts {
		for _, b := range l.consts[:i] {
			if a.value != b.value && !(a.keyed && b.keyed) && a.root != nil && a.root == b.root && overlap(a.key, b.key) {
				return a.target, fmt.Sprintf("%s and %s are set to different constants (%s, %s), so the last iteration wins",
					shorten(b.key), shorten(a.key), shorten(b.value), shorten(a.value))
			}
		}
	}
	accs := make(map[types.Object][]update)
	for _, a := range l.accs {
		if a.root != nil {
			accs[a.root] = append(accs[a.root], a)
		}
	}
	if len(accs) == 0 {
		return nil, ""
	}
	// A constant may join an accumulation it absorbs: x = true beside
	// x = x || e. Anywhere else a constant resets a running value.
	for _, c := range l.consts {
		absorbed := true
		for _, a := range accs[c.root] {
			if !overlap(a.key, c.key) || sameIteration(a, c) {
				continue
			}
			absorbed = a.key == c.key && (a.op == token.LOR && c.value == "true" || a.op == token.LAND && c.value == "false")
			if !absorbed {
				break
			}
		}
		if absorbed {
			l.self[c.target] = true
		}
	}
	bad := l.reads(body, accs)
	if bad == nil {
		return nil, ""
	}
	return bad, fmt.Sprintf("%s, which the loop accumulates into, is read outside its own updates", shorten(pathKey(bad)))
}

// reads returns the first occurrence in n of storage that accs update,
// other than the occurrences the updates themselves hold, or nil.
func (l *loopCheck) reads(n ast.Node, accs map[types.Object][]update) ast.Expr {
	var bad ast.Expr
	ast.Inspect(n, func(n ast.Node) bool {
		e, ok := n.(ast.Expr)
		if bad != nil || !ok || !l.isPath(e) {
			return bad == nil
		}
		if !l.self[e] {
			here := update{key: pathKey(e), keyed: l.keyedByLoop(e)}
			for _, a := range accs[l.root(e)] {
				if overlap(here.key, a.key) && !sameIteration(a, here) {
					bad = e
					return false
				}
			}
		}
		// The base of a path is part of it; its indexes are reads.
		for _, inner := range l.pathParts(e) {
			if bad = l.reads(inner, accs); bad != nil {
				break
			}
		}
		return false
	})
	return bad
}

// sameIteration reports whether a and b are both m[k] for the loop's key
// k: storage that only the current iteration touches.
func sameIteration(a, b update) bool {
	return a.keyed && b.keyed && a.key == b.key
}

// isPath reports whether e names storage: a variable, a field of one, an
// element of a map, slice or array, or a pointer's target.
func (l *loopCheck) isPath(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		_, ok := l.info.ObjectOf(e).(*types.Var)
		return ok
	case *ast.SelectorExpr:
		if sel := l.info.Selections[e]; sel != nil {
			return sel.Kind() == types.FieldVal
		}
		_, ok := l.info.ObjectOf(e.Sel).(*types.Var)
		return ok
	case *ast.IndexExpr:
		t := l.info.TypeOf(e.X)
		if t == nil {
			return false
		}
		switch t.Underlying().(type) {
		case *types.Map, *types.Slice, *types.Array, *types.Pointer, *types.Basic:
			return true
		}
	case *ast.StarExpr:
		return !l.info.Types[e].IsType()
	}
	return false
}

// pathParts returns the parts of the path e that are read to find its
// storage (indexes, and a base that is no path, like a call), in no order.
func (l *loopCheck) pathParts(e ast.Expr) (parts []ast.Expr) {
	for {
		switch x := e.(type) {
		case *ast.ParenExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		case *ast.SelectorExpr:
			if l.info.Selections[x] == nil {
				return parts // a package-level variable
			}
			e = x.X
		case *ast.IndexExpr:
			parts = append(parts, x.Index)
			e = x.X
		case *ast.Ident:
			return parts
		default:
			return append(parts, e)
		}
	}
}

// root returns the variable at the base of the path e, or nil.
func (l *loopCheck) root(e ast.Expr) types.Object {
	for {
		switch x := e.(type) {
		case *ast.ParenExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		case *ast.SelectorExpr:
			if l.info.Selections[x] == nil {
				return l.info.ObjectOf(x.Sel)
			}
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.Ident:
			return l.info.ObjectOf(x)
		default:
			return nil
		}
	}
}

// pathKey spells the path e without parentheses and dereferences:
// (*p).n[i] is "p.n[i]".
func pathKey(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.ParenExpr:
		return pathKey(x.X)
	case *ast.StarExpr:
		return pathKey(x.X)
	case *ast.SelectorExpr:
		return pathKey(x.X) + "." + x.Sel.Name
	case *ast.IndexExpr:
		return pathKey(x.X) + "[" + types.ExprString(x.Index) + "]"
	}
	return types.ExprString(e)
}

// overlap reports whether the paths a and b, from one root, may share
// storage: one contains the other, or both index the same thing, perhaps
// at the same place.
func overlap(a, b string) bool {
	if partOf(a, b) || partOf(b, a) {
		return true
	}
	ia, ib := strings.IndexByte(a, '['), strings.IndexByte(b, '[')
	return ia >= 0 && ib >= 0 && a[:ia] == b[:ib]
}

// partOf reports whether path a is b or a part of it.
func partOf(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+".") || strings.HasPrefix(a, b+"[")
}

// localOrBlank reports whether e is _ or a variable declared in the loop
// (its key, its value, or a variable of its body).
func (l *loopCheck) localOrBlank(e ast.Expr) bool {
	if e == nil {
		return true
	}
	id, ok := ast.Unparen(e).(*ast.Ident)
	if !ok {
		return false
	}
	if id.Name == "_" {
		return true
	}
	v, ok := l.info.ObjectOf(id).(*types.Var)
	return ok && l.loop.Pos() <= v.Pos() && v.Pos() < l.loop.End()
}

func (l *loopCheck) exprs(list []ast.Expr) ast.Node {
	for _, e := range list {
		if bad := l.expr(e); bad != nil {
			return bad
		}
	}
	return nil
}

// expr returns the first part of e that could have an effect (a call to
// anything but a pure function, a receive, a function literal), or nil.
func (l *loopCheck) expr(e ast.Expr) ast.Node {
	if e == nil {
		return nil
	}
	var bad ast.Node
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			bad = n
		case *ast.UnaryExpr:
			if n.Op == token.ARROW {
				bad = n
			}
		case *ast.CallExpr:
			if tv := l.info.Types[n.Fun]; !tv.IsType() && !isPure(calleeName(l.info, n)) {
				bad = n
			}
		}
		return bad == nil
	})
	return bad
}

// isBlank reports whether e is absent or _.
func isBlank(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return e == nil || ok && id.Name == "_"
}

func first(nodes ...ast.Node) ast.Node {
	for _, n := range nodes {
		if n != nil {
			return n
		}
	}
	return nil
}

func isInteger(t types.Type) bool {
	b, ok := underlyingBasic(t)
	return ok && b.Info()&types.IsInteger != 0
}

func isBool(t types.Type) bool {
	b, ok := underlyingBasic(t)
	return ok && b.Info()&types.IsBoolean != 0
}

func underlyingBasic(t types.Type) (*types.Basic, bool) {
	if t == nil {
		return nil, false
	}
	b, ok := t.Underlying().(*types.Basic)
	return b, ok
}

// describe names n for a message.
func describe(n ast.Node) string {
	switch n := n.(type) {
	case *ast.ReturnStmt:
		return "the return"
	case *ast.SendStmt:
		return "the channel send"
	case *ast.DeferStmt:
		return "the defer"
	case *ast.GoStmt:
		return "the go statement"
	case *ast.BranchStmt:
		return "the " + n.Tok.String()
	case *ast.RangeStmt:
		return "the nested range, assigning variables declared outside the loop,"
	case *ast.ExprStmt:
		return "the call " + shorten(types.ExprString(n.X))
	case *ast.AssignStmt:
		return "the assignment to " + shorten(types.ExprString(n.Lhs[0]))
	case *ast.IncDecStmt:
		return shorten(types.ExprString(n.X)) + n.Tok.String() + " (not an integer)"
	case *ast.FuncLit:
		return "the function literal"
	case *ast.CallExpr:
		return "the call " + shorten(types.ExprString(n))
	case *ast.UnaryExpr:
		return "the receive " + shorten(types.ExprString(n))
	case ast.Expr:
		return "the assignment to " + shorten(types.ExprString(n))
	}
	return "a statement"
}

func shorten(s string) string {
	const max = 40
	if len(s) > max {
		return s[:max-3] + "..."
	}
	return s
}
