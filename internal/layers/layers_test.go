// Package layers holds the test of writ's import graph: the seams DESIGN.md
// draws between the kernel, the adapters, the admission core and the
// observers, checked on what the packages really import.
package layers

import (
	"bytes"
	"encoding/json"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/writ-authz/writ"

type pkg struct {
	ImportPath string
	Deps       []string
}

// list returns every package of the module with its transitive dependencies.
func list(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps=false", "-json", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		deps[strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")] = p.Deps
	}
	return deps
}

// ours is the module's own packages among deps, relative to the module.
func ours(deps []string) []string {
	var out []string
	for _, d := range deps {
		if d == module || strings.HasPrefix(d, module+"/") {
			out = append(out, strings.TrimPrefix(strings.TrimPrefix(d, module), "/"))
		}
	}
	return out
}

func TestImportGraph(t *testing.T) {
	all := list(t)
	if len(all) < 20 {
		t.Fatalf("go list found %d packages", len(all))
	}
	rules := []struct {
		pkg     string
		allowed func(dep string) bool
		why     string
	}{
		{"task", func(string) bool { return false }, "the kernel imports nothing of writ"},
		{"task/lease", func(d string) bool { return d == "task" }, "the rhythm of durable work sits on the kernel's work queue, nothing else"},
		{"events", func(d string) bool { return d == "task" }, "events is a leaf: the kernel only"},
		{"adapters/names", func(string) bool { return false }, "the protocol names are a leaf: what config validates against without linking a parser"},
		{"authz/inputpaths", func(string) bool { return false }, "the policy input's member paths are a leaf: what config validates decision_log.mask against without linking the engine"},
		{"config", func(d string) bool { return d == "task" || d == "adapters/names" || d == "authz/inputpaths" },
			"config describes configuration, no decision code (and knows protocols, and the input's members, by name only)"},
		{"adapters/wire", func(d string) bool { return d == "task" || d == "internal/jsonkeys" }, "adapters sit on the kernel (and the JSON member scanner they share with identity)"},
		// Each protocol's package (adapters/a2a, adapters/acp, ...): see
		// TestProtocolsReachedThroughTheTable.
		{"adapters", func(d string) bool {
			return d == "task" || strings.HasPrefix(d, "adapters/") || d == "internal/jsonkeys"
		}, "adapters import nothing above them"},
		{"metrics", func(d string) bool { return d == "task" || d == "events" || d == "config" }, "an observer imports events, never the core"},
		{"internal/jsonstr", func(string) bool { return false }, "the JSON string escaper is a leaf: the encoders of the log and of the input share it"},
		{"decisionlog", func(d string) bool { return d == "task" || d == "events" || d == "config" || d == "internal/jsonstr" },
			"an observer imports events, never the core"},
		{"tracing", func(d string) bool { return d == "task" || d == "config" },
			"the tracer setup and the store's spans sit on config and the kernel: the core takes a trace.Tracer, never this package"},
		{"report", func(d string) bool {
			return d == "task" || d == "events" || d == "config" || d == "decisionlog" || d == "internal/jsonstr"
		}, "an observer imports events, never the core"},
		// OPA's plugins writ runs (status, decision-log upload): fed by
		// events and the assembly, never the core.
		{"fleet", func(d string) bool {
			return d == "task" || d == "events" || d == "config" || d == "decisionlog" || d == "metrics" || d == "internal/jsonstr"
		}, "an observer imports events, never the core"},
		// The token machinery of egress: it verifies with identity and
		// reports through events; the doors call it, never the reverse.
		{"authz/exchange", func(d string) bool {
			return d == "task" || d == "events" || d == "config" || d == "authz/identity" ||
				d == "authz/internal/segcache" || d == "internal/jsonkeys"
		}, "the exchange client sits on identity, config and events only"},
		// The replay of a decision log decides with the engine and reads
		// the log; it is no part of a running writ.
		{"replay", func(d string) bool {
			return d != "proxy" && !strings.HasPrefix(d, "proxy/") && d != "server" && d != "admin" && d != "metrics" &&
				(!strings.HasPrefix(d, "adapters") || d == "adapters/names")
		}, "the replay decides with the engine and reads the log: never the core, a door, an adapter or the assembly"},
		{"sts", func(d string) bool {
			return d == "task" || d == "config" || d == "authz/identity" || d == "authz/internal/segcache" ||
				d == "internal/jsonkeys" || d == "internal/devidp"
		}, "the STS is identity and a signing key, never writ's core"},
	}
	// A package that may import config may import what config imports
	// (the protocol names it validates against).
	configDeps := ours(all["config"])
	for _, r := range rules {
		deps, ok := all[r.pkg]
		if !ok {
			t.Errorf("package %s not found", r.pkg)
			continue
		}
		for _, d := range ours(deps) {
			if !r.allowed(d) && !(r.allowed("config") && slices.Contains(configDeps, d)) {
				t.Errorf("%s imports %s: %s", r.pkg, d, r.why)
			}
		}
	}
	// The decision engine (OPA) stays out of configuration and the observers.
	for _, p := range []string{"config", "events", "metrics", "decisionlog", "report", "task", "adapters", "adapters/names", "authz/inputpaths", "tracing"} {
		for _, d := range all[p] {
			if strings.HasPrefix(d, "github.com/open-policy-agent/") {
				t.Errorf("%s depends on %s", p, d)
				break
			}
		}
	}
}

// TestNoHTTPTestInProduct: a front door maps an Outcome; it never replays an
// HTTP handler through a recorder. httptest is for tests (and the test-only
// helpers under internal/).
func TestNoHTTPTestInProduct(t *testing.T) {
	root := "../.."
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if slices.Contains([]string{"testdata", "node_modules", ".git", "internal"}, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			if imp.Path.Value == `"net/http/httptest"` {
				t.Errorf("%s imports net/http/httptest", rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("only %d product files checked", checked)
	}
}
