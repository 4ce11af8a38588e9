package authz

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage"
)

// Rules of the policy set other than writ's decision: a package that
// answers some other application's questions on an input of its own (an
// AuthZEN application, proxy/authzen), evaluated with the discipline of
// writ's own decisions. The query of a rule is compiled once per policy
// revision and kept with it (a reload compiles a new one, on first use);
// results are cached by revision, rule and input in a bounded cache of
// their own (the decision cache's bounds), unless the policy calls a
// nondeterministic built-in; built-in errors fail the evaluation; a
// cancelled request stops it.

// ErrNoRule is returned by Prepare for a reference the serving policy
// defines nothing at: no rule, and no data document.
var ErrNoRule = errors.New("the policy defines nothing at this reference")

// maxRules bounds the rule queries one policy compiles (the references come
// from writ's configuration: a handful per application).
const maxRules = 256

// ruleQueries are a policy's compiled rule queries, by reference.
type ruleQueries struct {
	mu sync.Mutex
	m  map[string]*ruleQuery
}

// ruleQuery is one reference's compiled query, or why there is none.
type ruleQuery struct {
	prog *program
	err  error
}

// Prepared is one rule of one policy revision, compiled: every Eval of it
// runs that query on that revision, whatever reloads happen meanwhile, so a
// batch evaluated through one Prepared is decided by one policy. It is safe
// for concurrent use.
type Prepared struct {
	e    *Engine
	p    *Policy
	ref  string
	prog *program
}

// Prepare binds the rule at ref (a data reference: "data.todo.decision") to
// the serving policy, compiling its query on the revision's first use of
// it. It fails with ErrNoRule when the policy defines nothing there.
func (e *Engine) Prepare(ref string) (*Prepared, error) {
	p := e.policy.Load()
	prog, err := p.rule(ref)
	if err != nil {
		return nil, err
	}
	return &Prepared{e: e, p: p, ref: ref, prog: prog}, nil
}

// Revision is the policy revision the rule was prepared under.
func (q *Prepared) Revision() string { return q.p.Revision }

// Eval evaluates the rule on input, a JSON value as encoding/json decodes
// one into an any (maps, slices, strings, json.Number or float64, bools,
// nil). It returns the rule's value in the same form, and defined false
// when the rule is undefined for this input. An error (a built-in that
// failed, a rule with two values, a cancelled context) is the caller's to
// fail closed on.
func (q *Prepared) Eval(ctx context.Context, input any) (value any, defined bool, err error) {
	e, p := q.e, q.p
	raw, err := json.Marshal(input)
	if err != nil {
		return nil, false, fmt.Errorf("rule input: %w", err)
	}
	cache := e.rules != nil && !p.reads.nondeterministic
	var key [32]byte
	if cache {
		key = ruleKey(p.Revision, q.ref, raw)
		if r, ok := e.rules.Get(key); ok {
			e.ruleHits.Add(1)
			return r.result()
		}
		e.ruleMisses.Add(1)
	}
	in, err := ast.InterfaceToValue(input)
	if err != nil {
		return nil, false, fmt.Errorf("rule input: %w", err)
	}
	v, err := p.run(ctx, q.prog, in, nil)
	if err != nil {
		return nil, false, err
	}
	if cache {
		e.rules.Add(key, ruleResult{v: v})
	}
	return ruleResult{v: v}.result()
}

// RuleCacheStats returns the rule-result cache's hit and miss counts.
func (e *Engine) RuleCacheStats() (hits, misses uint64) {
	return e.ruleHits.Load(), e.ruleMisses.Load()
}

// ruleResult is one cached evaluation: the rule's value, nil when undefined.
type ruleResult struct{ v ast.Value }

func (r ruleResult) result() (any, bool, error) {
	if r.v == nil {
		return nil, false, nil
	}
	out, err := ast.JSON(r.v)
	if err != nil {
		return nil, false, fmt.Errorf("rule value: %w", err)
	}
	return out, true, nil
}

// ruleResultBytes estimates the heap of a cached result.
func ruleResultBytes(r ruleResult) int {
	if r.v == nil {
		return 128
	}
	return 128 + valueBytes(r.v)
}

// ruleKey is the cache key of one evaluation: the revision, the rule and
// the input's JSON form (encoding/json sorts object keys, so equal inputs
// have one form; two forms of one value are a miss, never a wrong hit).
func ruleKey(revision, ref string, input []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte("writ/rule\x00"))
	h.Write([]byte(revision))
	h.Write([]byte{0})
	h.Write([]byte(ref))
	h.Write([]byte{0})
	h.Write(input)
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// rule is the compiled query of the rule at ref, compiled on first use.
func (p *Policy) rule(ref string) (*program, error) {
	p.rules.mu.Lock()
	defer p.rules.mu.Unlock()
	if q, ok := p.rules.m[ref]; ok {
		return q.prog, q.err
	}
	if len(p.rules.m) >= maxRules {
		return nil, fmt.Errorf("rule %s: the policy already compiled %d rule queries", ref, maxRules)
	}
	prog, err := p.compileRule(ref)
	if p.rules.m == nil {
		p.rules.m = map[string]*ruleQuery{}
	}
	p.rules.m[ref] = &ruleQuery{prog: prog, err: err}
	return prog, err
}

// compileRule compiles `decision = <ref>` against the policy, after checking
// that the policy defines something at ref.
func (p *Policy) compileRule(ref string) (*program, error) {
	body, err := decisionQuery(ref)
	if err != nil {
		return nil, err
	}
	r, err := ast.ParseRef(ref)
	if err != nil || !r.HasPrefix(ast.DefaultRootRef) || !r.IsGround() {
		return nil, fmt.Errorf("rule %q: want a data reference such as data.todo.decision", ref)
	}
	ok, err := p.defines(r)
	if err != nil {
		return nil, fmt.Errorf("rule %s: %w", ref, err)
	}
	if !ok {
		return nil, fmt.Errorf("rule %s: %w", ref, ErrNoRule)
	}
	q, err := p.compiler.QueryCompiler().Compile(body)
	if err != nil {
		return nil, fmt.Errorf("compiling the query of rule %s: %w", ref, err)
	}
	return &program{compiler: p.compiler, query: q}, nil
}

// defines reports whether the policy has a rule at (or under, or above) r,
// or a data document at r.
func (p *Policy) defines(r ast.Ref) (bool, error) {
	if len(p.compiler.GetRules(r)) > 0 {
		return true, nil
	}
	path, err := storage.NewPathForRef(r)
	if err != nil {
		return false, err
	}
	ctx := context.Background()
	txn, err := p.store.NewTransaction(ctx)
	if err != nil {
		return false, err
	}
	defer p.store.Abort(ctx, txn)
	if _, err := p.store.Read(ctx, txn, path); err != nil {
		if storage.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}
