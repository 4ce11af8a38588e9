package authz

import (
	"context"
	"errors"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/writ-authz/writ/task"
)

// noMetrics: an evaluation's own timers are not read, so not kept.
var noMetrics = metrics.NoOp()

// resultVar is the query variable the decision is bound to.
const resultVar = ast.Var("decision")

// program is a compiled query and the compiler of the modules it runs against:
// the whole policy, or a target's residual after partial evaluation.
type program struct {
	compiler *ast.Compiler
	query    ast.Body
	// undefined: partial evaluation proved the decision undefined.
	undefined bool
	// view is what a residual reads of the input (nil for the whole
	// policy, whose view is its Policy's); tv is the residual's target part
	// of the input, converted once (nil when it reads none of the target).
	view *view
	tv   ast.Value
}

// decisionQuery is `decision = <query>` for a query that is one reference.
func decisionQuery(query string) (ast.Body, error) {
	body, err := ast.ParseBodyWithOpts(query, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return nil, fmt.Errorf("decision query %q: %w", query, err)
	}
	t, ok := body[0].Terms.(*ast.Term)
	if len(body) != 1 || !ok || body[0].Negated || len(body[0].With) > 0 {
		return nil, fmt.Errorf("decision query %q: want a single reference such as %s", query, DefaultQuery)
	}
	return ast.NewBody(ast.Equality.Expr(ast.NewTerm(resultVar), t)), nil
}

// run evaluates prog on input straight through OPA's evaluator (no rego.Rego
// layer: no per-evaluation goroutine, metrics or conversion of the result to Go
// values) and returns the value bound to the decision, nil when undefined.
func (p *Policy) run(ctx context.Context, prog *program, input ast.Value, tracer topdown.QueryTracer) (ast.Value, error) {
	if prog.undefined {
		return nil, nil
	}
	txn, err := p.store.NewTransaction(ctx)
	if err != nil {
		return nil, err
	}
	defer p.store.Abort(ctx, txn)
	q := topdown.NewQuery(prog.query).WithCompiler(prog.compiler).WithStore(p.store).WithTransaction(txn).
		WithInput(ast.NewTerm(input)).WithMetrics(noMetrics).
		// A built-in that errors (a type error, a bad regex) fails the
		// decision, which denies: it never just leaves a deny rule unfired.
		WithStrictBuiltinErrors(true)
	if ctx.Done() != nil {
		// A cancelled request stops its evaluation; AfterFunc costs no goroutine
		// unless the context ends.
		c := topdown.NewCancel()
		stop := context.AfterFunc(ctx, c.Cancel)
		defer stop()
		q = q.WithCancel(c)
	}
	if tracer != nil {
		q = q.WithQueryTracer(tracer)
	}
	var out ast.Value
	err = q.Iter(ctx, func(qr topdown.QueryResult) error {
		t := qr[resultVar]
		if t == nil {
			return errors.New("policy decision not bound")
		}
		if out != nil && out.Compare(t.Value) != 0 {
			return errors.New("policy decision has more than one value")
		}
		out = t.Value
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("policy evaluation: %w", err)
	}
	return out, nil
}

// decision evaluates prog and reads the decision object.
func (p *Policy) decision(ctx context.Context, prog *program, input ast.Value) (Decision, error) {
	v, err := p.run(ctx, prog, input, nil)
	if err != nil {
		return Decision{}, err
	}
	if v == nil {
		return Decision{}, errors.New("policy decision is undefined")
	}
	return decisionOf(v)
}

var (
	keyAllow   = ast.StringTerm("allow")
	keyDenials = ast.StringTerm("denials")
	keyHeaders = ast.StringTerm("headers")
	keyCode    = ast.StringTerm("code")
	keyReason  = ast.StringTerm("reason")
)

// decisionOf reads {allow, denials: [{code, reason}], headers?} from the OPA
// value itself. Anything malformed is an error (the caller fails closed).
func decisionOf(v ast.Value) (Decision, error) {
	obj, ok := v.(ast.Object)
	if !ok {
		return Decision{}, fmt.Errorf("policy decision is %s, not an object", ast.ValueName(v))
	}
	allow, ok := valueOf(obj, keyAllow).(ast.Boolean)
	if !ok {
		return Decision{}, errors.New(`policy decision has no boolean "allow"`)
	}
	d := Decision{Allow: bool(allow)}
	if raw := valueOf(obj, keyDenials); raw != nil {
		var items []*ast.Term
		switch list := raw.(type) {
		case *ast.Array:
			items = make([]*ast.Term, 0, list.Len())
			for i := range list.Len() {
				items = append(items, list.Elem(i))
			}
		case ast.Set:
			items = list.Slice()
		default:
			return Decision{}, errors.New(`policy decision "denials" is not a list`)
		}
		for _, item := range items {
			m, ok := item.Value.(ast.Object)
			var code, reason ast.String
			if ok {
				code, _ = valueOf(m, keyCode).(ast.String)
				reason, _ = valueOf(m, keyReason).(ast.String)
			}
			if !ok || code == "" {
				return Decision{}, fmt.Errorf("policy denial %v has no code", item)
			}
			d.Denials = append(d.Denials, task.Denial{Code: string(code), Reason: string(reason)})
		}
	}
	if d.Allow && len(d.Denials) > 0 {
		return Decision{}, errors.New("policy decision allows with denials")
	}
	if !d.Allow && len(d.Denials) == 0 {
		d.Denials = []task.Denial{{Code: "DENIED", Reason: "the policy denied without a reason"}}
	}
	if raw, ok := valueOf(obj, keyHeaders).(ast.Object); ok {
		d.Headers = map[string]string{}
		raw.Foreach(func(k, v *ast.Term) {
			ks, kok := k.Value.(ast.String)
			vs, vok := v.Value.(ast.String)
			if kok && vok {
				d.Headers[string(ks)] = string(vs)
			}
		})
	}
	return d, nil
}

func valueOf(obj ast.Object, k *ast.Term) ast.Value {
	if t := obj.Get(k); t != nil {
		return t.Value
	}
	return nil
}
