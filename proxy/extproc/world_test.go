package extproc_test

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
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/internal/syncbuf"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/extproc"
	"github.com/writ-authz/writ/proxy/extproc/extproctest"
	"github.com/writ-authz/writ/proxy/follow"
	"github.com/writ-authz/writ/proxy/push"
	"github.com/writ-authz/writ/proxy/sidecar"
	"github.com/writ-authz/writ/task"
)

const testIssuer = "https://idp.test"

// door is how the world's clients reach writ: the sidecar's own listener, or
// the fake Envoy in front of the ext_proc server (with its modes).
type door struct {
	name  string
	envoy *extproctest.Envoy // nil: the sidecar
}

var sidecarDoor = door{name: "sidecar"}

// extprocDoor is the ext_proc door with Envoy configured as mode says (nil:
// writ's deployment).
func extprocDoor(name string, mode func(*extproctest.Envoy)) door {
	e := &extproctest.Envoy{}
	if mode != nil {
		mode(e)
	}
	return door{name: name, envoy: e}
}

// world is one writ (one admission core, lifecycle store and push deliverer)
// in front of the seed's a2a-go agents and a fake A2A 1.0 JSON agent, reached
// through one door. Every world is new: scenarios through two doors start
// from the same state and are compared.
type world struct {
	t      testing.TB
	door   door
	cfg    *config.Config
	core   *proxy.Core
	store  *recStore
	idp    *devidp.Provider
	url    string
	ext    *extproc.Server
	logs   *syncbuf.Buffer
	rcv    *receiver
	agents map[string]*seedagents.Agent
	lister *fakeAgent
	served *servedSink
}

// servedSink records the requests each door reports answered.
type servedSink struct {
	events.Nop
	mu   sync.Mutex
	reqs []events.Request
}

func (s *servedSink) Served(e events.Request) {
	s.mu.Lock()
	s.reqs = append(s.reqs, e)
	s.mu.Unlock()
}

// wait returns the events once n were reported (a stream reports when Envoy
// closes it, just after the caller has its answer).
func (s *servedSink) wait(t testing.TB, n int) []events.Request {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(s.list()) < n && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	return s.list()
}

func (s *servedSink) list() []events.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]events.Request(nil), s.reqs...)
}

// fakeAgent is an A2A 1.0 JSON-RPC agent whose answers the test writes.
type fakeAgent struct {
	mu     sync.Mutex
	bodies []string
	srv    *httptest.Server
}

func newFakeAgent(t testing.TB, handle func(w http.ResponseWriter, r *http.Request, body []byte)) *fakeAgent {
	f := &fakeAgent{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.bodies = append(f.bodies, string(b))
		f.mu.Unlock()
		handle(w, r, b)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAgent) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bodies...)
}

