package layers

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// vocabulary is what only adapters/ may spell: the name of every protocol
// in the table, and the headers of each that are its own (what its edge
// reads, negotiates, or sends with a notification), read from the table so
// that a new protocol's vocabulary is forbidden here without an edit.
func vocabulary(t *testing.T) (protocols, headers []string) {
	t.Helper()
	// Headers that are HTTP's or writ's own, which every protocol may read.
	generic := []string{"Content-Type", "Authorization", wire.ClassificationHeader}
	for _, p := range adapters.Protocols() {
		protocols = append(protocols, p.Name)
		hs := append(p.DecisionHeaders(), p.NegotiationHeaders()...)
		if push, ok := p.Edge(adapters.RouteOptions{}).(adapters.Push); ok {
			for h := range push.NotificationHeaders(task.PushConfig{Token: "t", AuthScheme: "Bearer", Credentials: "c"}) {
				hs = append(hs, h)
			}
		}
		for _, h := range hs {
			same := func(o string) bool { return strings.EqualFold(o, h) }
			if !slices.ContainsFunc(generic, same) && !slices.ContainsFunc(headers, same) {
				headers = append(headers, h)
			}
		}
	}
	if len(protocols) < 2 || len(headers) < 3 {
		t.Fatalf("the table names %v and headers %v: too few for this test to mean anything", protocols, headers)
	}
	return protocols, headers
}

// spells reports what of the vocabulary a Go string literal spells: a
// protocol name (the whole literal), every protocol's name in one literal
// (a list of them, which goes stale when a protocol is added), or a
// protocol's header (anywhere in it, in any case). Prose that mentions a
// protocol ("the A2A SDK") is not vocabulary.
func spells(lit string, protocols, headers []string) string {
	if slices.ContainsFunc(protocols, func(p string) bool { return strings.EqualFold(strings.TrimSpace(lit), p) }) {
		return "the protocol name " + strconv.Quote(lit)
	}
	tokens := strings.FieldsFunc(lit, func(r rune) bool { return !('a' <= r && r <= 'z' || '0' <= r && r <= '9') })
	if !slices.ContainsFunc(protocols, func(p string) bool { return !slices.Contains(tokens, p) }) {
		return "the list of protocols"
	}
	lower := strings.ToLower(lit)
	for _, h := range headers {
		if strings.Contains(lower, strings.ToLower(h)) {
			return "the header " + h
		}
	}
	return ""
}

// allowedVocabulary is where outside adapters/ a literal may spell the
// vocabulary (the file, and text the literal holds), and why. Each entry
// must still be needed: one that matches nothing fails.
var allowedVocabulary = []struct{ file, holds, why string }{
	{"cmd/writ/inspect.go", "-header 'A2A-Version: 1.0'", "its help shows people an example command that sends an A2A 1.0 request"},
	{"internal/proxytest/agents.go", "a2a", "the shared test harness's fake agents are A2A agents, configured as the tests that drive them expect"},
	{"internal/proxytest/harness.go", "A2A-Version", "the shared test harness is an A2A client: it sends the version the test names"},
}

