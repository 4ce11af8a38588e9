package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The CLI tests run from the repository root, where config paths resolve.
func chdirRoot(t *testing.T) {
	t.Helper()
	wd, _ := os.Getwd()
	t.Chdir(filepath.Join(wd, "..", ".."))
}

func benchToken(t *testing.T) string {
	raw, err := os.ReadFile("testdata/identity/bench_token.txt")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(raw))
}

func TestPolicyTestCommand(t *testing.T) {
	chdirRoot(t)
	code, out, errOut := runCLI(t, "", "policy", "test", "policies")
	if code != 0 || !strings.Contains(out, "PASS: ") || strings.Contains(out, "FAIL") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	// A broken expectation fails with the test named.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "p.rego"), []byte("package x\n\nallow := false\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "p_test.rego"), []byte("package x\n\ntest_allow if allow\n"), 0o644)
	code, out, _ = runCLI(t, "", "policy", "test", dir)
	if code != 1 || !strings.Contains(out, "FAIL: data.x.test_allow") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

func TestValidateCommand(t *testing.T) {
	chdirRoot(t)
	code, out, errOut := runCLI(t, "", "validate", "-config", "testdata/config/seed.yaml")
	if code != 0 || !strings.Contains(out, "ok: testdata/config/seed.yaml: 3 agent(s), policies: policies (revision") ||
		!strings.Contains(errOut, "testdata/config/seed.yaml:33: warning: agents[2].security_schemes: [apikey]: the policy admits no caller to marketing-copy-agent") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	raw, _ := os.ReadFile("testdata/config/seed.yaml")
	os.WriteFile(bad, []byte(strings.Replace(string(raw), "max_data_classification: internal", "max_data_classification: secret", 1)), 0o644)
	code, _, errOut = runCLI(t, "", "validate", "-config", bad)
	if code != 1 || !strings.Contains(errOut, "agents[2].max_data_classification") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	// A policy directory with a syntax error: refused with the file named.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "p.rego"), []byte("package writ.authz\n\ndecision := {\n"), 0o644)
	withBadPolicy := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(withBadPolicy, []byte(strings.Replace(string(raw), "policies: [policies]", "policies: ["+dir+"]", 1)), 0o644)
	code, _, errOut = runCLI(t, "", "validate", "-config", withBadPolicy)
	if code != 1 || !strings.Contains(errOut, "p.rego") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
}

// TestEvalCommand: a real request, a real token, the shipped policy.
func TestEvalCommand(t *testing.T) {
	chdirRoot(t)
	req := "testdata/a2a/v1.0/jsonrpc/send.request.http"
	code, out, errOut := runCLI(t, "", "eval", "-config", "testdata/config/seed.yaml", "-request", req, "-token", benchToken(t))
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var got struct {
		Input    map[string]any `json:"input"`
		Decision struct {
			Allow   bool `json:"allow"`
			Denials []struct{ Code string }
		} `json:"decision"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	caller := got.Input["caller"].(map[string]any)
	if !got.Decision.Allow || caller["agent_id"] != "payments-investigator" || got.Input["version"] != "writ/v1" {
		t.Fatalf("%s", out)
	}
	// The same request to the KYC agent (by name): two denials, and -explain names
	// the rule files that fired.
	code, out, _ = runCLI(t, "", "eval", "-config", "testdata/config/seed.yaml", "-request", req, "-token", benchToken(t), "-agent", "kyc-refresh-agent", "-explain")
	if code != 1 || !strings.Contains(out, "TENANT_NOT_PERMITTED") || !strings.Contains(out, "CLASSIFICATION_EXCEEDED") ||
		!strings.Contains(out, "tenant.rego") || !strings.Contains(out, "classification.rego") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	// No token: anonymous, denied.
	code, out, _ = runCLI(t, "", "eval", "-config", "testdata/config/seed.yaml", "-request", req)
	if code != 1 || !strings.Contains(out, "UNAUTHENTICATED") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	// A caller file, unverified, for policy authors.
	callerFile := filepath.Join(t.TempDir(), "caller.json")
	os.WriteFile(callerFile, []byte(`{"authenticated":true,"method":"jwt","agent_id":"payments-investigator","tenant":"wholesale","scopes":["delegate"],"delegation_chain":["a","b","c","d"]}`), 0o644)
	code, out, _ = runCLI(t, "", "eval", "-config", "testdata/config/seed.yaml", "-request", req, "-caller", callerFile)
	if code != 1 || !strings.Contains(out, "DEPTH_EXCEEDED") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	// A bad token is reported, and the caller is anonymous.
	code, out, _ = runCLI(t, "", "eval", "-config", "testdata/config/seed.yaml", "-request", req, "-token", "eyJhbGciOiJub25lIn0.e30.")
	if code != 1 || !strings.Contains(out, "identity_error") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

// TestConfigFactsReachPolicies: a callback host the configuration allows for
// an agent (agents[].callback_hosts) is allowed by the shipped policy, which
// denies it without; the policy data file is unchanged.
func TestConfigFactsReachPolicies(t *testing.T) {
	chdirRoot(t)
	raw, err := os.ReadFile("testdata/a2a/v1.0/jsonrpc/send_push.request.http")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	req := filepath.Join(dir, "send.http")
	// Same length: the recorded Content-Length still holds.
	os.WriteFile(req, []byte(strings.Replace(string(raw), "https://agents.bank.ae/cb", "https://hooks.bank.xyz/cb", 1)), 0o644)
	seed, _ := os.ReadFile("testdata/config/seed.yaml")
	withHost := filepath.Join(dir, "c.yaml")
	os.WriteFile(withHost, []byte(strings.Replace(string(seed), "    security_schemes: [oauth2]\n",
		"    security_schemes: [oauth2]\n    callback_hosts: [hooks.bank.xyz]\n", 1)), 0o644)
	for cfg, want := range map[string]string{"testdata/config/seed.yaml": "CALLBACK_NOT_ALLOWED", withHost: ""} {
		code, out, errOut := runCLI(t, "", "eval", "-config", cfg, "-request", req, "-token", benchToken(t))
		if want == "" && (code != 0 || strings.Contains(out, "CALLBACK")) || want != "" && (code != 1 || !strings.Contains(out, want)) {
			t.Errorf("%s: exit %d\n%s\n%s", cfg, code, out, errOut)
		}
	}
}

// TestValidateRefusesAPolicyFailingKnownRequests: a policy set that compiles
// and has no tests but errors on every request (a built-in error in a deny
// rule) is refused, naming the known request it failed.
func TestValidateRefusesAPolicyFailingKnownRequests(t *testing.T) {
	chdirRoot(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "p.rego"), []byte(`package writ.authz

denials contains {"code": "X", "reason": "r"} if to_number(input.request.path) > 3

decision := {"allow": count(denials) == 0, "denials": denials}
`), 0o644)
	seed, _ := os.ReadFile("testdata/config/seed.yaml")
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(cfg, []byte(strings.Replace(string(seed), "policies: [policies]", "policies: ["+dir+"]", 1)), 0o644)
	code, out, errOut := runCLI(t, "", "validate", "-config", cfg)
	if code != 1 || !strings.Contains(errOut, "fails on a known request (a send to sanctions-screening-agent") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}
