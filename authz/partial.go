package authz

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// A target agent's platform metadata is static (it comes from writ's config, never
// from the caller), so the policy is partially evaluated once per target: with
// input.target known and the rest of the input unknown, OPA folds every rule that
// only reads the target and data.writ.config into constants and leaves a residual
// program that evaluates the rest. The residual is built on a target's first
// decision under a policy revision (and again, ahead of the swap, on a reload);
// it must decide exactly as the whole policy does, which TestPartialMatchesFull
// checks over a generated matrix of inputs, and which the first decisions of
// every target check again at run time: a residual that ever disagrees is dropped
// and its target evaluated whole.

// partialNamespace is where the residual's support rules live (data.writ_partial).
const partialNamespace = "writ_partial"

// maxTargets bounds the residuals a policy keeps; beyond it targets evaluate the
// whole policy.
const maxTargets = 256

// verifyDecisions is how many decisions of each target are also evaluated on the
// whole policy and compared.
const verifyDecisions = 8

// unknownInput is every top-level key of the writ/v1 input but target.
var unknownInput = func() []*ast.Term {
	var out []*ast.Term
	for _, k := range []string{"version", "operation", "protocol", "caller", "task", "push", "request"} {
		out = append(out, ast.NewTerm(ast.InputRootRef.Append(ast.StringTerm(k))))
	}
	return out
}()

// targetProgram is a target's residual.
type targetProgram struct {
	once   sync.Once
	target InputTarget
	prog   atomic.Pointer[program] // nil: evaluate the whole policy
	tv     ast.Value               // the target part of the input, converted once
	checks atomic.Int32
}

// targets holds a policy's residuals by target digest.
type targets struct {
	mu sync.Mutex
	m  map[[32]byte]*targetProgram
}

// targetDigest identifies a target by its content.
func targetDigest(t *InputTarget) [32]byte {
	h := sha256.New()
	var n [4]byte
	w := func(s string) {
		binary.BigEndian.PutUint32(n[:], uint32(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	list := func(ss []string) {
		w(strconv.Itoa(len(ss)))
		for _, s := range ss {
			w(s)
		}
	}
	w(t.Name)
	w(t.Owner)
	list(t.Tenants)
	w(t.MaxClassification)
	list(t.SecuritySchemes)
	w(strconv.Itoa(len(t.Skills)))
	for _, s := range t.Skills {
		w(s.ID)
		list(s.Tags)
	}
	w(strconv.FormatBool(t.PushNotifications))
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// forTarget returns the target's residual, building it on first use; nil when
// the policy keeps no more residuals.
func (p *Policy) forTarget(ctx context.Context, t *InputTarget, log *slog.Logger) *targetProgram {
	if p.noPartial {
		return nil
	}
	d := targetDigest(t)
	p.targets.mu.Lock()
	tp, ok := p.targets.m[d]
	if !ok {
		if len(p.targets.m) >= maxTargets {
			p.targets.mu.Unlock()
			return nil
		}
		tp = &targetProgram{target: cloneTarget(t)}
		tp.checks.Store(verifyDecisions)
		p.targets.m[d] = tp
	}
	p.targets.mu.Unlock()
	tp.once.Do(func() {
		tp.tv = tp.target.pruned(p.shape["target"])
		// Built once for every later decision: not bound to this request's context.
		prog, err := p.partial(context.WithoutCancel(ctx), &tp.target)
		if err != nil {
			if log == nil {
				log = slog.Default()
			}
			log.Warn("partial evaluation failed; the target is evaluated on the whole policy",
				"target", t.Name, "revision", p.Revision, "error", err)
			return
		}
		tp.prog.Store(prog)
	})
	return tp
}

func cloneTarget(t *InputTarget) InputTarget {
	c := *t
	c.Tenants = slices.Clone(t.Tenants)
	c.SecuritySchemes = slices.Clone(t.SecuritySchemes)
	c.Skills = make([]InputSkill, len(t.Skills))
	for i, s := range t.Skills {
		c.Skills[i] = InputSkill{ID: s.ID, Tags: slices.Clone(s.Tags)}
	}
	return c
}

// Prepare builds the residuals of the given targets ahead of their first
// decision (the reloader passes the targets the previous revision served).
func (p *Policy) Prepare(ctx context.Context, ts []InputTarget, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	for i := range ts {
		p.forTarget(ctx, &ts[i], log)
	}
}

// Targets lists the targets this policy has a residual for (or tried to build).
func (p *Policy) Targets() []InputTarget {
	p.targets.mu.Lock()
	defer p.targets.mu.Unlock()
	out := make([]InputTarget, 0, len(p.targets.m))
	for _, tp := range p.targets.m {
		out = append(out, tp.target)
	}
	return out
}

// partial evaluates the policy with input.target known and compiles the
// residual: the queries become the bodies of data.writ_partial.__result__, the
// support rules join the policy's own modules.
func (p *Policy) partial(ctx context.Context, t *InputTarget) (*program, error) {
	txn, err := p.store.NewTransaction(ctx)
	if err != nil {
		return nil, err
	}
	defer p.store.Abort(ctx, txn)
	known := ast.NewObject(item("target", t.build()))
	queries, support, err := topdown.NewQuery(p.full.query).WithCompiler(p.compiler).WithStore(p.store).
		WithTransaction(txn).WithInput(ast.NewTerm(known)).WithUnknowns(unknownInput).
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
	for name, m := range p.modules {
		modules[name] = m
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
