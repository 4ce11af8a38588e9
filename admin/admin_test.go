package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/admin"
	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/task"
)

const (
	allowRego = "package writ.authz\n\ndecision := {\"allow\": true, \"denials\": []}\n"
	denyRego  = "package writ.authz\n\ndecision := {\"allow\": false, \"denials\": [{\"code\": \"NO\", \"reason\": \"no\"}]}\n"
	testRego  = "package writ.authz_test\n\nimport data.writ.authz\n\ntest_decides if authz.decision\n"
)

// fixture is a policy directory, the engine serving it and its reloader.
type fixture struct {
	dir    string
	engine *authz.Engine
	rl     *authz.Reloader
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "p.rego"), allowRego)
	write(t, filepath.Join(dir, "p_test.rego"), testRego)
	p, err := authz.LoadPolicy(context.Background(), []string{dir}, authz.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := authz.NewEngine(p, authz.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{dir: dir, engine: e, rl: authz.NewReloader(e, []string{dir}, authz.LoadOptions{}, nil)}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// do sends one request to h and returns the status and body.
func do(t *testing.T, h http.Handler, method, path string, header ...string) (int, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func decode[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return v
}

func TestHealthz(t *testing.T) {
	h := newLocal(admin.Deps{}) // alive even with nothing wired
	if code, body := do(t, h, "GET", "/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("%d %q", code, body)
	}
	if code, _ := do(t, h, "POST", "/healthz"); code != http.StatusMethodNotAllowed {
		t.Fatalf("POST /healthz: %d", code)
	}
}

func TestReadyz(t *testing.T) {
	f := newFixture(t)
	rev := f.engine.Policy().Revision

	if code, body := do(t, newLocal(admin.Deps{}), "GET", "/readyz"); code != 503 || !strings.Contains(body, "no policy loaded") {
		t.Errorf("no engine: %d %q", code, body)
	}
	if code, body := do(t, newLocal(admin.Deps{Engine: f.engine}), "GET", "/readyz"); code != 200 || !strings.Contains(body, rev) {
		t.Errorf("nil Ready: %d %q", code, body)
	}
	var sawDeadline bool
	up := newLocal(admin.Deps{Engine: f.engine, Ready: func(ctx context.Context) error {
		_, sawDeadline = ctx.Deadline()
		return nil
	}})
	if code, _ := do(t, up, "GET", "/readyz"); code != 200 || !sawDeadline {
		t.Errorf("ready: %d, deadline %v", code, sawDeadline)
	}
	down := newLocal(admin.Deps{Engine: f.engine, Ready: func(context.Context) error {
		return errors.New("agent sanctions: GET /.well-known/agent-card.json: connection refused")
	}})
	if code, body := do(t, down, "GET", "/readyz"); code != 503 || !strings.Contains(body, "connection refused") {
		t.Errorf("upstream down: %d %q", code, body)
	}
	// The lifecycle store: down makes the process not ready, whatever the
	// agents say; back, ready again.
	storeErr := errors.New("lifecycle store unavailable: dial tcp 127.0.0.1:6379: connection refused")
	store := newLocal(admin.Deps{Engine: f.engine, StoreReady: func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			return errors.New("no deadline")
		}
		return storeErr
	}, Ready: func(context.Context) error { return nil }})
	if code, body := do(t, store, "GET", "/readyz"); code != 503 || !strings.Contains(body, "not ready: lifecycle store: ") ||
		!strings.Contains(body, "6379") {
		t.Errorf("store down: %d %q", code, body)
	}
	storeErr = nil
	if code, body := do(t, store, "GET", "/readyz"); code != 200 {
		t.Errorf("store back: %d %q", code, body)
	}
}

func TestPolicy(t *testing.T) {
	f := newFixture(t)
	p := f.engine.Policy()
	code, body := do(t, newLocal(admin.Deps{Engine: f.engine, Reloader: f.rl}), "GET", "/v1/policy")
	st := decode[admin.PolicyStatus](t, body)
	if code != 200 || st.Revision != p.Revision || len(st.Files) != 2 || st.Tests.Passed != 1 ||
		!st.Loaded.Equal(p.Loaded) || st.LastReload == nil || !st.LastReload.OK ||
		st.LastReload.Revision != p.Revision || st.Reloads == nil || st.Reloads.OK+st.Reloads.Failed != 0 {
		t.Fatalf("%d %s", code, body)
	}
	// The raw JSON carries the names operators read.
	for _, key := range []string{`"revision"`, `"files"`, `"loaded"`, `"passed"`, `"failed"`, `"last_reload"`, `"at"`, `"ok"`} {
		if !strings.Contains(body, key) {
			t.Errorf("no %s in %s", key, body)
		}
	}
	// Without a reloader there is no reload history; without an engine, no policy.
	st = decode[admin.PolicyStatus](t, func() string {
		_, b := do(t, newLocal(admin.Deps{Engine: f.engine}), "GET", "/v1/policy")
		return b
	}())
	if st.LastReload != nil || st.Revision != p.Revision {
		t.Errorf("no reloader: %+v", st)
	}
	if code, _ := do(t, newLocal(admin.Deps{}), "GET", "/v1/policy"); code != 503 {
		t.Errorf("no engine: %d", code)
	}
}

// TestReload: a good change is swapped in (200, new revision); a broken policy
// directory is refused (422) and the old revision keeps serving and deciding.
func TestReload(t *testing.T) {
	f := newFixture(t)
	h := newLocal(admin.Deps{Engine: f.engine, Reloader: f.rl})
	first := f.engine.Policy().Revision

	// Unchanged files: a successful no-op.
	code, body := do(t, h, "POST", "/v1/policy/reload")
	if ans := decode[admin.ReloadAnswer](t, body); code != 200 || !ans.OK || ans.Changed || ans.Revision != first {
		t.Fatalf("no-op reload: %d %s", code, body)
	}

	write(t, filepath.Join(f.dir, "p.rego"), denyRego)
	code, body = do(t, h, "POST", "/v1/policy/reload")
	ans := decode[admin.ReloadAnswer](t, body)
	second := f.engine.Policy().Revision
	if code != 200 || !ans.OK || !ans.Changed || ans.Revision != second || ans.Previous != first || second == first {
		t.Fatalf("good reload: %d %s", code, body)
	}

	write(t, filepath.Join(f.dir, "broken.rego"), "package writ.authz\n\ndenials contains x if {\n")
	code, body = do(t, h, "POST", "/v1/policy/reload")
	ans = decode[admin.ReloadAnswer](t, body)
	if code != http.StatusUnprocessableEntity || ans.OK || ans.Changed || ans.Revision != second ||
		!strings.Contains(ans.Error, "broken.rego") {
		t.Fatalf("broken reload: %d %s", code, body)
	}
	if f.engine.Policy().Revision != second {
		t.Fatal("a broken policy was swapped in")
	}
	d, _ := f.engine.Decide(context.Background(), &authz.Input{})
	if d.Revision != second || d.Allow {
		t.Fatalf("the old policy stopped deciding: %+v", d)
	}
	// /v1/policy reports the refusal while the old revision serves.
	_, body = do(t, h, "GET", "/v1/policy")
	st := decode[admin.PolicyStatus](t, body)
	if st.Revision != second || st.LastReload.OK || st.LastReload.Revision != second ||
		!strings.Contains(st.LastReload.Error, "broken.rego") || st.Reloads.OK != 2 || st.Reloads.Failed != 1 {
		t.Fatalf("after the refused reload: %s", body)
	}
	if code, _ := do(t, h, "GET", "/readyz"); code != 200 {
		t.Errorf("a refused reload made the process unready: %d", code)
	}

	if code, _ := do(t, h, "GET", "/v1/policy/reload"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET reload: %d", code)
	}
	if code, _ := do(t, newLocal(admin.Deps{Engine: f.engine}), "POST", "/v1/policy/reload"); code != 503 {
		t.Errorf("no reloader: %d", code)
	}
}

// TestReloadCrossOrigin: a browser's cross-site POST cannot trigger a reload.
func TestReloadCrossOrigin(t *testing.T) {
	f := newFixture(t)
	h := newLocal(admin.Deps{Engine: f.engine, Reloader: f.rl})
	if code, _ := do(t, h, "POST", "/v1/policy/reload", "Sec-Fetch-Site", "cross-site"); code != http.StatusForbidden {
		t.Fatalf("cross-site POST: %d", code)
	}
	if code, _ := do(t, h, "POST", "/v1/policy/reload", "Origin", "https://evil.example"); code != http.StatusForbidden {
		t.Fatalf("foreign Origin POST: %d", code)
	}
	if ok, failed := f.rl.Counts(); ok+failed != 0 {
		t.Fatalf("a cross-origin request reloaded: %d/%d", ok, failed)
	}
}

// secrets that a push config carries and the task view must never show.
var secrets = []string{"tok-SECRET-9f2", "cred-SECRET-77a", "sig=SECRET", "hunter2", "/hooks/SECRET-path"}

func TestTask(t *testing.T) {
	ctx := context.Background()
	store := task.NewMemoryStore(task.MemoryLimits{})
	rec := task.Record{
		Task: task.Task{ID: "t-1", ContextID: "ctx-9", State: task.Running,
			InputText: "screen ACME Trading LLC", Artifacts: []string{"sanctions-screening"},
			Chain: []string{"payments-investigator"}, Classification: task.Restricted,
			Owner: task.Owner{AgentID: "payments-investigator", Tenant: "wholesale", UserID: "u-1"}},
		Agent: "sanctions-screening-agent", Protocol: "a2a", Version: "1.0",
	}
	if err := store.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := store.SetPush(ctx, task.Ref{Agent: "sanctions-screening-agent", ID: "t-1"}, task.PushConfig{ID: "cb-1",
		URL:   "https://ops:hunter2@hooks.agents.bank.ae:8443/hooks/SECRET-path?sig=SECRET",
		Token: "tok-SECRET-9f2", AuthScheme: "Bearer", Credentials: "cred-SECRET-77a"}); err != nil {
		t.Fatal(err)
	}
	h := newLocal(admin.Deps{Store: store})

	code, body := do(t, h, "GET", "/v1/agents/sanctions-screening-agent/tasks/t-1")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	for _, s := range append(secrets, "ACME", "input_text") {
		if strings.Contains(body, s) {
			t.Errorf("the task view shows %q:\n%s", s, body)
		}
	}
	v := decode[admin.TaskView](t, body)
	want := admin.PushView{ID: "cb-1", Host: "hooks.agents.bank.ae:8443", AuthScheme: "Bearer"}
	if v.ID != "t-1" || v.ContextID != "ctx-9" || v.State != task.Running || v.Terminal ||
		v.Agent != "sanctions-screening-agent" || v.Protocol != "a2a" || v.Version != "1.0" ||
		v.Owner != rec.Task.Owner || len(v.Chain) != 1 || v.Classification != task.Restricted ||
		len(v.Artifacts) != 1 || v.Created.IsZero() || v.Updated.IsZero() ||
		len(v.Push) != 1 || v.Push[0] != want {
		t.Fatalf("%+v", v)
	}
	// Every field the JSON carries is one the brief names; nothing else.
	var raw map[string]any
	_ = json.Unmarshal([]byte(body), &raw)
	for _, k := range []string{"id", "context_id", "state", "agent", "protocol", "version", "owner",
		"delegation_chain", "data_classification", "artifacts", "created", "updated", "violations", "push_configs"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("no %q in %s", k, body)
		}
	}
	if pc := raw["push_configs"].([]any)[0].(map[string]any); len(pc) != 3 {
		t.Errorf("a push config shows more than id, host and auth scheme: %v", pc)
	}

	if code, body := do(t, h, "GET", "/v1/agents/sanctions-screening-agent/tasks/nope"); code != 404 || !strings.Contains(body, "task not found") {
		t.Errorf("unknown task: %d %s", code, body)
	}
	if code, _ := do(t, h, "DELETE", "/v1/agents/sanctions-screening-agent/tasks/t-1"); code != http.StatusMethodNotAllowed {
		t.Errorf("DELETE: %d", code)
	}
	// An id with a slash is reachable escaped.
	_ = store.Create(ctx, task.Record{Task: task.Task{ID: "a/b", State: task.Queued}, Agent: "sanctions-screening-agent"})
	if code, body := do(t, h, "GET", "/v1/agents/sanctions-screening-agent/tasks/a%2Fb"); code != 200 || !strings.Contains(body, `"a/b"`) {
		t.Errorf("escaped id: %d %s", code, body)
	}
	if code, _ := do(t, newLocal(admin.Deps{}), "GET", "/v1/agents/sanctions-screening-agent/tasks/t-1"); code != 503 {
		t.Errorf("no store: %d", code)
	}
	if code, body := do(t, newLocal(admin.Deps{Store: failing{}}), "GET", "/v1/agents/sanctions-screening-agent/tasks/t-1"); code != 500 || strings.Contains(body, "disk") {
		t.Errorf("store failure: %d %s", code, body)
	}
}

