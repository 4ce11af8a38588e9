package demo

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/writ-authz/writ/policies"
)

// TestAllowCallbacks patches the shipped data.json: the host lands on the
// tenant's callback list and allow_http_hosts as values, once, and nothing
// else changes.
func TestAllowCallbacks(t *testing.T) {
	shipped, err := policies.FS.ReadFile("data.json")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "data.json")
	if err := os.WriteFile(file, shipped, 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent
		if err := allowCallbacks(file, "wholesale", "127.0.0.1"); err != nil {
			t.Fatal(err)
		}
	}
	var before, after map[string]any
	patched, _ := os.ReadFile(file)
	if json.Unmarshal(shipped, &before) != nil || json.Unmarshal(patched, &after) != nil {
		t.Fatalf("not JSON:\n%s", patched)
	}
	cb := func(doc map[string]any) map[string]any {
		m, err := object(doc, "writ", "config", "callbacks")
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	list := func(v any) []string {
		var out []string
		for _, s := range v.([]any) {
			out = append(out, s.(string))
		}
		return out
	}
	tenants := cb(after)["tenants"].(map[string]any)
	if got := list(tenants["wholesale"]); !slices.Equal(got, []string{"agents.bank.ae", "127.0.0.1"}) {
		t.Errorf("wholesale callbacks %v", got)
	}
	if got := list(cb(after)["allow_http_hosts"]); !slices.Equal(got, []string{"127.0.0.1"}) {
		t.Errorf("allow_http_hosts %v", got)
	}
	// Put the shipped values back: the rest of the document is untouched.
	tenants["wholesale"] = cb(before)["tenants"].(map[string]any)["wholesale"]
	cb(after)["allow_http_hosts"] = cb(before)["allow_http_hosts"]
	a, _ := json.Marshal(after)
	b, _ := json.Marshal(before)
	if string(a) != string(b) {
		t.Errorf("the rest changed:\n%s\nwant\n%s", a, b)
	}
}

// TestAllowCallbacksShape: a data file of another shape is an error naming
// what is missing, and stays as it was.
func TestAllowCallbacksShape(t *testing.T) {
	for doc, want := range map[string]string{
		`{"writ": {"config": {}}}`: "writ.config.callbacks is not an object",
		`{"writ": {"config": {"callbacks": {"tenants": {}, "allow_http_hosts": []}}}}`:                 "writ.config.callbacks.tenants.wholesale is not a list",
		`{"writ": {"config": {"callbacks": {"tenants": {"wholesale": []}, "allow_http_hosts": "x"}}}}`: "writ.config.callbacks.allow_http_hosts is not a list",
		`not json`: "invalid character",
	} {
		file := filepath.Join(t.TempDir(), "data.json")
		if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		err := allowCallbacks(file, "wholesale", "127.0.0.1")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", doc, err, want)
		}
		if got, _ := os.ReadFile(file); string(got) != doc {
			t.Errorf("%s: the file changed to %s", doc, got)
		}
	}
}
