// Package newprotocol is what a protocol writ does not ship costs: this file
// alone. It registers a fake protocol in the table (adapters.Register, as
// adapters/builtin.go registers A2A and ACP) and shows that, with no other
// file edited, config accepts it in agents[].protocol, an auto route detects
// it, a request of it goes through the admission core (identity, the shipped
// policy, the lifecycle store, ownership of its tasks) to a real upstream,
// the core refuses a Connection header naming one of its headers, and the
// Envoy HTTP door forwards its headers.
package newprotocol

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
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/extauthz"
	"github.com/writ-authz/writ/proxy/writheader"
	"github.com/writ-authz/writ/task"
)

// The fake protocol: POST /fake/tasks {"text": "..."} sends a message and
// starts a task, GET /fake/tasks/{id} reads one; the Fake-Version header
// negotiates the version (only "1" exists). Answers are {"id", "state"};
// errors {"fake_error": {kind, message, codes}}.
const (
	name          = "fake"
	versionHeader = "Fake-Version"
	contentType   = "application/fake+json"
)

func TestMain(m *testing.M) {
	err := adapters.Register(adapters.Protocol{Name: name, Segments: []string{"fake"},
		Edge: func(adapters.RouteOptions) adapters.Edge { return edge{} }})
	if err != nil {
		fmt.Fprintln(os.Stderr, "registering the fake protocol:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// edge is the fake protocol's adapter: it parses, renders its faults, reads
// its answers and negotiates.
type edge struct{}

var _ interface {
	adapters.Edge
	adapters.Answers
	adapters.Negotiator
} = edge{}

func (edge) Name() string { return name }

func (edge) DecisionHeaders() []string { return []string{versionHeader, "Content-Type"} }

func (edge) NegotiationHeaders() []string { return []string{versionHeader} }

func (edge) Parse(in wire.Inbound, _ wire.Limits) (task.Request, *task.Fault) {
	req := task.Request{Protocol: task.Protocol{Name: name, Version: in.Header.Get(versionHeader), Binding: task.BindingREST}}
	if req.Protocol.Version != "1" {
		return req, task.NewFault(task.KindVersionNotSupported, "Fake-Version must be 1")
	}
	switch id, isTask := strings.CutPrefix(in.Path, "/fake/tasks/"); {
	case in.Method == http.MethodPost && in.Path == "/fake/tasks":
		req.Operation, req.Protocol.Method = task.OpSend, "POST /fake/tasks"
		if in.Header.Get("Content-Type") != contentType {
			return req, task.NewFault(task.KindContentType, "want "+contentType)
		}
		var body struct{ Text string }
		if err := json.Unmarshal(in.Body, &body); err != nil || body.Text == "" {
			return req, task.NewFault(task.KindInvalidParams, "want {\"text\": ...}")
		}
		req.Message = &task.MessageSummary{Role: "user", Parts: task.PartCounts{Text: 1}}
	case in.Method == http.MethodGet && isTask && id != "" && !strings.Contains(id, "/"):
		req.Operation, req.Protocol.Method, req.TaskID = task.OpGet, "GET /fake/tasks/{id}", id
	default:
		return req, task.NewFault(task.KindUnknownOperation, "no such fake operation")
	}
	return req, nil
}

func (edge) RenderFault(_ *task.Request, f *task.Fault) wire.Rendered {
	codes := []string{}
	for _, d := range f.Denials {
		codes = append(codes, d.Code)
	}
	body, _ := json.Marshal(map[string]any{"fake_error": map[string]any{"kind": f.Kind, "message": f.Message, "codes": codes}})
	return wire.Rendered{Status: wire.HTTPStatus(f.Kind), ContentType: contentType, Body: body}
}

func (edge) ParseResponse(_ *task.Request, status int, body []byte) ([]task.Event, error) {
	return answer(status, body)
}

func answer(status int, body []byte) ([]task.Event, error) {
	var a struct{ ID, State string }
	if err := json.Unmarshal(body, &a); err != nil || status != http.StatusOK || a.ID == "" || !task.State(a.State).Valid() {
		return nil, fmt.Errorf("not a fake answer (status %d)", status)
	}
	return []task.Event{{Kind: task.EventStatus, TaskID: a.ID, State: task.State(a.State)}}, nil
}

func (edge) NewStreamReader(_ *task.Request, body io.Reader, maxEventBytes int) wire.EventReader {
	return stream{wire.NewSSEReader(body, maxEventBytes)}
}

type stream struct{ r *wire.SSEReader }

func (s stream) Next() (wire.SSEEvent, []task.Event, error) {
	ev, err := s.r.Next()
	if err != nil || !ev.HasData {
		return ev, nil, err
	}
	evs, err := answer(http.StatusOK, ev.Data)
	return ev, evs, err
}

func (e edge) RenderStreamFault(req *task.Request, f *task.Fault) []byte {
	return append(append([]byte("data: "), e.RenderFault(req, f).Body...), "\n\n"...)
}

// upstream is a real fake-protocol agent on loopback that records what
// reached it.
type upstream struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []*http.Request
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.got = append(u.got, r.Clone(context.Background()))
		u.mu.Unlock()
		w.Header().Set("Content-Type", contentType)
		state := task.Running
		if r.Method == http.MethodGet {
			state = task.Succeeded
		}
		_, _ = fmt.Fprintf(w, `{"id":"t-fake-1","state":%q}`, state)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) requests() []*http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.got)
}

