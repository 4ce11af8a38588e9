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
// partially evaluated once per target and operation: with input.target and
// input.operation known and the rest of the input unknown, OPA folds every rule
// that only reads the target, the operation and data.writ.config into constants,
// drops the checks that do not apply to the operation, and leaves a residual
// program that evaluates the rest. The residual is built on the pair's first
// decision under a policy revision (and again, ahead of the swap, on a reload);
// it must decide exactly as the whole policy does, which TestPartialMatchesFull
// checks over a generated matrix of inputs, and which the first decisions of
// every residual check again at run time: a residual that ever disagrees is
// dropped and its decisions evaluated whole. An operation writ does not know is
// evaluated on the target's residual with the operation unknown.

// partialNamespace is where the residual's support rules live (data.writ_partial).
const partialNamespace = "writ_partial"

// maxResiduals bounds the residuals a policy keeps (each holds its own compiled
// rules, about 180 KB for the shipped policy); beyond it decisions evaluate the
// whole policy.
const maxResiduals = 256

// verifyDecisions is how many decisions of each residual are also evaluated on
// the whole policy and compared.
const verifyDecisions = 8

// unknownInput is every top-level member of the writ/v1 input but target, and
// but target and operation.
var unknownInput, unknownInputButOp = func() ([]*ast.Term, []*ast.Term) {
	var all, butOp []*ast.Term
	for _, k := range sectionsInput {
		if k == "target" {
			continue
		}
		t := ast.NewTerm(ast.InputRootRef.Append(ast.StringTerm(k)))
		all = append(all, t)
		if k != "operation" {
			butOp = append(butOp, t)
		}
	}
	return all, butOp
}()

// residualKey names a residual: a target digest and an operation ("" for the
// residual with the operation unknown).
type residualKey struct {
	target [32]byte
	op     string
}

// targetProgram is the residual of a target and an operation.
type targetProgram struct {
	once   sync.Once
	target InputTarget
	op     string
	prog   atomic.Pointer[program] // nil: evaluate the whole policy
	tv     ast.Value               // the target part of the input, converted once
	checks atomic.Int32
}

// targets holds a policy's residuals.
type targets struct {
	mu sync.Mutex
	m  map[residualKey]*targetProgram
}

// targetDigest identifies a target by its content.
func targetDigest(t *InputTarget) [32]byte { return digestOf("InputTarget", t, keyInputTarget) }

// forTarget returns the residual of the target and operation, building it on
// first use; nil when the policy keeps no more residuals.
func (p *Policy) forTarget(ctx context.Context, t *InputTarget, op string, log *slog.Logger) *targetProgram {
	if p.noPartial {
		return nil
	}
	if !task.Operation(op).Known() {
		op = "" // a residual is built per operation of task.Operations; any other uses the target's
	}
	k := residualKey{target: targetDigest(t), op: op}
	p.targets.mu.Lock()
	tp, ok := p.targets.m[k]
	if !ok {
		if len(p.targets.m) >= maxResiduals {
			p.targets.mu.Unlock()
			return nil
		}
		tp = &targetProgram{target: cloneInputTarget(t), op: op}
		tp.checks.Store(verifyDecisions)
		p.targets.m[k] = tp
	}
	p.targets.mu.Unlock()
	tp.once.Do(func() {
		tp.tv = pruned(&tp.target, p.shape["target"], valueInputTarget, fieldInputTarget)
		// Built once for every later decision: not bound to this request's context.
		prog, err := p.partial(context.WithoutCancel(ctx), &tp.target, op)
		if err != nil {
			if log == nil {
				log = slog.Default()
			}
			log.Warn("partial evaluation failed; the target is evaluated on the whole policy",
				"target", t.Name, "operation", op, "revision", p.Revision, "error", err)
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
		p.forTarget(ctx, &tp.target, tp.op, log)
	}
}

// Targets lists the targets this policy has built residuals for.
func (p *Policy) Targets() []InputTarget {
	p.targets.mu.Lock()
	defer p.targets.mu.Unlock()
	seen := map[[32]byte]bool{}
	var out []InputTarget
	for k, tp := range p.targets.m {
		if !seen[k.target] {
			seen[k.target] = true
			out = append(out, tp.target)
		}
	}
	slices.SortFunc(out, func(a, b InputTarget) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// partial evaluates the policy with input.target (and input.operation, unless op
// is "") known and compiles the residual: the queries become the bodies of
// data.writ_partial.result.__result__, beside the support rules, and the
// policy's own modules when the residual still refers to their rules.
func (p *Policy) partial(ctx context.Context, t *InputTarget, op string) (*program, error) {
	txn, err := p.store.NewTransaction(ctx)
	if err != nil {
		return nil, err
	}
	defer p.store.Abort(ctx, txn)
	known := ast.NewObject(item("target", valueInputTarget(t)))
	unknowns := unknownInput
	if op != "" {
		known.Insert(ast.StringTerm("operation"), ast.StringTerm(op))
		unknowns = unknownInputButOp
	}
	queries, support, err := topdown.NewQuery(p.full.query).WithCompiler(p.compiler).WithStore(p.store).
		WithTransaction(txn).WithInput(ast.NewTerm(known)).WithUnknowns(unknowns).
		WithPartialNamespace(partialNamespace).PartialRun(ctx)
	if err != nil {
		return nil, err
	}
	if len(queries) == 0 {
		return &program{undefined: true}, nil
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
	return &program{compiler: c, query: q}, nil
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