// TestTaskViewNeverShowsSecrets renders records directly, push configs of every
// shape included.
func TestTaskViewNeverShowsSecrets(t *testing.T) {
	for _, u := range []string{"https://ops:hunter2@h.example/hooks/SECRET-path?sig=SECRET", "::not a url sig=SECRET", ""} {
		rec := task.Record{Task: task.Task{ID: "x", State: task.Succeeded, InputText: "hunter2", OutputText: "hunter2"},
			Push: []task.PushConfig{{ID: "p", URL: u, Token: "tok-SECRET-9f2", Credentials: "cred-SECRET-77a"}}}
		raw, err := json.Marshal(admin.NewTaskView(rec))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets {
			if strings.Contains(string(raw), s) {
				t.Errorf("url %q: the view shows %q: %s", u, s, raw)
			}
		}
	}
}

// failing is a store whose backend is down.
type failing struct{ task.Store }

func (failing) Get(context.Context, task.Ref) (task.Record, bool, error) {
	return task.Record{}, false, errors.New("disk on fire")
}

func TestPprof(t *testing.T) {
	off := newLocal(admin.Deps{})
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline", "/debug/pprof"} {
		if code, _ := do(t, off, "GET", p); code != 404 {
			t.Errorf("pprof off by default, but %s answers %d", p, code)
		}
	}
	on := newLocal(admin.Deps{Pprof: true})
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/goroutine?debug=1",
		"/debug/pprof/cmdline", "/debug/pprof/symbol", "/debug/pprof/trace?seconds=0.01", "/debug/pprof/profile?seconds=1"} {
		if code, _ := do(t, on, "GET", p); code != 200 {
			t.Errorf("pprof on: %s answers %d", p, code)
		}
	}
}

