package extauthz

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/writ-authz/writ/internal/syncbuf"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/sidecar"
	"github.com/writ-authz/writ/task"
)

// world is one writ in front of the seed's agents, reachable two ways: its
// sidecar listener (the reference) and its ext_authz servers (gRPC over a real
// loopback connection with the generated client, and HTTP), both over the same
// admission core, lifecycle store and decision engine.
type world struct {
	t         testing.TB
	cfg       *config.Config
	px        *proxy.Core
	sidecar   *httptest.Server
	ext       *Server
	client    authv3.AuthorizationClient
	conn      *grpc.ClientConn
	idp       *devidp.Provider
	sanctions *seedagents.Agent
	logs      *syncbuf.Buffer
}

const testIssuer = "https://idp.test"

// newWorld starts the seed's three agents, writ in front of them, and the
// ext_authz servers; extra is appended to the config (an envoy: section
// replaces the default one).
func newWorld(t testing.TB, extra string) *world {
	t.Helper()
	return newWorldMapped(t, extra, "")
}

// newWorldMapped is newWorld with an mTLS mapping file (SPIFFE ID → caller).
func newWorldMapped(t testing.TB, extra, mtlsMapping string) *world {
	t.Helper()
	start := func(opts ...seedagents.Option) *seedagents.Agent {
		a, err := seedagents.StartSanctions(opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	}
	w := &world{t: t, sanctions: start(), logs: &syncbuf.Buffer{}}
	kyc := start(seedagents.WithName("kyc-refresh-agent"))
	marketing := start(seedagents.WithName("marketing-copy-agent"))

	var err error
	if w.idp, err = devidp.New(t.TempDir(), testIssuer, "writ"); err != nil {
		t.Fatal(err)
	}
	envoy := "envoy: {grpc_listen: '127.0.0.1:0', http_listen: '127.0.0.1:0'}\n"
	if strings.Contains(extra, "envoy:") {
		envoy = ""
	}
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:0
policies: [../../policies]
limits: {upstream_timeout: 5s, stream_idle_timeout: 5s}
identity:
  jwt: [{issuer: %s, audiences: [writ], jwks_file: %s}]
  mtls: {trust_domain: bank.ae%s}
agents:
  - {name: sanctions-screening-agent, route: /, upstream: '%s', protocol: a2a, owner: group-compliance,
     tenants: [wholesale, retail], max_data_classification: restricted, security_schemes: [oauth2, mtls],
     skills: [{id: screen, tags: [sanctions, compliance]}]}
  - {name: kyc-refresh-agent, route: /kyc, upstream: '%s', protocol: a2a, owner: retail-onboarding,
     tenants: [retail], max_data_classification: confidential, security_schemes: [oauth2],
     skills: [{id: refresh, tags: [kyc, compliance]}]}
  - {name: marketing-copy-agent, route: /marketing, upstream: '%s', protocol: a2a, owner: brand,
     max_data_classification: internal, security_schemes: [apikey], skills: [{id: copy, tags: [marketing]}]}
%s%s`, testIssuer, w.idp.JWKSFile, mappingKey(mtlsMapping), w.sanctions.URL, kyc.URL, marketing.URL, envoy, extra)
	if w.cfg, err = config.Parse([]byte(yaml)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(extra, "require_route_name") {
		// The fixtures build checks as an Envoy whose routes name no agent
		// would send them, so writ routes them itself (on canonical targets
		// only); routes_test.go runs the named routes.
		off := false
		w.cfg.Envoy.RequireRouteName = &off
	}
	ident, err := identity.New(w.cfg.Identity)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ident.Close)
	pol, err := authz.LoadPolicy(context.Background(), w.cfg.Policies, authz.LoadOptions{SkipTests: true})
	if err != nil {
		t.Fatal(err)
	}
	engine, err := authz.NewEngine(pol, authz.Options{CacheSize: w.cfg.DecisionCacheSize, DryRun: w.cfg.DryRun})
	if err != nil {
		t.Fatal(err)
	}
	store := task.NewMemoryStore(task.MemoryLimits{MaxTasks: 1000, MaxPerOwner: 100, TTL: time.Hour})
	log := slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if w.px, err = proxy.New(w.cfg, proxy.Deps{Identity: ident, Engine: engine, Store: store, Logger: log}); err != nil {
		t.Fatal(err)
	}
	sc := sidecar.New(w.px, w.cfg.Limits, log, nil)
	w.sidecar = httptest.NewUnstartedServer(sc)
	w.sidecar.Config = sc.HTTPServer("")
	w.sidecar.Start()
	t.Cleanup(w.sidecar.Close)

	if w.ext, err = New(w.px, ident, w.cfg, log); err != nil {
		t.Fatal(err)
	}
	if err := w.ext.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w.ext.Shutdown(ctx)
	})
	w.connect()
	return w
}

// connect dials the gRPC ext_authz listener, when there is one.
func (w *world) connect() {
	addr := w.ext.GRPCAddr()
	if addr == "" {
		return
	}
	var err error
	if w.conn, err = grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { w.conn.Close() })
	w.client = authv3.NewAuthorizationClient(w.conn)
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

func mappingKey(path string) string {
	if path == "" {
		return ""
	}
	return ", mapping_file: " + path
}

// caller describes who a test token speaks for.
type caller struct {
	agent, user, tenant, class, scopes string
	chain                              []string // oldest first
	issuer                             string
	expired                            bool
}

var investigator = caller{agent: "payments-investigator", user: "u-42", tenant: "wholesale", class: "restricted",
	scopes: "delegate", chain: []string{"orchestrator"}}

// claims are c's JWT claims, with the RFC 8693 act chain.
func (w *world) claims(c caller) map[string]any {
	dc := devidp.Caller{Agent: c.agent, User: c.user, Tenant: c.tenant, Classification: c.class, Scope: c.scopes, Chain: c.chain}
	if c.expired {
		dc.Expires = time.Now().Add(-time.Hour)
	}
	m := w.idp.Claims(dc)
	if c.issuer != "" {
		m["iss"] = c.issuer
	}
	return m
}

// token signs c's claims.
func (w *world) token(c caller) string {
	w.t.Helper()
	tok, err := w.idp.Sign(w.claims(c))
	if err != nil {
		w.t.Fatal(err)
	}
	return tok
}

// sendBody is an A2A 0.3 JSON-RPC message/send, as the seed's agents speak it.
func sendBody(text string) []byte {
	raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": map[string]any{
		"message": map[string]any{"kind": "message", "messageId": fmt.Sprintf("m-%d", time.Now().UnixNano()), "role": "user",
			"parts": []any{map[string]any{"kind": "text", "text": text},
				map[string]any{"kind": "data", "data": map[string]any{"beneficiary": "Acme Trading FZE"}}}}}})
	return raw
}

// req is one client request, sent to the sidecar or turned into a check.
type req struct {
	method, path string
	header       map[string]string // canonical or not; the test helpers lower-case for Envoy
	body         []byte
}

func post(path, token string, body []byte) req {
	r := req{method: "POST", path: path, body: body, header: map[string]string{"Content-Type": "application/json"}}
	if token != "" {
		r.header["Authorization"] = "Bearer " + token
	}
	return r
}

// answer is what a client sees.
type answer struct {
	status      int
	contentType string
	body        []byte
	header      http.Header
	// forwarded: the request went on to the agent (parity tests).
	forwarded bool
}

// viaSidecar sends r through writ's own listener.
func (w *world) viaSidecar(r req) answer {
	w.t.Helper()
	return w.send(w.sidecar.URL, "", r)
}

// send sends r to base (a door's listener) as a client would, for host (""
// keeps base's).
func (w *world) send(base, host string, r req) answer {
	w.t.Helper()
	hr, err := http.NewRequest(r.method, base+r.path, bytes.NewReader(r.body))
	if err != nil {
		w.t.Fatal(err)
	}
	if host != "" {
		hr.Host = host
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: body, header: resp.Header}
}

// checkRequest is r as Envoy's ext_authz filter sends it (headers map, body as
// bytes with pack_as_bytes).
func checkRequest(r req) *authv3.CheckRequest {
	hdr := map[string]string{":method": r.method, ":path": r.path, ":authority": "writ.test"}
	for k, v := range r.header {
		hdr[strings.ToLower(k)] = v
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: r.method, Path: r.path, Host: "writ.test", Headers: hdr, RawBody: r.body, Size: int64(len(r.body)),
			Protocol: "HTTP/1.1", Scheme: "http"}}}}
}

// check sends a CheckRequest over gRPC.
func (w *world) check(cr *authv3.CheckRequest) *authv3.CheckResponse {
	w.t.Helper()
	resp, err := w.client.Check(w.t.Context(), cr)
	if err != nil {
		w.t.Fatal(err)
	}
	return resp
}

// asAnswer is what Envoy sends the client for a denied response; nil when the
// response lets the request through.
func asAnswer(resp *authv3.CheckResponse) *answer {
	d := resp.GetDeniedResponse()
	if d == nil {
		return nil
	}
	a := &answer{status: int(d.GetStatus().GetCode()), body: []byte(d.GetBody()), header: http.Header{}}
	for _, h := range d.GetHeaders() {
		a.header.Set(h.GetHeader().GetKey(), h.GetHeader().GetValue())
	}
	a.contentType = a.header.Get("Content-Type")
	return a
}

// viaHTTP sends r to the HTTP ext_authz server as Envoy's http_service does.
func (w *world) viaHTTP(r req, prefix string) answer {
	w.t.Helper()
	return w.viaBase("http://"+w.ext.HTTPAddr()+prefix, r)
}

// reasons lists the ErrorInfo reasons of a JSON-RPC error answer (error.data is
// the list in 1.0, an object holding it as "details" in 0.3), or of a REST one.
func reasons(body []byte) []string {
	type info struct {
		Reason string `json:"reason"`
	}
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &env) != nil || env.Error == nil {
		return nil
	}
	var e struct {
		Data    json.RawMessage `json:"data"`
		Details []info          `json:"details"`
	}
	_ = json.Unmarshal(env.Error, &e)
	list := e.Details
	if len(list) == 0 && json.Unmarshal(e.Data, &list) != nil {
		var obj struct {
			Details []info `json:"details"`
		}
		_ = json.Unmarshal(e.Data, &obj)
		list = obj.Details
	}
	var out []string
	for _, d := range list {
		out = append(out, d.Reason)
	}
	return out
}
