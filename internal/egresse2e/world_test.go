package egresse2e

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/internal/peers"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/internal/writproc"
)

// The world of these tests, every part a real process or a real server on
// 127.0.0.1: a test IdP signs the user's tokens (alice, through the portal
// agent, for agent-a); `writ sts` exchanges every hop's token; three
// `writ serve` processes — writ A in front of agent A (ingress, and the
// egress listener A's own calls go through), writ B in front of agent B
// (ingress and egress), writ C in front of agent C (ingress) — and three
// @a2a-js/sdk 1.3.0 agents: A and B delegate every message onward through
// their writ's egress listener (agent.mjs --agent delegator), C screens it.
// One delegation: alice → portal → agent-a → agent-b → agent-c.
//
// Between the parts stand the test's own servers, which count what passes
// and can misbehave: tapB between writ A's egress and writ B (what left A's
// host for B), front between writ A and the STS's token endpoint (an STS
// that is down, slow, answers garbage or a token for another audience), and
// trap, the upstream of targets the policy must refuse.

const (
	agentA, agentB, agentC = "agent-a", "agent-b", "agent-c"
	portal                 = "portal"
	alice                  = "alice"
	tenant                 = "t1"
	scope                  = "delegate"
	idpIssuer              = "https://idp.e2e.test"
	// screened is what agent C says at the end of a delegation that went
	// through, as agent B reports it (and agent A then, as delegated).
	screened = "delegated to agent-c: completed Screening complete."
)

// world is the whole cast.
type world struct {
	t       testing.TB
	bin     string
	dir     string
	idp     *devidp.Provider
	sts     *writproc.Proc
	a, b, c *writproc.Proc
	// agentA, agentB, agentC are the JS agents' base URLs.
	agentA, agentB, agentC string
	front                  *stsFront
	tapB                   *tap
	// cardB is the URL of B's card (through the tap): A's target is named
	// by it.
	cardB string
	trap  *tap
	// pubKey is the decision logs' checkpoint key (PEM), for -verify.
	pubKey string
	// stsVerify verifies the STS's tokens as a target's writ does.
	stsVerify *identity.Resolver
}

func newWorld(t *testing.T) *world {
	t.Helper()
	peers.EnsureNode(t)
	w := &world{t: t, bin: writproc.Binary(t), dir: t.TempDir()}
	var err error
	if w.idp, err = devidp.New(w.dir, idpIssuer, "agent:"+agentA); err != nil {
		t.Fatal(err)
	}
	signing := w.checkpointKey()
	w.startSTS()
	w.front = newSTSFront(t, w.sts.URL)
	w.trap = newTap(t, "")

	// A names B by its card: the card writ B serves (signed by writ B, its
	// interfaces at B's public URL: the tap).
	w.tapB = newTap(t, "")
	w.cardB = w.tapB.URL() + "/.well-known/agent-card.json"
	egressA, egressB := writproc.FreeAddr(t), writproc.FreeAddr(t)
	w.agentC = peers.StartJSAgent(t, "sanctions", "")
	w.agentB = peers.StartJSAgent(t, "delegator", "", "--egress", "http://"+egressB, "--delegate-to", agentC)
	w.agentA = peers.StartJSAgent(t, "delegator", "", "--egress", "http://"+egressA, "--delegate-to", w.cardB)

	trust := fmt.Sprintf("{issuer: %q, audiences: [\"agent:%%s\"], jwks_url: %q}", w.sts.URL, w.sts.URL+"/.well-known/jwks.json")
	w.c = w.startWrit(agentC, fmt.Sprintf(`agents:
  - {name: agent-c, upstream: %q, max_data_classification: internal, security_schemes: [oauth2]}
identity:
  jwt: [%s]
`, w.agentC, fmt.Sprintf(trust, agentC)), signing)
	w.b = w.startWrit(agentB, fmt.Sprintf(`agents:
  - {name: agent-b, upstream: %q, public_url: %q, max_data_classification: internal, security_schemes: [oauth2]}
identity:
  jwt: [%s]
egress:
  listen: %s
  trusted_hosts: [127.0.0.1]
  exchange: {issuer: %q, client_id: agent-b, client_secret_file: %q}
  targets:
    - {name: agent-c, upstream: %q, max_data_classification: internal, security_schemes: [oauth2], tenants: [t1], skills: [{id: screen, tags: [sanctions]}]}
    - {name: agent-a, upstream: %q, max_data_classification: restricted, security_schemes: [oauth2]}
`, w.agentB, w.tapB.URL(), fmt.Sprintf(trust, agentB), egressB, w.sts.URL, w.secret(agentB), w.c.URL, w.trap.URL()), signing)
	w.tapB.to(t, w.b.URL)
	w.a = w.startWrit(agentA, fmt.Sprintf(`cards: {jku_trusted_hosts: [127.0.0.1]}
agents:
  - {name: agent-a, upstream: %q, max_data_classification: restricted, security_schemes: [oauth2]}
identity:
  jwt: [{issuer: %q, audiences: ["agent:agent-a"], jwks_file: %q}]
egress:
  listen: %s
  trusted_hosts: [127.0.0.1]
  exchange:
    issuer: %q
    token_endpoint: %q
    jwks_url: %q
    client_id: agent-a
    client_secret_file: %q
    timeout: 1s
  targets:
    - {name: agent-b, card_url: %q, require_signed_card: true, max_data_classification: internal, security_schemes: [oauth2], tenants: [t1], skills: [{id: screen, tags: [sanctions]}]}
    - {name: retail-only, upstream: %q, max_data_classification: restricted, security_schemes: [oauth2], tenants: [t2]}
`, w.agentA, idpIssuer, w.idp.JWKSFile, egressA, w.sts.URL, w.front.URL()+"/token", w.sts.URL+"/.well-known/jwks.json",
		w.secret(agentA), w.cardB, w.trap.URL()), signing)

	if w.stsVerify, err = identity.New(identity.Config{JWT: []config.JWTIssuer{{Issuer: w.sts.URL,
		Audiences: []string{"agent:" + agentB, "agent:" + agentC}, JWKSURL: w.sts.URL + "/.well-known/jwks.json"}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.stsVerify.Close)
	return w
}

// checkpointKey writes an Ed25519 key that signs the decision logs'
// checkpoints, and its public half for -verify; it returns the private key's
// path.
func (w *world) checkpointKey() string {
	w.t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		w.t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		w.t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		w.t.Fatal(err)
	}
	path := filepath.Join(w.dir, "checkpoint.key")
	w.write(path, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
	w.pubKey = filepath.Join(w.dir, "checkpoint.pub")
	w.write(w.pubKey, string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})))
	return path
}

