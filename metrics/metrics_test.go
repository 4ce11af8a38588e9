package metrics_test

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/metrics"
	"github.com/writ-authz/writ/proxy/envoyreq"
	"github.com/writ-authz/writ/proxy/extauthz"
	"github.com/writ-authz/writ/proxy/push"
	sidecardoor "github.com/writ-authz/writ/proxy/sidecar"
	"github.com/writ-authz/writ/task"
)

const (
	counter   = dto.MetricType_COUNTER
	gauge     = dto.MetricType_GAUGE
	histogram = dto.MetricType_HISTOGRAM
)

var (
	investigator = events.Caller{Authenticated: true, Method: "jwt", AgentID: "payments-investigator", UserID: "u-42", Tenant: "wholesale"}
	retailer     = events.Caller{Authenticated: true, Method: "jwt", AgentID: "kyc-bot", UserID: "u-7", Tenant: "retail"}
)

// scriptedDecisions are the decisions of the scripted run; every result, mode and
// the label bounds are covered.
func scriptedDecisions() []events.Decision {
	return []events.Decision{
		{Mode: events.ModeSidecar, Route: sanctions, Operation: task.OpSend, Caller: investigator, TaskID: "t-1",
			Allow: true, Eval: 2 * time.Millisecond},
		{Mode: events.ModeSidecar, Route: sanctions, Operation: task.OpSend, Caller: investigator, TaskID: "t-2",
			Allow: true, CacheHit: true, Eval: 10 * time.Microsecond},
		// The same code twice in one decision counts once.
		{Mode: events.ModeSidecar, Route: sanctions, Operation: task.OpGet, Caller: retailer, TaskID: "t-1",
			Denials: []task.Denial{{Code: "TENANT_MISMATCH"}, {Code: "SCOPE_MISSING", Reason: "a"}, {Code: "SCOPE_MISSING", Reason: "b"}},
			Eval:    time.Millisecond},
		{Mode: events.ModeExtAuthz, Route: deadAgent, Operation: task.OpSend, Caller: retailer,
			Allow: true, DryRun: true, Denials: []task.Denial{{Code: "DEPTH_EXCEEDED"}}, CacheHit: true, Eval: 20 * time.Microsecond},
		{Mode: events.ModeSidecar, Route: deadAgent, Operation: task.OpSend, Caller: investigator,
			Denials: []task.Denial{{Code: authz.PolicyErrorCode}}, Error: "policy evaluation: boom", Eval: 3 * time.Millisecond},
		// Out-of-vocabulary mode and operation are bounded to "other".
		{Mode: "carrier-pigeon", Route: sanctions, Operation: "frobnicate", Caller: investigator, Allow: true, Eval: time.Millisecond},
	}
}

func scriptedRequests() []events.Request {
	return []events.Request{
		{Mode: events.ModeSidecar, Route: sanctions, Operation: task.OpSend, Status: 200, Duration: 50 * time.Millisecond, Upstream: 40 * time.Millisecond},
		{Mode: events.ModeSidecar, Route: sanctions, Operation: task.OpSend, Status: 200, Duration: 30 * time.Millisecond, Upstream: 20 * time.Millisecond},
		{Mode: events.ModeSidecar, Route: sanctions, Operation: task.OpGet, Status: 403, Duration: 10 * time.Millisecond},
		{Mode: events.ModeExtAuthz, Route: deadAgent, Operation: task.OpSend, Status: 200, Duration: 5 * time.Millisecond},
		{Mode: events.ModeExtAuthz, Route: deadAgent, Operation: task.OpSend, Status: 403, Duration: 4 * time.Millisecond},
		{Mode: events.ModeSidecar, Status: 404, Duration: time.Millisecond}, // no route matched
	}
}

