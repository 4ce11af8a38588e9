// Package admin is writ's admin API, served on its own listener (loopback by
// default): liveness and readiness for orchestrators, the live policy and its
// reloads, the lifecycle record of one task for operators, and optionally
// Prometheus metrics and pprof.
//
// Routes (anything else is 404, a known path with the wrong method 405):
//
//	GET  /healthz            200 "ok" while the process lives
//	GET  /readyz             200 when a policy is loaded, the lifecycle store answers (Deps.StoreReady) and Deps.Ready passes, else 503 with the reason
//	GET  /metrics            Deps.Metrics, when set
//	GET  /v1/policy          operator: the live policy: revision, files, load time, test counts, last reload; the shadow set's, with its disagreement rate
//	POST /v1/policy/reload   operator: reload now: 200 with the new revision, or 422 while the old one keeps serving
//	GET  /v1/agents/{agent}/tasks/{id}  operator: the task's lifecycle record (never message content, push tokens or credentials)
//	     /debug/pprof/...    operator: net/http/pprof, only when Deps.Pprof
//
// Every request must name an allowed host (Deps.Addrs, Deps.Hosts, loopback;
// else 421) and must not come from another site (a cross-site Origin or
// Sec-Fetch-Site: 403): a web page open on an operator's machine can neither
// reach the API through DNS rebinding nor drive it from its own origin. The
// probe and scrape routes stay open to anyone who reaches the listener; the
// operator routes read task records, the policy and the process's memory or
// change the policy, so they need Deps.Token as a bearer token, or without
// one a listener on loopback only (403 otherwise): a process next to writ
// (the agent in the same pod) cannot read every caller's task records.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"net/url"
	"time"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/task"
)

// Deps are what the admin API reads and drives. Every field is optional: a
// missing Engine makes the process not ready, a missing Reloader or Store makes
// its routes answer 503.
type Deps struct {
	// Engine serves the live policy (authz.Engine).
	Engine PolicySource
	// Reloader reloads the policy (POST /v1/policy/reload) and remembers the
	// last attempt (GET /v1/policy) (authz.Reloader).
	Reloader Reloader
	// Shadow is the shadow policy set beside the live one (authz.Shadow;
	// policies_shadow:), ShadowReloader its reloader: GET /v1/policy shows
	// its revision, its evaluations and its disagreement rate.
	Shadow         ShadowSource
	ShadowReloader Reloader
	// Store holds the task lifecycle records (GET /v1/agents/{agent}/tasks/{id}).
	Store interface {
		Get(ctx context.Context, ref task.Ref) (task.Record, bool, error)
	}
	// StoreReady reports whether the lifecycle store can serve (Redis answers
	// its ping, the file is open); nil means it always can. A store that
	// cannot makes the process not ready: every request that needs it would
	// be refused (503) anyway. It shares ReadyTimeout with Ready.
	StoreReady func(ctx context.Context) error
	// Ready is the readiness check beyond a loaded policy (the wiring passes one
	// that fetches each upstream's card); nil means ready once the policy is
	// loaded. It gets at most ReadyTimeout.
	Ready func(ctx context.Context) error
	// Metrics is mounted at GET /metrics when set.
	Metrics http.Handler
	// Status, when set, gives the status document GET /v1/status serves
	// (JSON, OPA's status shape: fleet.Plugins.Status).
	Status func() ([]byte, error)
	// Pprof serves /debug/pprof/ and its sub-handlers when true.
	Pprof bool
	// Logger records reloads asked for through the API, refused operator
	// requests and store failures (default slog.Default()).
	Logger *slog.Logger
	// Addrs are the listener's addresses, as configured and as bound
	// (host:port): requests may name their hosts in Host, and the operator
	// routes answer without a Token only when every one is loopback. None
	// (the zero value): the listener counts as reachable beyond loopback.
	Addrs []string
	// Hosts are further host names requests may name in Host (admin_hosts),
	// besides Addrs' hosts, localhost and loopback addresses (and, on a
	// listener on every interface, any IP address).
	Hosts []string
	// Token, when set, is the bearer token every operator request must carry
	// (admin_token_file; LoadToken reads it).
	Token string
}

// PolicySource is what the admin API reads of the decision point: the policy
// serving now (nil before one is loaded). Safe for concurrent use.
type PolicySource interface {
	Policy() *authz.Policy
}

