package authz

import (
	"slices"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// reads is what a compiled policy set can observe of its input: the input paths
// its rules reference. Everything outside these paths can change without
// changing any decision, so the decision-cache key and the OPA input are built
// from these paths only (keyed on what the policy reads: a new context id from a
// known caller hits the cache when no rule reads task.context_id).
//
// The analysis is conservative. A reference input.a.b[x] reads input.a.b (all
// of it); any use of the whole input the analysis does not understand (walk,
// json.marshal(input), with input as ...) reads everything. Two indirections
// are followed because the shipped policy uses them: a local bound to an input
// path (v := input.caller; v.tenant reads caller.tenant), and a function whose
// parameter names the path (shown(path) := object.get(input, path, ...),
// same_as_owner(f) if input.caller[f] ...), resolved at each call site whose
// argument is a constant.
type reads struct {
	// all: the policy may read any part of the input.
	all bool
	// paths are the read paths, none a prefix of another, sorted.
	paths [][]string
	// nondeterministic: the policy calls a built-in whose result may differ
	// between two evaluations of the same input (time, randomness, HTTP): its
	// decisions are not cached.
	nondeterministic bool
}

// paramUse is a function parameter that names an input path: the function reads
// base + the argument, one key (path false, as in input.caller[f]) or a path
// (path true, as object.get(input, path, default) takes it).
type paramUse struct {
	index int
	base  []string
	path  bool
}

type analysis struct {
	all     bool
	nondet  bool
	paths   map[string][]string
	params  map[string][]paramUse // function ref → parameter uses
	calls   map[string][][]*ast.Term
	funcArg map[ast.Var]int // parameters of the function being walked
	fn      string
	// seen are the variables of the rule walked so far: a variable's first
	// occurrence is where it is bound (the compiler orders bodies so), so only
	// `v = <input path>` with v unseen binds an alias; with v seen it compares.
	seen map[ast.Var]bool
}

func newAnalysis() *analysis {
	return &analysis{paths: map[string][]string{}, params: map[string][]paramUse{}, calls: map[string][][]*ast.Term{}}
}

// analyzeReads walks every rule of the compiled modules.
func analyzeReads(modules map[string]*ast.Module) reads {
	a := newAnalysis()
	names := make([]string, 0, len(modules))
	for name := range modules {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, r := range modules[name].Rules {
			for rule := r; rule != nil; rule = rule.Else {
				a.rule(rule)
			}
		}
	}
	return a.result()
}

// analyzeReachable walks the query and every rule it can reach, through the
// references to data in each (a reference reaches every rule at or under
// its ground prefix, and every rule it may name beyond it): what one
// program can observe of its input, where analyzeReads answers for every
// rule of the modules. A residual is compiled beside the policy's own
// modules when it calls one of their rules (a helper function); only what
// it reaches of them runs, so only that is read.
func analyzeReachable(c *ast.Compiler, query ast.Body) reads {
	a := newAnalysis()
	seen := map[*ast.Rule]bool{}
	var queue []*ast.Rule
	reach := func(x any) {
		ast.WalkRefs(x, func(r ast.Ref) bool {
			if !r[0].Equal(ast.DefaultRootDocument) {
				return false
			}
			prefix := r.GroundPrefix()
			for _, rule := range append(c.GetRules(prefix), c.GetRulesWithPrefix(prefix)...) {
				if !seen[rule] {
					seen[rule] = true
					queue = append(queue, rule)
				}
			}
			return false
		})
	}
	// The query itself, as the body of a rule of its own.
	a.rule(&ast.Rule{Head: &ast.Head{}, Body: query})
	reach(query)
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		for rule := r; rule != nil; rule = rule.Else {
			a.rule(rule)
			reach(rule)
		}
	}
	return a.result()
}

// result resolves the parameter uses at their call sites and returns what
// the walked rules read.
func (a *analysis) result() reads {
	for fn, uses := range a.params {
		for _, args := range a.calls[fn] {
			for _, u := range uses {
				if u.index >= len(args) {
					a.add(u.base)
					continue
				}
				suffix, ok := constPath(args[u.index], u.path)
				if !ok {
					a.add(u.base)
					continue
				}
				a.add(append(slices.Clone(u.base), suffix...))
			}
		}
	}
	if a.all {
		return reads{all: true, nondeterministic: a.nondet}
	}
	return reads{paths: minimal(a.paths), nondeterministic: a.nondet}
}