// TestNoProtocolVocabularyOutsideAdapters: no string literal in a non-test
// Go file outside adapters/ spells a protocol's name or its headers. The
// core, the configuration, the doors and the observers know protocols only
// through the table (adapters.Protocols): a protocol added to the table
// needs no edit elsewhere, and one whose vocabulary is spelled elsewhere is
// a switch the table does not see.
func TestNoProtocolVocabularyOutsideAdapters(t *testing.T) {
	protocols, headers := vocabulary(t)
	root := "../.."
	fset := token.NewFileSet()
	used := map[int]bool{}
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "adapters" || slices.Contains([]string{"testdata", "node_modules", ".git"}, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		imports := map[*ast.BasicLit]bool{}
		namesPkg := ""
		for _, im := range f.Imports {
			imports[im.Path] = true
			if im.Path.Value == strconv.Quote(module+"/adapters/names") {
				namesPkg = "names"
				if im.Name != nil {
					namesPkg = im.Name.Name
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok && namesPkg != "" {
				// The names are the table's: only adapters.Register adds one.
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Add" {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == namesPkg {
						t.Errorf("%s:%d adds a protocol name: only adapters.Register does, with the protocol", rel, fset.Position(call.Pos()).Line)
					}
				}
			}
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING || imports[lit] {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Errorf("%s: %v", fset.Position(lit.Pos()), err)
				return true
			}
			what := spells(s, protocols, headers)
			allowed := slices.IndexFunc(allowedVocabulary, func(a struct{ file, holds, why string }) bool {
				return a.file == rel && strings.Contains(s, a.holds)
			})
			switch {
			case what == "":
			case allowed >= 0:
				used[allowed] = true
			default:
				pos := fset.Position(lit.Pos())
				if len(s) > 60 {
					s = s[:60] + "..."
				}
				t.Errorf("%s:%d %q spells %s: only adapters/ may (reach it through the protocol table)", rel, pos.Line, s, what)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d files checked", checked)
	}
	for i, a := range allowedVocabulary {
		if !used[i] {
			t.Errorf("%s may spell protocol vocabulary in %q (%s) but no longer does: drop the entry", a.file, a.holds, a.why)
		}
	}
}

// TestSpells: the matcher finds what it is for and leaves prose alone.
func TestSpells(t *testing.T) {
	protocols, headers := []string{"a2a", "acp"}, []string{"A2A-Version", "X-A2A-Extensions"}
	for lit, want := range map[string]bool{
		"a2a": true, " ACP ": true, "a2a, acp or auto": true, "x-a2a-extensions": true, "A2A-Version: 1.0": true,
		"the A2A SDK": false, "a2a-gateway": false, "@a2a-js/sdk": false, "Content-Type": false, "acp only": false,
	} {
		if got := spells(lit, protocols, headers) != ""; got != want {
			t.Errorf("spells(%q) = %v, want %v", lit, got, want)
		}
	}
}

// TestProtocolsReachedThroughTheTable: a protocol's package (adapters/a2a,
// adapters/acp: what package adapters imports besides the shared wire and
// names) sees the kernel and wire only, and is imported by adapters/ alone;
// everyone else reaches a protocol through the table. The exceptions say
// why.
func TestProtocolsReachedThroughTheTable(t *testing.T) {
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		imports[strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")] = ours(p.Imports)
	}
	var protocolPkgs []string
	for _, d := range imports["adapters"] {
		if strings.HasPrefix(d, "adapters/") && d != "adapters/wire" && d != "adapters/names" {
			protocolPkgs = append(protocolPkgs, d)
		}
	}
	if len(protocolPkgs) < 2 {
		t.Fatalf("package adapters imports the protocols %v: too few for this test to mean anything", protocolPkgs)
	}
	deps := list(t)
	for _, p := range protocolPkgs {
		for _, d := range ours(deps[p]) {
			// A protocol's own packages (its generated wire types) are its.
			if d != "task" && d != "adapters/wire" && d != "internal/jsonkeys" && !strings.HasPrefix(d, p+"/") {
				t.Errorf("%s imports %s: a protocol's adapter sees the kernel and wire only", p, d)
			}
		}
	}
	allowed := map[string]string{
		"internal/demo": "the demo narrates what an A2A client reads (adapters/a2a's error codes and task parser)",
		"bench/report":  "the benchmark report names the function it profiles (adapters/a2a.Parse)",
	}
	for pkg, deps := range imports {
		if pkg == "adapters" || strings.HasPrefix(pkg, "adapters/") || allowed[pkg] != "" {
			continue
		}
		for _, d := range deps {
			if slices.ContainsFunc(protocolPkgs, func(p string) bool { return d == p || strings.HasPrefix(d, p+"/") }) {
				t.Errorf("%s imports %s: only adapters/ imports a protocol; reach it through the table (adapters.Protocols, Route)", pkg, d)
			}
		}
	}
	for pkg, why := range allowed {
		if !slices.ContainsFunc(imports[pkg], func(d string) bool { return slices.Contains(protocolPkgs, d) }) {
			t.Errorf("%s may import a protocol (%s) but no longer does: drop the exception", pkg, why)
		}
	}
}