// ShadowSource is what the admin API reads of the shadow policy set: the
// set serving now and its evaluations by result. Safe for concurrent use.
type ShadowSource interface {
	Policy() *authz.Policy
	Counts() authz.ShadowCounts
}

// Reloader is what the admin API drives of the policy's reloading. Reload
// loads the policy files anew, swaps them in when they are good and returns
// why not otherwise (the old policy keeps serving); it may take seconds (the
// policies' own tests run). Last and Counts are cheap. Safe for concurrent use.
type Reloader interface {
	Reload(ctx context.Context) error
	Last() authz.ReloadResult
	Counts() (ok, failed uint64)
}

var (
	_ PolicySource = (*authz.Engine)(nil)
	_ Reloader     = (*authz.Reloader)(nil)
	_ ShadowSource = (*authz.Shadow)(nil)
)

// ReadyTimeout bounds one Deps.Ready call; a slower check answers 503. Set
// readiness probe timeouts above it.
const ReadyTimeout = 5 * time.Second

// New returns the admin API handler.
func New(d Deps) http.Handler {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	a := &api{d: d, access: newAccess(d)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", a.healthz)
	mux.HandleFunc("GET /readyz", a.readyz)
	if d.Metrics != nil {
		mux.Handle("GET /metrics", d.Metrics)
	}
	op := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, a.operator(h)) }
	op("GET /v1/policy", a.policy)
	op("POST /v1/policy/reload", a.reload)
	op("GET /v1/agents/{agent}/tasks/{id}", a.task)
	if d.Status != nil {
		op("GET /v1/status", a.status)
	}
	if d.Pprof {
		// pprof.Index also serves every named profile (heap, goroutine, …)
		// below /debug/pprof/.
		op("GET /debug/pprof/", pprof.Index)
		op("GET /debug/pprof/cmdline", pprof.Cmdline)
		op("GET /debug/pprof/profile", pprof.Profile)
		op("GET /debug/pprof/symbol", pprof.Symbol)
		op("POST /debug/pprof/symbol", pprof.Symbol)
		op("GET /debug/pprof/trace", pprof.Trace)
	}
	return a.guard(mux)
}

// status serves the status document.
func (a *api) status(w http.ResponseWriter, _ *http.Request) {
	doc, err := a.d.Status()
	if err != nil {
		a.d.Logger.Error("admin: the status document could not be made", "error", err)
		http.Error(w, "status unavailable", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(doc)
}

// api holds the handlers' dependencies.
type api struct {
	d      Deps
	access access
}

func (a *api) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok\n")
}

func (a *api) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	p := a.livePolicy()
	if p == nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "not ready: no policy loaded\n")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), ReadyTimeout)
	defer cancel()
	if a.d.StoreReady != nil {
		if err := a.d.StoreReady(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: lifecycle store: %v\n", err)
			return
		}
	}
	if a.d.Ready != nil {
		if err := a.d.Ready(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %v\n", err)
			return
		}
	}
	if p.BundleRevision != "" {
		fmt.Fprintf(w, "ready: policy revision %s (bundle revision %s)\n", p.Revision, p.BundleRevision)
		return
	}
	fmt.Fprintf(w, "ready: policy revision %s\n", p.Revision)
}

// livePolicy is the policy serving now, or nil.
func (a *api) livePolicy() *authz.Policy {
	if a.d.Engine == nil {
		return nil
	}
	return a.d.Engine.Policy()
}

// PolicyStatus is the answer of GET /v1/policy.
type PolicyStatus struct {
	// Revision identifies the live policy set (a hash of its files).
	Revision string `json:"revision"`
	// BundleRevision is the manifest revision of the OPA bundle the set
	// came from (policy_bundle:; Revision ends in "@" and it); absent for
	// files.
	BundleRevision string `json:"bundle_revision,omitempty"`
	// Files are the policy and data files it was loaded from.
	Files []string `json:"files"`
	// Loaded is when the live set was loaded.
	Loaded time.Time `json:"loaded"`
	// Tests counts the set's own Rego tests at load.
	Tests PolicyTests `json:"tests"`
	// LastReload is the latest reload attempt (the initial load until one
	// happens); absent without a reloader.
	LastReload *authz.ReloadResult `json:"last_reload,omitempty"`
	// Reloads counts reload attempts since the start; absent without a reloader.
	Reloads *ReloadCounts `json:"reloads,omitempty"`
	// Shadow is the shadow policy set (policies_shadow:); absent without one.
	Shadow *ShadowStatus `json:"shadow,omitempty"`
}

