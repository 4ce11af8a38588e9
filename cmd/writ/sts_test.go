package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/internal/syncbuf"
)

// TestSTSCommand: `writ sts -config sts.yaml` prints its endpoints, logs
// JSON, exchanges a `writ dev token` (the development issuer trusted in
// sts.yaml) for a narrower one, and stops on its context.
func TestSTSCommand(t *testing.T) {
	dir := t.TempDir()
	p, err := devidp.Open(filepath.Join(dir, "dev"), DevIssuer, "agent:a")
	if err != nil {
		t.Fatal(err)
	}
	subject, err := p.Token(devidp.Caller{Agent: "orchestrator", User: "alice", Scope: "read write", Tenant: "t1",
		MayAct: []string{"agent-a"}})
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write("clients.yaml", "agent-a: secret-of-agent-a\n")
	cfg := write("sts.yaml", "listen: 127.0.0.1:0\naudiences: [agent:b]\nclient_secrets_file: "+filepath.Join(dir, "clients.yaml")+
		"\nsubject_issuers:\n  - {issuer: "+DevIssuer+", audiences: [agent:a], jwks_file: "+p.JWKSFile+"}\n")
	var out, errOut syncbuf.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- runSTS(ctx, []string{"-config", cfg, "-ephemeral"}, &out, &errOut) }()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("exit %d\n%s", code, errOut.String())
		}
	}()
	var endpoint string
	re := regexp.MustCompile(`token endpoint: (\S+)`)
	for deadline := time.Now().Add(10 * time.Second); endpoint == ""; {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			endpoint = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no endpoint printed:\n%s\n%s", out.String(), errOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, want := range []string{"issuer:", "jwks:", "/.well-known/jwks.json", "discovery:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
	}
	form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"}, "subject_token": {subject},
		"subject_token_type": {"urn:ietf:params:oauth:token-type:jwt"}, "audience": {"agent:b"}, "scope": {"read"}}
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("agent-a", "secret-of-agent-a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		AccessToken string `json:"access_token"`
		Scope       string `json:"scope"`
	}
	err = json.NewDecoder(resp.Body).Decode(&a)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || a.AccessToken == "" || a.Scope != "read" {
		t.Fatalf("exchange: %d %+v %v\n%s", resp.StatusCode, a, err, errOut.String())
	}
	// Every stderr line is a JSON object; the start and the exchange are there.
	for _, line := range strings.Split(strings.TrimSpace(errOut.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("a log line is not JSON: %q", line)
		}
	}
	for _, want := range []string{`"msg":"writ sts is serving (for development and CI)"`, `"msg":"sts: token issued"`, `"actor":"agent-a"`} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, errOut.String())
		}
	}
	if strings.Contains(errOut.String(), a.AccessToken) || strings.Contains(errOut.String(), subject) {
		t.Error("the log holds a token")
	}
}

// TestSTSCommandProblems: a bad sts.yaml refuses the start, each problem
// logged with its file, line and key.
func TestSTSCommandProblems(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sts.yaml")
	if err := os.WriteFile(path, []byte("audiences: [agent:b]\nmay_act: maybe\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "", "sts", "-config", path)
	if code != 1 || !strings.Contains(errOut, `"key":"may_act"`) || !strings.Contains(errOut, `"line":2`) {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "", "sts", "-listen", "127.0.0.1:0"); code != 1 || !strings.Contains(errOut, `"key":"audiences"`) {
		t.Fatalf("no audiences: exit %d: %s", code, errOut)
	}
}
