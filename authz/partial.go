package authz

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/writ-authz/writ/task"
)

// A target agent's platform metadata is static (it comes from writ's config, never
// from the caller), and an operation is one of thirteen, so the policy is
// partially evaluated once per target and operation, and per whether the
// request names a task: with input.target and input.operation known (and,
// for a request that names no task, input.task.id known to be ""), and the
// rest of the input unknown, OPA folds every rule that only reads those and
// data.writ.config into constants, drops the checks that do not apply (a
// follow-up's ownership check, on a send that starts a task), and leaves a
// residual program that evaluates the rest. The residual is built on its
// first decision under a policy revision (and again, ahead of the swap, on a
// reload); it must decide exactly as the whole policy does, which
// TestPartialMatchesFull checks over a generated matrix of inputs, and which
// the first decisions of every residual check again at run time: a residual
// that ever disagrees is dropped and its decisions evaluated whole. An
// operation writ does not know is evaluated on the target's residual with the
// operation unknown.
//
// A residual reads less than the whole policy (a send that names no task
// reads nothing of the caller's subject in the shipped policy), and what it
// reads is its own view (shape.go): its OPA input and its decision-cache key
// (keyOn) cover that and nothing else, so decisions hit across callers that
// differ only where the residual cannot look.

// partialNamespace is where the residual's support rules live (data.writ_partial).
const partialNamespace = "writ_partial"

// maxResiduals bounds the residuals a policy keeps (each holds its own compiled
// rules, about 180 KB for the shipped policy); beyond it decisions evaluate the
// whole policy.
const maxResiduals = 256

// verifyDecisions is how many decisions of each residual are also evaluated on
// the whole policy and compared.
const verifyDecisions = 8

// unknownsFor are the unknowns of a partial evaluation: every top-level
// member of the writ/v1 input but target (and but operation when opKnown),
// and, when the task id is known, every member of the task but its id.
func unknownsFor(opKnown, idKnown bool) []*ast.Term {
	var out []*ast.Term
	for _, k := range sectionsInput {
		switch {
		case k == "target", k == "operation" && opKnown:
		case k == "task" && idKnown:
			for _, m := range sectionMembersInput["task"] {
				if m != "id" {
					out = append(out, ast.NewTerm(ast.InputRootRef.Append(ast.StringTerm(k)).Append(ast.StringTerm(m))))
				}
			}
		default:
			out = append(out, ast.NewTerm(ast.InputRootRef.Append(ast.StringTerm(k))))
		}
	}
	return out
}

