package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"go.yaml.in/yaml/v3"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/policies"
	"github.com/writ-authz/writ/task"
)

// The demo's identity provider: a key generated at start, its JWKS in the temp dir.
const (
	demoIssuer   = "https://idp.demo.writ"
	demoAudience = "writ-demo"
)

// demoOptions configure one run of the demo.
type demoOptions struct {
	// Listen is writ's address; a port of 0 picks a free one. Loopback only.
	Listen string
	// Serve keeps everything running after the scenario until ctx is done.
	Serve bool
	// Log receives writ's and the agents' logs (default: discarded).
	Log *slog.Logger
	// DecisionLog is where writ writes its decision log (default: a file in the
	// demo's temp dir, removed at the end).
	DecisionLog string
}

// demoCmd runs `writ demo [-serve] [-listen 127.0.0.1:0]`.
func demoCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	serve := fs.Bool("serve", false, "keep writ and the agents running after the scenario (until Ctrl-C)")
	listen := fs.String("listen", "127.0.0.1:0", "writ's address (loopback only; port 0 picks a free port)")
	decisions := fs.String("decision-log", "writ-demo-decisions.jsonl", "where writ writes the demo's decision log (render it with writ report)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := runDemo(ctx, stdout, demoOptions{Listen: *listen, Serve: *serve, Log: log, DecisionLog: *decisions}); err != nil {
		fmt.Fprintf(stderr, "writ demo: %v\n", err)
		return 1
	}
	return 0
}

// demoAgent is one protected agent of the scenario: how to start it, where writ
// routes it, and the platform metadata writ's config gives it (the seed's cards).
type demoAgent struct {
	key     string // the route without its slash
	start   func(...seedagents.Option) (*seedagents.Agent, error)
	name    string
	owner   string
	tenants []string
	max     task.Level
	schemes []string
	skill   task.Skill
}

var screenSkill = task.Skill{ID: "screen", Name: "Screen a counterparty",
	Description: "Screen a legal entity or individual against SDN, UN and local lists.",
	Tags:        []string{"sanctions", "compliance", "screening"}, Examples: []string{"Screen Acme Trading FZE"}}

var demoAgents = []demoAgent{
	{"sanctions", seedagents.StartSanctions, "sanctions-screening-agent", "group-compliance",
		[]string{"wholesale", "retail"}, task.Restricted, []string{"oauth2"}, screenSkill},
	{"clarifier", seedagents.StartClarifier, "sanctions-clarifier", "group-compliance",
		[]string{"wholesale", "retail"}, task.Restricted, []string{"oauth2"}, screenSkill},
	{"slow", seedagents.StartSlow, "sanctions-slow", "group-compliance",
		[]string{"wholesale", "retail"}, task.Restricted, []string{"oauth2"}, screenSkill},
	{"kyc", seedagents.StartSanctions, "kyc-refresh-agent", "retail-onboarding",
		[]string{"retail"}, task.Confidential, []string{"oauth2"},
		task.Skill{ID: "refresh", Name: "Refresh KYC", Description: "Collect and verify refreshed KYC data.",
			Tags: []string{"kyc", "compliance"}}},
	{"marketing", seedagents.StartSanctions, "marketing-copy-agent", "brand",
		nil, task.Internal, []string{"apikey"},
		task.Skill{ID: "copy", Name: "Write copy", Description: "Draft campaign copy.", Tags: []string{"marketing"}}},
}

// demoCaller is who a demo token speaks for.
type demoCaller struct {
	agent, user, tenant string
	class               task.Level
	chain               []string // earlier hops, oldest first (RFC 8693 act nesting)
}

var (
	investigator = demoCaller{agent: "payments-investigator", user: "u-42", tenant: "wholesale",
		class: task.Restricted, chain: []string{"orchestrator"}}
	retailCaller = demoCaller{agent: "kyc-ops-bot", user: "u-7", tenant: "retail", class: task.Confidential}
)

// demo is one running scenario: the agents, writ in front of them, the identity
// provider that signs the callers' tokens, and the checks that failed.
type demo struct {
	out      io.Writer
	dir      string
	idp      *devidp.Provider
	agents   map[string]*seedagents.Agent // by route key
	sc       *sidecar
	url      string
	http     *http.Client // for the a2a-go clients: taps writ's JSON-RPC errors
	plain    *http.Client // for plain GETs
	failures []string

	// Carried between steps.
	streamedTask a2a.TaskID // the finished sanctions task of step 3

	// decisions is the decision log file.
	decisions string

	// receiver records the push notifications writ delivers.
	receiver *http.Server
	rcvURL   string
	rcvMu    sync.Mutex
	rcvd     []delivery
}

