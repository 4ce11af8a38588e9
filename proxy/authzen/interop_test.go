package authzen_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/writ-authz/writ/proxy/authzen"
)

// The AuthZEN interop scenarios' own vectors (testdata/authzen/interop,
// README there names their source), answered by writ with Rego packages of
// our own (testdata/authzen/policies).

// todoVectors is one decisions file of the Todo interop.
type todoVectors struct {
	Evaluation []struct {
		Request  map[string]any `json:"request"`
		Expected bool           `json:"expected"`
	} `json:"evaluation"`
	Evaluations []struct {
		Request  map[string]any   `json:"request"`
		Expected []authzen.Result `json:"expected"`
	} `json:"evaluations"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// truncated is what a batch answers under semantic when execute_all would
// answer all: up to and including the first deny (deny_on_first_deny) or
// the first permit (permit_on_first_permit).
func truncated(all []authzen.Result, semantic string) []authzen.Result {
	for i, r := range all {
		if (semantic == authzen.DenyOnFirstDeny && !r.Decision) || (semantic == authzen.PermitOnFirstPermit && r.Decision) {
			return all[:i+1]
		}
	}
	return all
}

// evaluationsOf posts a batch and returns its evaluations as JSON text.
func (w *world) evaluationsOf(path string, req map[string]any) string {
	w.t.Helper()
	a := w.post(path, req)
	if a.status != 200 || a.header.Get("Content-Type") != "application/json" {
		w.t.Fatalf("%d %s %s", a.status, a.header.Get("Content-Type"), a.body)
	}
	var out struct {
		Evaluations json.RawMessage `json:"evaluations"`
	}
	if err := json.Unmarshal(a.body, &out); err != nil {
		w.t.Fatal(err)
	}
	return string(out.Evaluations)
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestTodoInterop: every decision vector of the Todo interop (the three
// payload revisions of Authorization API 1.0), through the Access
// Evaluation API; then all of each file's evaluation vectors as one batch
// (and as batches per subject, the subject given once as the default)
// under each semantic, answered exactly as the interop runner compares
// them; then the Access Evaluations vectors under each semantic.
func TestTodoInterop(t *testing.T) {
	w := newWorld(t, nil)
	files, _ := filepath.Glob(filepath.Join(testdata, "interop", "todo", "decisions-authorization-api-1_0-*.json"))
	if len(files) != 3 {
		t.Fatalf("vector files: %v", files)
	}
	single, batched := 0, 0
	for _, f := range files {
		var v todoVectors
		readJSON(t, f, &v)
		name := filepath.Base(f)
		var want []authzen.Result
		var items []any
		bySubject := map[string][]int{}
		for i, vec := range v.Evaluation {
			a := w.post("/todo/access/v1/evaluation", vec.Request)
			if a.status != 200 || string(a.body) != jsonText(t, authzen.Result{Decision: vec.Expected}) {
				t.Errorf("%s evaluation %d %v: %d %s, want decision %v", name, i, vec.Request, a.status, a.body, vec.Expected)
			}
			single++
			want = append(want, authzen.Result{Decision: vec.Expected})
			items = append(items, vec.Request)
			sub := jsonText(t, vec.Request["subject"])
			bySubject[sub] = append(bySubject[sub], i)
		}
		for _, sem := range []string{authzen.ExecuteAll, authzen.DenyOnFirstDeny, authzen.PermitOnFirstPermit} {
			got := w.evaluationsOf("/todo/access/v1/evaluations", map[string]any{"evaluations": items,
				"options": map[string]any{"evaluations_semantic": sem}})
			if got != jsonText(t, truncated(want, sem)) {
				t.Errorf("%s as one batch, %s: %s\nwant %s", name, sem, got, jsonText(t, truncated(want, sem)))
			}
			batched++
			for sub, idx := range bySubject {
				var its []any
				var exp []authzen.Result
				for _, i := range idx {
					r := v.Evaluation[i].Request
					its = append(its, map[string]any{"action": r["action"], "resource": r["resource"]})
					exp = append(exp, want[i])
				}
				got := w.evaluationsOf("/todo/access/v1/evaluations", map[string]any{"subject": v.Evaluation[idx[0]].Request["subject"],
					"evaluations": its, "options": map[string]any{"evaluations_semantic": sem}})
				if got != jsonText(t, truncated(exp, sem)) {
					t.Errorf("%s for subject %s, %s: %s\nwant %s", name, sub, sem, got, jsonText(t, truncated(exp, sem)))
				}
				batched++
			}
		}
		for i, vec := range v.Evaluations {
			for _, sem := range []string{"", authzen.ExecuteAll, authzen.DenyOnFirstDeny, authzen.PermitOnFirstPermit} {
				req := vec.Request
				if sem != "" {
					req = map[string]any{}
					for k, x := range vec.Request {
						req[k] = x
					}
					req["options"] = map[string]any{"evaluations_semantic": sem}
				}
				want := vec.Expected
				if sem != "" {
					want = truncated(want, sem)
				}
				if got := w.evaluationsOf("/todo/access/v1/evaluations", req); got != jsonText(t, want) {
					t.Errorf("%s evaluations %d (%q): %s, want %s", name, i, sem, got, jsonText(t, want))
				}
				batched++
			}
		}
	}
	t.Logf("%d evaluation vectors, %d batches", single, batched)
	if single != 120 {
		t.Errorf("%d evaluation vectors, want the interop's 120", single)
	}
}

// searchVectors is one Search interop file.
type searchVectors struct {
	Evaluation []struct {
		Request  map[string]any `json:"request"`
		Expected struct {
			Results []map[string]any `json:"results"`
		} `json:"expected"`
	} `json:"evaluation"`
}

// sortedResults renders results in a fixed order, as the interop runner
// compares them (sorted, then equal).
func sortedResults(t *testing.T, rs []map[string]any) string {
	t.Helper()
	keys := make([]string, len(rs))
	for i, r := range rs {
		keys[i] = jsonText(t, r)
	}
	slices.Sort(keys)
	return "[" + strings.Join(keys, ",") + "]"
}

// TestSearchInterop: every vector of the Search interop (subject, resource
// and action search) answered exactly: the same results, nothing else in
// the response.
func TestSearchInterop(t *testing.T) {
	w := newWorld(t, nil)
	n := 0
	for _, kind := range authzen.SearchKinds {
		var v searchVectors
		readJSON(t, filepath.Join(testdata, "interop", "search", string(kind)+".json"), &v)
		if len(v.Evaluation) < 10 {
			t.Fatalf("%s: %d vectors", kind, len(v.Evaluation))
		}
		for i, vec := range v.Evaluation {
			a := w.post("/searchdemo/access/v1/search/"+string(kind), vec.Request)
			var got struct {
				Results []map[string]any `json:"results"`
			}
			if a.status != 200 || json.Unmarshal(a.body, &got) != nil {
				t.Fatalf("%s %d: %d %s", kind, i, a.status, a.body)
			}
			if m := a.json(t); len(m) != 1 {
				t.Errorf("%s %d: the response has more than results: %s", kind, i, a.body)
			}
			if g, e := sortedResults(t, got.Results), sortedResults(t, vec.Expected.Results); g != e {
				t.Errorf("%s %d %v:\n got %s\nwant %s", kind, i, vec.Request, g, e)
			}
			n++
		}
	}
	t.Logf("%d search vectors", n)
	if n != 198 {
		t.Errorf("%d search vectors, want the interop's 198", n)
	}
}

// TestInteropVectorsNamed: the vectors' README names where each file
// comes from, and every file is named there.
func TestInteropVectorsNamed(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testdata, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	files, _ := filepath.Glob(filepath.Join(testdata, "interop", "*", "*.json"))
	for _, f := range files {
		if rel := filepath.ToSlash(strings.TrimPrefix(f, testdata+string(filepath.Separator))); !strings.Contains(readme, rel) {
			t.Errorf("README.md does not name %s", rel)
		}
	}
	if !strings.Contains(readme, "openid/authzen") || len(files) != 6 {
		t.Errorf("README.md names no source, or the files are not the six vectors: %v", files)
	}
}