// unknowns are unknownsFor's four answers, by [opKnown][idKnown].
var unknowns = [2][2][]*ast.Term{
	{unknownsFor(false, false), unknownsFor(false, true)},
	{unknownsFor(true, false), unknownsFor(true, true)},
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// targetProgram is the residual of a target, an operation and whether the
// request names a task.
type targetProgram struct {
	once   sync.Once
	target InputTarget
	op     string
	// named: the requests it decides name a task (input.task.id is not "").
	named bool
	// ident names the residual in decision-cache keys: a digest of its
	// operation, named and its target's content.
	ident  [32]byte
	prog   atomic.Pointer[program] // nil: evaluate the whole policy
	checks atomic.Int32
}

// targets holds a policy's residuals, by residualName.
type targets struct {
	mu sync.RWMutex
	m  map[string]*targetProgram
}

// residualName encodes what names a residual (its operation, named, its
// target's content) into e.
func residualName(e *keyEnc, t *InputTarget, op string, named bool) {
	e.s(op)
	e.flag(named)
	keyInputTarget(e, t)
}

// targetDigest identifies a target by its content.
func targetDigest(t *InputTarget) [32]byte { return digestOf("InputTarget", t, keyInputTarget) }

// forTarget returns the residual of the target, the operation and named,
// building it on first use; nil when the policy keeps no more residuals.
func (p *Policy) forTarget(ctx context.Context, t *InputTarget, op string, named bool, log *slog.Logger) *targetProgram {
	if p.noPartial {
		return nil
	}
	if !task.Operation(op).Known() {
		op = "" // a residual is built per operation of task.Operations; any other uses the target's
	}
	e := getKeyEnc()
	residualName(e, t, op, named)
	p.targets.mu.RLock()
	tp, ok := p.targets.m[string(e.b)] // no copy of the name on a lookup
	p.targets.mu.RUnlock()
	if !ok {
		p.targets.mu.Lock()
		if tp, ok = p.targets.m[string(e.b)]; !ok {
			if len(p.targets.m) >= maxResiduals {
				p.targets.mu.Unlock()
				keyEncs.Put(e)
				return nil
			}
			tp = &targetProgram{target: cloneInputTarget(t), op: op, named: named}
			tp.checks.Store(verifyDecisions)
			tp.ident = digestOf("residual", tp, func(e *keyEnc, tp *targetProgram) { residualName(e, &tp.target, tp.op, tp.named) })
			p.targets.m[string(e.b)] = tp
		}
		p.targets.mu.Unlock()
	}
	keyEncs.Put(e)
	tp.once.Do(func() {
		// Built once for every later decision: not bound to this request's context.
		prog, err := p.partial(context.WithoutCancel(ctx), &tp.target, op, named)
		if err != nil {
			if log == nil {
				log = slog.Default()
			}
			log.Warn("partial evaluation failed; the target is evaluated on the whole policy",
				"target", t.Name, "operation", op, "names_task", named, "revision", p.Revision, "error", err)
			return
		}
		tp.prog.Store(prog)
	})
	return tp
}

// prepare builds the residuals another policy built (Engine.Swap passes the
// previous revision's), ahead of their first decision.
func (p *Policy) prepare(ctx context.Context, from *Policy, log *slog.Logger) {
	from.targets.mu.Lock()
	built := make([]*targetProgram, 0, len(from.targets.m))
	for _, tp := range from.targets.m {
		built = append(built, tp)
	}
	from.targets.mu.Unlock()
	for _, tp := range built {
		p.forTarget(ctx, &tp.target, tp.op, tp.named, log)
	}
}

// Targets lists the targets this policy has built residuals for.
func (p *Policy) Targets() []InputTarget {
	p.targets.mu.Lock()
	defer p.targets.mu.Unlock()
	seen := map[[32]byte]bool{}
	var out []InputTarget
	for _, tp := range p.targets.m {
		if d := targetDigest(&tp.target); !seen[d] {
			seen[d] = true
			out = append(out, tp.target)
		}
	}
	slices.SortFunc(out, func(a, b InputTarget) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// partial evaluates the policy with input.target (and input.operation, unless op
// is "", and input.task.id as "" unless named) known and compiles the
// residual: the queries become the bodies of data.writ_partial.result.__result__,
// beside the support rules, and the policy's own modules when the residual
// still refers to their rules. Its view is what the compiled residual can
// reach of the input.
func (p *Policy) partial(ctx context.Context, t *InputTarget, op string, named bool) (*program, error) {
	txn, err := p.store.NewTransaction(ctx)
	if err != nil {
		return nil, err
	}
	defer p.store.Abort(ctx, txn)
	known := ast.NewObject(item("target", valueInputTarget(t)))
	if op != "" {
		known.Insert(ast.StringTerm("operation"), ast.StringTerm(op))
	}
	if !named {
		// The task's other members stay unknown (unknowns), each by name, so
		// that a rule reading any of them, or the task whole, is kept.
		known.Insert(ast.StringTerm("task"), ast.NewTerm(ast.NewObject(item("id", ast.String("")))))
	}
	queries, support, err := topdown.NewQuery(p.full.query).WithCompiler(p.compiler).WithStore(p.store).
		WithTransaction(txn).WithInput(ast.NewTerm(known)).WithUnknowns(unknowns[b2i(op != "")][b2i(!named)]).
		WithPartialNamespace(partialNamespace).PartialRun(ctx)
	if err != nil {
		return nil, err
	}
	if len(queries) == 0 {
		// Undefined whatever the rest of the input: it reads none of it.
		return &program{undefined: true, view: newView(reads{}, true)}, nil
	}
	result, err := ast.ParseModuleWithOpts("writ_partial_result", "package "+partialNamespace+".result",
		ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return nil, err
	}
	for _, body := range queries {
		result.Rules = append(result.Rules, &ast.Rule{
			Head:   ast.NewHead(ast.Var("__result__"), nil, ast.NewTerm(resultVar)),
			Body:   body,
			Module: result,
		})
	}
	modules := make(map[string]*ast.Module, len(p.modules)+len(support)+1)
	if p.refersToRules(queries, support) {
		for name, m := range p.modules {
			modules[name] = m
		}
	}
	for i, m := range support {
		modules[fmt.Sprintf("writ_partial_support_%d", i)] = m
	}
	modules["writ_partial_result"] = result
	c := p.newCompiler(ctx, txn)
	c.Compile(modules)
	if c.Failed() {
		return nil, fmt.Errorf("compiling the residual: %w", c.Errors)
	}
	q, err := c.QueryCompiler().Compile(ast.MustParseBody(string(resultVar) + " = data." + partialNamespace + ".result.__result__"))
	if err != nil {
		return nil, fmt.Errorf("compiling the residual query: %w", err)
	}
	prog := &program{compiler: c, query: q, view: newView(analyzeReachable(c, q), true)}
	if _, reads := prog.view.shape["target"]; reads || prog.view.reads.all {
		prog.tv = pruned(t, prog.view.shape["target"], valueInputTarget, fieldInputTarget)
	}
	return prog, nil
}

// refersToRules reports whether a residual refers to a rule of the policy's own
// modules (anything under data that is not a base document or the residual's
// own namespace): it then needs them compiled beside it.
func (p *Policy) refersToRules(queries []ast.Body, support []*ast.Module) bool {
	found := false
	visit := func(x any) {
		ast.WalkRefs(x, func(r ast.Ref) bool {
			if found || !r[0].Equal(ast.DefaultRootDocument) {
				return found
			}
			if len(r) > 1 && r[1].Value.Compare(ast.String(partialNamespace)) == 0 {
				return false
			}
			if len(p.compiler.GetRulesWithPrefix(r.GroundPrefix())) > 0 || len(p.compiler.GetRules(r.GroundPrefix())) > 0 {
				found = true
			}
			return found
		})
	}
	for _, q := range queries {
		visit(q)
	}
	for _, m := range support {
		visit(m)
	}
	return found
}