// constPath reads a call-site argument as a path suffix: a string (one key), or
// for a path parameter an array of strings. Anything else is not understood.
func constPath(t *ast.Term, path bool) ([]string, bool) {
	switch v := t.Value.(type) {
	case ast.String:
		return []string{string(v)}, true
	case *ast.Array:
		if !path {
			return nil, false
		}
		out := make([]string, 0, v.Len())
		for i := range v.Len() {
			s, ok := v.Elem(i).Value.(ast.String)
			if !ok {
				// A non-string step (an array index): the path up to it.
				return out, true
			}
			out = append(out, string(s))
		}
		return out, true
	}
	return nil, false
}

// minimal drops every path that has another path as its prefix and sorts them.
func minimal(set map[string][]string) [][]string {
	var out [][]string
	for _, p := range set {
		covered := false
		for _, q := range set {
			if len(q) < len(p) && slices.Equal(q, p[:len(q)]) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return strings.Join(out[i], "\x00") < strings.Join(out[j], "\x00") })
	return out
}

func (a *analysis) add(path []string) {
	if len(path) == 0 {
		a.all = true
		return
	}
	a.paths[strings.Join(path, "\x00")] = slices.Clone(path)
}

func (a *analysis) rule(r *ast.Rule) {
	a.fn, a.funcArg, a.seen = "", nil, map[ast.Var]bool{}
	if len(r.Head.Args) > 0 && r.Module != nil {
		a.fn = r.Ref().String()
		a.funcArg = map[ast.Var]int{}
		for i, arg := range r.Head.Args {
			if v, ok := arg.Value.(ast.Var); ok {
				a.funcArg[v] = i
			}
			ast.WalkVars(arg, func(v ast.Var) bool { a.seen[v] = true; return false })
		}
	}
	// The body binds what the head uses: walk it first.
	aliases := map[ast.Var][]string{}
	a.body(r.Body, aliases)
	if len(r.Head.Reference) > 1 {
		for _, t := range r.Head.Reference[1:] {
			a.term(t, aliases)
		}
	}
	if r.Head.Key != nil {
		a.term(r.Head.Key, aliases)
	}
	if r.Head.Value != nil {
		a.term(r.Head.Value, aliases)
	}
	for _, arg := range r.Head.Args {
		a.term(arg, aliases)
	}
}

// body walks a body in order: the compiler orders expressions so that a local
// is bound before it is used.
func (a *analysis) body(b ast.Body, aliases map[ast.Var][]string) {
	for _, e := range b {
		a.expr(e, aliases)
		ast.WalkVars(e, func(v ast.Var) bool { a.seen[v] = true; return false })
	}
}

// inputPath reports whether t is a reference into the input (directly, or
// through an alias) and returns its constant prefix path and the rest.
func inputPath(t *ast.Term, aliases map[ast.Var][]string) (base []string, rest ast.Ref, ok bool) {
	var head ast.Var
	var ref ast.Ref
	switch v := t.Value.(type) {
	case ast.Var:
		head = v
	case ast.Ref:
		h, isVar := v[0].Value.(ast.Var)
		if !isVar {
			return nil, nil, false
		}
		head, ref = h, v[1:]
	default:
		return nil, nil, false
	}
	switch {
	case head.Equal(ast.InputRootDocument.Value):
		base = nil
	default:
		p, isAlias := aliases[head]
		if !isAlias {
			return nil, nil, false
		}
		base = p
	}
	path := slices.Clone(base)
	for i, el := range ref {
		s, isStr := el.Value.(ast.String)
		if !isStr {
			return path, ref[i:], true
		}
		path = append(path, string(s))
	}
	return path, nil, true
}

func (a *analysis) expr(e *ast.Expr, aliases map[ast.Var][]string) {
	for _, w := range e.With {
		if _, _, ok := inputPath(w.Target, aliases); ok {
			// The input replaced for a sub-evaluation: give up on precision.
			a.all = true
		}
		a.term(w.Value, aliases)
	}
	switch ts := e.Terms.(type) {
	case []*ast.Term:
		if e.IsEquality() && len(ts) == 3 {
			if a.alias(ts[1], ts[2], aliases) || a.alias(ts[2], ts[1], aliases) {
				return
			}
		}
		a.call(ts[0], ts[1:], aliases)
	case *ast.Term:
		a.term(ts, aliases)
	default:
		// some/every/not and other compound expressions: walk their terms and
		// bodies with the same rules.
		ast.NewGenericVisitor(func(x any) bool {
			switch x := x.(type) {
			case *ast.Term:
				a.term(x, aliases)
				return true
			case *ast.Expr:
				a.expr(x, aliases)
				return true
			}
			return false
		}).Walk(e.Terms)
	}
}

