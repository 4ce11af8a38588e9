package authzen_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/authzen"
	"github.com/writ-authz/writ/proxy/extauthz"
	"github.com/writ-authz/writ/task"
)

// The AuthZEN door's cost against an ext_authz check of the same
// delegation, in one run, in process (no transport on either side): the
// check of bench/request_allow.json (make bench-envoy's), an evaluation
// asking about the same send, and a batch of 100 such evaluations. Run on
// one core: go test -run - -bench . -cpu 1 ./proxy/authzen.

// benchWorld is the core, the engine, the ext_authz server and the door,
// without the sidecar's listener.
type benchWorld struct {
	ext   *extauthz.Server
	door  *authzen.Server
	token string // the investigator's
	pep   string
}

func newBenchWorld(b *testing.B) *benchWorld {
	b.Helper()
	idp, err := devidp.New(b.TempDir(), proxytest.Issuer, "writ")
	if err != nil {
		b.Fatal(err)
	}
	yaml := fmt.Sprintf(`policies: [%s, %s]
identity:
  jwt: [{issuer: %s, audiences: [writ], jwks_file: %s}]
agents:
  - {name: sanctions-screening-agent, route: /, upstream: 'http://127.0.0.1:1', protocol: a2a, owner: group-compliance,
     tenants: [wholesale, retail], max_data_classification: restricted, security_schemes: [oauth2]}
authzen: {listen: '127.0.0.1:0', clients: [gateway], applications: [{name: todo, package: todo}]}
`, proxytest.Policies(), filepath.Join(testdata, "policies"), proxytest.Issuer, idp.JWKSFile)
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		b.Fatal(err)
	}
	ident, err := identity.New(cfg.Identity)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ident.Close)
	pol, err := authz.LoadPolicy(context.Background(), cfg.Policies, authz.LoadOptions{SkipTests: true})
	if err != nil {
		b.Fatal(err)
	}
	engine, err := authz.NewEngine(pol, authz.Options{})
	if err != nil {
		b.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store := task.NewMemoryStore(task.MemoryLimits{MaxTasks: 1000, MaxPerOwner: 100, TTL: time.Hour})
	core, err := proxy.New(cfg, proxy.Deps{Identity: ident, Engine: engine, Store: store, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	w := &benchWorld{}
	if w.ext, err = extauthz.New(core, ident, cfg, quiet); err != nil {
		b.Fatal(err)
	}
	if w.door, err = authzen.New(core, rulesOf(engine), ident, cfg, authzen.Options{Logger: quiet}); err != nil {
		b.Fatal(err)
	}
	sign := func(c proxytest.Caller) string {
		tok, err := idp.Token(devidp.Caller{Agent: c.Agent, User: c.User, Tenant: c.Tenant, Classification: c.Class,
			Scope: c.Scopes, Chain: c.Chain})
		if err != nil {
			b.Fatal(err)
		}
		return tok
	}
	w.token, w.pep = sign(proxytest.Investigator), sign(gateway)
	return w
}

// question is the check's delegation as the delegation profile asks it.
func (w *benchWorld) question() map[string]any {
	return map[string]any{"subject": map[string]any{"type": "agent", "id": "payments-investigator",
		"properties": map[string]any{"token": w.token}},
		"action":   map[string]any{"name": "send"},
		"resource": map[string]any{"type": "agent", "id": "sanctions-screening-agent"},
		"context": map[string]any{"context_id": "ctx-wholesale-981",
			"callback": map[string]any{"url": "https://agents.bank.ae/cb", "has_token": true}}}
}

// serve runs one request through the door in process.
func (w *benchWorld) serve(b *testing.B, path string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+w.pep)
	rec := httptest.NewRecorder()
	w.door.ServeHTTP(rec, req)
	if rec.Code != 200 {
		b.Fatalf("%d %s", rec.Code, rec.Body)
	}
	return rec
}

// BenchmarkExtAuthzCheck is the baseline: one allowed check, in process.
func BenchmarkExtAuthzCheck(b *testing.B) {
	w := newBenchWorld(b)
	raw, err := os.ReadFile(filepath.Join(proxytest.Root(), "bench", "request_allow.json"))
	if err != nil {
		b.Fatal(err)
	}
	var cr authv3.CheckRequest
	if err := protojson.Unmarshal(raw, &cr); err != nil {
		b.Fatal(err)
	}
	cr.Attributes.Request.Http.Headers["authorization"] = "Bearer " + w.token
	if resp, _ := w.ext.Check(b.Context(), &cr); resp.GetOkResponse() == nil {
		b.Fatalf("not allowed: %v", resp)
	}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = w.ext.Check(b.Context(), &cr)
	}
}

