package authzen

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
)

// application is a Rego package of the policy set served as a decision
// point of its own: the AuthZEN request itself is its input. Its contract
// (docs/authzen.md):
//
//   - data.<package>.decision answers an evaluation: a boolean, or an object
//     {"decision": bool, "context": {...}} whose context the enforcement
//     point receives as is. Undefined denies.
//   - data.<package>.subjects, .resources and .actions, where defined, are
//     the candidates of a search (a set or array of entities: {type, id,
//     properties?}, actions {name, properties?}), each then evaluated
//     through decision; the permitted ones are the results, as listed. A
//     search the package lists no candidates for is not offered.
type application struct {
	name string
	// pkg is the package's data reference (data.todo).
	pkg   string
	rules Rules
	log   *slog.Logger
}

// candidateRules name the rules that list a search's candidates.
var candidateRules = map[searchKind]string{searchSubject: "subjects", searchResource: "resources", searchAction: "actions"}

func (a *application) begin() (evaluator, error) {
	d, err := a.rules.Prepare(a.pkg + ".decision")
	if err != nil {
		return nil, fmt.Errorf("application %s: %w", a.name, err)
	}
	return &appEval{a: a, decision: d}, nil
}

func (a *application) searches(kind searchKind) bool {
	_, err := a.rules.Prepare(a.pkg + "." + candidateRules[kind])
	return err == nil
}

// appEval decides one request's evaluations on one prepared decision.
type appEval struct {
	a        *application
	decision Rule
}

func (e *appEval) evaluate(ctx context.Context, q *query) result {
	v, defined, err := e.decision.Eval(ctx, q.input())
	if err != nil {
		return failure(http.StatusInternalServerError, "the policy could not decide", fmt.Errorf("%s.decision: %w", e.a.pkg, err))
	}
	if !defined {
		return result{} // undefined denies: fail closed
	}
	switch d := v.(type) {
	case bool:
		return result{Decision: d}
	case map[string]any:
		allow, ok := d["decision"].(bool)
		if !ok {
			return failure(http.StatusInternalServerError, "the policy could not decide",
				fmt.Errorf("%s.decision has no boolean \"decision\"", e.a.pkg))
		}
		r := result{Decision: allow}
		if c, ok := d["context"]; ok && c != nil {
			obj, ok := c.(map[string]any)
			if !ok {
				return failure(http.StatusInternalServerError, "the policy could not decide",
					fmt.Errorf("%s.decision's context is not an object", e.a.pkg))
			}
			r.Context = obj
		}
		return r
	}
	return failure(http.StatusInternalServerError, "the policy could not decide",
		fmt.Errorf("%s.decision is %T, neither a boolean nor an object", e.a.pkg, v))
}

func (e *appEval) candidates(ctx context.Context, kind searchKind, q *query) ([]map[string]any, error) {
	ref := e.a.pkg + "." + candidateRules[kind]
	rule, err := e.a.rules.Prepare(ref)
	if err != nil {
		return nil, err
	}
	v, defined, err := rule.Eval(ctx, q.input())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	if !defined {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s is %T, not a set or array of entities", ref, v)
	}
	out := make([]map[string]any, 0, len(list))
	for _, item := range list {
		obj, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s lists %v, not an entity", ref, item)
		}
		out = append(out, obj)
	}
	return out, nil
}
