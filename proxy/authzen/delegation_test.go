package authzen_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/proxy/authzen"
)

// subjectOf is the delegation profile's subject for c, with its token.
func (w *world) subjectOf(c proxytest.Caller) map[string]any {
	return map[string]any{"type": "agent", "id": c.Agent, "properties": map[string]any{"token": w.h.Token(c)}}
}

// resultNames are a search's results, by id (or, for actions, name).
func resultNames(t *testing.T, a answer) []string {
	t.Helper()
	var out authzen.SearchResponse
	if a.status != 200 || json.Unmarshal(a.body, &out) != nil {
		t.Fatalf("%d %s", a.status, a.body)
	}
	var names []string
	for _, r := range out.Results {
		if id := authzen.Str(r, "id"); id != "" {
			names = append(names, id)
		} else {
			names = append(names, authzen.Str(r, "name"))
		}
	}
	return names
}

// TestDelegationSearch: Threat: a resource search lists an agent the caller
// may not discover (whose card must never enter its context), or answers
// from rules other than the ones its evaluations and the directory apply.
// Defence: a resource search answers "which agents may this
// caller delegate to" from the rules of filtered discovery: the agents it
// may discover (exactly the sidecar's directory for it) and, of those, the
// ones the policy lets it send to; an action search lists the operations
// it may perform on an agent, or on a task; a subject search has no
// candidates (the callers are the identity provider's).
func TestDelegationSearch(t *testing.T) {
	w := newWorld(t, nil)
	for _, c := range []proxytest.Caller{proxytest.Investigator, proxytest.RetailBot} {
		resp, body := w.h.Do(http.MethodGet, adapters.DirectoryPath, w.h.Token(c), nil, nil)
		var dir struct {
			Agents []struct {
				Name string `json:"name"`
			} `json:"agents"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(body, &dir) != nil {
			t.Fatalf("directory: %d %s", resp.StatusCode, body)
		}
		var listed []string
		for _, a := range dir.Agents {
			listed = append(listed, a.Name)
		}
		slices.Sort(listed)
		discover := resultNames(t, w.post("/access/v1/search/resource", map[string]any{"subject": w.subjectOf(c),
			"action": map[string]any{"name": "discover"}, "resource": map[string]any{"type": "agent"}}))
		if !slices.Equal(discover, listed) || len(listed) == 0 {
			t.Errorf("%s: discover search %v, directory %v", c.Agent, discover, listed)
		}
		send := resultNames(t, w.post("/access/v1/search/resource", map[string]any{"subject": w.subjectOf(c),
			"action": map[string]any{"name": "send"}, "resource": map[string]any{"type": "agent"}}))
		var want []string
		for _, name := range listed {
			a := w.post("/access/v1/evaluation", map[string]any{"subject": w.subjectOf(c), "action": map[string]any{"name": "send"},
				"resource": map[string]any{"type": "agent", "id": name}})
			if a.json(t)["decision"] == true {
				want = append(want, name)
			}
		}
		if !slices.Equal(send, want) || !slices.Contains(send, sanctions) || slices.Contains(send, legacy) {
			t.Errorf("%s may send to %v; the evaluations say %v", c.Agent, send, want)
		}
	}
	ops := resultNames(t, w.post("/access/v1/search/action", map[string]any{"subject": w.subjectOf(proxytest.Investigator),
		"resource": map[string]any{"type": "agent", "id": sanctions}}))
	if !slices.Contains(ops, "send") || !slices.Contains(ops, "discover") || slices.Contains(ops, "get") || slices.Contains(ops, "cancel") {
		t.Errorf("actions on an agent: %v", ops)
	}
	none := resultNames(t, w.post("/access/v1/search/action", map[string]any{"subject": w.subjectOf(proxytest.Investigator),
		"resource": map[string]any{"type": "agent", "id": legacy}}))
	if slices.Contains(none, "send") {
		t.Errorf("actions on an agent that refuses the caller's authentication: %v", none)
	}
	// A task of the investigator's: its follow-ups are its owner's, nobody else's.
	created := w.viaSidecar(parityCase{caller: &investigator, route: "/sanctions", op: "send"}, "")
	taskRes := map[string]any{"type": "task", "id": created.taskID, "properties": map[string]any{"agent": sanctions}}
	own := resultNames(t, w.post("/access/v1/search/action", map[string]any{"subject": w.subjectOf(proxytest.Investigator), "resource": taskRes}))
	foreign := resultNames(t, w.post("/access/v1/search/action", map[string]any{"subject": w.subjectOf(proxytest.RetailBot), "resource": taskRes}))
	if !slices.Contains(own, "get") || slices.Contains(own, "discover") || slices.Contains(foreign, "get") {
		t.Errorf("actions on a task: its owner %v, another caller %v", own, foreign)
	}
	subjects := resultNames(t, w.post("/access/v1/search/subject", map[string]any{"subject": map[string]any{"type": "agent"},
		"action": map[string]any{"name": "send"}, "resource": map[string]any{"type": "agent", "id": sanctions}}))
	if len(subjects) != 0 {
		t.Errorf("subjects %v", subjects)
	}
}

// TestQuestionsChangeNothing: Threat: a decision point whose questions act
// — a send asked about reaching the agent, a task or context recorded or
// claimed, a push config stored — lets an enforcement point (or anyone it
// relays) change state it was only asking about. Defence: the core decides
// a Question and returns; nothing is forwarded, served or recorded (the
// store is only read).
func TestQuestionsChangeNothing(t *testing.T) {
	w := newWorld(t, nil)
	before := len(w.agent.Requests())
	stats, err := w.h.Store.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"send", "stream", "card", "discover"} {
		a := w.post("/access/v1/evaluation", map[string]any{"subject": w.subjectOf(proxytest.Investigator),
			"action": map[string]any{"name": op}, "resource": map[string]any{"type": "agent", "id": sanctions},
			"context": map[string]any{"context_id": "ctx-new", "callback": map[string]any{"url": "https://agents.bank.ae/cb", "has_token": true}}})
		if op == "send" && a.json(t)["decision"] != true {
			t.Fatalf("%s: %s", op, a.body)
		}
	}
	after, err := w.h.Store.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(w.agent.Requests()); n != before || jsonText(t, after) != jsonText(t, stats) {
		t.Errorf("asking changed something: %d requests reached the agent (was %d), store %v (was %v)", n, before, after, stats)
	}
}

// TestCacheServesAuthZEN: the decision cache serves the delegation profile
// as it serves the sidecar (one key for one delegation, whichever door asks
// it), and an application's results are cached too.
func TestCacheServesAuthZEN(t *testing.T) {
	w := newWorld(t, nil)
	q := map[string]any{"subject": w.subjectOf(proxytest.Investigator), "action": map[string]any{"name": "send"},
		"resource": map[string]any{"type": "agent", "id": sanctions}}
	w.post("/access/v1/evaluation", q)
	hits, _ := w.h.Engine.CacheStats()
	w.post("/access/v1/evaluation", q)
	w.viaSidecar(parityCase{caller: &investigator, route: "/sanctions", op: "send"}, "")
	if h, _ := w.h.Engine.CacheStats(); h != hits+2 {
		t.Errorf("decision cache hits %d → %d: the question and the sidecar's request do not share a decision", hits, h)
	}
	todo := `{"subject": {"type": "user", "id": "CiRmZDE2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs"},
		"action": {"name": "can_read_todos"}, "resource": {"type": "todo", "id": "todo-1"}}`
	w.post("/todo/access/v1/evaluation", todo)
	rh, _ := w.h.Engine.RuleCacheStats()
	w.post("/todo/access/v1/evaluation", todo)
	if h, _ := w.h.Engine.RuleCacheStats(); h != rh+1 {
		t.Errorf("rule cache hits %d → %d", rh, h)
	}
}

// countingRules counts the rules prepared.
type countingRules struct {
	authzen.Rules
	n atomic.Int64
}

func (c *countingRules) Prepare(ref string) (authzen.Rule, error) {
	c.n.Add(1)
	return c.Rules.Prepare(ref)
}

// TestBatchSharesOnePreparedRule: a batch of an application is decided on
// one prepared rule (one compiled query, one policy revision), not one per
// item, and in-process, without a request per item.
func TestBatchSharesOnePreparedRule(t *testing.T) {
	w := newWorld(t, nil)
	rules := &countingRules{Rules: rulesOf(w.h.Engine)}
	s, err := authzen.New(w.h.Core, rules, w.ident, w.h.Cfg, authzen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, 100)
	for i := range items {
		items[i] = map[string]any{"resource": map[string]any{"type": "todo", "id": "todo-" + string(rune('a'+i%26))}}
	}
	body, _ := json.Marshal(map[string]any{"subject": map[string]any{"type": "user", "id": "beth@the-smiths.com"},
		"action": map[string]any{"name": "can_read_todos"}, "evaluations": items})
	rec := &recorder{header: http.Header{}}
	req, _ := http.NewRequest(http.MethodPost, "/todo/access/v1/evaluations", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+w.pep)
	s.ServeHTTP(rec, req)
	var out struct{ Evaluations []authzen.Result }
	if rec.status != 200 || json.Unmarshal(rec.body, &out) != nil || len(out.Evaluations) != 100 {
		t.Fatalf("%d %s", rec.status, rec.body)
	}
	if n := rules.n.Load(); n != 1 {
		t.Errorf("%d rules prepared for one batch", n)
	}
}

// TestPEPAuthentication: Threat: anyone who reaches the decision point's
// listener asks it questions — probing which agents, tenants and
// classifications the policy admits — or a workload with a valid
// certificate that is no enforcement point asks as one. Defence: an
// enforcement point authenticates by a bearer JWT or a client certificate
// the listener verified (its SPIFFE ID through identity.mtls), and only the
// agent ids of authzen.clients may ask (401, 403 otherwise, before the body
// is read); the delegation profile's subject is never the enforcement
// point.
func TestPEPAuthentication(t *testing.T) {
	ca, caKey, pool := testCA(t)
	w := newWorld(t, func(c *config.Config) {
		c.Identity.MTLS = &config.MTLS{TrustDomain: "bank.ae"}
		c.AuthZEN.Clients = append(c.AuthZEN.Clients, "spiffe://bank.ae/gateway")
	})
	server, roots := selfSigned(t)
	w.pdp = w.door(&authzen.Options{TLS: &tls.Config{Certificates: []tls.Certificate{server}, ClientCAs: pool,
		ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12}})
	w.base = "https://" + w.pdp.Addr()
	client := func(spiffe string) *http.Client {
		cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if spiffe != "" {
			cfg.Certificates = []tls.Certificate{leafCert(t, ca, caKey, spiffe)}
		}
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	q := `{"subject": {"type": "agent", "id": "x"}, "action": {"name": "discover"}, "resource": {"type": "agent", "id": "` + sanctions + `"}}`
	jsonOnly := map[string]string{"Content-Type": "application/json"}
	for _, c := range []struct {
		name   string
		client *http.Client
		hdr    map[string]string
		status int
	}{
		{"a client certificate of a client", client("spiffe://bank.ae/gateway"), jsonOnly, 200},
		{"a client certificate of another workload", client("spiffe://bank.ae/intruder"), jsonOnly, 403},
		{"a bearer token of a client", client(""), map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + w.pep}, 200},
		{"neither", client(""), jsonOnly, 401},
	} {
		t.Run(c.name, func(t *testing.T) {
			w.t, w.client = t, c.client
			if a := w.do(http.MethodPost, "/access/v1/evaluation", q, c.hdr); a.status != c.status {
				t.Errorf("%d %s, want %d", a.status, a.body, c.status)
			}
		})
	}
}

// TestTrustSubjectProperties: Threat: a subject whose properties claim an
// agent, a tenant and scopes is believed, so whoever can describe a caller
// gets that caller's decisions. Defence: by default the caller is only what
// a token the identity sources verify says, and a subject without one is
// anonymous (UNAUTHENTICATED); only with
// authzen.delegation.trust_subject_properties (an enforcement point that
// verified the caller itself) do the properties state the caller, and then
// the decision is the one the caller's token gets.
func TestTrustSubjectProperties(t *testing.T) {
	asserted := map[string]any{"type": "agent", "id": "payments-investigator", "properties": map[string]any{
		"user_id": "u-42", "tenant": "wholesale", "classification": "restricted", "scopes": "delegate",
		"delegation_chain": []any{"orchestrator"}}}
	ask := func(w *world, subject map[string]any) map[string]any {
		a := w.post("/access/v1/evaluation", map[string]any{"subject": subject, "action": map[string]any{"name": "send"},
			"resource": map[string]any{"type": "agent", "id": sanctions}})
		return a.json(t)
	}
	off := newWorld(t, nil)
	got := ask(off, asserted)
	ctx, _ := got["context"].(map[string]any)
	if got["decision"] != false || ctx["reason"] != "unauthenticated" {
		t.Errorf("asserted properties believed by default: %v", got)
	}
	on := newWorld(t, func(c *config.Config) { c.AuthZEN.Delegation.TrustSubjectProperties = true })
	if d := ask(on, asserted); d["decision"] != true {
		t.Errorf("asserted investigator: %v", d)
	}
	if d := ask(on, on.subjectOf(proxytest.Investigator)); d["decision"] != true {
		t.Errorf("the investigator's token: %v", d)
	}
	delete(asserted["properties"].(map[string]any), "scopes")
	got = ask(on, asserted)
	ctx, _ = got["context"].(map[string]any)
	if got["decision"] != false || jsonText(t, ctx["denials"]) != `[{"code":"SCOPE_MISSING","reason":"the caller's token lacks a scope the operation needs"}]` {
		t.Errorf("asserted without scopes: %v", got)
	}
}

// TestMetadata: the delegation profile's document at the root, each
// application's under its name, the searches an application defines no
// candidates for left out (and not served), and nothing where no decision
// point is.
func TestMetadata(t *testing.T) {
	w := newWorld(t, nil)
	get := func(path string) (int, map[string]any) {
		a := w.do(http.MethodGet, path, nil, nil)
		var m map[string]any
		_ = json.Unmarshal(a.body, &m)
		return a.status, m
	}
	st, root := get("/.well-known/authzen-configuration")
	if st != 200 || root["policy_decision_point"] != w.base || root["search_resource_endpoint"] != w.base+"/access/v1/search/resource" {
		t.Errorf("root: %d %v", st, root)
	}
	st, todo := get("/.well-known/authzen-configuration/todo")
	if st != 200 || todo["policy_decision_point"] != w.base+"/todo" || todo["access_evaluations_endpoint"] != w.base+"/todo/access/v1/evaluations" ||
		todo["search_subject_endpoint"] != nil {
		t.Errorf("todo: %d %v", st, todo)
	}
	if a := w.post("/todo/access/v1/search/subject", `{"subject": {"type": "user"}, "action": {"name": "can_read_todos"},
		"resource": {"type": "todo", "id": "todo-1"}}`); a.status != 404 {
		t.Errorf("a search the application does not offer: %d %s", a.status, a.body)
	}
	for _, p := range []string{"/.well-known/authzen-configuration/nope", "/.well-known/authzen-configurationtodo",
		"/.well-known/authzen-configuration/todo/x", "/nope/access/v1/evaluation"} {
		if st, _ := get(p); st != 404 {
			t.Errorf("%s: %d", p, st)
		}
	}
	off := newWorld(t, func(c *config.Config) { c.AuthZEN.Delegation.Disabled = true })
	if a := off.do(http.MethodGet, "/.well-known/authzen-configuration", nil, nil); a.status != 404 {
		t.Errorf("root with the profile off: %d", a.status)
	}
	if a := off.post("/access/v1/evaluation", `{}`); a.status != 404 {
		t.Errorf("evaluation with the profile off: %d", a.status)
	}
	if u, err := url.Parse(w.base); err != nil || u.Host != w.pdp.Addr() {
		t.Errorf("base %s", w.base)
	}
}

// recorder is a minimal ResponseWriter for a handler called in-process.
type recorder struct {
	header http.Header
	status int
	body   []byte
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = 200
	}
	r.body = append(r.body, b...)
	return len(b), nil
}
func (r *recorder) WriteHeader(s int) { r.status = s }

// testCA is a CA for client certificates.
func testCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "test client CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return ca, key, pool
}

// leafCert is a client certificate with a SPIFFE ID, signed by ca.
func leafCert(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, spiffe string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(spiffe)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "workload"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), URIs: []*url.URL{u},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
