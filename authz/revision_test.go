package authz

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/writ-authz/writ/policies"
)

// TestRevisionIsAContentDigest: the same files give the same revision
// wherever they live (two directories, the files listed one by one as a
// ConfigMap mount lists them, the set embedded in the binary), so a reload to
// the same content from another directory changes nothing; an edit, and a
// data file moved to another place in data, are new revisions.
func TestRevisionIsAContentDigest(t *testing.T) {
	ctx := context.Background()
	load := func(paths ...string) *Policy {
		t.Helper()
		p, err := LoadPolicy(ctx, paths, LoadOptions{SkipTests: true})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := copyPolicies(t), copyPolicies(t)
	revA := load(a).Revision
	if revB := load(b).Revision; revB != revA {
		t.Errorf("two copies of the same files: revisions %s and %s", revA, revB)
	}
	entries, err := os.ReadDir(b)
	if err != nil {
		t.Fatal(err)
	}
	var each []string
	for _, e := range entries {
		each = append(each, filepath.Join(b, e.Name()))
	}
	if rev := load(each...).Revision; rev != revA {
		t.Errorf("the files listed one by one: revision %s, the directory %s", rev, revA)
	}
	embedded, err := LoadPolicyFS(ctx, policies.FS, "embedded", LoadOptions{SkipTests: true})
	if err != nil {
		t.Fatal(err)
	}
	if embedded.Revision != revA {
		t.Errorf("the embedded set: revision %s, the same files on disk %s", embedded.Revision, revA)
	}

	// A reload from another directory with the same content: no new revision.
	e, err := NewEngine(load(a), Options{})
	if err != nil {
		t.Fatal(err)
	}
	served := e.Policy()
	if err := NewReloader(e, []string{b}, LoadOptions{SkipTests: true}, nil).Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if e.Policy() != served {
		t.Error("a reload to the same content from another directory swapped in a new policy")
	}

	setData(t, b, `"ownership": "agent"`, `"ownership": "tenant"`)
	if rev := load(b).Revision; rev == revA {
		t.Error("an edit kept the revision")
	}
	// data.json one directory down is data.sub.writ..., another document.
	c := copyPolicies(t)
	if err := os.Mkdir(filepath.Join(c, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(c, "data.json"), filepath.Join(c, "sub", "data.json")); err != nil {
		t.Fatal(err)
	}
	if rev := load(c).Revision; rev == revA {
		t.Error("a data file moved to another place in data kept the revision")
	}
}
