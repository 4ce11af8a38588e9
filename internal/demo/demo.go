// Package demo is `writ demo`: the seed's eight-step delegation scenario as
// data (Scenario), played against real a2a-go agents with writ in front of
// them and real a2a-go clients carrying signed JWTs.
//
// A step is a title and a Runner whose fields are its cases and expectations
// (an Admission lists route, caller and the denial codes it wants). Playing a
// step yields a Result: the lines of its story and its Checks (name, ok, got,
// want) in order. PrintStep shows a Result on the console; the tests assert
// the same Checks. How writ is started is the caller's: Options.Start gets the
// demo's *config.Config and returns a running writ (`writ demo` passes
// StartServer: writ built by the one assembly, as `writ serve` builds it).
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"go.yaml.in/yaml/v3"

	"github.com/writ-authz/writ/adapters"
	a2aadapter "github.com/writ-authz/writ/adapters/a2a"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/policies"
	"github.com/writ-authz/writ/task"
)

// The demo's identity provider: a key generated at start, its JWKS in the temp dir.
const (
	issuer   = "https://idp.demo.writ"
	audience = "writ-demo"
)

// Writ is a running writ.
type Writ interface {
	// URL is the sidecar's base URL (http://host:port).
	URL() string
	// AdminURL is the admin listener's base URL.
	AdminURL() string
	// Close drains and stops writ, flushing its decision log.
	Close()
}

// StartFunc starts writ from a configuration that config.Parse accepted.
type StartFunc func(ctx context.Context, cfg *config.Config, log *slog.Logger) (Writ, error)

// Options configure one run of the demo.
type Options struct {
	// Listen is writ's address; a port of 0 picks a free one. Loopback only.
	Listen string
	// Serve keeps everything running after the scenario until ctx is done.
	Serve bool
	// Log receives writ's and the agents' logs (default: discarded).
	Log *slog.Logger
	// DecisionLog is where writ writes its decision log (default: a file in the
	// demo's temp dir, removed at the end).
	DecisionLog string
	// Start starts writ. Required.
	Start StartFunc
	// Command is how the printed commands name writ (default "writ").
	Command string
}

// Run starts the agents and writ, plays the Scenario, prints every step and
// returns an error when a check failed. With opt.Serve it then keeps serving
// until ctx is done.
func Run(ctx context.Context, out io.Writer, opt Options) error {
	st, err := Start(ctx, opt)
	if err != nil {
		return err
	}
	defer st.Close()
	fmt.Fprintf(out, "writ is serving on %s in front of %d real A2A agents (a2a-go, on loopback);\n", st.url, len(agents))
	fmt.Fprintf(out, "every call below is a real a2a-go client or HTTP request through writ.\n")
	results := st.Play(ctx, Scenario, func(r Result) { PrintStep(out, r) })
	failed := PrintSummary(out, results)
	cmd := opt.Command
	if cmd == "" {
		cmd = "writ"
	}
	if failed == 0 && !strings.HasPrefix(st.decisions, st.dir) {
		fmt.Fprintf(out, "\nwrit's decision log of this run (one JSON line per decision and task event): %s\n", st.decisions)
		fmt.Fprintf(out, "render it as a page:  %s report -log %s -o writ-demo-report.html\n", cmd, st.decisions)
	}
	if opt.Serve && ctx.Err() == nil {
		st.printServe(out)
		<-ctx.Done()
		fmt.Fprintln(out, "\nshutting down")
	}
	if failed > 0 {
		return fmt.Errorf("%d check(s) failed; writ did not behave as the scenario expects", failed)
	}
	return nil
}

// Stage is the running scenario: the agents, writ in front of them, the
// identity provider that signs the callers' tokens, the push receiver.
type Stage struct {
	dir       string
	idp       *devidp.Provider
	agents    map[string]*seedagents.Agent // by route key
	states    *taskStates                  // every agent task's states, from the agents' hooks
	receiver  *receiver
	writ      Writ
	url       string
	http      *http.Client // for the a2a-go clients: taps writ's JSON-RPC errors
	plain     *http.Client // for plain GETs
	decisions string       // the decision log file

	// streamed is the finished sanctions task of the streaming step, which the
	// core step reads back.
	streamed a2a.TaskID
}