func TestMetrics(t *testing.T) {
	if code, _ := do(t, newLocal(admin.Deps{}), "GET", "/metrics"); code != 404 {
		t.Errorf("no metrics handler: %d", code)
	}
	m := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "writ_policy_reloads_total{result=\"ok\"} 0\n")
	})
	h := newLocal(admin.Deps{Metrics: m})
	if code, body := do(t, h, "GET", "/metrics"); code != 200 || !strings.HasPrefix(body, "writ_policy_reloads_total") {
		t.Errorf("metrics: %d %q", code, body)
	}
	if code, _ := do(t, h, "POST", "/metrics"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics: %d", code)
	}
}

func TestUnknownRoutes(t *testing.T) {
	f := newFixture(t)
	h := newLocal(admin.Deps{Engine: f.engine, Reloader: f.rl, Store: task.NewMemoryStore(task.MemoryLimits{})})
	for _, p := range []string{"/", "/v1", "/v1/", "/v1/policy/", "/v1/tasks", "/v1/tasks/t-1", "/v1/agents/x/tasks/", "/v1/agents/x/tasks/a/b", "/healthz/x", "/metrics"} {
		if code, _ := do(t, h, "GET", p); code != 404 {
			t.Errorf("GET %s: %d", p, code)
		}
	}
	for _, r := range [][2]string{{"DELETE", "/v1/policy"}, {"PUT", "/v1/policy/reload"}, {"POST", "/readyz"}} {
		if code, _ := do(t, h, r[0], r[1]); code != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %d", r[0], r[1], code)
		}
	}
}