func scriptedTaskEvents() []events.Task {
	return []events.Task{
		{Kind: events.TaskCreated, Route: sanctions, TaskID: "t-1", To: task.Queued},
		{Kind: events.TaskCreated, Route: sanctions, TaskID: "t-2", To: task.Running},
		{Kind: events.TaskStateChanged, Route: sanctions, TaskID: "t-1", From: task.Queued, To: task.Running},
		{Kind: events.TaskStateChanged, Route: sanctions, TaskID: "t-1", From: task.Running, To: task.Succeeded},
		{Kind: events.TaskStateChanged, Route: sanctions, TaskID: "t-2", From: task.Running, To: task.Succeeded},
		{Kind: events.TaskStateChanged, Route: sanctions, TaskID: "t-3", From: "bogus", To: task.Running},
		{Kind: events.TaskViolation, Route: sanctions, TaskID: "t-1", From: task.Succeeded, To: task.Running},
		{Kind: events.TaskArtifact, Route: sanctions, TaskID: "t-1", Artifact: "sanctions-screening"},
	}
}

// TestScrapeAfterScriptedRun feeds known events and drives real sources (engine,
// reloader, identity, store, a push deliverer delivering to a loopback receiver,
// the proxy), scrapes /metrics over HTTP and checks every family's exact values.
func TestScrapeAfterScriptedRun(t *testing.T) {
	w := newWorld(t, refusedURL(t))
	bus := &events.Bus{}
	px := w.proxy(t, bus)
	ctx := context.Background()

	// Push: a loopback receiver, a plain client, fast retries.
	var flaky atomic.Int32
	release := make(chan struct{})
	recv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
		case "/flaky":
			if flaky.Add(1) == 1 {
				rw.WriteHeader(http.StatusServiceUnavailable)
			}
		case "/bad":
			rw.WriteHeader(http.StatusBadRequest)
		case "/down":
			rw.WriteHeader(http.StatusServiceUnavailable)
		case "/hold":
			<-release
		}
	}))
	t.Cleanup(recv.Close)
	results := make(chan push.Result, 16)
	d := push.NewDeliverer(push.DelivererConfig{Workers: 2, QueueSize: 2, MaxAttempts: 3,
		BaseBackoff: time.Millisecond, MaxBackoff: time.Millisecond, AttemptTimeout: 5 * time.Second,
		Client: &http.Client{}, Logger: quiet(), Events: bus,
		OnResult: func(r push.Result) { results <- r }})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d.Close(ctx)
	})
	t.Cleanup(func() { close(release) }) // runs first: the held deliveries finish
	// The observers come last, built from the producers' snapshots.
	parts := components{"sidecar": 0, "decision_log": 2}
	m := metrics.New(config.Metrics{}, metrics.Sources{DecisionCache: w.engine, Policy: w.engine, Reloads: w.reloader,
		TokenCache: w.ident, Store: w.store, Push: d, Lifecycle: px, Components: parts, Shadow: shadowTally{5, 2, 1, 3},
		Upload: uploadTally{ChunksUploaded: 7, ChunksFailed: 2, QueueDropped: 1, BufferDrops: 3, Failed: 4, Buffered: 512}})
	bus.Subscribe(m)
	url := serveMetrics(t, m)

	// Before anything happens: the live revision, zero counters.
	rev0 := w.engine.Policy().Revision
	s := scrapeURL(t, url)
	s.want(t, "writ_policy_info", gauge, map[string]float64{L("revision", rev0): 1})
	s.want(t, "writ_policy_reloads_total", counter, map[string]float64{L("result", "ok"): 0, L("result", "failed"): 0})
	s.want(t, "writ_push_deliveries_total", counter, map[string]float64{L("result", "delivered"): 0, L("result", "failed"): 0})
	if f := s["writ_decisions_total"]; f != nil {
		t.Errorf("decisions before any event: %v", f)
	}

	// Hook events.
	for _, e := range scriptedDecisions() {
		m.Decided(e)
	}
	bus.ShadowDisagreed(events.ShadowDisagreement{Direction: "allow_to_deny", Code: "DEPTH_EXCEEDED"})
	bus.ShadowDisagreed(events.ShadowDisagreement{Direction: "codes", Code: "TENANT_NOT_PERMITTED"})
	for _, e := range scriptedRequests() {
		m.Served(e)
	}
	for _, e := range scriptedTaskEvents() {
		m.TaskChanged(e)
	}

	// Token cache: the same token twice is a miss, then a hit.
	creds := identity.Credentials{Header: http.Header{"Authorization": {"Bearer " + w.token(t)}}}
	var caller identity.Caller
	for range 2 {
		c, err := w.ident.Identify(ctx, creds)
		if err != nil {
			t.Fatal(err)
		}
		caller = c
	}
	// Decision cache: the same input twice is a miss, then a hit.
	in := authz.BuildInput(&authz.Facts{Caller: caller, Target: authz.TargetOf(&w.cfg.Agents[0]),
		Request: &task.Request{Operation: task.OpSend, Protocol: task.Protocol{Name: "a2a", Version: "0.3", Binding: task.BindingJSONRPC, Method: "message/send"},
			Message: &task.MessageSummary{ID: "m-1", Role: "user", Parts: task.PartCounts{Text: 1}}},
		HTTP: authz.HTTPInfo{Method: "POST", Path: "/", Host: "writ.test", RemoteAddr: "127.0.0.1:40000"}})
	for range 2 {
		if _, err := w.engine.Decide(ctx, in); err != nil {
			t.Fatal(err)
		}
	}

	// Reloads: a changed set (ok, new revision), then a broken one (failed; the
	// new revision keeps serving).
	data := filepath.Join(w.dir, "policies", "data.json")
	raw, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	changed := bytes.Replace(raw, []byte(`"max_delegation_depth": 4`), []byte(`"max_delegation_depth": 3`), 1)
	if bytes.Equal(changed, raw) {
		t.Fatal("data.json has no max_delegation_depth 4 to change")
	}
	if err := os.WriteFile(data, changed, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := w.reloader.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	rev1 := w.engine.Policy().Revision
	if rev1 == rev0 {
		t.Fatal("the reload did not change the revision")
	}
	if err := os.WriteFile(filepath.Join(w.dir, "policies", "broken.rego"), []byte("package writ.authz\n\nthis is not rego\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := w.reloader.Reload(ctx); err == nil {
		t.Fatal("a broken policy set reloaded")
	}

	// Store: records in known states.
	for id, st := range map[string]task.State{"s-1": task.Queued, "s-2": task.Queued, "s-3": task.Running,
		"s-4": task.AwaitingInput, "s-5": task.Succeeded} {
		if err := w.store.Create(ctx, task.Record{Task: task.Task{ID: id, State: st, Owner: task.Owner{AgentID: "a", Tenant: "wholesale"}}, Agent: sanctions}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := w.store.Apply(ctx, task.Ref{Agent: sanctions, ID: "s-1"}, task.Event{Kind: task.EventStatus, TaskID: "s-1", State: task.Running}); err != nil {
		t.Fatal(err)
	}

	// Push: one at a time, so the outcomes are known.
	deliver := func(path string, wantDelivered bool, wantAttempts int) {
		t.Helper()
		target := recv.URL + path
		if path == "" {
			target = "http://[::1" // unparseable: the guard's refusal
		}
		if err := d.Enqueue(push.Notification{TaskID: "t" + path, URL: target, Body: []byte(`{}`), Seq: 1}); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-results:
			if r.Delivered != wantDelivered || r.Attempts != wantAttempts {
				t.Fatalf("%q: delivered %v after %d attempts (%v), want %v after %d", path, r.Delivered, r.Attempts, r.Err, wantDelivered, wantAttempts)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%q: no outcome", path)
		}
	}
	deliver("/ok", true, 1)    // delivered
	deliver("/flaky", true, 2) // retry, delivered
	deliver("/bad", false, 1)  // failed (4xx is final)
	deliver("/down", false, 3) // retry, retry, failed
	deliver("", false, 1)      // failed, refused: unparseable
	// OnResult runs before the deliverer releases the slot: wait for an empty queue.
	for deadline := time.Now().Add(10 * time.Second); d.Stats().Queued != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("queue not drained: %+v", d.Stats())
		}
	}
	for seq := range uint64(3) { // two held (the queue's cap), the third dropped
		err := d.Enqueue(push.Notification{TaskID: "t-hold", URL: recv.URL + "/hold", Body: []byte(`{}`), Seq: seq + 1})
		if want := seq == 2; errors.Is(err, push.ErrQueueFull) != want {
			t.Fatalf("hold %d: %v", seq, err)
		}
	}

	s = scrapeURL(t, url)

	// Decisions.
	s.want(t, "writ_decisions_total", counter, map[string]float64{
		L("route", sanctions, "operation", "send", "result", "allow", "mode", "sidecar"):     2,
		L("route", sanctions, "operation", "get", "result", "deny", "mode", "sidecar"):       1,
		L("route", deadAgent, "operation", "send", "result", "dry_run", "mode", "ext_authz"): 1,
		L("route", deadAgent, "operation", "send", "result", "error", "mode", "sidecar"):     1,
		L("route", sanctions, "operation", "other", "result", "allow", "mode", "other"):      1,
	})
	s.want(t, "writ_denials_total", counter, map[string]float64{
		L("route", sanctions, "operation", "get", "code", "TENANT_MISMATCH"): 1,
		L("route", sanctions, "operation", "get", "code", "SCOPE_MISSING"):   1,
		L("route", deadAgent, "operation", "send", "code", "DEPTH_EXCEEDED"): 1,
		L("route", deadAgent, "operation", "send", "code", "POLICY_ERROR"):   1,
	})
	s.want(t, "writ_decision_duration_seconds", histogram, map[string]float64{
		L("mode", "sidecar", "cache", "miss"):  3,
		L("mode", "sidecar", "cache", "hit"):   1,
		L("mode", "ext_authz", "cache", "hit"): 1,
		L("mode", "other", "cache", "miss"):    1,
	})
	s.wantSums(t, "writ_decision_duration_seconds", map[string]float64{
		L("mode", "sidecar", "cache", "miss"):  0.006,
		L("mode", "sidecar", "cache", "hit"):   0.00001,
		L("mode", "ext_authz", "cache", "hit"): 0.00002,
		L("mode", "other", "cache", "miss"):    0.001,
	})

	// Requests.
	s.want(t, "writ_requests_total", counter, map[string]float64{
		L("route", sanctions, "operation", "send", "status", "200", "mode", "sidecar"):   2,
		L("route", sanctions, "operation", "get", "status", "403", "mode", "sidecar"):    1,
		L("route", deadAgent, "operation", "send", "status", "200", "mode", "ext_authz"): 1,
		L("route", deadAgent, "operation", "send", "status", "403", "mode", "ext_authz"): 1,
		L("route", "", "operation", "", "status", "404", "mode", "sidecar"):              1,
	})
	s.want(t, "writ_request_duration_seconds", histogram, map[string]float64{
		L("route", sanctions, "operation", "send", "mode", "sidecar"):   2,
		L("route", sanctions, "operation", "get", "mode", "sidecar"):    1,
		L("route", deadAgent, "operation", "send", "mode", "ext_authz"): 2,
		L("route", "", "operation", "", "mode", "sidecar"):              1,
	})
	s.wantSums(t, "writ_request_duration_seconds", map[string]float64{
		L("route", sanctions, "operation", "send", "mode", "sidecar"):   0.08,
		L("route", sanctions, "operation", "get", "mode", "sidecar"):    0.01,
		L("route", deadAgent, "operation", "send", "mode", "ext_authz"): 0.009,
		L("route", "", "operation", "", "mode", "sidecar"):              0.001,
	})
	s.want(t, "writ_upstream_duration_seconds", histogram, map[string]float64{L("route", sanctions): 2})
	s.wantSums(t, "writ_upstream_duration_seconds", map[string]float64{L("route", sanctions): 0.06})
	s.want(t, "writ_extauthz_checks_total", counter, map[string]float64{L("result", "allow"): 1, L("result", "deny"): 1})
	s.want(t, "writ_upstream_errors_total", counter, map[string]float64{"": 0})
	s.want(t, "writ_upstream_invalid_responses_total", counter, map[string]float64{"": 0})

	// Caches.
	s.want(t, "writ_decision_cache_hits_total", counter, map[string]float64{"": 1})
	s.want(t, "writ_decision_cache_misses_total", counter, map[string]float64{"": 1})
	s.want(t, "writ_token_cache_hits_total", counter, map[string]float64{"": 1})
	s.want(t, "writ_token_cache_misses_total", counter, map[string]float64{"": 1})

	// Tasks.
	s.want(t, "writ_tasks", gauge, map[string]float64{
		L("state", "queued"): 1, L("state", "running"): 2, L("state", "awaiting_input"): 1, L("state", "awaiting_auth"): 0,
		L("state", "succeeded"): 1, L("state", "cancelled"): 0, L("state", "failed"): 0, L("state", "rejected"): 0,
	})
	s.want(t, "writ_tasks_created_total", counter, map[string]float64{"": 2})
	s.want(t, "writ_task_transitions_total", counter, map[string]float64{
		L("from", "queued", "to", "running"):    1,
		L("from", "running", "to", "succeeded"): 2,
		L("from", "other", "to", "running"):     1,
	})
	s.want(t, "writ_protocol_violations_total", counter, map[string]float64{L("route", sanctions): 1})

	// Push.
	s.want(t, "writ_push_deliveries_total", counter, map[string]float64{L("result", "delivered"): 2, L("result", "failed"): 3})
	s.want(t, "writ_push_attempts_total", counter, map[string]float64{
		L("result", "delivered"): 2, L("result", "retry"): 3, L("result", "failed"): 3})
	s.want(t, "writ_push_delivery_duration_seconds", histogram, map[string]float64{"": 5})
	if sum := s.sums("writ_push_delivery_duration_seconds")[""]; sum <= 0 {
		t.Errorf("push delivery duration sum %v", sum)
	}
	s.want(t, "writ_push_queue_depth", gauge, map[string]float64{"": 2})
	s.want(t, "writ_push_dropped_total", counter, map[string]float64{"": 1})
	s.want(t, "writ_push_guard_refusals_total", counter, map[string]float64{L("reason", push.ReasonUnparseable): 1})
	if st := d.Stats(); st.Delivered != 2 || st.Failed != 3 || st.Retried != 3 || st.RefusedByGuard[push.ReasonUnparseable] != 1 {
		t.Errorf("the deliverer's own stats disagree: %+v", st)
	}

	// writ's own parts (the assembly's counts).
	s.want(t, "writ_component_errors_total", counter, map[string]float64{L("component", "sidecar"): 0, L("component", "decision_log"): 2})

	// Policy.
	s.want(t, "writ_policy_reloads_total", counter, map[string]float64{L("result", "ok"): 1, L("result", "failed"): 1})
	s.want(t, "writ_policy_info", gauge, map[string]float64{L("revision", rev1): 1})

	// Shadow.
	s.want(t, "writ_shadow_evaluations_total", counter, map[string]float64{
		L("result", "agree"): 5, L("result", "disagree"): 2, L("result", "error"): 1, L("result", "dropped"): 3})
	s.want(t, "writ_shadow_disagreements_total", counter, map[string]float64{
		L("code", "DEPTH_EXCEEDED", "direction", "allow_to_deny"): 1, L("code", "TENANT_NOT_PERMITTED", "direction", "codes"): 1})

	// Decision log upload.
	s.want(t, "writ_decision_log_uploads_total", counter, map[string]float64{L("result", "uploaded"): 7, L("result", "failed"): 2})
	s.want(t, "writ_decision_log_upload_dropped_total", counter, map[string]float64{
		L("reason", "queue"): 1, L("reason", "buffer"): 3, L("reason", "failed"): 4})
	s.want(t, "writ_decision_log_upload_buffered_bytes", gauge, map[string]float64{"": 512})

	// Go and process collectors.
	for _, name := range []string{"go_goroutines", "go_memstats_alloc_bytes", "process_cpu_seconds_total", "process_resident_memory_bytes"} {
		if s[name] == nil {
			t.Errorf("%s: not in the scrape", name)
		}
	}

	// Names lists exactly the writ_ families of the scrape.
	if got, want := s.writ(), metrics.Names(); !slices.Equal(got, want) {
		t.Errorf("scrape families %v\nNames()          %v", got, want)
	}
	// Tenants are off: no family has a tenant label, and no series a task or user id.
	for _, name := range s.writ() {
		if slices.Contains(s.labelNames(name), "tenant") {
			t.Errorf("%s has a tenant label with TenantLabels off", name)
		}
	}
	body := scrapeText(t, url)
	for _, leak := range []string{"t-1", "t-2", "u-42", "wholesale", "payments-investigator", "boom"} {
		if strings.Contains(body, `"`+leak+`"`) {
			t.Errorf("the exposition holds %q", leak)
		}
	}
}

func scrapeText(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return string(raw)
}

// TestTenantLabels: with TenantLabels, decisions carry the caller's tenant, and
// only decisions do.
func TestTenantLabels(t *testing.T) {
	m := metrics.New(config.Metrics{TenantLabels: true}, metrics.Sources{})
	for _, e := range scriptedDecisions() {
		m.Decided(e)
	}
	for _, e := range scriptedRequests() {
		m.Served(e)
	}
	m.Decided(events.Decision{Mode: events.ModeSidecar, Route: sanctions, Operation: task.OpSend, Allow: true}) // anonymous
	s := scrapeURL(t, serveMetrics(t, m))
	s.want(t, "writ_decisions_total", counter, map[string]float64{
		L("route", sanctions, "operation", "send", "result", "allow", "mode", "sidecar", "tenant", "wholesale"):  2,
		L("route", sanctions, "operation", "send", "result", "allow", "mode", "sidecar", "tenant", ""):           1,
		L("route", sanctions, "operation", "get", "result", "deny", "mode", "sidecar", "tenant", "retail"):       1,
		L("route", deadAgent, "operation", "send", "result", "dry_run", "mode", "ext_authz", "tenant", "retail"): 1,
		L("route", deadAgent, "operation", "send", "result", "error", "mode", "sidecar", "tenant", "wholesale"):  1,
		L("route", sanctions, "operation", "other", "result", "allow", "mode", "other", "tenant", "wholesale"):   1,
	})
	for _, name := range s.writ() {
		if name != "writ_decisions_total" && slices.Contains(s.labelNames(name), "tenant") {
			t.Errorf("%s has a tenant label", name)
		}
	}
}

// TestNoSources: with no sources only the event-driven families exist, and
// Names still covers them.
func TestNoSources(t *testing.T) {
	m := metrics.New(config.Metrics{}, metrics.Sources{})
	url := serveMetrics(t, m)
	// Only the families without labels, and those whose series start at
	// zero for rates and alerts, exist before any event.
	if got, want := scrapeURL(t, url).writ(), []string{"writ_push_delivery_duration_seconds", "writ_task_evictions_total",
		"writ_tasks_created_total", "writ_token_exchange_duration_seconds", "writ_token_exchanges_total",
		"writ_upstream_errors_total", "writ_upstream_invalid_responses_total"}; !slices.Equal(got, want) {
		t.Errorf("families before any event: %v, want %v", got, want)
	}
	for _, e := range scriptedDecisions() {
		m.Decided(e)
	}
	m.Pushed(push.Event(push.Result{Attempts: 1, Delivered: true, Latency: time.Second}, true))
	s := scrapeURL(t, url)
	for _, name := range s.writ() {
		if !slices.Contains(metrics.Names(), name) {
			t.Errorf("%s is not in Names()", name)
		}
	}
	for _, name := range []string{"writ_tasks", "writ_policy_info", "writ_push_queue_depth", "writ_decision_cache_hits_total", "writ_store_errors_total", "writ_store_cancellations_total", "writ_component_errors_total"} {
		if s[name] != nil {
			t.Errorf("%s exported without its source", name)
		}
	}
	s.want(t, "writ_push_deliveries_total", counter, map[string]float64{L("result", "delivered"): 1})
	if s["writ_push_attempts_total"] != nil { // attempts come from attempt events
		t.Error("an outcome counted an attempt of a delivered notification")
	}
	if m.Registry() == nil {
		t.Fatal("no registry")
	}
}

// recorder keeps every hook event, as the test's oracle.
type recorder struct {
	mu        sync.Mutex
	decisions []events.Decision
	requests  []events.Request
	tasks     []events.Task
}

func (r *recorder) Decided(e events.Decision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.decisions = append(r.decisions, e)
}

func (r *recorder) Served(e events.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, e)
}

