package authz

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/fstest"
)

// sourceSet is a one-module set whose decision denies with code.
func sourceSet(code string) fstest.MapFS {
	return fstest.MapFS{"writ/authz/p.rego": &fstest.MapFile{Data: []byte(`package writ.authz

decision := {"allow": false, "denials": [{"code": "` + code + `", "reason": "r"}]}
`)}}
}

// TestSourceReloader: a reloader over a source (a bundle's) swaps in what
// the source loads, with the bundle revision folded into the revision, and
// a source error is a refused reload: counted, the last good kept.
func TestSourceReloader(t *testing.T) {
	ctx := context.Background()
	p, err := LoadPolicyFS(ctx, sourceSet("a"), "bundle", LoadOptions{BundleRevision: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	if p.BundleRevision != "v1" || !strings.HasSuffix(p.Revision, "@v1") {
		t.Fatalf("revision %q bundle %q", p.Revision, p.BundleRevision)
	}
	e, err := NewEngine(p, Options{CacheSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	var next func(context.Context, LoadOptions) (*Policy, error)
	r := NewSourceReloader(e, func(ctx context.Context, opt LoadOptions) (*Policy, error) { return next(ctx, opt) }, LoadOptions{}, nil)
	next = func(ctx context.Context, opt LoadOptions) (*Policy, error) {
		opt.BundleRevision = "v2"
		return LoadPolicyFS(ctx, sourceSet("b"), "bundle", opt)
	}
	if err := r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	good := e.Revision()
	if !strings.HasSuffix(good, "@v2") || good == p.Revision {
		t.Fatalf("after reload %q", good)
	}
	next = func(context.Context, LoadOptions) (*Policy, error) { return nil, errors.New("bad signature") }
	if err := r.Reload(ctx); err == nil {
		t.Fatal("a source error reloaded")
	}
	if ok, failed := r.Counts(); ok != 1 || failed != 1 || e.Revision() != good || r.Last().OK {
		t.Errorf("counts %d/%d, revision %q (want %q), last %+v", ok, failed, e.Revision(), good, r.Last())
	}
	if err := r.Watch(ctx); err != nil {
		t.Errorf("Watch of a source: %v", err)
	}
}