// TestReadyzConcurrentWithReload: readiness and policy status stay consistent
// while reloads run (go test -race).
func TestReadyzConcurrentWithReload(t *testing.T) {
	f := newFixture(t)
	h := newLocal(admin.Deps{Engine: f.engine, Reloader: f.rl})
	srv := httptest.NewServer(h)
	defer srv.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 5 {
			rego := allowRego
			if i%2 == 0 {
				rego = denyRego
			}
			write(t, filepath.Join(f.dir, "p.rego"), rego)
			resp, err := srv.Client().Post(srv.URL+"/v1/policy/reload", "", nil)
			if err == nil {
				resp.Body.Close()
			}
		}
	}()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case <-done:
			return
		case <-deadline:
			t.Fatal("reloads did not finish")
		default:
		}
		for _, p := range []string{"/readyz", "/v1/policy"} {
			resp, err := srv.Client().Get(srv.URL + p)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("%s: %d during reloads", p, resp.StatusCode)
			}
		}
	}
}

// newLocal is the admin API on a loopback listener (writ's default admin
// address), as most tests here serve it.
func newLocal(d admin.Deps) http.Handler {
	if d.Addrs == nil {
		d.Addrs = []string{"127.0.0.1:8477"}
	}
	return admin.New(d)
}

// doHost is do with the request's Host (and any headers) set.
func doHost(t *testing.T, h http.Handler, method, path, host string, header ...string) (int, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestAdminHostAllowList: a request naming a host the listener is not —
// what a DNS-rebinding page sends — is refused (421) on every route; the
// listener's own addresses, localhost, loopback addresses and admin_hosts
// are served, and on a listener on every interface any IP address (the pod
// IP kubelet probes and Prometheus use).
//
// Threat: DNS rebinding: a web page open on an operator's machine resolves
// its own name to 127.0.0.1 and then reads task records or reloads the
// policy through the victim's browser. Defence: every request's Host must be
// one of the listener's (Deps.Addrs, Deps.Hosts, localhost, loopback).
func TestAdminHostAllowList(t *testing.T) {
	f := newFixture(t)
	m := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "writ_up 1\n") })
	local := admin.New(admin.Deps{Engine: f.engine, Reloader: f.rl, Metrics: m, Addrs: []string{"127.0.0.1:8477"},
		Hosts: []string{"writ-admin.internal"}})
	for _, host := range []string{"evil.example:8477", "rebind.attacker.test", "127.0.0.1.evil.example:8477", "10.0.0.5:8477"} {
		for _, r := range [][2]string{{"GET", "/healthz"}, {"GET", "/metrics"}, {"GET", "/v1/policy"}, {"POST", "/v1/policy/reload"}} {
			if code, _ := doHost(t, local, r[0], r[1], host); code != http.StatusMisdirectedRequest {
				t.Errorf("Host %q: %s %s answers %d, want 421", host, r[0], r[1], code)
			}
		}
	}
	if ok, failed := f.rl.Counts(); ok+failed != 0 {
		t.Fatalf("a request for a foreign host reloaded the policy")
	}
	for _, host := range []string{"127.0.0.1:8477", "localhost:8477", "LOCALHOST.", "[::1]:8477", "127.0.0.2", "writ-admin.internal:8477"} {
		if code, body := doHost(t, local, "GET", "/v1/policy", host); code != 200 {
			t.Errorf("Host %q: %d %s", host, code, body)
		}
	}
	all := admin.New(admin.Deps{Engine: f.engine, Metrics: m, Addrs: []string{"0.0.0.0:8477"}})
	for host, want := range map[string]int{"10.1.2.3:8477": 200, "[fd00::7]:8477": 200, "127.0.0.1:8477": 200, "evil.example:8477": 421} {
		if code, _ := doHost(t, all, "GET", "/metrics", host); code != want {
			t.Errorf("every interface, Host %q: %d, want %d", host, code, want)
		}
	}
}