// BenchmarkEvaluation is one Access Evaluation of the same delegation.
func BenchmarkEvaluation(b *testing.B) {
	w := newBenchWorld(b)
	body, _ := json.Marshal(w.question())
	if rec := w.serve(b, "/access/v1/evaluation", body); !bytes.Contains(rec.Body.Bytes(), []byte(`"decision":true`)) {
		b.Fatalf("not allowed: %s", rec.Body)
	}
	b.ReportAllocs()
	for b.Loop() {
		w.serve(b, "/access/v1/evaluation", body)
	}
}

// BenchmarkEvaluations100 is one Access Evaluations request of 100 of them
// (the subject given once, as the default); decisions/s is per item.
func BenchmarkEvaluations100(b *testing.B) {
	w := newBenchWorld(b)
	q := w.question()
	items := make([]any, 100)
	for i := range items {
		items[i] = map[string]any{"action": q["action"], "resource": q["resource"], "context": q["context"]}
	}
	body, _ := json.Marshal(map[string]any{"subject": q["subject"], "evaluations": items})
	if rec := w.serve(b, "/access/v1/evaluations", body); bytes.Count(rec.Body.Bytes(), []byte(`"decision":true`)) != 100 {
		b.Fatalf("not all allowed: %s", rec.Body)
	}
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		w.serve(b, "/access/v1/evaluations", body)
	}
	b.ReportMetric(float64(b.N)*100/time.Since(start).Seconds(), "decisions/s")
}

// BenchmarkTodoEvaluations100 is a batch of 100 evaluations of an
// application's package (the Todo interop's), one prepared rule for all.
func BenchmarkTodoEvaluations100(b *testing.B) {
	w := newBenchWorld(b)
	items := make([]any, 100)
	for i := range items {
		items[i] = map[string]any{"resource": map[string]any{"type": "todo", "id": fmt.Sprintf("todo-%d", i%10),
			"properties": map[string]any{"ownerID": "morty@the-citadel.com"}}}
	}
	body, _ := json.Marshal(map[string]any{"subject": map[string]any{"type": "user",
		"id": "CiRmZDE2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs"},
		"action": map[string]any{"name": "can_update_todo"}, "evaluations": items})
	w.serve(b, "/todo/access/v1/evaluations", body)
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		w.serve(b, "/todo/access/v1/evaluations", body)
	}
	b.ReportMetric(float64(b.N)*100/time.Since(start).Seconds(), "decisions/s")
}

// BenchmarkRatios interleaves the three in every iteration — 100 checks,
// 100 evaluations, one batch of 100 — so that a shared, busy host slows
// them alike, and reports each as a throughput ratio to the check's: an
// evaluation per second against a check per second, a batch's decisions
// per second, and batch requests per second.
func BenchmarkRatios(b *testing.B) {
	w := newBenchWorld(b)
	raw, err := os.ReadFile(filepath.Join(proxytest.Root(), "bench", "request_allow.json"))
	if err != nil {
		b.Fatal(err)
	}
	var cr authv3.CheckRequest
	if err := protojson.Unmarshal(raw, &cr); err != nil {
		b.Fatal(err)
	}
	cr.Attributes.Request.Http.Headers["authorization"] = "Bearer " + w.token
	if resp, _ := w.ext.Check(b.Context(), &cr); resp.GetOkResponse() == nil {
		b.Fatalf("not allowed: %v", resp)
	}
	q := w.question()
	one, _ := json.Marshal(q)
	items := make([]any, 100)
	for i := range items {
		items[i] = map[string]any{"action": q["action"], "resource": q["resource"], "context": q["context"]}
	}
	batch, _ := json.Marshal(map[string]any{"subject": q["subject"], "evaluations": items})
	if rec := w.serve(b, "/access/v1/evaluations", batch); bytes.Count(rec.Body.Bytes(), []byte(`"decision":true`)) != 100 {
		b.Fatalf("not all allowed: %s", rec.Body)
	}
	var checks, evals, batches time.Duration
	for b.Loop() {
		t0 := time.Now()
		for range 100 {
			_, _ = w.ext.Check(b.Context(), &cr)
		}
		t1 := time.Now()
		for range 100 {
			w.serve(b, "/access/v1/evaluation", one)
		}
		t2 := time.Now()
		w.serve(b, "/access/v1/evaluations", batch)
		t3 := time.Now()
		checks, evals, batches = checks+t1.Sub(t0), evals+t2.Sub(t1), batches+t3.Sub(t2)
	}
	n := float64(b.N) * 100
	b.ReportMetric(n/checks.Seconds(), "checks/s")
	b.ReportMetric(n/evals.Seconds(), "evaluations/s")
	b.ReportMetric(n/batches.Seconds(), "batch-decisions/s")
	b.ReportMetric(checks.Seconds()/evals.Seconds(), "evaluation/check")
	b.ReportMetric(checks.Seconds()/batches.Seconds(), "batch-decision/check")
	b.ReportMetric(checks.Seconds()/batches.Seconds()/100, "batch-request/check")
}