const issuer = "https://idp.test"

// writConfig is a writ.yaml with one agent of the fake protocol at "/" and
// one auto route at /auto.
func writConfig(jwks, upstreamURL, protocol string) string {
	return "policies: [../../policies]\n" +
		"identity:\n  jwt:\n    - {issuer: " + issuer + ", audiences: [writ], jwks_file: " + jwks + "}\n" +
		"agents:\n" +
		"  - {name: fake-agent, protocol: " + protocol + ", upstream: '" + upstreamURL + "', tenants: [wholesale], " +
		"max_data_classification: restricted, security_schemes: [oauth2]}\n" +
		"  - {name: auto-agent, route: /auto, upstream: '" + upstreamURL + "', tenants: [wholesale], " +
		"max_data_classification: restricted, security_schemes: [oauth2]}\n"
}

// TestConfigAcceptsIt: agents[].protocol may name the registered protocol,
// and a name the table lacks is refused with the table's names.
func TestConfigAcceptsIt(t *testing.T) {
	if _, err := config.Parse([]byte(writConfig("jwks.json", "http://127.0.0.1:1", name))); err != nil {
		t.Fatalf("config refuses protocol %q: %v", name, err)
	}
	_, err := config.Parse([]byte(writConfig("jwks.json", "http://127.0.0.1:1", "fake2")))
	if err == nil || !strings.Contains(err.Error(), "agents[0].protocol") || !strings.Contains(err.Error(), name+" or auto") {
		t.Fatalf("an unknown protocol: %v", err)
	}
}

// TestEnvoyForwardsItsHeaders: the Envoy HTTP door's header list (what
// deploy/envoy's allowed_headers must pass) holds the protocol's header.
func TestEnvoyForwardsItsHeaders(t *testing.T) {
	if hs := extauthz.RequestHeaders(); !slices.Contains(hs, strings.ToLower(versionHeader)) {
		t.Fatalf("extauthz.RequestHeaders() = %v, without %s", hs, versionHeader)
	}
}

// writ is the admission core in front of up, with a test identity provider.
type writ struct {
	core  *proxy.Core
	store *task.MemoryStore
	idp   *devidp.Provider
}