// delivery is one notification the demo's receiver got.
type delivery struct {
	token, auth, body string
}

// startReceiver serves the demo's push callback on loopback and allows it in the
// copied policy data.
func (d *demo) startReceiver(dataFile string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	d.rcvURL = "http://" + ln.Addr().String() + "/cb"
	d.receiver = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		d.rcvMu.Lock()
		d.rcvd = append(d.rcvd, delivery{r.Header.Get("X-A2A-Notification-Token"), r.Header.Get("Authorization"), string(body)})
		d.rcvMu.Unlock()
	})}
	go func() { _ = d.receiver.Serve(ln) }()
	raw, err := os.ReadFile(dataFile)
	if err != nil {
		return err
	}
	data := strings.Replace(string(raw), `"wholesale": ["agents.bank.ae"]`, `"wholesale": ["agents.bank.ae", "127.0.0.1"]`, 1)
	data = strings.Replace(data, `"allow_http_hosts": []`, `"allow_http_hosts": ["127.0.0.1"]`, 1)
	if data == string(raw) {
		return fmt.Errorf("the shipped data.json changed shape: cannot allow the demo's receiver")
	}
	return os.WriteFile(dataFile, []byte(data), 0o600)
}

// deliveries returns what the receiver got once at least n arrived (or after 5s).
func (d *demo) deliveries(n int) []delivery {
	deadline := time.Now().Add(5 * time.Second)
	for {
		d.rcvMu.Lock()
		got := slices.Clone(d.rcvd)
		d.rcvMu.Unlock()
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runDemo starts the agents and writ, runs the scenario and reports every check
// that failed as the error. With opt.Serve it then keeps serving until ctx is done.
func runDemo(ctx context.Context, out io.Writer, opt demoOptions) error {
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	d := &demo{out: out, agents: map[string]*seedagents.Agent{}}
	defer d.close()
	if err := d.start(ctx, opt); err != nil {
		return err
	}
	fmt.Fprintf(out, "writ is serving on %s in front of %d real A2A agents (a2a-go, on loopback);\n", d.url, len(demoAgents))
	fmt.Fprintf(out, "every call below is a real a2a-go client or HTTP request through writ.\n")

	steps := []func(context.Context){d.stepDiscovery, d.stepAdmission, d.stepStreaming,
		d.stepInputRequired, d.stepCancel, d.stepPush, d.stepCore, d.stepCard}
	for _, step := range steps {
		if ctx.Err() != nil {
			d.failf("the scenario was interrupted: %v", ctx.Err())
			break
		}
		step(ctx)
	}
	fmt.Fprintln(out)
	if len(d.failures) == 0 {
		fmt.Fprintln(out, "All steps behaved as expected.")
		if !strings.HasPrefix(d.decisions, d.dir) {
			fmt.Fprintf(out, "\nwrit's decision log of this run (one JSON line per decision and task event): %s\n", d.decisions)
			fmt.Fprintf(out, "render it as a page:  writ report -log %s -o writ-demo-report.html\n", d.decisions)
		}
	} else {
		fmt.Fprintf(out, "%d check(s) FAILED:\n", len(d.failures))
		for _, f := range d.failures {
			fmt.Fprintf(out, "  - %s\n", f)
		}
	}
	if opt.Serve && ctx.Err() == nil {
		d.printServe()
		<-ctx.Done()
		fmt.Fprintln(out, "\nshutting down")
	}
	if len(d.failures) > 0 {
		return fmt.Errorf("%d check(s) failed; writ did not behave as the scenario expects", len(d.failures))
	}
	return nil
}

// start writes the policies and the JWKS to a temp dir, starts the agents and
// then writ in front of them.
func (d *demo) start(ctx context.Context, opt demoOptions) error {
	listen, err := loopbackAddr(opt.Listen)
	if err != nil {
		return err
	}
	if d.dir, err = os.MkdirTemp("", "writ-demo-"); err != nil {
		return err
	}
	policyDir := filepath.Join(d.dir, "policies")
	if err := os.CopyFS(policyDir, policies.FS); err != nil {
		return fmt.Errorf("writing the shipped policies: %w", err)
	}
	// The demo's own push receiver listens on loopback over http: the demo (and
	// only the demo) puts 127.0.0.1 on the callback allow-list and trusts it in the
	// SSRF guard.
	if err := d.startReceiver(filepath.Join(policyDir, "data.json")); err != nil {
		return err
	}
	if d.idp, err = devidp.New(d.dir, demoIssuer, demoAudience); err != nil {
		return err
	}
	base := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}
	d.http = &http.Client{Transport: rpcTap{base}, Timeout: 30 * time.Second}
	d.plain = &http.Client{Transport: base, Timeout: 30 * time.Second}

	cfg := &config.Config{Listen: listen, Admin: "127.0.0.1:0", Policies: []string{policyDir},
		Push: config.Push{TrustedHosts: []string{"127.0.0.1"}},
		Identity: identity.Config{JWT: []identity.IssuerConfig{{Issuer: demoIssuer,
			Audiences: []string{demoAudience}, JWKSFile: d.idp.JWKSFile, Algorithms: []string{"ES256"}}}}}
	for _, a := range demoAgents {
		ag, err := a.start(seedagents.WithName(a.name), seedagents.WithLogger(opt.Log))
		if err != nil {
			return fmt.Errorf("starting %s: %w", a.name, err)
		}
		d.agents[a.key] = ag
		cfg.Agents = append(cfg.Agents, config.Agent{Name: a.name, Route: "/" + a.key, Upstream: ag.URL,
			Protocol: "a2a", PublicURL: "http://" + listen + "/" + a.key, Owner: a.owner, Tenants: a.tenants,
			MaxDataClassification: a.max, SecuritySchemes: a.schemes, Skills: []task.Skill{a.skill}})
	}
	d.decisions = opt.DecisionLog
	if d.decisions == "" {
		d.decisions = filepath.Join(d.dir, "decisions.jsonl")
	}
	_ = os.Remove(d.decisions) // this run's story only
	cfg.DecisionLog = config.DecisionLog{Output: d.decisions}
	// Through config.Parse, so the demo's config gets exactly the defaults and
	// validation a writ.yaml gets. The file stays in the temp dir to look at.
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	if cfg, err = config.Parse(raw); err != nil {
		return fmt.Errorf("the demo's config: %w", err)
	}
	_ = os.WriteFile(filepath.Join(d.dir, "writ.yaml"), raw, 0o600)
	if d.sc, err = startSidecar(ctx, cfg, opt.Log); err != nil {
		return fmt.Errorf("starting writ: %w", err)
	}
	d.url = d.sc.URL()
	return nil
}

// close stops writ, then the agents, and removes the temp dir.
func (d *demo) close() {
	if d.sc != nil {
		d.sc.shutdown(5 * time.Second)
	}
	if d.receiver != nil {
		d.receiver.Close()
	}
	for _, a := range d.agents {
		_ = a.Close()
	}
	if d.plain != nil {
		d.plain.CloseIdleConnections()
	}
	if d.dir != "" {
		_ = os.RemoveAll(d.dir)
	}
}

// loopbackAddr checks that addr is on a loopback IP and, for port 0, picks a
// free port now: the agents' public URLs must name writ's real port before writ
// starts.
func loopbackAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("-listen %q: %v", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return "", fmt.Errorf("-listen %q: the demo binds a loopback IP only (e.g. 127.0.0.1)", addr)
	}
	if port != "0" {
		return addr, nil
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// token signs a JWT for c: sub is the user, act the RFC 8693 delegation chain
// with c.agent as the current actor and the earlier hops nested inside it.
func (d *demo) token(c demoCaller) string {
	tok, err := d.idp.Token(devidp.Caller{Agent: c.agent, User: c.user, Tenant: c.tenant,
		Classification: string(c.class), Scope: "delegate", Chain: c.chain})
	if err != nil {
		panic(fmt.Sprintf("signing a demo token: %v", err)) // the key is ours; this cannot fail
	}
	return tok
}

// client is a real a2a-go client for writ's route, sending tok as a bearer token.
func (d *demo) client(ctx context.Context, route, tok string) (*a2aclient.Client, error) {
	return a2aclient.NewFromEndpoints(ctx,
		[]a2a.AgentInterface{{URL: d.url + "/" + route, Transport: a2a.TransportProtocolJSONRPC}},
		a2aclient.WithJSONRPCTransport(d.http), a2aclient.WithInterceptors(bearer(tok)))
}

// bearer puts the caller's token on every call the client makes.
type bearer string

func (b bearer) Before(ctx context.Context, req *a2aclient.Request) (context.Context, error) {
	req.Meta["Authorization"] = []string{"Bearer " + string(b)}
	return ctx, nil
}

func (bearer) After(context.Context, *a2aclient.Response) error { return nil }

// get does a plain GET through writ; tok may be empty (anonymous).
func (d *demo) get(ctx context.Context, path, tok string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.url+path, nil)
	if err != nil {
		return 0, nil, err
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := d.plain.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, err
}

// rpcFault is writ's JSON-RPC error as it came over the wire.
type rpcFault struct {
	Status  int             // the HTTP status it came in
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
	// Details are the google.rpc.ErrorInfo entries: error.data itself for A2A
	// 1.0, error.data.details for 0.3 (where data is an object).
	Details []errorInfo `json:"-"`
}

type errorInfo struct {
	Reason   string            `json:"reason"`
	Metadata map[string]string `json:"metadata"`
}

// Reason is the fault's own ErrorInfo reason (the first entry).
func (f *rpcFault) Reason() string {
	if len(f.Details) == 0 {
		return ""
	}
	return f.Details[0].Reason
}

// Reasons are every ErrorInfo reason, the fault's own first.
func (f *rpcFault) Reasons() []string {
	var out []string
	for _, e := range f.Details {
		out = append(out, e.Reason)
	}
	return out
}

// Denials are the policy's denials: the ErrorInfo entries after the first that
// carry a human reason (code: entry.Reason).
func (f *rpcFault) Denials() []errorInfo {
	var out []errorInfo
	for i, e := range f.Details {
		if i > 0 && e.Metadata["reason"] != "" {
			out = append(out, e)
		}
	}
	return out
}

// Codes are the denial codes, comma-separated.
func (f *rpcFault) Codes() string {
	var codes []string
	for _, e := range f.Denials() {
		codes = append(codes, e.Reason)
	}
	return strings.Join(codes, ", ")
}

// rpcTap is the a2a-go clients' transport. It keeps a copy of every JSON-RPC
// error answer for the call that asked for it (rpcCall): the a2a-go v0.3.3
// client reports an error that comes with a non-200 status (writ's denials are
// 401/403) as a bare "unexpected HTTP status", without reading the body.
type rpcTap struct{ base http.RoundTripper }

type tapKey struct{}

func (t rpcTap) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	sink, _ := req.Context().Value(tapKey{}).(*rpcFault)
	if err != nil || sink == nil {
		return resp, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return resp, nil // a stream, or not JSON-RPC
	}
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if rerr != nil {
		return resp, nil
	}
	var env struct {
		Error *rpcFault `json:"error"`
	}
	if json.Unmarshal(body, &env) != nil || env.Error == nil {
		return resp, nil
	}
	f := env.Error
	f.Status = resp.StatusCode
	if json.Unmarshal(f.Data, &f.Details) != nil { // 1.0: a list; 0.3: an object
		var legacy struct {
			Details []errorInfo `json:"details"`
		}
		_ = json.Unmarshal(f.Data, &legacy)
		f.Details = legacy.Details
	}
	*sink = *f
	return resp, nil
}

// rpcCall runs one a2a-go client call and returns writ's JSON-RPC error answer,
// or nil when the call got none.
func rpcCall(ctx context.Context, call func(context.Context) error) (*rpcFault, error) {
	f := &rpcFault{}
	err := call(context.WithValue(ctx, tapKey{}, f))
	if f.Code == 0 {
		return nil, err
	}
	return f, err
}

// check records a failed expectation and prints it where it happened.
func (d *demo) check(ok bool, format string, args ...any) bool {
	if !ok {
		d.failf(format, args...)
	}
	return ok
}

func (d *demo) failf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	d.failures = append(d.failures, msg)
	fmt.Fprintf(d.out, "  !! UNEXPECTED: %s\n", msg)
}

