package authz

import (
	"context"
	"strings"
	"testing"

	"github.com/writ-authz/writ/policies"
)

// TestLoadPolicyFS: the embedded policies load as a directory of them does
// (compiled, tests run), named embedded/<file>, with a revision that depends
// on their content alone (the same in every run).
func TestLoadPolicyFS(t *testing.T) {
	a, err := LoadPolicyFS(context.Background(), policies.FS, "embedded", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadPolicyFS(context.Background(), policies.FS, "embedded", LoadOptions{SkipTests: true})
	if err != nil {
		t.Fatal(err)
	}
	if a.Revision != b.Revision || a.Tests.Passed == 0 || len(a.Files) == 0 || !strings.HasPrefix(a.Files[0], "embedded/") {
		t.Fatalf("a %+v\nb %+v", a, b)
	}
	e, err := NewEngine(a, Options{CacheSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.Decide(context.Background(), BuildInput(facts(investigator, sanctions)))
	if err != nil || !d.Allow {
		t.Fatalf("the shipped decision on the seed's delegation: %+v %v", d, err)
	}
}
