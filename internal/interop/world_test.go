package interop

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/internal/peers"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/internal/writproc"
)

const (
	issuer   = "https://idp.interop.test"
	audience = "writ"
	// acpDelay is how long an ACP run works: long enough to cancel an async
	// run on the way, short enough for the sync and streamed runs.
	acpDelay = 3 * time.Second
)

// Agent names, as the table shows them.
const (
	agentJS  = "@a2a-js/sdk 1.0 server"
	agentGo  = "a2a-go 0.3 server"
	agentACP = "ACP server (seed)"
)

// Client names, as the table shows them.
const (
	clientJSRPC  = "@a2a-js/sdk JSON-RPC"
	clientJSREST = "@a2a-js/sdk REST"
	clientGo     = "a2a-go JSON-RPC"
	clientHTTP   = "plain HTTP"
)

var (
	agentOrder  = []string{agentJS, agentGo, agentACP}
	clientOrder = []string{clientJSRPC, clientJSREST, clientGo, clientHTTP}
)

// world is everything started once: the agents, the identity provider, the
// push receiver and the built writ binary; each door adds its own writ.
type world struct {
	bin      string
	idp      *devidp.Provider
	policies string
	js       string // the @a2a-js/sdk agent's base URL
	goFast   *seedagents.Agent
	goSlow   *seedagents.Agent
	acp      *seedagents.Agent
	rcv      *receiver
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{bin: writproc.Binary(t), rcv: newReceiver(t)}
	dir := t.TempDir()
	var err error
	if w.idp, err = devidp.New(dir, issuer, audience); err != nil {
		t.Fatal(err)
	}
	w.policies = writproc.CopyPolicies(t, filepath.Join(dir, "policies"), "127.0.0.1")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.js = peers.StartScript(t, "interop-agent.mjs") }()
	start := func(f func(...seedagents.Option) (*seedagents.Agent, error), opts ...seedagents.Option) *seedagents.Agent {
		a, err := f(opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	}
	w.goFast = start(seedagents.StartSanctions)
	w.goSlow = start(seedagents.StartSlow)
	w.acp = start(seedagents.StartACP, seedagents.WithDelay(acpDelay))
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return w
}

// route is one agent as writ serves it.
type route struct {
	name, path, upstream, protocol string
}

// routes are the agents behind every door: the JS agent (slow by message
// text), the a2a-go agents (a fast one and a slow one for cancel and
// subscribe), and the ACP agent.
func (w *world) routes() []route {
	return []route{
		{"sanctions-screening-agent", "/js", w.js, "a2a"},
		{"go-sanctions", "/go", w.goFast.URL, "a2a"},
		{"go-slow", "/go-slow", w.goSlow.URL, "a2a"},
		{seedagents.ACPAgentName, "/acp", w.acp.URL, "acp"},
	}
}

// config is writ's configuration in front of the world's agents: callers
// from the test IdP, push to the loopback receiver allowed (policy copy and
// trusted host), a decision log, and the agents with public URLs under base.
func (w *world) config(listen, base, decisionLog, extra string, stateDir string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `listen: %s
admin: 127.0.0.1:0
policies: ['%s']
decision_log: {output: '%s'}
limits: {upstream_timeout: 20s, stream_idle_timeout: 20s}
identity:
  jwt: [{issuer: '%s', audiences: [%s], jwks_file: '%s'}]
push: {trusted_hosts: [127.0.0.1]}
%s%sagents:
`, listen, w.policies, decisionLog, issuer, audience, w.idp.JWKSFile, writproc.StoreSection(stateDir), extra)
	for _, r := range w.routes() {
		fmt.Fprintf(&b, "  - {name: %s, route: %s, upstream: '%s', protocol: %s, public_url: '%s%s', owner: compliance,\n"+
			"     tenants: [wholesale], max_data_classification: restricted, security_schemes: [oauth2],\n"+
			"     skills: [{id: screen, tags: [sanctions]}]}\n", r.name, r.path, r.upstream, r.protocol, base, r.path)
	}
	return b.String()
}

// token is a JWT for the caller of one cell: its own agent id, so its tasks,
// its listings and its decision-log lines are its own.
func (w *world) token(t *testing.T, agentID string) string {
	t.Helper()
	tok, err := w.idp.Token(devidp.Caller{Agent: agentID, User: "u-" + agentID, Tenant: "wholesale",
		Classification: "internal", Scope: "delegate"})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// receiver is the push receiver on loopback: every notification body, by
// the path it came to (one path per cell).
type receiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string][]string
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{got: map[string][]string{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		r.mu.Lock()
		r.got[req.URL.Path] = append(r.got[req.URL.Path], req.Header.Get("X-A2A-Notification-Token")+" "+string(b))
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// url is the callback URL of one cell.
func (r *receiver) url(cell string) string { return r.srv.URL + "/cb/" + cell }

// waitFor waits until a notification to the cell's path carries all of the
// strings, and reports whether one did.
func (r *receiver) waitFor(cell string, within time.Duration, all ...string) bool {
	deadline := time.Now().Add(within)
	for {
		r.mu.Lock()
		bodies := append([]string(nil), r.got["/cb/"+cell]...)
		r.mu.Unlock()
		for _, b := range bodies {
			ok := true
			for _, s := range all {
				if !strings.Contains(b, s) {
					ok = false
					break
				}
			}
			if ok {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
