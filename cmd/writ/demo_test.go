package main

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/writ-authz/writ/internal/syncbuf"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDemo runs `writ demo` in-process, end to end: real a2a-go agents, writ in
// front of them, real a2a-go clients with signed JWTs. Every step must show the
// verdict the seed's worked example expects.
func TestDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	start := time.Now()
	err := runDemo(ctx, &out, demoOptions{Listen: "127.0.0.1:0"})
	t.Logf("the demo took %s", time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("runDemo: %v\n%s", err, out.String())
	}
	got := out.String()
	if strings.Contains(got, "UNEXPECTED") {
		t.Errorf("the demo reports an unexpected outcome:\n%s", got)
	}
	// label -> verdict lines (steps 2 and 6), whatever the padding between them.
	for _, v := range [][2]string{
		{"sanctions-screening-agent", "ALLOW"},
		{"kyc-refresh-agent", "CLASSIFICATION_EXCEEDED, TENANT_NOT_PERMITTED"},
		{"marketing-copy-agent", "CLASSIFICATION_EXCEEDED, NO_ACCEPTABLE_AUTH"},
		{"chain depth 4", "DEPTH_EXCEEDED"},
		{"cycle", "CYCLE_DETECTED"},
		{"https://evil.example/hook (token)", "CALLBACK_NOT_ALLOWED"},
		{"https://agents.bank.ae/cb (no token)", "CALLBACK_UNAUTHENTICATED"},
	} {
		re := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(v[0]) + `\s+-> ` + regexp.QuoteMeta(v[1]) + `$`)
		if !re.MatchString(got) {
			t.Errorf("no line %q -> %q", v[0], v[1])
		}
	}
	for _, want := range []string{
		// 1. discovery
		"sanctions-clarifier         v3.1.0  skills=[screen] streaming=true",
		"hidden: kyc-refresh-agent (serves tenant 'retail' only); marketing-copy-agent (handles up to 'internal'",
		"kyc-refresh-agent, sanctions-clarifier, sanctions-screening-agent, sanctions-slow",
		// 3. streaming
		"status   working          final=false",
		"artifact sanctions-screening last_chunk=true",
		`status   completed        final=true "Screening complete."`,
		"text: Acme Trading FZE: 1 possible match (score 0.83) against SDN list",
		`data: {"list":"SDN","matches":1,"recommendation":"manual_review","top_score":0.83}`,
		// 4. input required
		`input-required — "Which jurisdiction should I screen against?"`,
		`completed — "Screened. No matches."`,
		// 5. cancellation
		"is working",
		`cancel           : canceled — "Screening cancelled."`,
		"TaskNotCancelable (-32002) TASK_NOT_CANCELABLE",
		"the agent saw 1 cancel",
		"UnsupportedOperation (-32004) UNSUPPORTED_OPERATION, TASK_TERMINAL",
		// 7. core
		"internal state   : succeeded",
		"status=completed parts=2",
		"round-trips      : true",
		"as A2A 1.0       : round-trips true",
		// 8. card
		`name               "sanctions-screening-agent"`,
		"bearer (http Bearer JWT)",
		"absent from the published card",
		"without a token: HTTP 404",
		"All steps behaved as expected.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", got)
	}
}

// TestDemoServe: with -serve writ keeps serving after the scenario, the printed
// token and URL work, and cancelling the context shuts everything down.
func TestDemoServe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	serveCtx, stop := context.WithCancel(ctx)
	var out syncbuf.Buffer
	done := make(chan error, 1)
	go func() { done <- runDemo(serveCtx, &out, demoOptions{Listen: "127.0.0.1:0", Serve: true}) }()
	for !strings.Contains(out.String(), "Ctrl-C stops") {
		select {
		case err := <-done:
			t.Fatalf("the demo returned before serving: %v\n%s", err, out.String())
		case <-ctx.Done():
			t.Fatalf("no serving message:\n%s", out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	writ := regexp.MustCompile(`export WRIT=(\S+)`).FindStringSubmatch(out.String())
	token := regexp.MustCompile(`export TOKEN=(\S+)`).FindStringSubmatch(out.String())
	if writ == nil || token == nil {
		t.Fatalf("no WRIT/TOKEN lines:\n%s", out.String())
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, writ[1]+"/.well-known/writ/directory?tags=sanctions", nil)
	req.Header.Set("Authorization", "Bearer "+token[1])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var dir struct {
		Agents []struct {
			Name string `json:"name"`
		} `json:"agents"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &dir) != nil || len(dir.Agents) != 3 {
		t.Fatalf("directory while serving: HTTP %d %s", resp.StatusCode, body)
	}
	// The admin listener of writ serve: metrics that counted the scenario,
	// readiness, the policy status.
	admin := regexp.MustCompile(`admin: (http://\S+)/readyz`).FindStringSubmatch(out.String())
	if admin == nil {
		t.Fatalf("no admin URL:\n%s", out.String())
	}
	for path, want := range map[string]string{
		"/metrics":   `writ_decisions_total{mode="sidecar",operation="send",result="deny",route="kyc-refresh-agent"}`,
		"/readyz":    "",
		"/v1/policy": `"revision"`,
	} {
		resp, err := http.Get(admin[1] + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("admin %s: HTTP %d\n%.2000s", path, resp.StatusCode, body)
		}
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("runDemo: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the demo did not shut down")
	}
	if _, err := http.Get(writ[1] + "/.well-known/writ/directory"); err == nil {
		t.Error("writ still answers after shutdown")
	}
}

// TestDemoLoopbackOnly: the demo refuses to bind anything but a loopback IP.
func TestDemoLoopbackOnly(t *testing.T) {
	code, _, errOut := runCLI(t, "", "demo", "-listen", "0.0.0.0:0")
	if code != 1 || !strings.Contains(errOut, "loopback") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