func newWrit(t *testing.T, up *upstream) *writ {
	t.Helper()
	idp, err := devidp.New(t.TempDir(), issuer, "writ")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(writConfig(idp.JWKSFile, up.srv.URL, name)))
	if err != nil {
		t.Fatal(err)
	}
	ident, err := identity.New(cfg.Identity)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ident.Close)
	pol, err := authz.LoadPolicy(context.Background(), cfg.Policies, authz.LoadOptions{SkipTests: true})
	if err != nil {
		t.Fatal(err)
	}
	engine, err := authz.NewEngine(pol, authz.Options{CacheSize: cfg.DecisionCacheSize})
	if err != nil {
		t.Fatal(err)
	}
	store := task.NewMemoryStore(task.MemoryLimits{MaxTasks: 100, MaxPerOwner: 10, TTL: time.Hour})
	core, err := proxy.New(cfg, proxy.Deps{Identity: ident, Engine: engine, Store: store,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(core.Close)
	return &writ{core: core, store: store, idp: idp}
}

func (w *writ) token(t *testing.T, agent string) string {
	t.Helper()
	tok, err := w.idp.Token(devidp.Caller{Agent: agent, User: "u-1", Tenant: "wholesale", Classification: "restricted", Scope: "delegate"})
	if err != nil {
		t.Fatal(err)
	}
	return "Bearer " + tok
}

// admit is a request of the fake protocol through the core.
func (w *writ) admit(method, path, auth string, body string, extra ...string) (proxy.Incoming, proxy.Outcome) {
	h := http.Header{versionHeader: {"1"}}
	if auth != "" {
		h.Set("Authorization", auth)
	}
	if body != "" {
		h.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		h.Set(extra[i], extra[i+1])
	}
	inc := proxy.Incoming{Method: method, Path: path, Host: "writ.test", RemoteAddr: "127.0.0.1:5000", Header: h, Body: []byte(body)}
	return inc, w.core.Admit(context.Background(), inc)
}

// forward is a door's work for a Forward outcome, through the plan's
// exported fields only: the request to the agent, its answer read back.
func forward(t *testing.T, inc proxy.Incoming, out proxy.Outcome) []byte {
	t.Helper()
	p := out.Plan
	req, err := http.NewRequest(p.Method, p.URL.String(), bytes.NewReader(p.Body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = inc.Header.Clone()
	for k, v := range p.Header {
		req.Header[k] = v
	}
	for _, k := range p.Drop {
		req.Header.Del(k)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	body, refused := p.Answer(context.Background(), resp.StatusCode, raw)
	if refused != nil {
		t.Fatalf("the core refused the agent's answer: %d %s", refused.Status, refused.Body)
	}
	return body
}

// TestAdmitToARealUpstream: a send of the fake protocol is decided by the
// shipped policy and reaches the agent with writ's caller header; the task
// its answer starts is recorded as the fake protocol's, owned by the
// caller; another caller's read of it is answered like a missing task, in
// the fake protocol's error shape; the owner's read reaches the agent.
func TestAdmitToARealUpstream(t *testing.T) {
	up := newUpstream(t)
	w := newWrit(t, up)
	owner := w.token(t, "payments-investigator")

	inc, out := w.admit(http.MethodPost, "/fake/tasks", owner, `{"text":"screen Acme"}`)
	if out.Kind != proxy.Forward || out.Protocol.Name != name || out.Operation != task.OpSend {
		t.Fatalf("send: %v %+v %v: %s", out.Kind, out.Protocol, out.Denials, out.Answer.Body)
	}
	if body := forward(t, inc, out); !strings.Contains(string(body), "t-fake-1") {
		t.Fatalf("the agent's answer: %s", body)
	}
	got := up.requests()
	if len(got) != 1 || got[0].URL.Path != "/fake/tasks" || got[0].Header.Get(versionHeader) != "1" {
		t.Fatalf("the agent got %v", got)
	}
	if c := got[0].Header.Get(writheader.Caller); !strings.Contains(c, "payments-investigator") {
		t.Fatalf("the agent got %s %q: not writ's caller", writheader.Caller, c)
	}
	rec, ok, err := w.store.Get(context.Background(), task.Ref{Agent: "fake-agent", ID: "t-fake-1"})
	if err != nil || !ok || rec.Protocol != name || rec.Task.Owner.AgentID != "payments-investigator" || rec.Task.State != task.Running {
		t.Fatalf("recorded %+v %v, %v", rec, ok, err)
	}

	_, out = w.admit(http.MethodGet, "/fake/tasks/t-fake-1", w.token(t, "retail-bot"), "")
	if out.Kind != proxy.Refuse || out.Fault == nil || out.Fault.Kind != task.KindTaskNotFound ||
		out.Answer.ContentType != contentType || !strings.Contains(string(out.Answer.Body), `"fake_error"`) {
		t.Fatalf("another caller's read: %v %+v %s", out.Kind, out.Fault, out.Answer.Body)
	}
	inc, out = w.admit(http.MethodGet, "/fake/tasks/t-fake-1", owner, "")
	if out.Kind != proxy.Forward || out.Operation != task.OpGet {
		t.Fatalf("the owner's read: %v %v %s", out.Kind, out.Denials, out.Answer.Body)
	}
	forward(t, inc, out)
	if rec, _, err := w.store.Get(context.Background(), task.Ref{Agent: "fake-agent", ID: "t-fake-1"}); err != nil || rec.Task.State != task.Succeeded {
		t.Fatalf("after the read %+v, %v", rec, err)
	}
	if n := len(up.requests()); n != 2 {
		t.Fatalf("the agent got %d requests, want 2 (the send and the owner's read)", n)
	}
}

// TestRefusalsInItsShape: a caller without a token and a request of a
// version the protocol lacks are refused before the agent, in the fake
// protocol's error shape.
func TestRefusalsInItsShape(t *testing.T) {
	up := newUpstream(t)
	w := newWrit(t, up)
	for what, out := range map[string]proxy.Outcome{
		"anonymous": second(w.admit(http.MethodPost, "/fake/tasks", "", `{"text":"x"}`)),
		"version 2": second(w.admit(http.MethodPost, "/fake/tasks", w.token(t, "payments-investigator"), `{"text":"x"}`, versionHeader, "2")),
	} {
		if out.Kind != proxy.Refuse || out.Answer.ContentType != contentType || !strings.Contains(string(out.Answer.Body), `"fake_error"`) {
			t.Errorf("%s: %v %s %s", what, out.Kind, out.Answer.ContentType, out.Answer.Body)
		}
	}
	if n := len(up.requests()); n != 0 {
		t.Fatalf("the agent got %d requests", n)
	}
}

// TestConnectionNamingItsHeader: the core reads the protocol's
// DecisionHeaders from its edge, so a Connection header naming Fake-Version
// (which a hop-by-hop removal would drop before the agent saw it) is
// refused, as it is for A2A-Version.
//
// Threat: a caller names a header the decision depends on in Connection, so
// that writ decides on it and the forwarding hop drops it. Defence: the core
// refuses it for every protocol of the table, this one included.
func TestConnectionNamingItsHeader(t *testing.T) {
	up := newUpstream(t)
	w := newWrit(t, up)
	_, out := w.admit(http.MethodPost, "/fake/tasks", w.token(t, "payments-investigator"), `{"text":"x"}`, "Connection", versionHeader)
	if out.Kind != proxy.Refuse || out.Fault == nil || out.Fault.Kind != task.KindNotARequest || out.Answer.ContentType != contentType {
		t.Fatalf("Connection: %s: %v %+v %s", versionHeader, out.Kind, out.Fault, out.Answer.Body)
	}
}

// TestAutoRouteDetectsIt: on an auto route a path under the protocol's
// segment is its request; other paths keep their protocols.
func TestAutoRouteDetectsIt(t *testing.T) {
	up := newUpstream(t)
	w := newWrit(t, up)
	_, out := w.admit(http.MethodPost, "/auto/fake/tasks", w.token(t, "payments-investigator"), `{"text":"x"}`)
	if out.Kind != proxy.Forward || out.Protocol.Name != name || out.Route != "auto-agent" {
		t.Fatalf("auto route: %v %+v %s", out.Kind, out.Protocol, out.Answer.Body)
	}
	r, err := adapters.NewRoute("", "/")
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"/fake/tasks": name, "/runs": "acp", "/message:send": "a2a"} {
		if got := r.For(path).Name(); got != want {
			t.Errorf("an auto route's %s is %s's, want %s's", path, got, want)
		}
	}
}

func second(_ proxy.Incoming, out proxy.Outcome) proxy.Outcome { return out }