// heading prints a step's title the way the seed's worked example does.
func (d *demo) heading(title string) {
	rule := strings.Repeat("=", 78)
	fmt.Fprintf(d.out, "\n%s\n%s\n%s\n", rule, title, rule)
}

// printServe tells how to try writ by hand while -serve keeps it running.
func (d *demo) printServe() {
	admin := "http://" + d.sc.adminLn.Addr().String()
	body := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-1","role":"user","parts":[{"kind":"text","text":"Screen Acme Trading FZE"}]}}}`
	fmt.Fprintf(d.out, `
writ keeps serving: %s   (admin: %s/readyz, metrics: %s/metrics)
config: %s
decision log: %s
Try it (the token is the payments-investigator's, valid for one hour):

  export WRIT=%s
  export TOKEN=%s
  curl -s -H "Authorization: Bearer $TOKEN" "$WRIT%s?tags=sanctions"
  curl -s -H "Authorization: Bearer $TOKEN" $WRIT/sanctions/.well-known/agent-card.json
  curl -s -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '%s' $WRIT/sanctions/
  curl -s -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '%s' $WRIT/marketing/

Ctrl-C stops writ and the agents.
`, d.url, admin, admin, filepath.Join(d.dir, "writ.yaml"), d.decisions, d.url, d.token(investigator), adapters.DirectoryPath, body, body)
}

// errText is err's message, or "no error".
func errText(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
