package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/follow"
	"github.com/writ-authz/writ/proxy/sidecar"
	"github.com/writ-authz/writ/task"
)

// harness is writ in front of real upstreams on loopback, with a test identity
// provider that signs real JWTs.
type harness struct {
	t     *testing.T
	px    *proxy.Core
	bus   *events.Bus
	srv   *httptest.Server
	store *task.MemoryStore
	idp   *devidp.Provider
	cfg   *config.Config
}

const testIssuer = "https://idp.test"

func newHarness(t *testing.T, agents []config.Agent, mutate func(*config.Config)) *harness {
	t.Helper()
	return newHarnessWith(t, agents, mutate, nil)
}

// newHarnessWith is newHarness with push delivery through n.
func newHarnessWith(t *testing.T, agents []config.Agent, mutate func(*config.Config), n proxy.Notifier) *harness {
	t.Helper()
	idp, err := devidp.New(t.TempDir(), testIssuer, "writ")
	if err != nil {
		t.Fatal(err)
	}
	yaml := "policies: [../policies]\nlimits: {upstream_timeout: 2s, stream_idle_timeout: 2s}\n" +
		"identity:\n  jwt:\n    - issuer: " + testIssuer + "\n      audiences: [writ]\n      jwks_file: " + idp.JWKSFile + "\n" +
		"agents:\n  - {name: placeholder, upstream: 'http://127.0.0.1:1', max_data_classification: public, security_schemes: [oauth2]}\n"
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Agents = agents
	for i := range cfg.Agents {
		a := &cfg.Agents[i]
		if a.Route == "" {
			a.Route = "/"
		}
		if a.Protocol == "" {
			a.Protocol = "auto"
		}
		if a.JSONRPCPath == "" {
			a.JSONRPCPath = "/"
		}
	}
	// The listener comes first, so agents configured with public_url "self" can
	// advertise writ's own address.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Agents {
		if cfg.Agents[i].PublicURL == "self" {
			cfg.Agents[i].PublicURL = "http://" + ln.Addr().String() + strings.TrimSuffix(cfg.Agents[i].Route, "/")
		}
	}
	if mutate != nil {
		mutate(cfg)
	}
	if err := cfg.Validate(); err != nil {
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
	engine, err := authz.NewEngine(pol, authz.Options{CacheSize: cfg.DecisionCacheSize, DryRun: cfg.DryRun})
	if err != nil {
		t.Fatal(err)
	}
	store := task.NewMemoryStore(task.MemoryLimits{MaxTasks: 1000, MaxPerOwner: 100, TTL: time.Hour})
	bus := &events.Bus{}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	px, err := proxy.New(cfg, proxy.Deps{Identity: ident, Engine: engine, Store: store, Push: n, Events: bus,
		Logger: quiet, Follow: follow.New(follow.Options{Store: store, Lifecycle: cfg.Lifecycle, Logger: quiet})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	h := &harness{t: t, px: px, bus: bus, store: store, idp: idp, cfg: cfg}
	sc := sidecar.New(px, cfg.Limits, quiet, nil)
	h.srv = httptest.NewUnstartedServer(sc)
	h.srv.Listener.Close()
	h.srv.Listener = ln
	h.srv.Config = sc.HTTPServer("")
	h.srv.Start()
	t.Cleanup(h.srv.Close)
	return h
}

// caller describes who a test token speaks for.
type caller struct {
	agent, user, tenant, class string
	scopes                     string
	chain                      []string // oldest first
}

var (
	investigator = caller{agent: "payments-investigator", user: "u-42", tenant: "wholesale", class: "restricted",
		scopes: "delegate", chain: []string{"orchestrator"}}
	retailBot = caller{agent: "retail-bot", user: "u-7", tenant: "retail", class: "internal", scopes: "delegate"}
)

// token signs a JWT for c, with the RFC 8693 act chain.
func (h *harness) token(c caller) string {
	h.t.Helper()
	tok, err := h.idp.Token(devidp.Caller{Agent: c.agent, User: c.user, Tenant: c.tenant,
		Classification: c.class, Scope: c.scopes, Chain: c.chain})
	if err != nil {
		h.t.Fatal(err)
	}
	return tok
}

// do sends one request through writ.
func (h *harness) do(method, path, token string, body any, hdr map[string]string) (*http.Response, []byte) {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, _ := json.Marshal(b)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

// rpc sends a JSON-RPC request and decodes the envelope.
func (h *harness) rpc(path, token, version, method string, params any) (int, rpcAnswer) {
	h.t.Helper()
	hdr := map[string]string{}
	if version != "" {
		hdr["A2A-Version"] = version
	}
	resp, body := h.do("POST", path, token, map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, hdr)
	var a rpcAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		h.t.Fatalf("%s: not JSON-RPC: %s", method, body)
	}
	a.raw = body
	return resp.StatusCode, a
}

type rpcAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
	raw []byte
}

// reasons lists the ErrorInfo reasons of an error answer: error.data is the list
// in A2A 1.0, an object holding it as "details" in 0.3.
func (a rpcAnswer) reasons() []string {
	if a.Error == nil {
		return nil
	}
	type info struct {
		Reason string `json:"reason"`
	}
	var list []info
	if json.Unmarshal(a.Error.Data, &list) != nil {
		var obj struct {
			Details []info `json:"details"`
		}
		_ = json.Unmarshal(a.Error.Data, &obj)
		list = obj.Details
	}
	var out []string
	for _, d := range list {
		out = append(out, d.Reason)
	}
	return out
}

// task looks a task up on whichever configured agent holds it (tests name
// tasks by id alone; records are keyed by agent and id).
func (h *harness) task(id string) (task.Record, bool, error) {
	for _, a := range h.cfg.Agents {
		rec, ok, err := h.store.Get(context.Background(), task.Ref{Agent: a.Name, ID: id})
		if ok || err != nil {
			return rec, ok, err
		}
	}
	return task.Record{}, false, nil
}
