package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/internal/syncbuf"
	"github.com/writ-authz/writ/internal/writproc"
)

// commands are writ's commands as a user types them.
var commands = []string{"serve", "validate", "dev token", "dev jwks", "sts", "demo", "inspect", "eval", "policy test", "policy replay", "report", "version"}

// TestHelpExitsZero: -h, -help and --help print the command's usage on
// stdout and exit 0, for writ itself and every command.
func TestHelpExitsZero(t *testing.T) {
	for _, cmd := range append([]string{"", "dev", "policy"}, commands...) {
		for _, h := range []string{"-h", "-help", "--help"} {
			args := append(strings.Fields(cmd), h)
			code, out, errOut := runCLI(t, "", args...)
			if code != 0 || !strings.Contains(out, "usage") && !strings.Contains(out, "Usage") {
				t.Errorf("writ %s %s: exit %d\nstdout %s\nstderr %s", cmd, h, code, out, errOut)
			}
		}
	}
	if code, _, errOut := runCLI(t, "", "validate", "-nonsense"); code != 2 || !strings.Contains(errOut, "usage: writ validate") {
		t.Errorf("a bad flag: exit %d %s", code, errOut)
	}
	// A command of subcommands lists them all.
	for cmd, subs := range map[string][]string{"dev": {"writ dev token", "writ dev jwks"}, "policy": {"writ policy test", "writ policy replay"}} {
		_, out, _ := runCLI(t, "", cmd, "-h")
		for _, sub := range subs {
			if !strings.Contains(out, sub) {
				t.Errorf("writ %s -h does not name %s:\n%s", cmd, sub, out)
			}
		}
		if lines := strings.Count(strings.TrimSpace(out), "\n"); lines < 2 {
			t.Errorf("writ %s -h prints only a usage line:\n%s", cmd, out)
		}
	}
}