// alias records `v = <input path>` (a local bound to a constant input path); it
// reports whether the expression was one.
func (a *analysis) alias(lhs, rhs *ast.Term, aliases map[ast.Var][]string) bool {
	v, ok := lhs.Value.(ast.Var)
	if !ok || v.Equal(ast.InputRootDocument.Value) || a.seen[v] {
		return false
	}
	if _, taken := aliases[v]; taken {
		return false
	}
	base, rest, ok := inputPath(rhs, aliases)
	if !ok || len(rest) > 0 {
		return false
	}
	aliases[v] = base
	return true
}

// call walks a call (operator and operands), understanding object.get on an
// input path and recording calls of functions with constant arguments.
func (a *analysis) call(op *ast.Term, args []*ast.Term, aliases map[ast.Var][]string) {
	ref, isRef := op.Value.(ast.Ref)
	if isRef {
		name := ref.String()
		if b, ok := ast.BuiltinMap[name]; ok && (b.Nondeterministic || timeDependent[name]) {
			a.nondet = true
		}
		if name == ast.ObjectGet.Name && len(args) >= 2 {
			if base, rest, ok := inputPath(args[0], aliases); ok && len(rest) == 0 {
				if suffix, ok := constPath(args[1], true); ok {
					a.add(append(base, suffix...))
				} else if i, isParam := a.param(args[1]); isParam {
					a.params[a.fn] = append(a.params[a.fn], paramUse{index: i, base: base, path: true})
				} else {
					a.add(base)
				}
				for _, t := range args[1:] {
					a.term(t, aliases)
				}
				return
			}
		}
		if _, builtin := ast.BuiltinMap[name]; !builtin && ref.IsGround() {
			a.calls[name] = append(a.calls[name], args)
		}
	} else {
		a.term(op, aliases)
	}
	for _, t := range args {
		a.term(t, aliases)
	}
}

// timeDependent are built-ins OPA does not flag as nondeterministic whose
// result still depends on the time of the evaluation (a token's or a
// certificate's validity): a cached decision could outlive it.
var timeDependent = map[string]bool{
	"io.jwt.decode_verify":                                   true,
	"crypto.x509.parse_and_verify_certificates":              true,
	"crypto.x509.parse_and_verify_certificates_with_options": true,
}

func (a *analysis) param(t *ast.Term) (int, bool) {
	v, ok := t.Value.(ast.Var)
	if !ok || a.funcArg == nil {
		return 0, false
	}
	i, ok := a.funcArg[v]
	return i, ok
}

// term records the input paths a term reads and walks into what it contains.
func (a *analysis) term(t *ast.Term, aliases map[ast.Var][]string) {
	if base, rest, ok := inputPath(t, aliases); ok {
		if len(rest) > 0 {
			if i, isParam := a.param(rest[0]); isParam {
				a.params[a.fn] = append(a.params[a.fn], paramUse{index: i, base: base})
			} else {
				a.add(base)
			}
			for _, el := range rest {
				a.term(el, aliases)
			}
			return
		}
		a.add(base)
		return
	}
	switch v := t.Value.(type) {
	case ast.Ref:
		for _, el := range v[1:] {
			a.term(el, aliases)
		}
	case ast.Call:
		a.call(v[0], v[1:], aliases)
	case *ast.Array:
		for i := range v.Len() {
			a.term(v.Elem(i), aliases)
		}
	case ast.Object:
		v.Foreach(func(k, x *ast.Term) {
			a.term(k, aliases)
			a.term(x, aliases)
		})
	case ast.Set:
		v.Foreach(func(x *ast.Term) { a.term(x, aliases) })
	case *ast.ArrayComprehension:
		inner := cloneAliases(aliases)
		a.body(v.Body, inner)
		a.term(v.Term, inner)
	case *ast.SetComprehension:
		inner := cloneAliases(aliases)
		a.body(v.Body, inner)
		a.term(v.Term, inner)
	case *ast.ObjectComprehension:
		inner := cloneAliases(aliases)
		a.body(v.Body, inner)
		a.term(v.Key, inner)
		a.term(v.Value, inner)
	}
}

// cloneAliases copies an alias scope (never nil: an inner scope adds to it).
func cloneAliases(m map[ast.Var][]string) map[ast.Var][]string {
	out := make(map[ast.Var][]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Reads reports whether the policy may read the input's member at path (its
// steps below input, as ["caller", "user_id"]): a path the policy reads
// leads to the member or lies within it, or the policy may read the whole
// input. A replay says so of the members its log masked.
func (p *Policy) Reads(path []string) bool {
	if p.reads.all {
		return true
	}
	for _, r := range p.reads.paths {
		n := min(len(r), len(path))
		if slices.Equal(r[:n], path[:n]) {
			return true
		}
	}
	return false
}