// TestAdminRefusesCrossSite: a request a browser sends on behalf of another
// site — Sec-Fetch-Site cross-site or same-site, or an Origin other than the
// host it asks — is refused on reads as on writes.
//
// Threat: a page on another origin reads or drives the admin API through
// the operator's browser. Defence: a cross-site Origin or Sec-Fetch-Site is
// refused (403) on every route, reads included.
func TestAdminRefusesCrossSite(t *testing.T) {
	f := newFixture(t)
	h := newLocal(admin.Deps{Engine: f.engine, Reloader: f.rl})
	for _, hdr := range [][2]string{{"Sec-Fetch-Site", "cross-site"}, {"Sec-Fetch-Site", "same-site"},
		{"Origin", "http://evil.example"}, {"Origin", "null"}, {"Origin", "http://127.0.0.1:9999"}} {
		if code, _ := doHost(t, h, "GET", "/v1/policy", "127.0.0.1:8477", hdr[0], hdr[1]); code != http.StatusForbidden {
			t.Errorf("GET with %s: %s answers %d, want 403", hdr[0], hdr[1], code)
		}
	}
	if code, _ := doHost(t, h, "GET", "/v1/policy", "127.0.0.1:8477", "Origin", "http://127.0.0.1:8477", "Sec-Fetch-Site", "same-origin"); code != 200 {
		t.Errorf("same origin: %d", code)
	}
}