// ShadowStatus is the shadow policy set in GET /v1/policy: what it is and
// how often it disagrees with the live set.
type ShadowStatus struct {
	Revision string      `json:"revision"`
	Files    []string    `json:"files"`
	Loaded   time.Time   `json:"loaded"`
	Tests    PolicyTests `json:"tests"`
	// Evaluations counts the shadow's evaluations since the start by result.
	Evaluations ShadowEvaluations `json:"evaluations"`
	// DisagreementRate is disagree / (agree + disagree): the share of the
	// decisions it evaluated that it would have made otherwise (0 before
	// any).
	DisagreementRate float64 `json:"disagreement_rate"`
	// LastReload and Reloads are the shadow reloader's.
	LastReload *authz.ReloadResult `json:"last_reload,omitempty"`
	Reloads    *ReloadCounts       `json:"reloads,omitempty"`
}

// ShadowEvaluations counts shadow evaluations by result.
type ShadowEvaluations struct {
	Agree    uint64 `json:"agree"`
	Disagree uint64 `json:"disagree"`
	Error    uint64 `json:"error"`
	Dropped  uint64 `json:"dropped"`
}

// PolicyTests counts a policy set's own Rego tests.
type PolicyTests struct {
	// Passed, Failed and Errored count the tests by outcome (a set loads only
	// with none failed or errored).
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Errored int `json:"errored"`
}

// ReloadCounts counts reload attempts by outcome.
type ReloadCounts struct {
	// OK counts reloads that loaded (a changed or an unchanged revision);
	// Failed counts refused ones.
	OK     uint64 `json:"ok"`
	Failed uint64 `json:"failed"`
}

func (a *api) policy(w http.ResponseWriter, _ *http.Request) {
	p := a.livePolicy()
	if p == nil {
		writeError(w, http.StatusServiceUnavailable, "no policy loaded")
		return
	}
	st := PolicyStatus{Revision: p.Revision, BundleRevision: p.BundleRevision, Files: p.Files, Loaded: p.Loaded,
		Tests: PolicyTests{Passed: p.Tests.Passed, Failed: p.Tests.Failed, Errored: p.Tests.Errored}}
	if st.Files == nil {
		st.Files = []string{}
	}
	if rl := a.d.Reloader; rl != nil {
		last := rl.Last()
		ok, failed := rl.Counts()
		st.LastReload, st.Reloads = &last, &ReloadCounts{OK: ok, Failed: failed}
	}
	if sh := a.d.Shadow; sh != nil {
		st.Shadow = a.shadowStatus(sh)
	}
	writeJSON(w, http.StatusOK, st)
}

// shadowStatus is the shadow set's part of GET /v1/policy.
func (a *api) shadowStatus(sh ShadowSource) *ShadowStatus {
	st := &ShadowStatus{Files: []string{}}
	if p := sh.Policy(); p != nil {
		st.Revision, st.Loaded = p.Revision, p.Loaded
		st.Tests = PolicyTests{Passed: p.Tests.Passed, Failed: p.Tests.Failed, Errored: p.Tests.Errored}
		if p.Files != nil {
			st.Files = p.Files
		}
	}
	c := sh.Counts()
	st.Evaluations = ShadowEvaluations{Agree: c.Agree, Disagree: c.Disagree, Error: c.Error, Dropped: c.Dropped}
	if n := c.Agree + c.Disagree; n > 0 {
		st.DisagreementRate = float64(c.Disagree) / float64(n)
	}
	if rl := a.d.ShadowReloader; rl != nil {
		last := rl.Last()
		ok, failed := rl.Counts()
		st.LastReload, st.Reloads = &last, &ReloadCounts{OK: ok, Failed: failed}
	}
	return st
}

// ReloadAnswer is the answer of POST /v1/policy/reload.
type ReloadAnswer struct {
	// OK reports whether the policy files loaded, compiled and passed their tests.
	OK bool `json:"ok"`
	// Revision is the revision serving after the attempt: the new one, or on
	// failure the old one, which keeps serving.
	Revision string `json:"revision"`
	// Previous is the revision that served before the attempt.
	Previous string `json:"previous_revision"`
	// Changed reports whether a new revision was swapped in.
	Changed bool `json:"changed"`
	// Error says why a reload was refused.
	Error string `json:"error,omitempty"`
}

