package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
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
	raw := seedYAML(t)
	os.WriteFile(bad, []byte(strings.Replace(raw, "max_data_classification: internal", "max_data_classification: secret", 1)), 0o644)
	code, _, errOut = runCLI(t, "", "validate", "-config", bad)
	if code != 1 || !strings.Contains(errOut, "agents[2].max_data_classification") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	// A policy directory with a syntax error: refused with the file named.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "p.rego"), []byte("package writ.authz\n\ndecision := {\n"), 0o644)
	withBadPolicy := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(withBadPolicy, []byte(strings.Replace(raw, seedPolicies(t), "policies: ["+dir+"]", 1)), 0o644)
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
	seed := seedYAML(t)
	withHost := filepath.Join(dir, "c.yaml")
	os.WriteFile(withHost, []byte(strings.Replace(seed, "    security_schemes: [oauth2]\n",
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
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(cfg, []byte(strings.Replace(seedYAML(t), seedPolicies(t), "policies: ["+dir+"]", 1)), 0o644)
	code, out, errOut := runCLI(t, "", "validate", "-config", cfg)
	if code != 1 || !strings.Contains(errOut, "fails on a known request (a send to sanctions-screening-agent") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestPolicyTestShowsWhatFailed: a failed test names the expression it
// failed at, and shows what it expected and what came out: what a test in
// the shipped form (expect) printed, else the failed expression drawn with
// the values of its parts.
func TestPolicyTestShowsWhatFailed(t *testing.T) {
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "p.rego"), "package x\n\ncodes := [\"DEPTH_EXCEEDED\"]\n")
	writeTestFile(t, filepath.Join(dir, "p_test.rego"), `package x_test

import data.x

expect(got, want) if got == want

else := false if {
	print("want:", want)
	print("got: ", got)
}

test_printed if {
	expect(x.codes, [])
}

test_plain if {
	x.codes == ["CYCLE_DETECTED"]
}
`)
	code, out, errOut := runCLI(t, "", "policy", "test", dir)
	for _, want := range []string{
		"FAIL: data.x_test.test_printed (" + dir + "/p_test.rego:12)\n  failed at " + dir + "/p_test.rego:13: expect(x.codes, [])\n  want: []\n  got:  [\"DEPTH_EXCEEDED\"]\n",
		"FAIL: data.x_test.test_plain (" + dir + "/p_test.rego:16)\n  failed at " + dir + "/p_test.rego:17: x.codes == [\"CYCLE_DETECTED\"]\n",
		"  \tx.codes == [\"CYCLE_DETECTED\"]\n  \t|\n  \t[\"DEPTH_EXCEEDED\"]\n",
	} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("exit %d, want %q in\n%s\n%s", code, want, out, errOut)
		}
	}
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// candidatePolicies is a copy of the shipped policies (from the repository
// root) with data.json's from replaced by to.
func candidatePolicies(t *testing.T, from, to string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("policies")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"embed.go", "limits_test.go"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, "data.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), from) {
		t.Fatalf("data.json has no %s", from)
	}
	writeTestFile(t, filepath.Join(dir, "data.json"), strings.Replace(string(raw), from, to, 1))
	return dir
}