// TestAdminOperatorRoutes: on a listener beyond loopback the operator routes
// (task records, the policy, reload, pprof) need the admin token — without
// one configured they are off (403) — while /healthz, /readyz and /metrics
// stay open; with a token, a request without it or with another is 401; on
// a loopback listener without a token they answer.
//
// Threat: a process that shares writ's network — the agent in writ's pod,
// which reaches the admin port on the pod's loopback — reads every caller's
// task records, or reloads the policy. Defence: the operator routes need a
// bearer token from admin_token_file (which only writ's container mounts),
// or without one are served only by a listener bound to loopback alone.
func TestAdminOperatorRoutes(t *testing.T) {
	f := newFixture(t)
	store := task.NewMemoryStore(task.MemoryLimits{})
	if err := store.Create(context.Background(), task.Record{Task: task.Task{ID: "t-1", State: task.Running},
		Agent: "sanctions-screening-agent"}); err != nil {
		t.Fatal(err)
	}
	m := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "writ_up 1\n") })
	deps := func(addr, token string) admin.Deps {
		return admin.Deps{Engine: f.engine, Reloader: f.rl, Store: store, Metrics: m, Pprof: true,
			Addrs: []string{addr}, Token: token}
	}
	operator := [][2]string{{"GET", "/v1/agents/sanctions-screening-agent/tasks/t-1"}, {"GET", "/v1/policy"},
		{"POST", "/v1/policy/reload"}, {"GET", "/debug/pprof/cmdline"}}
	open := [][2]string{{"GET", "/healthz"}, {"GET", "/readyz"}, {"GET", "/metrics"}}
	const tok = "0123456789abcdef0123456789abcdef"

	pod := admin.New(deps("0.0.0.0:8477", ""))
	for _, r := range operator {
		if code, _ := doHost(t, pod, r[0], r[1], "127.0.0.1:8477"); code != http.StatusForbidden {
			t.Errorf("every interface, no token: %s %s answers %d, want 403", r[0], r[1], code)
		}
	}
	if ok, failed := f.rl.Counts(); ok+failed != 0 {
		t.Fatal("a refused request reloaded the policy")
	}
	for _, r := range open {
		if code, _ := doHost(t, pod, r[0], r[1], "10.1.2.3:8477"); code != 200 {
			t.Errorf("every interface: %s %s answers %d", r[0], r[1], code)
		}
	}
	withToken := admin.New(deps("0.0.0.0:8477", tok))
	for _, r := range operator {
		for _, auth := range []string{"", "Bearer ", "Bearer wrong-" + tok, "Basic " + tok, tok} {
			if code, _ := doHost(t, withToken, r[0], r[1], "127.0.0.1:8477", "Authorization", auth); code != http.StatusUnauthorized {
				t.Errorf("token set, Authorization %q: %s %s answers %d, want 401", auth, r[0], r[1], code)
			}
		}
		if code, body := doHost(t, withToken, r[0], r[1], "10.1.2.3:8477", "Authorization", "Bearer "+tok); code != 200 {
			t.Errorf("with the token: %s %s answers %d %s", r[0], r[1], code, body)
		}
	}
	local := admin.New(deps("127.0.0.1:8477", ""))
	for _, r := range operator {
		if code, body := doHost(t, local, r[0], r[1], "127.0.0.1:8477"); code != 200 {
			t.Errorf("loopback, no token: %s %s answers %d %s", r[0], r[1], code, body)
		}
	}
	if code, _ := doHost(t, admin.New(admin.Deps{Engine: f.engine}), "GET", "/v1/policy", "127.0.0.1"); code != http.StatusForbidden {
		t.Errorf("no listener address given: operator routes answer %d, want 403 (fail closed)", code)
	}
}

