package authz

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestConfigMapLayout: a policy directory laid out as Kubernetes mounts a
// ConfigMap (..data and a timestamped directory beside links) loads each file
// once; a cancelled load is refused, never accepted untested.
func TestConfigMapLayout(t *testing.T) {
	src := copyPolicies(t)
	dir := t.TempDir()
	stamp := filepath.Join(dir, "..2026_11_30_07_00_00.000000001")
	if err := os.Mkdir(stamp, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		raw, _ := os.ReadFile(filepath.Join(src, e.Name()))
		os.WriteFile(filepath.Join(stamp, e.Name()), raw, 0o644)
	}
	if err := os.Symlink(filepath.Base(stamp), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.Symlink(filepath.Join("..data", e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	p, err := LoadPolicy(context.Background(), []string{dir}, LoadOptions{})
	if err != nil {
		t.Fatalf("ConfigMap layout: %v", err)
	}
	want := 0
	for _, e := range entries {
		if ext := filepath.Ext(e.Name()); ext == ".rego" || ext == ".json" {
			want++
		}
	}
	if len(p.Files) != want || p.Tests.Passed == 0 {
		t.Fatalf("files %d (want %d), tests %+v", len(p.Files), want, p.Tests)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := LoadPolicy(ctx, []string{src}, LoadOptions{}); err == nil {
		t.Fatal("a cancelled load was accepted")
	}
}
