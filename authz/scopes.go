package authz

import (
	"context"
	"sort"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
)

// requiredScopesQuery names the scopes each operation requires, as the
// shipped policy defines them (policies/scopes.rego: required_scopes, from
// data.writ.config.required_scopes or its defaults).
const requiredScopesQuery = "data.writ.authz.required_scopes"

// requiredScopes is a policy's answer to requiredScopesQuery, read once.
type requiredScopes struct {
	once sync.Once
	m    map[string][]string
}

// RequiredScopes is the scopes the serving policy requires for operation op
// (data.writ.authz.required_scopes[op]), sorted; nil when it requires none or
// defines no such rule. An egress call asks the STS for them: the authority
// the hop needs, not the caller's whole scope. Read once per policy.
func (e *Engine) RequiredScopes(op string) []string {
	p := e.policy.Load()
	p.required.once.Do(func() { p.required.m = p.readRequiredScopes() })
	return p.required.m[op]
}

// readRequiredScopes evaluates requiredScopesQuery; a policy that does not
// define it, or defines it in another shape, requires nothing that way.
func (p *Policy) readRequiredScopes() map[string][]string {
	body, err := decisionQuery(requiredScopesQuery)
	if err != nil {
		return nil
	}
	q, err := p.compiler.QueryCompiler().Compile(body)
	if err != nil {
		return nil // the policy has no such rule
	}
	v, err := p.run(context.Background(), &program{compiler: p.compiler, query: q}, ast.NewObject(), nil)
	if err != nil || v == nil {
		return nil
	}
	obj, ok := v.(ast.Object)
	if !ok {
		return nil
	}
	out := map[string][]string{}
	obj.Foreach(func(k, val *ast.Term) {
		op, ok := k.Value.(ast.String)
		if !ok {
			return
		}
		var scopes []string
		add := func(t *ast.Term) {
			if s, ok := t.Value.(ast.String); ok {
				scopes = append(scopes, string(s))
			}
		}
		switch list := val.Value.(type) {
		case *ast.Array:
			list.Foreach(add)
		case ast.Set:
			list.Foreach(add)
		}
		sort.Strings(scopes)
		out[string(op)] = scopes
	})
	return out
}