// TestEvalCandidatePolicies: writ eval -policies decides with a candidate set
// on the configuration's agents, identity and facts, beside the
// configuration's own set (live): a depth limit lowered from 4 to 2 denies a
// two-hop chain the live set allows. A copy of the live files elsewhere is
// the live revision.
func TestEvalCandidatePolicies(t *testing.T) {
	chdirRoot(t)
	req := "testdata/a2a/v1.0/jsonrpc/send.request.http"
	callerFile := filepath.Join(t.TempDir(), "caller.json")
	writeTestFile(t, callerFile, `{"authenticated":true,"method":"jwt","agent_id":"payments-investigator","tenant":"wholesale","scopes":["delegate"],"delegation_chain":["a","b"]}`)
	type decision struct {
		Allow    bool
		Denials  []struct{ Code string }
		Revision string
	}
	var got struct {
		Decision decision
		Live     *decision
	}
	eval := func(candidate string) int {
		t.Helper()
		code, out, errOut := runCLI(t, "", "eval", "-config", "testdata/config/seed.yaml", "-request", req, "-caller", callerFile, "-policies", candidate)
		got.Live = nil
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("exit %d: %v\n%s\n%s", code, err, out, errOut)
		}
		return code
	}
	if code := eval(candidatePolicies(t, `"max_delegation_depth": 4`, `"max_delegation_depth": 2`)); code != 1 || got.Decision.Allow ||
		len(got.Decision.Denials) != 1 || got.Decision.Denials[0].Code != "DEPTH_EXCEEDED" ||
		got.Live == nil || !got.Live.Allow || got.Live.Revision == got.Decision.Revision {
		t.Fatalf("exit %d: %+v", code, got)
	}
	if code := eval(candidatePolicies(t, `"ownership": "agent"`, `"ownership": "agent"`)); code != 0 || !got.Decision.Allow ||
		got.Live == nil || got.Live.Revision != got.Decision.Revision {
		t.Fatalf("the same files elsewhere: exit %d: %+v", code, got)
	}
	code, out, errOut := runCLI(t, "", "eval", "-config", "testdata/config/seed.yaml", "-request", req, "-caller", callerFile, "-policies", t.TempDir())
	if code != 2 || !strings.Contains(errOut, "the candidate policies") {
		t.Fatalf("an empty candidate: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestPolicyTestAgainstAConfig: writ policy test -config tests a candidate
// set, then loads it as a reload of that configuration would (its facts and
// a known request to every agent) and prints the revision it would serve: a
// limit changed inside its range passes with no test edited, the same files
// elsewhere are the live revision, and a set that passes its tests but fails
// on a known request is refused.
func TestPolicyTestAgainstAConfig(t *testing.T) {
	chdirRoot(t)
	const cfg = "testdata/config/seed.yaml"
	code, out, errOut := runCLI(t, "", "policy", "test", "-config", cfg)
	liveRE := regexp.MustCompile(`ok: policies passes what a reload of testdata/config/seed.yaml asks \(9 known requests decided\); revision ([0-9a-f]{16})\n`)
	m := liveRE.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("the configuration's own set: exit %d\n%s\n%s", code, out, errOut)
	}
	live := m[1]
	lowered := candidatePolicies(t, `"max_delegation_depth": 4`, `"max_delegation_depth": 2`)
	code, out, errOut = runCLI(t, "", "policy", "test", "-config", cfg, lowered)
	if code != 0 || strings.Contains(out, "FAIL") || !strings.Contains(out, "ok: "+lowered+" passes") ||
		!strings.Contains(out, "the configuration's own policies (policies) are revision "+live+"\n") {
		t.Fatalf("a lowered depth: exit %d\n%s\n%s", code, out, errOut)
	}
	same := candidatePolicies(t, `"ownership": "agent"`, `"ownership": "agent"`)
	code, out, _ = runCLI(t, "", "policy", "test", "-config", cfg, same)
	if code != 0 || !strings.Contains(out, "revision "+live+"\n") || !strings.Contains(out, "are revision "+live+" too: the same content") {
		t.Fatalf("the same files elsewhere: exit %d\n%s", code, out)
	}
	failing := t.TempDir()
	writeTestFile(t, filepath.Join(failing, "p.rego"), `package writ.authz

denials contains {"code": "X", "reason": "r"} if to_number(input.request.path) > 3

decision := {"allow": count(denials) == 0, "denials": denials}
`)
	writeTestFile(t, filepath.Join(failing, "p_test.rego"), "package writ.authz_test\n\ntest_nothing if true\n")
	code, out, _ = runCLI(t, "", "policy", "test", "-config", cfg, failing)
	if code != 1 || !strings.Contains(out, "PASS: 1/1") || !strings.Contains(out, "would be refused by testdata/config/seed.yaml: the policy fails on a known request") {
		t.Fatalf("a set failing a known request: exit %d\n%s", code, out)
	}
}

// shadowConfig is seed.yaml (as a file elsewhere, its paths absolute) with
// the shadow set at shadow.
func shadowConfig(t *testing.T, shadow string) string {
	t.Helper()
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/config/seed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(raw), "../../policies", filepath.Join(root, "policies"), 1)
	s = strings.ReplaceAll(s, "../identity/", filepath.Join(root, "testdata/identity")+"/")
	path := filepath.Join(t.TempDir(), "writ.yaml")
	writeTestFile(t, path, s+"\npolicies_shadow: ["+shadow+"]\n")
	return path
}

// TestPolicyTestChecksTheShadowSet: writ policy test -config tests the
// configuration's shadow set (policies_shadow:) as it tests the live one —
// its Rego tests, then the gate a start or reload applies — so a shadow a
// serving writ would refuse is caught before it ships.
func TestPolicyTestChecksTheShadowSet(t *testing.T) {
	chdirRoot(t)
	lowered := candidatePolicies(t, `"max_delegation_depth": 4`, `"max_delegation_depth": 2`)
	cfg := shadowConfig(t, lowered)
	code, out, errOut := runCLI(t, "", "policy", "test", "-config", cfg)
	if code != 0 || !strings.Contains(out, "testing the shadow set (policies_shadow: "+lowered+")\n") ||
		strings.Count(out, "PASS: ") != 2 || !strings.Contains(out, "ok: "+lowered+" passes what a reload of "+cfg+" asks") {
		t.Fatalf("a good shadow: exit %d\n%s\n%s", code, out, errOut)
	}
	failing := candidatePolicies(t, `"max_delegation_depth": 4`, `"max_delegation_depth": 4`)
	writeTestFile(t, filepath.Join(failing, "extra_test.rego"), "package writ.authz_test\n\ntest_always_fails if false\n")
	code, out, _ = runCLI(t, "", "policy", "test", "-config", shadowConfig(t, failing))
	if code != 1 || !strings.Contains(out, "testing the shadow set") || !strings.Contains(out, "FAIL: data.writ.authz_test.test_always_fails") {
		t.Fatalf("a shadow failing its tests: exit %d\n%s", code, out)
	}
}
