package authz

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// brokenDeny has a deny rule whose built-in errors on every request
// (to_number of a path): not strict, the rule would just not fire and every
// request would be allowed.
const brokenDeny = `package writ.authz

denials contains {"code": "TOO_DEEP", "reason": "r"} if to_number(input.request.path) > 3

decision := {"allow": count(denials) == 0, "denials": denials}
`

// TestBuiltinErrorsDeny: a built-in error in a deny rule fails the decision
// (POLICY_ERROR, denied), instead of leaving the rule unfired.
func TestBuiltinErrorsDeny(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "p.rego"), brokenDeny)
	for _, opt := range []LoadOptions{{}, {NoPartial: true}} {
		p, err := LoadPolicy(context.Background(), []string{dir}, opt)
		if err != nil {
			t.Fatal(err)
		}
		e, _ := NewEngine(p, Options{CacheSize: -1})
		d, err := e.Decide(context.Background(), BuildInput(facts(investigator, sanctions)))
		if err == nil || d.Allow || !slices.Equal(codes(d), []string{PolicyErrorCode}) || !strings.Contains(err.Error(), "to_number") {
			t.Fatalf("partial %v: %+v %v", !opt.NoPartial, d, err)
		}
	}
}

// TestSmokeGate: a set that compiles and has no tests but errors on a known
// request is refused at load and on reload (the last good policy keeps
// serving); without known requests it would have loaded.
func TestSmokeGate(t *testing.T) {
	smoke := []Smoke{{Name: "sanctions-screening-agent, jwt caller", Input: BuildInput(facts(investigator, sanctions))}}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "p.rego"), brokenDeny)
	if _, err := LoadPolicy(context.Background(), []string{dir}, LoadOptions{}); err != nil {
		t.Fatalf("without known requests the set loads: %v", err)
	}
	_, err := LoadPolicy(context.Background(), []string{dir}, LoadOptions{Smoke: smoke})
	if err == nil || !strings.Contains(err.Error(), "sanctions-screening-agent, jwt caller") {
		t.Fatalf("load: %v", err)
	}
	good := copyPolicies(t)
	p, err := LoadPolicy(context.Background(), []string{good}, LoadOptions{Smoke: smoke, SkipTests: true})
	if err != nil {
		t.Fatalf("the shipped set fails its smoke test: %v", err)
	}
	e, _ := NewEngine(p, Options{})
	r := NewReloader(e, []string{good}, LoadOptions{Smoke: smoke, SkipTests: true}, nil)
	writeFile(t, filepath.Join(good, "decision.rego"), brokenDeny)
	if err := r.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), "fails on a known request") {
		t.Fatalf("reload: %v", err)
	}
	if e.Policy().Revision != p.Revision {
		t.Fatal("a set failing its smoke test was swapped in")
	}
}
