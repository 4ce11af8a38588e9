package authz

import (
	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/writ-authz/writ/authz/internal/segcache"
)

// The OPA input of a decision: only the values at the paths the policy reads
// (reads.go), converted straight from the struct, without intermediate maps. A
// policy that may read everything gets the whole input (Input.Value). A read
// path descends into the input's sections (input.caller.tenant is the
// caller's tenant alone) and into free-form objects (the claims); deeper, a
// member is given whole (input.task.owner.tenant gives the whole owner).

// shape is the tree of read paths: a node with no children is read whole.
type shape map[string]shape

func shapeOf(paths [][]string) shape {
	root := shape{}
	for _, p := range paths {
		n := root
		for _, step := range p {
			c, ok := n[step]
			if !ok {
				c = shape{}
				n[step] = c
			}
			n = c
		}
	}
	return root
}

// view is what one program reads of the input — the whole policy, or one
// residual (partial.go) — and how its OPA input and its decision-cache key
// are made from that: the read paths, their tree, the paths the key
// encodes, and the paths into the caller with the tag its memoized caller
// values go by.
type view struct {
	reads reads
	shape shape
	// keyPaths are the read paths the key encodes: all of them, or for a
	// residual all but the target's (the residual's name in the key is its
	// target's content).
	keyPaths [][]string
	// caller are the read paths into the caller, without "caller"; callerTag
	// is a digest of them, so that two views that read different members of
	// one caller never share its converted value.
	caller    [][]string
	callerTag [32]byte
}

// newView is the view of a program that reads r. named: the key names the
// target otherwise (a residual), so its paths leave the target out.
func newView(r reads, named bool) *view {
	v := &view{reads: r, shape: shapeOf(r.paths)}
	e := getKeyEnc()
	e.s("caller paths")
	for _, path := range r.paths {
		if path[0] == "caller" {
			v.caller = append(v.caller, path[1:])
			e.list(path[1:])
		}
		if !named || path[0] != "target" {
			v.keyPaths = append(v.keyPaths, path)
		}
	}
	v.callerTag = e.sum()
	return v
}

// value is the OPA input of in under p: only what the policy reads, converted
// straight from the struct (the target part comes from tv when given: the
// residual's, converted once).
func (p *Policy) value(in *Input, tv ast.Value) ast.Value { return p.view.value(p.Revision, in, tv) }

// value is the OPA input of in for a program reading v, under a revision.
func (v *view) value(revision string, in *Input, tv ast.Value) ast.Value {
	if v.reads.all {
		return in.Value()
	}
	obj := ast.NewObject()
	for k, sub := range v.shape {
		var x ast.Value
		switch {
		case k == "target" && tv != nil:
			x = tv
		case k == "caller" && len(sub) > 0:
			x = v.callerValue(revision, &in.Caller, sub)
		default:
			x = fieldInput(in, k, sub)
		}
		if x != nil {
			obj.Insert(keyTerm(k), ast.NewTerm(x))
		}
	}
	return obj
}

// pruned is the object of x's members that sub names, each as field converts
// it (nil: x has no such member); all of x when sub names none.
func pruned[T any](x *T, sub shape, whole func(*T) ast.Value, field func(*T, string, shape) ast.Value) ast.Value {
	if len(sub) == 0 {
		return whole(x)
	}
	obj := ast.NewObject()
	for k, s := range sub {
		if v := field(x, k, s); v != nil {
			obj.Insert(keyTerm(k), ast.NewTerm(v))
		}
	}
	return obj
}

// callers memoizes the caller part of the input (the members the policy reads)
// by their digest and the policy revision: decisions of a known caller that
// miss the decision cache share one converted caller. A caller seen once only
// passes through the cache's probation segment.
var callers = mustCache(segcache.New[[32]byte, ast.Value](4096, 8<<20, valueBytes))

// callerValue is the caller part of the input (sub names some of its members),
// from callers when it is there.
func (v *view) callerValue(revision string, c *InputCaller, sub shape) ast.Value {
	e := getKeyEnc()
	e.s(revision)
	e.b = append(e.b, v.callerTag[:]...)
	for _, path := range v.caller {
		keyInputCallerAt(e, c, path)
	}
	d := e.sum()
	if x, ok := callers.Get(d); ok {
		return x
	}
	x := pruned(c, sub, valueInputCaller, fieldInputCaller)
	callers.Add(d, x)
	return x
}