// TestLoadToken: the token file's content, trimmed; too short, with spaces
// or missing is an error naming the key.
func TestLoadToken(t *testing.T) {
	dir := t.TempDir()
	for content, ok := range map[string]bool{
		"0123456789abcdef0123456789abcdef\n": true, "  0123456789abcdef0123456789abcdef0123  ": true,
		"short\n": false, "0123456789abcdef 0123456789abcdef": false, "0123456789abcdef0123456789abcdef\x00": false, "": false,
	} {
		p := filepath.Join(dir, "token")
		write(t, p, content)
		tok, err := admin.LoadToken(p)
		if (err == nil) != ok || (ok && tok != strings.TrimSpace(content)) {
			t.Errorf("%q: %q %v", content, tok, err)
		}
		if err != nil && !strings.Contains(err.Error(), "admin_token_file") {
			t.Errorf("%q: the error names no key: %v", content, err)
		}
	}
	if _, err := admin.LoadToken(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file loads")
	}
}

// TestReadyzBundleRevision: a policy from a bundle has its manifest
// revision on /readyz's line and in GET /v1/policy's bundle_revision.
func TestReadyzBundleRevision(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "p.rego"), allowRego)
	p, err := authz.LoadPolicyFS(context.Background(), os.DirFS(dir), "bundle", authz.LoadOptions{BundleRevision: "release-7"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := authz.NewEngine(p, authz.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := newLocal(admin.Deps{Engine: e})
	if code, body := do(t, h, "GET", "/readyz"); code != 200 || !strings.Contains(body, "ready: policy revision "+p.Revision+" (bundle revision release-7)") {
		t.Errorf("/readyz: %d %q", code, body)
	}
	if code, body := do(t, h, "GET", "/v1/policy"); code != 200 || !strings.Contains(body, `"bundle_revision": "release-7"`) {
		t.Errorf("GET /v1/policy: %d %s", code, body)
	}
}
