package authz

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// appRego is an application package beside writ's decision: who may read
// what is data, and one rule errors on a bad input.
const appRego = `package app

default decision := false

decision if input.subject.id in data.app.readers[input.resource.id]

count_of := to_number(input.context.n)

candidates := [{"type": "user", "id": id} | some id in data.app.users]
`

const appData = `{"app": {"readers": {"doc-1": ["alice"]}, "users": ["alice", "bob"]}}`

// loadApp loads writ's shipped policy and the application, with opt.
func loadApp(t *testing.T, rego string, opt LoadOptions) (*Policy, error) {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "app.rego"), rego)
	writeFile(t, filepath.Join(dir, "data.json"), appData)
	return LoadPolicy(context.Background(), []string{shipped, dir}, opt)
}

func jsonInput(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestPrepareRule: a rule of the policy other than writ's decision is
// evaluated on an arbitrary input with the decision's discipline: compiled
// once per revision, the result cached by revision, rule and input, a
// reference the policy defines nothing at refused, a built-in's error an
// error (never a quiet undefined), and a Prepared bound to its revision
// across a reload.
func TestPrepareRule(t *testing.T) {
	p, err := loadApp(t, appRego, LoadOptions{Rules: []string{"data.app.decision"}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEngine(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q, err := e.Prepare("data.app.decision")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := e.Prepare("data.app.decision")
	if q.prog != again.prog {
		t.Errorf("the rule's query was compiled twice under one revision")
	}
	alice := jsonInput(t, `{"subject": {"type": "user", "id": "alice"}, "action": {"name": "read"}, "resource": {"type": "doc", "id": "doc-1"}}`)
	bob := jsonInput(t, `{"subject": {"type": "user", "id": "bob"}, "action": {"name": "read"}, "resource": {"type": "doc", "id": "doc-1"}}`)
	for _, c := range []struct {
		in   any
		want bool
	}{{alice, true}, {bob, false}, {alice, true}} {
		v, defined, err := q.Eval(ctx, c.in)
		if err != nil || !defined || v != c.want {
			t.Errorf("Eval = %v %v %v, want %v", v, defined, err, c.want)
		}
	}
	if hits, misses := e.RuleCacheStats(); hits != 1 || misses != 2 {
		t.Errorf("rule cache %d hits, %d misses; want 1 and 2", hits, misses)
	}
	list, _ := e.Prepare("data.app.candidates")
	if v, _, err := list.Eval(ctx, map[string]any{}); err != nil || len(v.([]any)) != 2 {
		t.Errorf("candidates = %v %v", v, err)
	}
	if _, err := e.Prepare("data.app.readers"); err != nil {
		t.Errorf("a data document is something the policy defines: %v", err)
	}
	for _, ref := range []string{"data.app.nothing", "data.other.decision"} {
		if _, err := e.Prepare(ref); !errors.Is(err, ErrNoRule) {
			t.Errorf("%s: %v, want ErrNoRule", ref, err)
		}
	}
	if _, err := e.Prepare("input.x"); err == nil || errors.Is(err, ErrNoRule) {
		t.Errorf("a reference outside data: %v", err)
	}
	bad, _ := e.Prepare("data.app.count_of")
	if _, _, err := bad.Eval(ctx, jsonInput(t, `{"context": {"n": "not a number"}}`)); err == nil {
		t.Errorf("a built-in's error was not an error")
	}
	// A reload: the old Prepared keeps its revision, a new one the new.
	p2, err := loadApp(t, strings.Replace(appRego, "default decision := false", "default decision := true", 1), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.Swap(p2)
	if v, _, _ := q.Eval(ctx, bob); v != false || q.Revision() != p.Revision {
		t.Errorf("the prepared rule moved to the new revision: %v %s", v, q.Revision())
	}
	q2, _ := e.Prepare("data.app.decision")
	if v, _, _ := q2.Eval(ctx, bob); v != true || q2.Revision() != p2.Revision {
		t.Errorf("the new revision's rule: %v %s", v, q2.Revision())
	}
}

// TestLoadRequiresNamedRules: a policy set that lacks a rule the
// configuration names (an AuthZEN application's decision) is refused at
// load, as a reload to it would be.
func TestLoadRequiresNamedRules(t *testing.T) {
	_, err := LoadPolicy(context.Background(), []string{shipped}, LoadOptions{Rules: []string{"data.app.decision"}})
	if err == nil || !strings.Contains(err.Error(), "data.app.decision") || !errors.Is(err, ErrNoRule) {
		t.Errorf("a set without the named rule: %v", err)
	}
}

// TestNondeterministicRulesNotCached: a policy that calls a
// nondeterministic built-in caches no rule result either.
func TestNondeterministicRulesNotCached(t *testing.T) {
	p, err := loadApp(t, appRego+"\nnow := time.now_ns()\n", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := NewEngine(p, Options{})
	q, _ := e.Prepare("data.app.decision")
	in := jsonInput(t, `{"subject": {"id": "alice"}, "resource": {"id": "doc-1"}}`)
	for range 3 {
		if _, _, err := q.Eval(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	if hits, misses := e.RuleCacheStats(); hits+misses != 0 {
		t.Errorf("cached: %d hits, %d misses", hits, misses)
	}
}
