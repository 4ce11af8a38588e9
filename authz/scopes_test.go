package authz

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestRequiredScopes: the scopes an egress call asks for are what the
// serving policy requires of the operation: the shipped defaults, the data's
// override, nothing for a policy without the rule.
func TestRequiredScopes(t *testing.T) {
	e, err := NewEngine(loadShipped(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.RequiredScopes("send"); !slices.Equal(got, []string{"delegate"}) {
		t.Fatalf("send: %v", got)
	}
	if got := e.RequiredScopes("get"); got != nil {
		t.Fatalf("get: %v", got)
	}
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("p.rego", "package writ.authz\n\ndecision := {\"allow\": true, \"denials\": []}\n")
	p, err := LoadPolicy(context.Background(), []string{dir}, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.Swap(p)
	if got := e.RequiredScopes("send"); got != nil {
		t.Fatalf("a policy without required_scopes: %v", got)
	}
	write("q.rego", "package writ.authz\n\nrequired_scopes := {\"send\": [\"pay\", \"delegate\"]}\n")
	p, err = LoadPolicy(context.Background(), []string{dir}, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.Swap(p)
	if got := e.RequiredScopes("send"); !slices.Equal(got, []string{"delegate", "pay"}) {
		t.Fatalf("a policy's own rule: %v", got)
	}
}