// listerAgent lists every task it has, whoever asks: writ must filter.
func listerAgent(t testing.TB) *fakeAgent {
	var mu sync.Mutex
	n := 0
	return newFakeAgent(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet {
			http.NotFound(w, r)
			return
		}
		if strings.Contains(string(body), `"ListTasks"`) {
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{"tasks":[`+
				`{"id":"t-inv","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}},`+
				`{"id":"t-retail","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}},`+
				`{"id":"t-never-seen","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}],"totalSize":3,"pageSize":3}}`)
			return
		}
		mu.Lock()
		n++
		id := map[int]string{1: "t-inv", 2: "t-retail"}[n]
		mu.Unlock()
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":%q,"contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}}}`, id)
	})
}

// receiver records push notifications.
type receiver struct {
	mu   sync.Mutex
	hdr  []http.Header
	body []string
	srv  *httptest.Server
}

func newReceiver(t testing.TB) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.hdr = append(r.hdr, req.Header.Clone())
		r.body = append(r.body, string(b))
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// waitFor returns the notifications once one containing s arrived.
func (r *receiver) waitFor(t testing.TB, s string) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		for i, b := range r.body {
			if strings.Contains(b, s) {
				out := append([]string(nil), r.body[:i+1]...)
				r.mu.Unlock()
				return out
			}
		}
		r.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no notification with %s arrived", s)
	return nil
}

// pushPolicies copies the shipped policies with 127.0.0.1 (the receiver) on
// the callback allow-list, over http — trusted only in these tests.
func pushPolicies(t testing.TB) string {
	dir := t.TempDir()
	entries, _ := os.ReadDir("../../policies")
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		raw, _ := os.ReadFile(filepath.Join("../../policies", e.Name()))
		if e.Name() == "data.json" {
			s := strings.Replace(string(raw), `"wholesale": ["agents.bank.ae"]`, `"wholesale": ["agents.bank.ae", "127.0.0.1"]`, 1)
			s = strings.Replace(s, `"allow_http_hosts": []`, `"allow_http_hosts": ["127.0.0.1"]`, 1)
			raw = []byte(s)
		}
		_ = os.WriteFile(filepath.Join(dir, e.Name()), raw, 0o644)
	}
	return dir
}

// recStore is the memory store, with the order tasks and contexts were
// first recorded in (to compare two stores after the same scenario).
type recStore struct {
	*task.MemoryStore
	mu       sync.Mutex
	tasks    []task.Ref
	contexts []task.Ref
}

func (s *recStore) Create(ctx context.Context, r task.Record) error {
	err := s.MemoryStore.Create(ctx, r)
	if err == nil {
		s.mu.Lock()
		s.tasks = append(s.tasks, r.Ref())
		s.mu.Unlock()
	}
	return err
}

func (s *recStore) ClaimContext(ctx context.Context, ref task.Ref, owner task.Owner) (task.Owner, error) {
	got, err := s.MemoryStore.ClaimContext(ctx, ref, owner)
	if err == nil && got == owner {
		s.mu.Lock()
		seen := false
		for _, r := range s.contexts {
			seen = seen || r == ref
		}
		if !seen {
			s.contexts = append(s.contexts, ref)
		}
		s.mu.Unlock()
	}
	return got, err
}

// snapshot is the store's contents: every task and context in the order they
// were recorded, without times.
func (s *recStore) snapshot(t testing.TB) string {
	s.mu.Lock()
	tasks, contexts := append([]task.Ref(nil), s.tasks...), append([]task.Ref(nil), s.contexts...)
	s.mu.Unlock()
	var b strings.Builder
	for _, ref := range tasks {
		rec, ok, err := s.Get(context.Background(), ref)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			fmt.Fprintf(&b, "task %s/%s: gone\n", ref.Agent, ref.ID)
			continue
		}
		rec.Created, rec.Updated = time.Time{}, time.Time{}
		raw, _ := json.Marshal(rec)
		fmt.Fprintf(&b, "task %s\n", raw)
	}
	for _, ref := range contexts {
		o, ok, _ := s.Context(context.Background(), ref)
		fmt.Fprintf(&b, "context %s/%s: %v %+v\n", ref.Agent, ref.ID, ok, o)
	}
	return b.String()
}

// newWorld starts the agents, writ and its door.
func newWorld(t testing.TB, d door, mutate func(*config.Config)) *world {
	t.Helper()
	start := func(f func(...seedagents.Option) (*seedagents.Agent, error), opts ...seedagents.Option) *seedagents.Agent {
		a, err := f(opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	}
	w := &world{t: t, door: d, logs: &syncbuf.Buffer{}, rcv: newReceiver(t), served: &servedSink{}, agents: map[string]*seedagents.Agent{
		"sanctions": start(seedagents.StartSanctions),
		"clarifier": start(seedagents.StartClarifier),
		"slow":      start(seedagents.StartSlow, seedagents.WithDelay(300*time.Millisecond)),
		"kyc":       start(seedagents.StartSanctions, seedagents.WithName("kyc-refresh-agent")),
	}, lister: listerAgent(t)}
	var err error
	if w.idp, err = devidp.New(t.TempDir(), testIssuer, "writ"); err != nil {
		t.Fatal(err)
	}
	agent := func(name, route, up string) string {
		return fmt.Sprintf(`  - {name: %s, route: %s, upstream: '%s', protocol: a2a, owner: group-compliance,
     tenants: [wholesale, retail], max_data_classification: restricted, security_schemes: [oauth2],
     skills: [{id: screen, tags: [sanctions, compliance]}]}
`, name, route, up)
	}
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:0
policies: ['%s']
limits: {upstream_timeout: 5s, stream_idle_timeout: 10s}
identity:
  jwt: [{issuer: %s, audiences: [writ], jwks_file: '%s'}]
agents:
%s%s%s%s%s%s  - {name: kyc-refresh-agent, route: /kyc, upstream: '%s', protocol: a2a, owner: retail-onboarding,
     tenants: [retail], max_data_classification: confidential, security_schemes: [oauth2],
     skills: [{id: refresh, tags: [kyc, compliance]}]}
envoy: {ext_proc_listen: '127.0.0.1:0'}
`, pushPolicies(t), testIssuer, w.idp.JWKSFile,
		agent("sanctions-screening-agent", "/", w.agents["sanctions"].URL),
		agent("sanctions-clarifier", "/clarifier", w.agents["clarifier"].URL),
		agent("sanctions-slow", "/slow", w.agents["slow"].URL),
		agent("sanctions-lister", "/lister", w.lister.srv.URL),
		agent("sanctions-down", "/down", closedPort(t)),
		agent("sanctions-odd", "/odd", oddStreamer(t).srv.URL),
		w.agents["kyc"].URL)
	if w.cfg, err = config.Parse([]byte(yaml)); err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(w.cfg)
		if err := w.cfg.Validate(); err != nil {
			t.Fatal(err)
		}
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
	w.store = &recStore{MemoryStore: task.NewMemoryStore(task.MemoryLimits{MaxTasks: 1000, MaxPerOwner: 100, TTL: time.Hour})}
	guard := push.NewGuard(push.GuardConfig{TrustedHosts: []string{"127.0.0.1"}})
	deliverer := push.NewDeliverer(push.DelivererConfig{Client: guard.Client(5*time.Second, 1<<20),
		BaseBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	t.Cleanup(func() { _ = deliverer.Close(context.Background()) })
	log := slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if w.core, err = proxy.New(w.cfg, proxy.Deps{Identity: ident, Engine: engine, Store: w.store, Logger: log, Push: deliverer,
		Events: w.served, Follow: follow.New(follow.Options{Store: w.store, Lifecycle: w.cfg.Lifecycle, Logger: log})}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.core.Close)
	if d.envoy == nil {
		sc := sidecar.New(w.core, w.cfg.Limits, log, nil)
		srv := httptest.NewUnstartedServer(sc)
		srv.Config = sc.HTTPServer("")
		srv.Start()
		t.Cleanup(srv.Close)
		w.url = srv.URL
		return w
	}
	if w.ext, err = extproc.New(w.core, ident, w.cfg, log); err != nil {
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
	conn, err := grpc.NewClient("passthrough:///"+w.ext.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	envoy := *d.envoy
	envoy.Client = extprocv3.NewExternalProcessorClient(conn)
	for _, a := range w.cfg.Agents {
		envoy.Routes = append(envoy.Routes, extproctest.Route{Prefix: a.Route, Name: a.Name, Upstream: a.Upstream})
	}
	srv := httptest.NewServer(&envoy)
	t.Cleanup(srv.Close)
	w.url = srv.URL
	return w
}

// oddStreamer answers an A2A 1.0 stream with what a proxy must pass on
// exactly and observe anyway: a keep-alive comment, an id line, CRLF line
// ends, an event that is not JSON, and a last event the agent does not end
// with a blank line.
func oddStreamer(t testing.TB) *fakeAgent {
	return newFakeAgent(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if r.Method == http.MethodGet {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			": keep-alive\n\n",
			"id: 1\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"task\":{\"id\":\"t-odd\",\"contextId\":\"c-odd\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}}\r\n\r\n",
			"data: not json\n\n",
			"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"artifactUpdate\":{\"taskId\":\"t-odd\",\"contextId\":\"c-odd\",\"artifact\":{\"artifactId\":\"a-1\",\"name\":\"report\",\"parts\":[{\"text\":\"ok\"}]}}}}\n\n",
			"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"statusUpdate\":{\"taskId\":\"t-odd\",\"contextId\":\"c-odd\",\"status\":{\"state\":\"TASK_STATE_COMPLETED\"}}}}",
		} {
			fmt.Fprint(w, ev)
			w.(http.Flusher).Flush()
		}
	})
}

// closedPort is the URL of a port nothing listens on (an agent that is down).
func closedPort(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// caller describes who a test token speaks for.
type caller struct {
	agent, user, tenant, class, scopes string
	chain                              []string
}

var (
	investigator = caller{agent: "payments-investigator", user: "u-42", tenant: "wholesale", class: "restricted",
		scopes: "delegate", chain: []string{"orchestrator"}}
	retailBot = caller{agent: "retail-bot", user: "u-7", tenant: "retail", class: "internal", scopes: "delegate"}
)

func (w *world) token(c caller) string {
	w.t.Helper()
	tok, err := w.idp.Token(devidp.Caller{Agent: c.agent, User: c.user, Tenant: c.tenant, Classification: c.class,
		Scope: c.scopes, Chain: c.chain})
	if err != nil {
		w.t.Fatal(err)
	}
	return tok
}

// reply is what a caller got.
type reply struct {
	status      int
	contentType string
	header      http.Header
	body        []byte
}

// do sends one request through the world's door.
func (w *world) do(method, path, token string, body []byte, hdr map[string]string) reply {
	w.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, w.url+path, rd)
	if err != nil {
		w.t.Fatal(err)
	}
	if body != nil {
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
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		w.t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return reply{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), header: resp.Header, body: out}
}

// rpc sends a JSON-RPC request (version "" is A2A 0.3).
func (w *world) rpc(path, token, version, method string, params any) reply {
	w.t.Helper()
	raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	hdr := map[string]string{}
	if version != "" {
		hdr["A2A-Version"] = version
	}
	return w.do("POST", path, token, raw, hdr)
}

// rpcAnswer is a JSON-RPC answer's envelope.
type rpcAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func (r reply) rpc(t testing.TB) rpcAnswer {
	t.Helper()
	var a rpcAnswer
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatalf("not JSON-RPC (%d): %s", r.status, r.body)
	}
	return a
}

// task03 reads an A2A 0.3 task result.
func (r reply) task03(t testing.TB) (id, state string) {
	t.Helper()
	a := r.rpc(t)
	if a.Error != nil {
		t.Fatalf("error: %s", r.body)
	}
	var tk struct {
		ID     string `json:"id"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	if err := json.Unmarshal(a.Result, &tk); err != nil {
		t.Fatal(err)
	}
	return tk.ID, tk.Status.State
}

func msg03(text string, extra map[string]any) map[string]any {
	m := map[string]any{"kind": "message", "messageId": fmt.Sprintf("m-%d", time.Now().UnixNano()), "role": "user",
		"parts": []any{map[string]any{"kind": "text", "text": text},
			map[string]any{"kind": "data", "data": map[string]any{"beneficiary": "Acme Trading FZE"}}}}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

var sendParams10 = map[string]any{"message": map[string]any{"messageId": "m-1", "role": "ROLE_USER",
	"parts": []any{map[string]any{"text": "Screen Acme Trading FZE"}}}}

// normalizer replaces what differs from run to run — ids the agents make up,
// times, writ's decision ids, the receiver's port — by stable names, in order
// of first appearance, so two runs of one scenario compare byte for byte.
type normalizer struct {
	names map[string]string
	n     int
}

var (
	uuidRe     = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeRe     = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)
	msgIDRe    = regexp.MustCompile(`m-\d{10,}`)
	decisionRe = regexp.MustCompile(`\b[0-9a-f]{24}\b`)
	portRe     = regexp.MustCompile(`127\.0\.0\.1:\d+`)
	// The signatures of a card writ signed: each world signs with a key of
	// its own, and ECDSA signs anew each time.
	signaturesRe = regexp.MustCompile(`"signatures":\[[^\]]*\]`)
)

func (n *normalizer) apply(s string) string {
	if n.names == nil {
		n.names = map[string]string{}
	}
	name := func(prefix string) func(string) string {
		return func(m string) string {
			if v, ok := n.names[m]; ok {
				return v
			}
			n.n++
			v := fmt.Sprintf("%s-%d", prefix, n.n)
			n.names[m] = v
			return v
		}
	}
	s = uuidRe.ReplaceAllStringFunc(s, name("id"))
	s = msgIDRe.ReplaceAllStringFunc(s, name("msg"))
	s = decisionRe.ReplaceAllString(s, "DECISION")
	s = timeRe.ReplaceAllString(s, "TIME")
	s = portRe.ReplaceAllString(s, "127.0.0.1:PORT")
	s = signaturesRe.ReplaceAllString(s, `"signatures":["SIGNED"]`)
	return s
}

// transcript is what the caller saw in a scenario, and the notifications.
type transcript struct {
	steps []step
}

type step struct {
	what        string
	status      int
	contentType string
	body        string
}

func (tr *transcript) add(what string, r reply) reply {
	tr.steps = append(tr.steps, step{what: what, status: r.status, contentType: r.contentType, body: string(r.body)})
	return r
}

func (tr *transcript) note(what, body string) {
	tr.steps = append(tr.steps, step{what: what, body: body})
}

// normalized renders the transcript and the store with one normalizer.
func (w *world) normalized(tr *transcript) ([]step, string) {
	n := &normalizer{}
	out := make([]step, len(tr.steps))
	for i, s := range tr.steps {
		s.body = n.apply(s.body)
		out[i] = s
	}
	return out, n.apply(w.store.snapshot(w.t))
}

// rpcError reports whether a body is a JSON-RPC error answer.
func rpcError(body string) bool {
	var a struct {
		Error json.RawMessage `json:"error"`
	}
	return json.Unmarshal([]byte(body), &a) == nil && len(a.Error) > 0 && !strings.HasPrefix(body, `{"error"`)
}

// sameForCaller compares what a caller saw through the sidecar (ref) and
// through ext_proc (got): the same bodies and content types, and the same
// statuses except the one documented difference — a JSON-RPC error the
// sidecar sends on 200 (as A2A servers do) is a refusal status behind Envoy.
func sameForCaller(t *testing.T, ref, got []step) {
	t.Helper()
	if len(ref) != len(got) {
		t.Fatalf("%d steps through ext_proc, %d through the sidecar", len(got), len(ref))
	}
	for i := range ref {
		r, g := ref[i], got[i]
		status := r.status == g.status || (r.status == http.StatusOK && g.status >= 400 && rpcError(r.body))
		if !status || r.contentType != g.contentType || r.body != g.body {
			t.Errorf("%s:\next_proc %d %q %s\nsidecar  %d %q %s", r.what, g.status, g.contentType, g.body,
				r.status, r.contentType, r.body)
		}
	}
}
