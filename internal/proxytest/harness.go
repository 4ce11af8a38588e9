// Package proxytest is the harness the tests of the core, its doors and its
// follower share: writ as the one assembly builds it (the core, the follower,
// the sidecar door, the admin API) in front of real upstreams on loopback,
// with a test identity provider that signs real JWTs, and the fake agents
// and push receivers the tests drive.
package proxytest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/internal/syncbuf"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/server"
	"github.com/writ-authz/writ/task"
)

// Harness is writ in front of real upstreams on loopback, built by the one
// assembly (server.New) as writ serve builds it, with a test identity
// provider that signs real JWTs: the core (Core), its follower, the sidecar
// door listening at Srv, the admin API, metrics; the decision log is off.
type Harness struct {
	T      *testing.T
	Server *server.Server
	Core   *proxy.Core
	// Engine is the core's decision engine (for doors that also evaluate
	// other rules of the policy set: the AuthZEN applications).
	Engine *authz.Engine
	Bus    *events.Bus
	Srv    *Endpoint
	Store  *task.MemoryStore
	IDP    *devidp.Provider
	Cfg    *config.Config
	// Log is writ's own log (the core's and the sidecar's, JSON lines), for
	// tests that check what writ logs, and what it never does.
	Log *syncbuf.Buffer
}

// Endpoint is where a listener of the harness answers.
type Endpoint struct {
	// URL is its base URL (http://127.0.0.1:port).
	URL string
}

// Issuer is the test identity provider's issuer.
const Issuer = "https://idp.test"

// Root is the module's root directory (where policies/ is), wherever the
// test that asks runs from.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Policies is the directory of the shipped policies.
func Policies() string { return filepath.Join(Root(), "policies") }

// New is writ in front of agents, with mutate applied to the config (nil:
// none) before it is validated; push is left to the agents.
func New(t *testing.T, agents []config.Agent, mutate func(*config.Config)) *Harness {
	t.Helper()
	return NewWith(t, agents, mutate, nil)
}

// NewWith is New with push delivery through n (nil: push is left to the
// agents).
func NewWith(t *testing.T, agents []config.Agent, mutate func(*config.Config), n proxy.Notifier) *Harness {
	t.Helper()
	idp, err := devidp.New(t.TempDir(), Issuer, "writ")
	if err != nil {
		t.Fatal(err)
	}
	yaml := "admin: 127.0.0.1:0\ndecision_log: {output: 'off'}\n" +
		"policies: [" + Policies() + "]\nlimits: {upstream_timeout: 2s, stream_idle_timeout: 2s}\n" +
		"identity:\n  jwt:\n    - issuer: " + Issuer + "\n      audiences: [writ]\n      jwks_file: " + idp.JWKSFile + "\n" +
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
	// Push is the notifier's, or left to the agents.
	cfg.Push.Disabled = n == nil
	if mutate != nil {
		mutate(cfg)
	}
	if err := cfg.Validate(); err != nil {
		ln.Close()
		t.Fatal(err)
	}
	store := task.NewMemoryStore(task.MemoryLimits{MaxTasks: 1000, MaxPerOwner: 100, TTL: time.Hour})
	bus := &events.Bus{}
	logs := &syncbuf.Buffer{}
	opts := []server.Option{server.WithLogger(slog.New(slog.NewJSONHandler(logs, nil))), server.WithStore(store),
		server.WithEvents(bus), server.WithListener(ln), server.WithoutPolicyTests()}
	if n != nil {
		opts = append(opts, server.WithNotifier(n))
	}
	s, err := server.New(context.Background(), cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("writ's shutdown: %v", err)
		}
	})
	return &Harness{T: t, Server: s, Core: s.Core(), Engine: s.Engine(), Bus: bus, Srv: &Endpoint{URL: s.URL()}, Store: store, IDP: idp, Cfg: cfg, Log: logs}
}

// Caller describes who a test token speaks for.
type Caller struct {
	Agent, User, Tenant, Class string
	Scopes                     string
	Chain                      []string // oldest first
	// ChainScopes is what each hop of Chain was granted, where recorded.
	ChainScopes []string
}

// Token signs a JWT for c, with the RFC 8693 act chain.
func (h *Harness) Token(c Caller) string {
	h.T.Helper()
	tok, err := h.IDP.Token(devidp.Caller{Agent: c.Agent, User: c.User, Tenant: c.Tenant,
		Classification: c.Class, Scope: c.Scopes, Chain: c.Chain, ChainScopes: c.ChainScopes})
	if err != nil {
		h.T.Fatal(err)
	}
	return tok
}

// Do sends one request through writ.
func (h *Harness) Do(method, path, token string, body any, hdr map[string]string) (*http.Response, []byte) {
	h.T.Helper()
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
	req, err := http.NewRequest(method, h.Srv.URL+path, rd)
	if err != nil {
		h.T.Fatal(err)
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
		h.T.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

// RPC sends a JSON-RPC request and decodes the envelope.
func (h *Harness) RPC(path, token, version, method string, params any) (int, RPCAnswer) {
	h.T.Helper()
	return h.RPCWith(path, token, version, method, params, nil)
}

// RPCAnswer is a JSON-RPC answer, decoded, with its bytes (Raw).
type RPCAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
	Raw []byte `json:"-"`
}

// Reasons lists the ErrorInfo reasons of an error answer: error.data is the list
// in A2A 1.0, an object holding it as "details" in 0.3.
func (a RPCAnswer) Reasons() []string {
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

// Task looks a task up on whichever configured agent holds it (tests name
// tasks by id alone; records are keyed by agent and id).
func (h *Harness) Task(id string) (task.Record, bool, error) {
	for _, a := range h.Cfg.Agents {
		rec, ok, err := h.Store.Get(context.Background(), task.Ref{Agent: a.Name, ID: id})
		if ok || err != nil {
			return rec, ok, err
		}
	}
	return task.Record{}, false, nil
}

// RPCWith is RPC with extra headers.
func (h *Harness) RPCWith(path, token, version, method string, params any, hdr map[string]string) (int, RPCAnswer) {
	h.T.Helper()
	if hdr == nil {
		hdr = map[string]string{}
	}
	if version != "" {
		hdr["A2A-Version"] = version
	}
	resp, body := h.Do("POST", path, token, map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, hdr) //nolint:bodyclose // Do reads and closes the body
	var a RPCAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		h.T.Fatalf("%s: not JSON-RPC: %s", method, body)
	}
	a.Raw = body
	return resp.StatusCode, a
}

// Investigator and RetailBot are the callers most tests speak for: an agent
// of the wholesale tenant one hop down a chain, and a retail one.
var (
	Investigator = Caller{Agent: "payments-investigator", User: "u-42", Tenant: "wholesale", Class: "restricted",
		Scopes: "delegate", Chain: []string{"orchestrator"}}
	RetailBot = Caller{Agent: "retail-bot", User: "u-7", Tenant: "retail", Class: "internal", Scopes: "delegate"}
)
