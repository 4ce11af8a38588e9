package egress_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/exchange"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/egress"
	"github.com/writ-authz/writ/proxy/sidecar"
	"github.com/writ-authz/writ/sts"
	"github.com/writ-authz/writ/task"
)

// The world of these tests, all real and on 127.0.0.1: a test IdP signs the
// inbound callers' tokens; writ sts exchanges them; writ A protects the
// agent "investigator" (a fake agent that records what reached it) and runs
// the egress door for it; writ B protects the sanctions-screening agent (the
// a2a-go seed agent) and accepts only the STS's tokens for its audience. The
// egress targets: the screener behind writ B, "raw" (a fake agent called
// directly, to see exactly what the door sends), and targets the policy must
// refuse (the trap, which must never see a request).

const (
	local     = "investigator"
	screener  = "sanctions-screening-agent"
	secretOfA = "secret-of-investigator"
)

// orchestrator is the inbound caller: an agent of the wholesale tenant
// acting for user u-42, cleared for restricted data, holding delegate.
var orchestrator = proxytest.Caller{Agent: "orchestrator", User: "u-42", Tenant: "wholesale", Class: "restricted",
	Scopes: "delegate pay"}

// recorder keeps every decision event (counts them only, when drop is set:
// benchmarks).
type recorder struct {
	events.Nop
	drop      atomic.Bool
	mu        sync.Mutex
	decisions []events.Decision
	count     int
}

func (r *recorder) Decided(d events.Decision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count++
	if !r.drop.Load() {
		r.decisions = append(r.decisions, d)
	}
}

// egressDecisions are the egress decisions so far.
func (r *recorder) egressDecisions() []events.Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []events.Decision
	for _, d := range r.decisions {
		if d.Direction == events.DirectionEgress {
			out = append(out, d)
		}
	}
	return out
}

// writ is one writ: the core, the sidecar door, and (A) the egress door.
type writ struct {
	core   *proxy.Core
	rec    *recorder
	url    string
	egress *egress.Server
	exch   *exchange.Exchanger
	cfg    *config.Config
}

