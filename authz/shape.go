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

// value is the OPA input of in under p: only what the policy reads, converted
// straight from the struct (the target part comes from tv when given: the
// residual's, converted once).
func (p *Policy) value(in *Input, tv ast.Value) ast.Value {
	if p.reads.all {
		return in.Value()
	}
	obj := ast.NewObject()
	for k, sub := range p.shape {
		var v ast.Value
		switch {
		case k == "target" && tv != nil:
			v = tv
		case k == "caller" && len(sub) > 0:
			v = p.callerValue(&in.Caller, sub)
		default:
			v = fieldInput(in, k, sub)
		}
		if v != nil {
			obj.Insert(keyTerm(k), ast.NewTerm(v))
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
func (p *Policy) callerValue(c *InputCaller, sub shape) ast.Value {
	e := getKeyEnc()
	e.s(p.Revision)
	for _, path := range p.reads.paths {
		if path[0] == "caller" {
			keyInputCallerAt(e, c, path[1:])
		}
	}
	d := e.sum()
	if v, ok := callers.Get(d); ok {
		return v
	}
	v := pruned(c, sub, valueInputCaller, fieldInputCaller)
	callers.Add(d, v)
	return v
}