func (r *recorder) TaskChanged(e events.Task) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tasks = append(r.tasks, e)
}

func (r *recorder) Pushed(events.Push) {}

// TestThroughProxy puts the metrics on a real sidecar in front of the seed's
// sanctions agent: an allowed send (forwarded, task recorded), an anonymous send
// (denied), a send to an agent that refuses connections (upstream error) and an
// ext_authz check; the scrape matches what the hooks saw.
func TestThroughProxy(t *testing.T) {
	agent, err := seedagents.StartSanctions(seedagents.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Close() })
	w := newWorld(t, agent.URL)
	rec := &recorder{}
	bus := &events.Bus{}
	px := w.proxy(t, bus)
	m := metrics.New(config.Metrics{}, metrics.Sources{DecisionCache: w.engine, Policy: w.engine, Reloads: w.reloader,
		TokenCache: w.ident, Store: w.store, Lifecycle: px})
	bus.Subscribe(m)
	bus.Subscribe(rec)
	sidecar := httptest.NewServer(sidecardoor.New(px, w.cfg.Limits, nil, nil))
	t.Cleanup(sidecar.Close)
	url := serveMetrics(t, m)
	tok := w.token(t)

	send := func(path, token string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", sidecar.URL+path, bytes.NewReader(sendBody()))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := send("/", tok); st != http.StatusOK {
		t.Fatalf("allowed send: %d", st)
	}
	if st := send("/", ""); st < 400 {
		t.Fatalf("anonymous send: %d", st)
	}
	if st := send("/dead", tok); st < 500 {
		t.Fatalf("send to a dead agent: %d", st)
	}
	ext, err := extauthz.New(px, w.ident, w.cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	check, err := ext.Check(context.Background(), &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		// The agent Envoy's route names (envoy.require_route_name).
		ContextExtensions: map[string]string{envoyreq.RouteKey: w.cfg.Agents[0].Name},
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 40000}}}}},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{Method: "POST", Path: "/", Host: "writ.test",
			Headers: map[string]string{"authorization": "Bearer " + tok, "content-type": "application/json"}, RawBody: sendBody()}}}})
	if err != nil || check.GetOkResponse() == nil {
		t.Fatalf("ext_authz check denied: %v %v", check, err)
	}

	s := scrapeURL(t, url)
	rec.mu.Lock()
	defer rec.mu.Unlock()

	// The oracle: the same counts, computed from the recorded events.
	decisions, denials, requests := map[string]float64{}, map[string]float64{}, map[string]float64{}
	for _, e := range rec.decisions {
		result := "allow"
		switch {
		case e.Error != "":
			result = "error"
		case e.DryRun:
			result = "dry_run"
		case !e.Allow:
			result = "deny"
		}
		decisions[L("route", e.Route, "operation", string(e.Operation), "result", result, "mode", e.Mode)]++
		seen := map[string]bool{}
		for _, d := range e.Denials {
			if !seen[d.Code] {
				seen[d.Code] = true
				denials[L("route", e.Route, "operation", string(e.Operation), "code", d.Code)]++
			}
		}
	}
	for _, e := range rec.requests {
		requests[L("route", e.Route, "operation", string(e.Operation), "status", strconv.Itoa(e.Status), "mode", e.Mode)]++
	}
	s.want(t, "writ_decisions_total", counter, decisions)
	s.want(t, "writ_denials_total", counter, denials)
	s.want(t, "writ_requests_total", counter, requests)
	if len(denials) == 0 {
		t.Error("the anonymous send was denied with no code")
	}
	// The scenario itself, stated plainly.
	s.want(t, "writ_decisions_total", counter, map[string]float64{
		L("route", sanctions, "operation", "send", "result", "allow", "mode", "sidecar"):   1,
		L("route", sanctions, "operation", "send", "result", "deny", "mode", "sidecar"):    1,
		L("route", deadAgent, "operation", "send", "result", "allow", "mode", "sidecar"):   1,
		L("route", sanctions, "operation", "send", "result", "allow", "mode", "ext_authz"): 1,
	})
	s.want(t, "writ_extauthz_checks_total", counter, map[string]float64{L("result", "allow"): 1})
	s.want(t, "writ_upstream_errors_total", counter, map[string]float64{"": 1})
	s.want(t, "writ_upstream_invalid_responses_total", counter, map[string]float64{"": 0})
	s.want(t, "writ_upstream_duration_seconds", histogram, map[string]float64{L("route", sanctions): 1, L("route", deadAgent): 1})
	s.want(t, "writ_tasks_created_total", counter, map[string]float64{"": 1})
	st, _ := w.store.Stats(context.Background())
	tasks := map[string]float64{}
	for _, state := range task.States {
		tasks[L("state", string(state))] = float64(st.ByState[state])
	}
	s.want(t, "writ_tasks", gauge, tasks)
	if st.Tasks != 1 {
		t.Errorf("%d tasks in the store, want 1", st.Tasks)
	}
	hits, misses := w.ident.CacheStats()
	s.want(t, "writ_token_cache_hits_total", counter, map[string]float64{"": float64(hits)})
	s.want(t, "writ_token_cache_misses_total", counter, map[string]float64{"": float64(misses)})
	if misses != 1 || hits != 2 {
		t.Errorf("token cache %d hits, %d misses; want 2, 1 (one token, three uses)", hits, misses)
	}
	dh, dm := w.engine.CacheStats()
	s.want(t, "writ_decision_cache_hits_total", counter, map[string]float64{"": float64(dh)})
	s.want(t, "writ_decision_cache_misses_total", counter, map[string]float64{"": float64(dm)})
	if dh+dm != uint64(len(rec.decisions)) {
		t.Errorf("decision cache %d+%d lookups for %d decisions", dh, dm, len(rec.decisions))
	}
}

