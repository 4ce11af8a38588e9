package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/internal/otlptest"
	"github.com/writ-authz/writ/sts"
)

// TestServeEgress: egress.listen starts the egress door beside the sidecar:
// a call the agent makes while serving an inbound request (Writ-Parent: the
// decision id writ gave it) goes out with writ sts's token for the target;
// shutdown closes the listener. With tracing on, the call's own trace
// context goes on to the target as the egress forward's.
func TestServeEgress(t *testing.T) {
	chdirRoot(t)
	dir := t.TempDir()
	idp, err := devidp.New(dir, "https://idp.test", "writ")
	if err != nil {
		t.Fatal(err)
	}
	clients := filepath.Join(dir, "clients.yaml")
	secret := filepath.Join(dir, "secret")
	for path, s := range map[string]string{clients: "investigator: s3cret-of-investigator\n", secret: "s3cret-of-investigator"} {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sc := config.STS{Listen: "127.0.0.1:0", Audiences: []string{"agent:raw"}, ClientSecretsFile: clients,
		SubjectIssuers: []config.JWTIssuer{{Issuer: idp.Issuer, Audiences: []string{"writ"}, JWKSFile: idp.JWKSFile}}}
	sc.ApplyDefaults()
	s, err := sts.New(sc, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })

	for _, traced := range []bool{false, true} {
		t.Run(fmt.Sprintf("traced=%t", traced), func(t *testing.T) {
			serveEgress(t, idp, s, secret, traced)
		})
	}
}

// serveEgress is TestServeEgress's run, with tracing off or on. On, the
// call's trace context (the agent's traceparent) is the egress admit
// span's parent, and the target gets the egress forward's context.
func serveEgress(t *testing.T, idp *devidp.Provider, s *sts.Server, secret string, traced bool) {
	var mu sync.Mutex
	var decisionID, outbound, traceparent string
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		decisionID = r.Header.Get("Writ-Decision-Id")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_COMPLETED"}}}}`)
	}))
	defer agent.Close()
	raw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		outbound = r.Header.Get("Authorization")
		traceparent = r.Header.Get("Traceparent")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"r-1","contextId":"c-2","status":{"state":"TASK_STATE_COMPLETED"}}}}`)
	}))
	defer raw.Close()
	cfg, err := config.Parse(fmt.Appendf(nil, `policies: [policies]
listen: 127.0.0.1:0
admin: 127.0.0.1:0
push: {disabled: true}
identity:
  jwt: [{issuer: %q, audiences: [writ], jwks_file: %q}]
agents:
  - {name: investigator, upstream: %q, protocol: a2a, max_data_classification: restricted, security_schemes: [oauth2]}
egress:
  listen: 127.0.0.1:0
  trusted_hosts: [127.0.0.1]
  exchange: {issuer: %q, client_id: investigator, client_secret_file: %q}
  targets:
    - {name: raw, upstream: %q, protocol: a2a, max_data_classification: restricted, security_schemes: [oauth2]}
`, idp.Issuer, idp.JWKSFile, agent.URL, s.Issuer(), secret, raw.URL))
	if err != nil {
		t.Fatal(err)
	}
	var recv *otlptest.Receiver
	if traced {
		recv = otlptest.Start(t)
		cfg.Tracing = tracingOn(recv.GRPCAddr)
	}
	w, err := New(t.Context(), cfg, WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	addr := w.ListenerAddr("egress.listen")
	if addr == "" || cfg.Egress.Agent != "investigator" {
		t.Fatalf("egress door at %q, agent %q", addr, cfg.Egress.Agent)
	}
	tok, err := idp.Token(devidp.Caller{Agent: "orchestrator", User: "u-1", Tenant: "t", Scope: "delegate"})
	if err != nil {
		t.Fatal(err)
	}
	send := func(url, token, parent string) int {
		req, _ := http.NewRequest("POST", url, strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("A2A-Version", "1.0")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if parent != "" {
			req.Header.Set("Writ-Parent", parent)
			req.Header.Set("Traceparent", callerParent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := send(w.URL()+"/", tok, ""); st != 200 {
		t.Fatalf("inbound: %d", st)
	}
	mu.Lock()
	parent := decisionID
	mu.Unlock()
	if st := send("http://"+addr+"/to/raw/", "", parent); st != 200 {
		t.Fatalf("egress: %d", st)
	}
	mu.Lock()
	got := outbound
	mu.Unlock()
	if !strings.HasPrefix(got, "Bearer ") || strings.Contains(got, tok) {
		t.Fatalf("the target got %q", got)
	}
	shutdown(t, w)
	if _, err := http.Get("http://" + addr + "/to/raw/"); err == nil {
		t.Fatal("the egress listener still answers after shutdown")
	}
	if !traced {
		if traceparent != callerParent {
			t.Errorf("tracing off: the target got traceparent %q, not the agent's as it sent it", traceparent)
		}
		return
	}
	spans := recv.Wait(t, func(ss []otlptest.Span) bool { return len(otlptest.Named(ss, "writ.forward")) == 2 })
	var admit, forward otlptest.Span
	for _, sp := range otlptest.Named(spans, "writ.admit") {
		if sp.Attr("writ.mode") == "egress" {
			admit = sp
		}
	}
	for _, sp := range otlptest.Named(spans, "writ.forward") {
		if sp.Parent() == admit.ID() {
			forward = sp
		}
	}
	if admit.Span == nil || admit.TraceID() != callerTraceID || admit.Parent() != callerSpanID || forward.Span == nil {
		t.Fatalf("the egress call's admit span %v (want the child of the agent's %s), forward %v", admit.Span, callerSpanID, forward.Span)
	}
	if want := "00-" + callerTraceID + "-" + forward.ID() + "-01"; traceparent != want {
		t.Errorf("the target got traceparent %q, want the egress forward's %q", traceparent, want)
	}
}