// startWrit builds a writ from a writ.yaml document.
func startWrit(t testing.TB, yaml string) *writ {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
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
	engine, err := authz.NewEngine(pol, authz.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bus := &events.Bus{}
	rec := &recorder{}
	bus.Subscribe(rec)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store := task.NewMemoryStore(task.MemoryLimits{MaxTasks: 1000, MaxPerOwner: 100, TTL: time.Hour})
	core, err := proxy.New(cfg, proxy.Deps{Identity: ident, Engine: engine, Store: store, Events: bus, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(core.Close)
	w := &writ{core: core, rec: rec, cfg: cfg}
	srv := httptest.NewServer(sidecar.New(core, cfg.Limits, quiet, nil))
	t.Cleanup(srv.Close)
	w.url = srv.URL
	if cfg.Egress.Enabled() {
		if w.exch, err = exchange.New(cfg.Egress.Exchange, exchange.WithEvents(bus)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.exch.Close)
		if w.egress, err = egress.New(core, w.exch, cfg, quiet); err != nil {
			t.Fatal(err)
		}
		if err := w.egress.Listen(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := w.egress.Shutdown(context.Background()); err != nil {
				t.Errorf("the egress door's shutdown: %v", err)
			}
		})
	}
	return w
}

// stsFront stands between writ A and the STS's token endpoint, and
// misbehaves as told: what an STS that is down, slow, broken or confused
// looks like to the exchange client.
type stsFront struct {
	srv   *httptest.Server
	mode  atomic.Value // string: "" (pass), "down", "slow", "garbage", "wrong_audience", "swap_subject"
	calls atomic.Int64 // token exchanges that reached the front
	// swap is the subject token "swap_subject" exchanges instead of the
	// one asked for: the STS answers for another delegation.
	swap atomic.Value // string
}

func newSTSFront(t testing.TB, stsURL string) *stsFront {
	target, err := url.Parse(stsURL)
	if err != nil {
		t.Fatal(err)
	}
	f := &stsFront{}
	f.mode.Store("")
	rp := httputil.NewSingleHostReverseProxy(target)
	stop := make(chan struct{})
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(body))
		exchange := form.Get("grant_type") == "urn:ietf:params:oauth:grant-type:token-exchange"
		if exchange {
			f.calls.Add(1)
		}
		switch mode := f.mode.Load().(string); {
		case mode == "down":
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
					return
				}
			}
			w.WriteHeader(http.StatusBadGateway)
			return
		case mode == "slow":
			select {
			case <-time.After(5 * time.Second):
			case <-stop:
			case <-r.Context().Done():
			}
			return
		case mode == "garbage" && exchange:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"access_token": 42, "token_type": "Bearer"`)
			return
		case mode == "wrong_audience" && exchange:
			// The real STS signs a good token, for another target.
			form.Set("audience", "agent:raw")
			body = []byte(form.Encode())
		case mode == "swap_subject" && exchange:
			form.Set("subject_token", f.swap.Load().(string))
			body = []byte(form.Encode())
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { close(stop); f.srv.Close() })
	return f
}

// world is the whole cast.
type world struct {
	t        testing.TB
	idp      *devidp.Provider
	sts      *sts.Server
	front    *stsFront
	a, b     *writ
	agentA   *fakeAgent
	screener *seedagents.Agent
	raw      *fakeAgent
	trap     *fakeAgent
	// verify verifies the STS's tokens as a target's writ does.
	verify *identity.Resolver
}

// worldOptions adjust the world.
type worldOptions struct {
	// policies are writ A's policy paths (default: the shipped ones).
	policies []string
	// linkTTL is egress.link_ttl (default the default).
	linkTTL string
	// agent, when set, starts the local agent given the egress listener's
	// URL and returns its base URL (default: a fake agent).
	agent func(egressURL string) string
}

func newWorld(t testing.TB, opt worldOptions) *world {
	t.Helper()
	w := &world{t: t}
	dir := t.TempDir()
	var err error
	if w.idp, err = devidp.New(dir, proxytest.Issuer, "writ"); err != nil {
		t.Fatal(err)
	}
	secrets := filepath.Join(dir, "clients.yaml")
	write(t, secrets, local+": "+secretOfA+"\n")
	secretFile := filepath.Join(dir, "secret")
	write(t, secretFile, secretOfA)
	audiences := []string{"agent:" + screener, "agent:raw", "agent:internal-only", "agent:retail-only", "agent:orchestrator", "agent:" + local}
	sc := config.STS{Listen: "127.0.0.1:0", Audiences: audiences, ClientSecretsFile: secrets,
		SubjectIssuers: []config.JWTIssuer{{Issuer: proxytest.Issuer, Audiences: []string{"writ"}, JWKSFile: w.idp.JWKSFile}}}
	sc.ApplyDefaults()
	if w.sts, err = sts.New(sc, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	if err := w.sts.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.sts.Shutdown(context.Background()) })
	stsJWKS := filepath.Join(dir, "sts-jwks.json")
	write(t, stsJWKS, string(get(t, w.sts.JWKSURL())))
	w.front = newSTSFront(t, "http://"+w.sts.Addr())
	if w.verify, err = identity.New(identity.Config{JWT: []config.JWTIssuer{{Issuer: w.sts.Issuer(),
		Audiences: audiences, JWKSFile: stsJWKS}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.verify.Close)

	if w.screener, err = seedagents.StartSanctions(seedagents.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.screener.Close() })
	w.b = startWrit(t, fmt.Sprintf(`policies: [%s]
limits: {upstream_timeout: 5s, stream_idle_timeout: 5s}
identity:
  jwt:
    - {issuer: %q, audiences: ["agent:%s"], jwks_file: %q}
agents:
  - {name: %s, upstream: %q, protocol: a2a, owner: group-compliance, tenants: [wholesale, retail],
     max_data_classification: restricted, security_schemes: [oauth2], skills: [{id: screen, tags: [sanctions]}]}
`, proxytest.Policies(), w.sts.Issuer(), screener, stsJWKS, screener, w.screener.URL))

	w.agentA = newFakeAgent(t)
	egressAddr := freePort(t)
	agentURL := w.agentA.URL
	if opt.agent != nil {
		agentURL = opt.agent("http://" + egressAddr)
	}
	w.raw = newFakeAgent(t)
	w.trap = newFakeAgent(t)
	policies := opt.policies
	if len(policies) == 0 {
		policies = []string{proxytest.Policies()}
	}
	pols, _ := json.Marshal(policies)
	ttl := ""
	if opt.linkTTL != "" {
		ttl = "  link_ttl: " + opt.linkTTL + "\n"
	}
	target := func(name, upstream, extra string) string {
		if !strings.Contains(extra, "max_data_classification") {
			extra += ", max_data_classification: restricted"
		}
		return fmt.Sprintf("    - {name: %s, upstream: %q, protocol: a2a, owner: o, security_schemes: [oauth2]%s}\n",
			name, upstream, extra)
	}
	w.a = startWrit(t, fmt.Sprintf(`policies: %s
limits: {upstream_timeout: 5s, stream_idle_timeout: 5s}
identity:
  jwt:
    - {issuer: %q, audiences: [writ], jwks_file: %q}
agents:
  - {name: %s, upstream: %q, protocol: a2a, max_data_classification: restricted, security_schemes: [oauth2]}
  - {name: other, route: /other, upstream: %q, protocol: a2a, max_data_classification: restricted, security_schemes: [oauth2]}
egress:
  listen: %s
  agent: %s
  trusted_hosts: [127.0.0.1]
%s  exchange:
    issuer: %q
    token_endpoint: %q
    client_id: %s
    client_secret_file: %q
    timeout: 1s
  targets:
`, pols, proxytest.Issuer, w.idp.JWKSFile, local, agentURL, w.agentA.URL, egressAddr, local, ttl,
		w.sts.Issuer(), w.front.srv.URL+"/token", local, secretFile)+
		target(screener, w.b.url, ", tenants: [wholesale, retail], skills: [{id: screen, tags: [sanctions]}]")+
		target("raw", w.raw.URL, ", skills: [{id: echo, tags: [echo]}]")+
		target("internal-only", w.trap.URL, ", max_data_classification: internal")+
		target("retail-only", w.trap.URL, ", tenants: [retail]")+
		target("orchestrator", w.trap.URL, "")+
		target(local, w.trap.URL, ""))
	return w
}

func write(t testing.TB, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func get(t testing.TB, u string) []byte {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}

// token is a token for c, from the test IdP.
func (w *world) token(c proxytest.Caller) string {
	w.t.Helper()
	tok, err := w.idp.Token(devidp.Caller{Agent: c.Agent, User: c.User, Tenant: c.Tenant, Classification: c.Class,
		Scope: c.Scopes, Chain: c.Chain, ChainScopes: c.ChainScopes})
	if err != nil {
		w.t.Fatal(err)
	}
	return tok
}

// own is a credential of the local agent's own for user: a token issued to
// it (azp), without an act chain: what a root call presents.
func (w *world) own(user string) string {
	w.t.Helper()
	tok, err := w.idp.Sign(map[string]any{"iss": proxytest.Issuer, "aud": "writ", "sub": user, "azp": local,
		"scope": "delegate", "tenant": "wholesale", "exp": time.Now().Add(time.Hour).Unix()})
	if err != nil {
		w.t.Fatal(err)
	}
	return tok
}

// inbound sends a task to the local agent through writ A with token, and
// returns the Writ-Decision-Id the agent received with it: the parent its
// outbound calls name.
func (w *world) inbound(token string) string {
	return w.inboundTo("/", token)
}

func (w *world) inboundTo(path, token string) string {
	w.t.Helper()
	before := len(w.agentA.Requests())
	req, _ := http.NewRequest("POST", w.a.url+path, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"screen Acme"}]}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	reqs := w.agentA.Requests()
	if resp.StatusCode != 200 || len(reqs) != before+1 {
		w.t.Fatalf("the inbound request did not reach the agent: %d %s", resp.StatusCode, body)
	}
	id := reqs[len(reqs)-1].Header.Get("Writ-Decision-Id")
	if id == "" {
		w.t.Fatal("the agent got no Writ-Decision-Id")
	}
	return id
}

// send03 is an A2A 0.3 message/send (the seed agent speaks 0.3).
const send03 = `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-9","role":"user","parts":[{"kind":"text","text":"Screen Acme Trading FZE"},{"kind":"data","data":{"beneficiary":"Acme Trading FZE"}}]}}}`

// call sends the agent's outbound call to the egress listener: path below
// it, Writ-Parent parent ("" for none), and extra headers.
func (w *world) call(parent, path, body string, hdr map[string]string) (*http.Response, []byte) {
	w.t.Helper()
	method := "POST"
	if body == "" {
		method = "GET"
	}
	req, _ := http.NewRequest(method, "http://"+w.a.egress.Addr()+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if parent != "" {
		req.Header.Set("Writ-Parent", parent)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

// rpcError reads a JSON-RPC error's code and its ErrorInfo reasons.
func rpcError(t *testing.T, body []byte) (int, []string) {
	t.Helper()
	var a proxytest.RPCAnswer
	if err := json.Unmarshal(body, &a); err != nil || a.Error == nil {
		t.Fatalf("not a JSON-RPC error: %s", body)
	}
	return a.Error.Code, a.Reasons()
}

// bearer is the token of an Authorization header.
func bearer(h http.Header) string {
	v := h.Get("Authorization")
	tok, _ := strings.CutPrefix(v, "Bearer ")
	return tok
}

// freePort is an address nothing listens on.
func freePort(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// devidpCaller is c as the IdP signs it, with may_act naming mayAct.
func devidpCaller(c proxytest.Caller, mayAct []string) devidp.Caller {
	return devidp.Caller{Agent: c.Agent, User: c.User, Tenant: c.Tenant, Classification: c.Class, Scope: c.Scopes,
		Chain: c.Chain, ChainScopes: c.ChainScopes, MayAct: mayAct}
}

// send10 sends an A2A 1.0 SendMessage to the local agent through writ A and
// returns the status and body.
func (w *world) send10(path, token string) (int, string) {
	w.t.Helper()
	req, _ := http.NewRequest("POST", w.a.url+path, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"screen Acme"}]}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// fakeAgent is an A2A 1.0 JSON-RPC upstream that answers a completed task
// and records what reached it.
type fakeAgent struct {
	URL  string
	mu   sync.Mutex
	seen []*http.Request
	body [][]byte
}

func newFakeAgent(t testing.TB) *fakeAgent {
	f := &fakeAgent{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.seen, f.body = append(f.seen, r), append(f.body, b)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_COMPLETED"}}}}`)
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// Requests are the requests that reached the agent.
func (f *fakeAgent) Requests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.seen...)
}

// Bodies are their bodies.
func (f *fakeAgent) Bodies() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.body...)
}