// TestConcurrentHooks fires hooks from many goroutines, over new and known label
// values, while scrapes run: no race, and no event lost or counted twice.
func TestConcurrentHooks(t *testing.T) {
	m := metrics.New(config.Metrics{TenantLabels: true}, metrics.Sources{})
	url := serveMetrics(t, m)
	const workers, per = 8, 500
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for i := range per {
				tenant := "tenant-" + strconv.Itoa(i%37) // new series keep appearing
				m.Decided(events.Decision{Mode: events.ModeSidecar, Route: sanctions, Operation: task.OpSend,
					Caller: events.Caller{Tenant: tenant}, Denials: []task.Denial{{Code: "C" + strconv.Itoa(i%5)}}})
				m.Served(events.Request{Mode: events.ModeSidecar, Route: sanctions, Operation: task.OpSend, Status: 200 + i%3, Upstream: time.Millisecond})
				if g == 0 && i%100 == 0 {
					scrapeURL(t, url)
				}
			}
		})
	}
	wg.Wait()
	// Invalid UTF-8 in a label value is dropped, never a panic on the request path.
	m.Decided(events.Decision{Mode: events.ModeSidecar, Route: "bad\xff", Operation: task.OpSend})
	m.Served(events.Request{Mode: events.ModeSidecar, Route: "bad\xff", Status: 200, Upstream: time.Millisecond})

	s := scrapeURL(t, url)
	decisions, denials, requests := map[string]float64{}, map[string]float64{}, map[string]float64{}
	for i := range per {
		decisions[L("route", sanctions, "operation", "send", "result", "deny", "mode", "sidecar", "tenant", "tenant-"+strconv.Itoa(i%37))] += workers
		denials[L("route", sanctions, "operation", "send", "code", "C"+strconv.Itoa(i%5))] += workers
		requests[L("route", sanctions, "operation", "send", "status", strconv.Itoa(200+i%3), "mode", "sidecar")] += workers
	}
	s.want(t, "writ_decisions_total", counter, decisions)
	s.want(t, "writ_denials_total", counter, denials)
	s.want(t, "writ_requests_total", counter, requests)
	s.want(t, "writ_upstream_duration_seconds", histogram, map[string]float64{L("route", sanctions): workers * per})
}

// components is a Components source: the errors of each of writ's parts, as
// the assembly counts them.
type components map[string]uint64

func (c components) ComponentErrors(f func(component string, n uint64)) {
	for name, n := range c {
		f(name, n)
	}
}
