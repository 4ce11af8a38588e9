package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// depthLog is a decision log a real writ wrote with decision_log.include_input
// on (proxytest.DepthLog: sends at every delegation depth from 0 to 4, a get
// at 3), from the repository root.
const depthLog = "replay/testdata/depth.jsonl"

// lowered is a copy of the shipped policies with the max depth at 3.
func lowered(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("policies")); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data.json")
	raw, _ := os.ReadFile(data)
	if err := os.WriteFile(data, []byte(strings.Replace(string(raw), `"max_delegation_depth": 4`, `"max_delegation_depth": 3`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPolicyReplayCommand: writ policy replay exits 0 when nothing flips
// (the set that decided) or only the expected flips do, 1 on an unexpected
// flip (printed by code, caller and target with the decision ids), 2 on a
// set that does not compile (with its file and line), a log without
// inputs, a bad expectations file or missing flags; -o writes the page.
func TestPolicyReplayCommand(t *testing.T) {
	chdirRoot(t)
	cand := lowered(t)
	code, out, errOut := runCLI(t, "", "policy", "replay", "-log", depthLog, "-policies", "policies")
	if code != 0 || !strings.Contains(out, "replayed 11 of 11 decisions (14 lines)") || !strings.Contains(out, "allow → deny: 0\n") {
		t.Fatalf("unchanged: exit %d\n%s\n%s", code, out, errOut)
	}
	page := filepath.Join(t.TempDir(), "impact.html")
	code, out, errOut = runCLI(t, "", "policy", "replay", "-log", depthLog, "-policies", cand, "-o", page)
	if code != 1 || !strings.Contains(out, "allow → deny: 2\n") || !strings.Contains(out, "DEPTH_EXCEEDED                    2  e.g. ") ||
		!strings.Contains(out, "payments-investigator") || !strings.Contains(out, "sanctions-screening-agent") || !strings.Contains(out, depthLog+":9") {
		t.Fatalf("lowered: exit %d\n%s\n%s", code, out, errOut)
	}
	html, err := os.ReadFile(page)
	if err != nil || !strings.Contains(string(html), `id="total-allow-to-deny">2<`) || !strings.Contains(string(html), "Content-Security-Policy") {
		t.Fatalf("the page: %v\n%.400s", err, html)
	}
	expect := filepath.Join(t.TempDir(), "expect.yaml")
	os.WriteFile(expect, []byte("- flip: allow_to_deny\n  code: DEPTH_EXCEEDED\n"), 0o600)
	if code, out, errOut = runCLI(t, "", "policy", "replay", "-log", depthLog, "-policies", cand, "-expect", expect); code != 0 ||
		!strings.Contains(out, "allow → deny: 2 (all expected)") {
		t.Fatalf("expected: exit %d\n%s\n%s", code, out, errOut)
	}
	os.WriteFile(expect, []byte("- flip: allow_to_deny\n  target: travel\n"), 0o600)
	if code, out, _ = runCLI(t, "", "policy", "replay", "-log", depthLog, "-policies", cand, "-expect", expect); code != 1 ||
		!strings.Contains(out, "allow → deny: 2 (2 unexpected)") || !strings.Contains(out, "expected, but no flip matched: {flip: allow_to_deny, target: travel} (line 1)") {
		t.Fatalf("unexpected: exit %d\n%s", code, out)
	}
	os.WriteFile(expect, []byte("- flip: sideways\n"), 0o600)
	if code, _, errOut = runCLI(t, "", "policy", "replay", "-log", depthLog, "-policies", cand, "-expect", expect); code != 2 || !strings.Contains(errOut, "sideways") {
		t.Fatalf("bad expectations: exit %d\n%s", code, errOut)
	}

	os.WriteFile(filepath.Join(cand, "depth.rego"), []byte("package writ.authz\n\nmax_depth := {\n"), 0o600)
	if code, _, errOut = runCLI(t, "", "policy", "replay", "-log", depthLog, "-policies", cand); code != 2 ||
		!strings.Contains(errOut, "depth.rego:4: rego_parse_error") {
		t.Fatalf("broken set: exit %d\n%s", code, errOut)
	}
	// A log written without include_input: nothing to replay.
	raw, _ := os.ReadFile(depthLog)
	var bare []string
	for l := range strings.SplitSeq(strings.TrimSpace(string(raw)), "\n") {
		if i := strings.Index(l, `,"input_version"`); i >= 0 {
			l = l[:i] + l[strings.Index(l, `,"seq"`):]
		}
		bare = append(bare, l)
	}
	noInput := filepath.Join(t.TempDir(), "bare.jsonl")
	os.WriteFile(noInput, []byte(strings.Join(bare, "\n")+"\n"), 0o600)
	if code, out, errOut = runCLI(t, "", "policy", "replay", "-log", noInput, "-policies", "policies"); code != 2 ||
		!strings.Contains(out, "11  no input (decision_log.include_input was off)") || !strings.Contains(errOut, "no decision could be replayed") {
		t.Fatalf("no input: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut = runCLI(t, "", "policy", "replay", "-log", depthLog); code != 2 || !strings.Contains(errOut, "-policies are required") {
		t.Fatalf("no -policies: exit %d\n%s", code, errOut)
	}
	if code, out, _ = runCLI(t, "", "policy", "replay", "-h"); code != 0 || !strings.Contains(out, "Exit 0: nothing flipped beyond -expect") {
		t.Fatalf("-h: exit %d\n%s", code, out)
	}
}