// startSTS runs writ sts: the IdP's tokens for agent-a are subject tokens,
// agents A and B authenticate with client secrets, a subject token is bound
// to its holder (subject_audience).
func (w *world) startSTS() {
	w.t.Helper()
	clients := filepath.Join(w.dir, "clients.yaml")
	w.write(clients, agentA+": "+secretOf(agentA)+"\n"+agentB+": "+secretOf(agentB)+"\n")
	addr := writproc.FreeAddr(w.t)
	w.sts = writproc.StartSTS(w.t, w.bin, fmt.Sprintf(`listen: %s
signing_key_file: %q
audiences: ["agent:agent-b", "agent:agent-c"]
client_secrets_file: %q
subject_audience: "agent:{actor}"
subject_issuers:
  - {issuer: %q, audiences: ["agent:agent-a"], jwks_file: %q}
`, addr, filepath.Join(w.dir, "sts-key.jwk"), clients, idpIssuer, w.idp.JWKSFile), writproc.Options{Dir: w.dir})
}

func secretOf(agent string) string { return "secret-of-" + agent }

// secret writes agent's client secret to a file of its own.
func (w *world) secret(agent string) string {
	path := filepath.Join(w.dir, agent+".secret")
	w.write(path, secretOf(agent))
	return path
}

// startWrit runs writ serve for agent on body (agents, identity, egress),
// with a decision log of its own whose checkpoints key signs.
func (w *world) startWrit(agent, body, key string) *writproc.Proc {
	w.t.Helper()
	dir := filepath.Join(w.dir, agent)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		w.t.Fatal(err)
	}
	log := filepath.Join(dir, "decisions.log")
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:0
push: {disabled: true}
limits: {upstream_timeout: 10s}
decision_log: {output: %q, signing_key_file: %q}
`, log, key) + writproc.StoreSection(dir) + body
	return writproc.Start(w.t, w.bin, yaml, writproc.Options{Dir: dir, DecisionLog: log})
}

func (w *world) write(path, s string) {
	w.t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		w.t.Fatal(err)
	}
}

// user is alice's token for agent-a, from the IdP, issued through the portal
// (its act), after the earlier hops chain, with the data classification
// ceiling class. Every token is new (its jti): no cache on the way knows it.
func (w *world) user(class string, chain ...string) string {
	w.t.Helper()
	claims := w.idp.Claims(devidp.Caller{Agent: portal, User: alice, Tenant: tenant, Classification: class,
		Scope: scope, Chain: chain})
	claims["jti"] = randomID()
	tok, err := w.idp.Sign(claims)
	if err != nil {
		w.t.Fatal(err)
	}
	return tok
}

func randomID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// message is an A2A 1.0 SendMessage, as agent A's SDK server reads it.
func message(text string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":%q,"role":"ROLE_USER","parts":[{"text":%q}]}}}`,
		randomID(), text)
}

// answer is what a JSON-RPC call answered: its HTTP status, and the task's
// state and last status text (or the error).
type answer struct {
	Status int
	Body   string
	State  string
	Text   string
}