func (a *api) reload(w http.ResponseWriter, r *http.Request) {
	if a.d.Reloader == nil || a.d.Engine == nil {
		writeError(w, http.StatusServiceUnavailable, "policy reload is not available")
		return
	}
	prev := ""
	if p := a.livePolicy(); p != nil {
		prev = p.Revision
	}
	a.d.Logger.Info("policy reload requested through the admin API", "remote", r.RemoteAddr)
	// A reload is all-or-nothing; a client that hangs up does not abandon it.
	err := a.d.Reloader.Reload(context.WithoutCancel(r.Context()))
	ans := ReloadAnswer{OK: err == nil, Previous: prev}
	if p := a.livePolicy(); p != nil {
		ans.Revision = p.Revision
	}
	ans.Changed = ans.Revision != prev
	if err != nil {
		ans.Error = err.Error()
		writeJSON(w, http.StatusUnprocessableEntity, ans)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

// TaskView is the answer of GET /v1/agents/{agent}/tasks/{id}: a task's lifecycle record for
// operators. It is built field by field from the record, so message content,
// push tokens and credentials cannot appear in it.
type TaskView struct {
	// ID is the task id.
	ID string `json:"id"`
	// ContextID groups the tasks of one investigation.
	ContextID string `json:"context_id"`
	// State is the lifecycle state in writ's vocabulary.
	State task.State `json:"state"`
	// Terminal reports whether no transition may leave State.
	Terminal bool `json:"terminal"`
	// Agent is the protected agent (route) the task runs on.
	Agent string `json:"agent"`
	// Protocol and Version are those of the request that created the task.
	Protocol string `json:"protocol"`
	Version  string `json:"version"`
	// Owner is the caller who created the task.
	Owner task.Owner `json:"owner"`
	// Chain is the delegation chain that led to the task, oldest hop first.
	Chain []string `json:"delegation_chain"`
	// Classification is the task's data classification.
	Classification task.Level `json:"data_classification,omitempty"`
	// Artifacts names the artifacts the task produced, in order.
	Artifacts []string `json:"artifacts"`
	// Created and Updated are when the record was created and last changed.
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// Violations counts the illegal transitions the upstream reported.
	Violations int `json:"violations"`
	// Push lists the task's push configs, secrets left out.
	Push []PushView `json:"push_configs"`
}

// PushView is one push config as operators see it: its id, the receiver's host
// and the auth scheme. The full URL (its path or query may carry a secret), the
// token and the credentials are never shown.
type PushView struct {
	// ID is the config's id.
	ID string `json:"id"`
	// Host is the receiver's host (and port).
	Host string `json:"host"`
	// AuthScheme is the scheme the receiver expects (e.g. Bearer).
	AuthScheme string `json:"auth_scheme,omitempty"`
}

// NewTaskView renders a record for operators.
func NewTaskView(rec task.Record) TaskView {
	t := rec.Task
	v := TaskView{ID: t.ID, ContextID: t.ContextID, State: t.State, Terminal: t.State.Terminal(),
		Agent: rec.Agent, Protocol: rec.Protocol, Version: rec.Version, Owner: t.Owner,
		Chain: nonNil(t.Chain), Classification: t.Classification, Artifacts: nonNil(t.Artifacts),
		Created: rec.Created, Updated: rec.Updated, Violations: rec.Violations, Push: []PushView{}}
	for _, p := range rec.Push {
		v.Push = append(v.Push, PushView{ID: p.ID, Host: hostOf(p.URL), AuthScheme: p.AuthScheme})
	}
	return v
}

func (a *api) task(w http.ResponseWriter, r *http.Request) {
	if a.d.Store == nil {
		writeError(w, http.StatusServiceUnavailable, "no task store")
		return
	}
	id := r.PathValue("id")
	rec, ok, err := a.d.Store.Get(r.Context(), task.Ref{Agent: r.PathValue("agent"), ID: id})
	switch {
	case errors.Is(err, task.ErrNotFound) || (err == nil && !ok):
		writeError(w, http.StatusNotFound, "task not found")
	case err != nil:
		a.d.Logger.Error("admin: reading the task store", "task_id", id, "error", err)
		writeError(w, http.StatusInternalServerError, "task store failed")
	default:
		writeJSON(w, http.StatusOK, NewTaskView(rec))
	}
}

// hostOf is the host (and port) of a URL; never its user info, path or query.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