// Start writes the shipped policies and a JWKS to a temp dir, starts the push
// receiver and the agents, then writ in front of them.
func Start(ctx context.Context, opt Options) (_ *Stage, err error) {
	if opt.Start == nil {
		return nil, errors.New("demo: no way to start writ (Options.Start)")
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	listen, err := loopbackAddr(opt.Listen)
	if err != nil {
		return nil, err
	}
	st := &Stage{agents: map[string]*seedagents.Agent{}, states: newTaskStates()}
	defer func() {
		if err != nil {
			st.Close()
		}
	}()
	if st.dir, err = os.MkdirTemp("", "writ-demo-"); err != nil {
		return nil, err
	}
	policyDir := filepath.Join(st.dir, "policies")
	if err := os.CopyFS(policyDir, policies.FS); err != nil {
		return nil, fmt.Errorf("writing the shipped policies: %w", err)
	}
	// The demo's own push receiver listens on loopback over http: the demo (and
	// only the demo) puts its host on the wholesale callback allow-list and
	// trusts it in the SSRF guard.
	if st.receiver, err = startReceiver(); err != nil {
		return nil, err
	}
	if err := allowCallbacks(filepath.Join(policyDir, "data.json"), Investigator.Tenant, st.receiver.host); err != nil {
		return nil, err
	}
	if st.idp, err = devidp.New(st.dir, issuer, audience); err != nil {
		return nil, err
	}
	st.http, st.plain = newClients()

	cfg := &config.Config{Listen: listen, Admin: "127.0.0.1:0", Policies: []string{policyDir},
		Push: config.Push{TrustedHosts: []string{st.receiver.host}},
		Identity: identity.Config{JWT: []identity.IssuerConfig{{Issuer: issuer,
			Audiences: []string{audience}, JWKSFile: st.idp.JWKSFile, Algorithms: []string{"ES256"}}}}}
	for _, a := range agents {
		ag, err := a.start(seedagents.WithName(a.name), seedagents.WithLogger(opt.Log),
			seedagents.WithStateHook(st.states.record))
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", a.name, err)
		}
		st.agents[a.key] = ag
		cfg.Agents = append(cfg.Agents, config.Agent{Name: a.name, Route: "/" + a.key, Upstream: ag.URL,
			Protocol: a2aadapter.ProtocolName, PublicURL: "http://" + listen + "/" + a.key, Owner: a.owner, Tenants: a.tenants,
			MaxDataClassification: a.max, SecuritySchemes: a.schemes, Skills: []task.Skill{a.skill}})
	}
	st.decisions = opt.DecisionLog
	if st.decisions == "" {
		st.decisions = filepath.Join(st.dir, "decisions.jsonl")
	}
	_ = os.Remove(st.decisions) // this run's story only
	// With each decision's input: the log is a replay corpus (writ policy
	// replay -log … -policies …).
	cfg.DecisionLog = config.DecisionLog{Output: st.decisions, IncludeInput: true}
	// Through config.Parse, so the demo's config gets exactly the defaults and
	// validation a writ.yaml gets. The file stays in the temp dir to look at.
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	if cfg, err = config.Parse(raw); err != nil {
		return nil, fmt.Errorf("the demo's config: %w", err)
	}
	_ = os.WriteFile(st.configFile(), raw, 0o600)
	if st.writ, err = opt.Start(ctx, cfg, opt.Log); err != nil {
		return nil, fmt.Errorf("starting writ: %w", err)
	}
	st.url = st.writ.URL()
	return st, nil
}

// Play runs the steps in order and hands each result to each (when not nil)
// as soon as it is done. A step left unplayed because ctx ended is a failure.
func (st *Stage) Play(ctx context.Context, steps []Step, each func(Result)) []Result {
	var results []Result
	for _, s := range steps {
		res := Result{Title: s.Title}
		if ctx.Err() != nil {
			res = Result{}
			(&recorder{&res}).check("the scenario", false, "interrupted before "+s.Title+": "+ctx.Err().Error(), "every step played")
		} else {
			s.Run.run(ctx, st, &recorder{&res})
		}
		if each != nil {
			each(res)
		}
		results = append(results, res)
		if ctx.Err() != nil {
			break
		}
	}
	return results
}

// Close stops writ, then the agents and the receiver, and removes the temp dir.
func (st *Stage) Close() {
	if st.writ != nil {
		st.writ.Close()
	}
	if st.receiver != nil {
		st.receiver.close()
	}
	for _, a := range st.agents {
		_ = a.Close()
	}
	if st.plain != nil {
		st.plain.CloseIdleConnections()
	}
	if st.dir != "" {
		_ = os.RemoveAll(st.dir)
	}
}

func (st *Stage) configFile() string { return filepath.Join(st.dir, "writ.yaml") }

// loopbackAddr checks that addr is on a loopback IP and, for port 0, picks a
// free port now: the agents' public URLs must name writ's real port before writ
// starts.
func loopbackAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("-listen %q: %w", addr, err)
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

// printServe tells how to try writ by hand while -serve keeps it running.
func (st *Stage) printServe(out io.Writer) {
	admin := st.writ.AdminURL()
	body := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-1","role":"user","parts":[{"kind":"text","text":"Screen Acme Trading FZE"}]}}}`
	fmt.Fprintf(out, `
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
`, st.url, admin, admin, st.configFile(), st.decisions, st.url, st.token(Investigator), adapters.DirectoryPath, body, body)
}

// newClients are the demo's HTTP clients: one for the a2a-go clients (it taps
// writ's JSON-RPC errors), one for plain GETs. No proxy: everything is on loopback.
func newClients() (rpc, plain *http.Client) {
	base := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}
	return &http.Client{Transport: rpcTap{base}, Timeout: 30 * time.Second},
		&http.Client{Transport: base, Timeout: 30 * time.Second}
}