// post sends body to url with the bearer token (and headers).
func post(t testing.TB, url, token, body string, hdr map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{Status: resp.StatusCode, Body: string(b)}
	var rpc struct {
		Result struct {
			Task struct {
				Status struct {
					State   string `json:"state"`
					Message struct {
						Parts []struct {
							Text string `json:"text"`
						} `json:"parts"`
					} `json:"message"`
				} `json:"status"`
			} `json:"task"`
		} `json:"result"`
	}
	if json.Unmarshal(b, &rpc) == nil {
		a.State = rpc.Result.Task.Status.State
		for _, p := range rpc.Result.Task.Status.Message.Parts {
			a.Text += p.Text
		}
	}
	return a
}

// delegate sends alice's request (token) to agent A through writ A, and
// returns what A answered: the outcome of the delegation it made.
func (w *world) delegate(token string) answer {
	w.t.Helper()
	return post(w.t, w.a.URL+"/", token, message("Screen Acme Trading FZE"), nil)
}

// observed is what a JS agent has received so far.
func (w *world) observed(agentURL string) []seedagents.Observed {
	w.t.Helper()
	return peers.JSAgentRequests(w.t, agentURL)
}

// lastParent is the Writ-Decision-Id of the last message agentURL received:
// the parent its outbound calls name.
func (w *world) lastParent(agentURL string) string {
	w.t.Helper()
	var id string
	for _, o := range w.observed(agentURL) {
		if o.Method == "SendMessage" {
			id = o.Header.Get("Writ-Decision-Id")
		}
	}
	if id == "" {
		w.t.Fatalf("%s received no message with a Writ-Decision-Id", agentURL)
	}
	return id
}

// writ runs the writ binary (report, dev, ...) and returns its output and
// exit status.
func (w *world) writ(args ...string) (string, int) {
	w.t.Helper()
	cmd := exec.Command(w.bin, args...)
	cmd.Dir = w.dir
	out, err := cmd.CombinedOutput()
	if err == nil {
		return string(out), 0
	}
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	w.t.Fatalf("writ %v: %v", args, err)
	return "", -1
}

// tap is a server of the test's own: a reverse proxy to its target (or, with
// none, an upstream that answers a completed task), which keeps every
// request that passed.
type tap struct {
	srv  *httptest.Server
	next atomic.Pointer[httputil.ReverseProxy]
	mu   sync.Mutex
	seen []*http.Request
}

// newTap starts a tap that answers every request itself, until to gives it
// a target.
func newTap(t testing.TB, target string) *tap {
	tp := &tap{}
	tp.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		tp.mu.Lock()
		tp.seen = append(tp.seen, r.Clone(r.Context()))
		tp.mu.Unlock()
		if next := tp.next.Load(); next != nil {
			next.ServeHTTP(rw, r)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		fmt.Fprint(rw, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_COMPLETED"}}}}`)
	}))
	t.Cleanup(tp.srv.Close)
	if target != "" {
		tp.to(t, target)
	}
	return tp
}

// to makes the tap a reverse proxy to target.
func (tp *tap) to(t testing.TB, target string) {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	tp.next.Store(httputil.NewSingleHostReverseProxy(u))
}

// URL is the tap's base URL.
func (tp *tap) URL() string { return tp.srv.URL }

// Requests are the requests that passed so far.
func (tp *tap) Requests() []*http.Request {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]*http.Request(nil), tp.seen...)
}

// Count is how many requests passed.
func (tp *tap) Count() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return len(tp.seen)
}

// stsFront stands between writ A and the STS's token endpoint, and
// misbehaves as told.
type stsFront struct {
	srv *httptest.Server
	// mode: "" passes, "down" closes the connection, "slow" answers after
	// writ's exchange timeout, "garbage" answers what is not a token
	// response, "wrong_audience" lets the real STS sign a token for another
	// target.
	mode      atomic.Value
	exchanges atomic.Int64 // token exchanges that reached the front
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
	f.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(body))
		if form.Get("grant_type") == "urn:ietf:params:oauth:grant-type:token-exchange" {
			f.exchanges.Add(1)
			switch f.mode.Load().(string) {
			case "down":
				if c, _, err := http.NewResponseController(rw).Hijack(); err == nil {
					_ = c.Close()
				}
				return
			case "slow":
				select {
				case <-time.After(5 * time.Second):
				case <-stop:
				case <-r.Context().Done():
				}
				return
			case "garbage":
				rw.Header().Set("Content-Type", "application/json")
				fmt.Fprint(rw, `{"access_token": 42, "token_type": "Bearer"`)
				return
			case "wrong_audience":
				form.Set("audience", "agent:"+agentC)
				body = []byte(form.Encode())
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		rp.ServeHTTP(rw, r)
	}))
	t.Cleanup(func() { close(stop); f.srv.Close() })
	return f
}

// URL is the front's base URL.
func (f *stsFront) URL() string { return f.srv.URL }