// flagsOf lists the flags `writ CMD -h` documents.
func flagsOf(t *testing.T, cmd string) map[string]bool {
	t.Helper()
	_, out, _ := runCLI(t, "", append(strings.Fields(cmd), "-h")...)
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z-]+)`).FindAllStringSubmatch(out, -1) {
		flags[m[1]] = true
	}
	return flags
}

// TestREADMEFlagSpelling: every `writ CMD -flag` README and the pages of
// docs/ show is a flag the command has, spelt as its usage spells it (one
// dash); the documents and the usage texts never write a writ flag with two
// dashes.
func TestREADMEFlagSpelling(t *testing.T) {
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages under docs/ (%v)", err)
	}
	known := map[string]map[string]bool{}
	for _, cmd := range commands {
		known[cmd] = flagsOf(t, cmd)
		known[cmd]["h"] = true // every command takes -h (TestHelpExitsZero)
	}
	cmdRE := regexp.MustCompile(`writ (dev token|dev jwks|policy test|policy replay|serve|validate|sts|demo|inspect|eval|report|version)\b([^\n` + "`" + `|]*)`)
	flagRE := regexp.MustCompile(`(?:^|[\s\[(])(-{1,2})([a-z][a-z-]*)`)
	checked := 0
	for _, page := range append([]string{"../../README.md"}, pages...) {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(page, "../../")
		for _, m := range cmdRE.FindAllStringSubmatch(string(raw), -1) {
			for _, f := range flagRE.FindAllStringSubmatch(m[2], -1) {
				if f[1] == "--" {
					t.Errorf("%s: writ %s %s%s: one dash, as the usage spells it", name, m[1], f[1], f[2])
					continue
				}
				if !known[m[1]][f[2]] {
					t.Errorf("%s: writ %s -%s: not a flag of writ %s (it has %v)", name, m[1], f[2], m[1], known[m[1]])
				}
				checked++
			}
		}
	}
	if checked < 10 {
		t.Errorf("only %d flags found in README and docs/: is the pattern stale?", checked)
	}
	if strings.Contains(usage, " --") {
		t.Errorf("writ's usage writes a flag with two dashes:\n%s", usage)
	}
}

// TestVersion: writ version prints the module version, the commit and the
// build time from the build info (and the build time set by make).
func TestVersion(t *testing.T) {
	code, out, _ := runCLI(t, "", "version")
	if code != 0 || !strings.HasPrefix(out, "writ ") || !strings.Contains(out, "\ncommit:") || !strings.Contains(out, "\nbuilt:") {
		t.Fatalf("exit %d: %s", code, out)
	}
	old := buildTime
	buildTime = "2026-12-01T16:00:00Z"
	defer func() { buildTime = old }()
	if _, out, _ := runCLI(t, "", "version"); !strings.Contains(out, "built:       2026-12-01T16:00:00Z") {
		t.Errorf("build time: %s", out)
	}
}

// TestDevIdentity: writ dev jwks and writ dev token share a key kept in
// -dir; the token carries the flags' claims and verifies with the JWKS.
func TestDevIdentity(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	jwks := filepath.Join(t.TempDir(), "dev-jwks.json")
	if code, _, errOut := runCLI(t, "", "dev", "jwks", "-dir", dir, "-o", jwks); code != 0 {
		t.Fatalf("jwks: %d %s", code, errOut)
	}
	code, out, errOut := runCLI(t, "", "dev", "token", "-dir", dir, "-aud", "my-agent", "-sub", "u-1", "-agent", "payments-investigator",
		"-tenant", "wholesale", "-scope", "delegate read", "-classification", "confidential", "-chain", "root,orchestrator", "-may-act", "agent-b, agent-c", "-exp", "10m")
	if code != 0 {
		t.Fatalf("token: %d %s", code, errOut)
	}
	r, err := identity.New(identity.Config{JWT: []identity.IssuerConfig{{Issuer: DevIssuer, Audiences: []string{"my-agent"}, JWKSFile: jwks}}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+strings.TrimSpace(out))
	c, err := r.Identify(context.Background(), identity.Credentials{Header: h})
	if err != nil || c.AgentID != "payments-investigator" || c.UserID != "u-1" || c.Tenant != "wholesale" ||
		strings.Join(c.Scopes, " ") != "delegate read" || c.Classification != "confidential" ||
		strings.Join(c.Chain, ",") != "root,orchestrator" {
		t.Fatalf("%+v %v", c, err)
	}
	if ma, _ := c.Claims["may_act"].(map[string]any); fmt.Sprint(ma["sub"]) != "[agent-b agent-c]" {
		t.Errorf("may_act = %v", c.Claims["may_act"])
	}
	// Tokens for tests of refusals: expired, and not yet valid.
	for flags, want := range map[string]error{"-exp -1h": identity.ErrTokenExpired, "-nbf 10m": identity.ErrTokenNotYetValid} {
		args := append([]string{"dev", "token", "-dir", dir, "-aud", "my-agent"}, strings.Fields(flags)...)
		code, out, errOut := runCLI(t, "", args...)
		if code != 0 {
			t.Fatalf("%s: exit %d %s", flags, code, errOut)
		}
		h.Set("Authorization", "Bearer "+strings.TrimSpace(out))
		if _, err := r.Identify(context.Background(), identity.Credentials{Header: h}); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", flags, err, want)
		}
	}
	for _, flags := range [][]string{{"-exp", "0s"}, {"-nbf", "-1m"}, {"-nbf", "2h"}} {
		if code, _, _ := runCLI(t, "", append([]string{"dev", "token", "-dir", dir}, flags...)...); code != 2 {
			t.Errorf("%v: exit %d", flags, code)
		}
	}
}

// TestValidateFindings: what loads but cannot work is named by key and
// line: no identity source, a JWKS URL that does not answer, a claim name
// a sample token does not have, an agent whose schemes the policy admits
// no caller to (or only callers no identity source identifies).
func TestValidateFindings(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	agent := "agents:\n  - name: my-agent\n    upstream: http://127.0.0.1:9000\n    max_data_classification: confidential\n    security_schemes: [oauth2]\n"

	code, _, errOut := runCLI(t, "", "validate", "-config", write("none.yaml", agent))
	if code != 0 || !strings.Contains(errOut, "none.yaml: warning: identity: no identity source") {
		t.Errorf("no identity: %d %s", code, errOut)
	}
	if code, _, _ := runCLI(t, "", "validate", "-strict", "-config", filepath.Join(dir, "none.yaml")); code != 1 {
		t.Errorf("-strict: exit %d", code)
	}

	code, _, errOut = runCLI(t, "", "validate", "-config", write("typo.yaml", strings.Replace(agent, "upstream", "upstrem", 1)))
	if code != 1 || !strings.Contains(errOut, "typo.yaml:3: error: agents[0].upstrem: unknown key (did you mean upstream?)") {
		t.Errorf("typo: %d %s", code, errOut)
	}

	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	code, _, errOut = runCLI(t, "", "validate", "-config", write("dead.yaml", agent+
		"identity:\n  jwt:\n    - {issuer: https://idp, audiences: [my-agent], jwks_url: "+dead.URL+"/jwks.json}\n"))
	if code != 1 || !strings.Contains(errOut, "dead.yaml:8: error: identity.jwt[0].jwks_url: does not answer") {
		t.Errorf("dead JWKS URL: %d %s", code, errOut)
	}

	devDir := filepath.Join(dir, "dev")
	jwks := filepath.Join(dir, "jwks.json")
	runCLI(t, "", "dev", "jwks", "-dir", devDir, "-o", jwks)
	_, tok, _ := runCLI(t, "", "dev", "token", "-dir", devDir, "-aud", "my-agent")
	cfg := write("claims.yaml", agent+"identity:\n  jwt:\n    - {issuer: writ-dev, audiences: [my-agent], jwks_file: "+jwks+", tenant_claim: org}\n")
	code, out, errOut := runCLI(t, "", "validate", "-config", cfg, "-token", strings.TrimSpace(tok))
	if code != 0 || !strings.Contains(errOut, `claims.yaml:8: warning: identity.jwt[0].tenant_claim: is "org", which the sample token does not have`) ||
		!strings.Contains(errOut, `the sample token is caller agent_id="dev-agent"`) || !strings.Contains(out, "ok: ") {
		t.Errorf("sample token: %d %s %s", code, out, errOut)
	}

	code, _, errOut = runCLI(t, "", "validate", "-config", write("apikey.yaml", strings.Replace(agent, "[oauth2]", "[apikey]", 1)+
		"identity:\n  jwt: [{issuer: writ-dev, audiences: [my-agent], jwks_file: "+jwks+"}]\n"))
	if code != 0 || !strings.Contains(errOut, "apikey.yaml:5: warning: agents[0].security_schemes: [apikey]: the policy admits no caller to my-agent, however it authenticates (NO_ACCEPTABLE_AUTH") {
		t.Errorf("apikey agent: %d %s", code, errOut)
	}
	code, _, errOut = runCLI(t, "", "validate", "-config", write("mtls.yaml", strings.Replace(agent, "[oauth2]", "[mtls]", 1)+
		"identity:\n  jwt: [{issuer: writ-dev, audiences: [my-agent], jwks_file: "+jwks+"}]\n"))
	if code != 0 || !strings.Contains(errOut, "the policy admits only mtls callers to my-agent, and no identity source of this configuration identifies one (configure identity.mtls and tls.client_ca_file)") {
		t.Errorf("mtls agent: %d %s", code, errOut)
	}
	// The embedded policies are the default: validate works from any directory.
	if code, out, errOut := runCLI(t, "", "validate", "-config", cfg); code != 0 || !strings.Contains(out, "policies: the shipped policies embedded in writ") {
		t.Errorf("embedded: %d %s %s", code, out, errOut)
	}
}

// TestServeLogsJSONOnlyFromAnyDirectory: `writ serve` started in a
// directory without policies (the embedded ones are the default) writes
// nothing but JSON lines on stderr — its start, a configuration warning,
// requests allowed, denied and malformed, a SIGHUP with nothing to reload,
// the shutdown — and its decision log on stdout is JSON lines too, with the
// same field names for ids.
func TestServeLogsJSONOnlyFromAnyDirectory(t *testing.T) {
	exe, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t-1","contextId":"c-1","status":{"state":"completed"}}}`)
	}))
	defer agent.Close()
	listen, admin := writproc.FreeAddr(t), writproc.FreeAddr(t)
	cfg := filepath.Join(dir, "writ.yaml")
	os.WriteFile(cfg, []byte(`listen: `+listen+`
admin: `+admin+`
store: {path: `+filepath.Join(dir, "state", "writ.db")+`}
log: {level: debug}
agents:
  - {name: my-agent, upstream: `+agent.URL+`, max_data_classification: confidential, security_schemes: [oauth2]}
`), 0o600)
	args, _ := json.Marshal([]string{"serve", "-config", cfg})
	var stdout, stderr syncbuf.Buffer
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), stChildEnv+"="+string(args))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer cmd.Process.Kill()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get("http://" + admin + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not up:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"nonsense"}`,
		`not json`,
	} {
		if resp, err := http.Post("http://"+listen+"/", "application/json", strings.NewReader(body)); err == nil {
			resp.Body.Close()
		}
	}
	if conn, err := net.Dial("tcp", listen); err == nil {
		conn.Write([]byte("GARBAGE / HTTP/9.9\r\nHost: x\r\n\r\n"))
		conn.Close()
	}
	cmd.Process.Signal(syscall.SIGHUP)
	time.Sleep(200 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(40 * time.Second):
		t.Fatal("writ serve did not stop on SIGTERM")
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	msgs := ""
	for _, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["time"] == nil || rec["level"] == nil || rec["msg"] == nil {
			t.Errorf("stderr: not a JSON log line: %q", line)
			continue
		}
		msgs += rec["msg"].(string) + "\n"
	}
	for _, want := range []string{"configuration: no identity source", "writ is serving", "nothing to reload", "shutting down"} {
		if !strings.Contains(msgs, want) {
			t.Errorf("no %q line in:\n%s", want, msgs)
		}
	}
	if !strings.Contains(stderr.String(), `"policies":"the shipped policies embedded in writ"`) {
		t.Errorf("not on the embedded policies:\n%s", stderr.String())
	}
	decisions := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	for _, line := range decisions {
		if !json.Valid([]byte(line)) {
			t.Errorf("stdout: not a JSON line: %q", line)
		}
	}
	if !strings.Contains(stdout.String(), `"decision_id"`) {
		t.Errorf("no decision on stdout:\n%s", stdout.String())
	}
}
