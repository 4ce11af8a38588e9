package proxy_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/internal/syncbuf"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/writheader"
	"github.com/writ-authz/writ/task"
)

// The tests in this file are written from an attacker's side: the request
// sent, what the agent received, what the caller saw. Each names the threat and
// the defence in its doc comment; `make security` builds SECURITY.md from them.

// kycAgent is an agent a wholesale caller may not reach (retail only,
// confidential at most): its metadata must never reach that caller.
func kycAgent(upstream string) config.Agent {
	return config.Agent{Name: "kyc-refresh-agent", Route: "/kyc", Upstream: upstream, Protocol: "a2a",
		Owner: "retail-onboarding", Tenants: []string{"retail"}, MaxDataClassification: task.Confidential,
		SecuritySchemes: []string{"oauth2"}}
}

// TestSecurityDisclosureAnonymous — Threat: an anonymous caller learns platform
// metadata (a hidden agent's tenants, its classification ceiling) from the
// refusal's reasons. Defence: an unauthenticated caller gets one
// UNAUTHENTICATED, a WWW-Authenticate challenge, and nothing else; the detailed
// reasons go to the decision log only.
func TestSecurityDisclosureAnonymous(t *testing.T) {
	up := proxytest.NewFakeAgent(t, nil)
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL), kycAgent(up.Srv.URL)}, nil)
	rec := &recordingSink{}
	h.Bus.Subscribe(rec)
	resp, body := h.Do("POST", "/kyc/", "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
		"params": proxytest.SendParams}, map[string]string{"A2A-Version": "1.0"})
	var a proxytest.RPCAnswer
	_ = json.Unmarshal(body, &a)
	a.Raw = body
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != "Bearer" {
		t.Fatalf("status %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if got := a.Reasons(); !slices.Equal(got, []string{"UNAUTHENTICATED"}) {
		t.Errorf("reasons %v: want one UNAUTHENTICATED (the fault's own reason, which is its one denial)", got)
	}
	for _, leak := range []string{"retail", "confidential", "kyc-refresh-agent", "TENANT", "CLASSIFICATION", "oauth2"} {
		if strings.Contains(string(body), leak) {
			t.Errorf("the 401 shows %q: %s", leak, body)
		}
	}
	if len(up.Requests()) != 0 {
		t.Error("the agent received the anonymous request")
	}
	// The decision log keeps what the policy said.
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.decisions) != 1 || len(rec.decisions[0].Denials) < 2 {
		t.Fatalf("decision events %+v", rec.decisions)
	}
}

// TestSecurityDisclosureDenied — Threat: an authenticated caller maps the
// platform (which tenants an agent serves, its ceilings, the callback
// allow-list) from denial reasons. Defence: callers get the denial codes and
// neutral reasons; the policy's own reasons go to the decision log only.
func TestSecurityDisclosureDenied(t *testing.T) {
	up := proxytest.NewFakeAgent(t, nil)
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL), kycAgent(up.Srv.URL)}, nil)
	rec := &recordingSink{}
	h.Bus.Subscribe(rec)
	status, a := h.RPC("/kyc/", h.Token(proxytest.Investigator), "1.0", "SendMessage", proxytest.SendParams)
	if status != 403 || !slices.Contains(a.Reasons(), "TENANT_NOT_PERMITTED") || !slices.Contains(a.Reasons(), "CLASSIFICATION_EXCEEDED") {
		t.Fatalf("%d %s", status, a.Raw)
	}
	for _, leak := range []string{`\"retail\"`, "retail", "confidential", "restricted"} {
		if strings.Contains(string(a.Raw), leak) {
			t.Errorf("the refusal quotes %q: %s", leak, a.Raw)
		}
	}
	if !strings.Contains(string(a.Raw), proxy.PublicReason("TENANT_NOT_PERMITTED")) {
		t.Errorf("no neutral reason in %s", a.Raw)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	logged := fmt.Sprint(rec.decisions[len(rec.decisions)-1].Denials)
	if !strings.Contains(logged, "retail") {
		t.Errorf("the decision event lost the policy's reasons: %s", logged)
	}
}

// contextAgent answers sends with a task in the context the message names (or
// c-victim), and lists with the tasks it has.
func contextAgent(t *testing.T) *proxytest.FakeAgent {
	var n atomic.Int32
	return proxytest.NewFakeAgent(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var env struct {
			Method string `json:"method"`
			Params struct {
				Message struct {
					ContextID string `json:"contextId"`
				} `json:"message"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &env)
		w.Header().Set("Content-Type", "application/json")
		ctx := env.Params.Message.ContextID
		if ctx == "" {
			ctx = "c-victim"
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-%d","contextId":%q,"status":{"state":"TASK_STATE_COMPLETED"}}}}`, n.Add(1), ctx)
	})
}

// TestSecurityForeignContext — Threat: another tenant sends into a victim's
// A2A context (joining its conversation) or lists it. Defence: a context
// belongs to whoever created its first task; another caller's use of it is
// answered like a missing task and never reaches the agent.
func TestSecurityForeignContext(t *testing.T) {
	up := contextAgent(t)
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, nil)
	if _, a := h.RPC("/", h.Token(proxytest.Investigator), "1.0", "SendMessage", proxytest.SendParams); a.Error != nil {
		t.Fatalf("victim's send: %s", a.Raw)
	}
	before := len(up.Requests())
	join := map[string]any{"message": map[string]any{"messageId": "m-2", "role": "ROLE_USER", "contextId": "c-victim",
		"parts": []any{map[string]any{"text": "what did they ask?"}}}}
	status, a := h.RPC("/", h.Token(proxytest.RetailBot), "1.0", "SendMessage", join)
	if a.Error == nil || a.Error.Code != -32001 || status != 200 {
		t.Fatalf("a foreign send into the victim's context: %d %s", status, a.Raw)
	}
	status, a = h.RPC("/", h.Token(proxytest.RetailBot), "1.0", "ListTasks", map[string]any{"contextId": "c-victim"})
	if a.Error == nil || a.Error.Code != -32001 {
		t.Fatalf("a foreign listing of the victim's context: %d %s", status, a.Raw)
	}
	if n := len(up.Requests()); n != before {
		t.Errorf("the agent received %d of the attacker's requests", n-before)
	}
	// The owner keeps using it; a context nobody owns is anyone's to create.
	if _, a := h.RPC("/", h.Token(proxytest.Investigator), "1.0", "SendMessage", join); a.Error != nil {
		t.Errorf("the owner's own context: %s", a.Raw)
	}
	fresh := map[string]any{"message": map[string]any{"messageId": "m-3", "role": "ROLE_USER", "contextId": "c-new",
		"parts": []any{map[string]any{"text": "x"}}}}
	if _, a := h.RPC("/", h.Token(proxytest.RetailBot), "1.0", "SendMessage", fresh); a.Error != nil {
		t.Errorf("a new context: %s", a.Raw)
	}
}

// acpAgentServer is a minimal ACP server: runs complete at once in the session
// they name; GET /session/{id} shows the session.
func acpAgentServer(t *testing.T) *proxytest.FakeAgent {
	var n atomic.Int32
	return proxytest.NewFakeAgent(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == "POST" && r.URL.Path == "/runs":
			var in struct {
				AgentName string `json:"agent_name"`
				SessionID string `json:"session_id"`
			}
			_ = json.Unmarshal(body, &in)
			fmt.Fprintf(w, `{"run_id":"r-%d","agent_name":%q,"session_id":%q,"status":"completed","output":[]}`, n.Add(1), in.AgentName, in.SessionID)
		case strings.HasPrefix(r.URL.Path, "/session"):
			fmt.Fprint(w, `{"id":"s-victim","history":["secret"]}`)
		default:
			w.WriteHeader(404)
			fmt.Fprint(w, `{"code":"not_found","message":"no such thing"}`)
		}
	})
}

// TestSecurityACPSessionAndAgent — Threat: over ACP, another tenant reads or
// runs in a victim's session, or names an agent other than the one the route
// protects (agent_name, GET /agents/{name}) to reach it under the route's
// policy. Defence: a session belongs to whoever created its first run; a
// request naming another agent than the route's is refused; neither reaches
// the agent.
func TestSecurityACPSessionAndAgent(t *testing.T) {
	up := acpAgentServer(t)
	a := config.Agent{Name: "kyc-refresh-agent", Route: "/acp", Upstream: up.Srv.URL, Protocol: "acp",
		Tenants: []string{"wholesale", "retail"}, MaxDataClassification: task.Restricted, SecuritySchemes: []string{"oauth2"}}
	h := proxytest.New(t, []config.Agent{a}, nil)
	run := func(tok, agent, session string) (*http.Response, []byte) {
		return h.Do("POST", "/acp/runs", tok, map[string]any{"agent_name": agent, "session_id": session, "mode": "sync",
			"input": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"content_type": "text/plain", "content": "x"}}}}}, nil)
	}
	if resp, body := run(h.Token(proxytest.Investigator), "kyc-refresh-agent", "s-victim"); resp.StatusCode != 200 {
		t.Fatalf("victim's run: %d %s", resp.StatusCode, body)
	}
	before := len(up.Requests())
	if resp, body := run(h.Token(proxytest.RetailBot), "kyc-refresh-agent", "s-victim"); resp.StatusCode != 404 || !strings.Contains(string(body), "not_found") {
		t.Errorf("a run in the victim's session: %d %s", resp.StatusCode, body)
	}
	if resp, body := h.Do("GET", "/acp/session/s-victim", h.Token(proxytest.RetailBot), nil, nil); resp.StatusCode != 404 || strings.Contains(string(body), "secret") {
		t.Errorf("reading the victim's session: %d %s", resp.StatusCode, body)
	}
	if resp, body := run(h.Token(proxytest.Investigator), "payroll-agent", ""); resp.StatusCode != 404 {
		t.Errorf("a run naming another agent: %d %s", resp.StatusCode, body)
	}
	if resp, body := h.Do("GET", "/acp/agents/payroll-agent", h.Token(proxytest.Investigator), nil, nil); resp.StatusCode != 404 {
		t.Errorf("the manifest of another agent: %d %s", resp.StatusCode, body)
	}
	if n := len(up.Requests()); n != before {
		t.Errorf("the agent received %d of the refused requests", n-before)
	}
	if resp, body := h.Do("GET", "/acp/session/s-victim", h.Token(proxytest.Investigator), nil, nil); resp.StatusCode != 200 {
		t.Errorf("the owner's session: %d %s", resp.StatusCode, body)
	}
}

// TestSecurityCrossAgentEvent — Threat: an agent's answer reports another
// agent's task (same id) to move it, e.g. to a terminal state. Defence:
// records are keyed by agent and task id; an answer about a task its request
// neither created nor named is a protocol violation, logged, and changes
// nothing.
func TestSecurityCrossAgentEvent(t *testing.T) {
	honest := proxytest.NewFakeAgent(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_WORKING"}}}}`)
	})
	rogue := proxytest.NewFakeAgent(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(string(body), `"GetTask"`) {
			// Asked about its own task t-9, it reports t-1 as failed.
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_FAILED"}}}`)
			return
		}
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-9","contextId":"c-9","status":{"state":"TASK_STATE_WORKING"}}}}`)
	})
	r := proxytest.SanctionsAgent(rogue.Srv.URL)
	r.Name, r.Route = "rogue-agent", "/rogue"
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(honest.Srv.URL), r}, nil)
	tok := h.Token(proxytest.Investigator)
	if _, a := h.RPC("/", tok, "1.0", "SendMessage", proxytest.SendParams); a.Error != nil {
		t.Fatal(string(a.Raw))
	}
	if _, a := h.RPC("/rogue/", tok, "1.0", "SendMessage", proxytest.SendParams); a.Error != nil {
		t.Fatal(string(a.Raw))
	}
	h.RPC("/rogue/", tok, "1.0", "GetTask", map[string]any{"id": "t-9"})
	rec, ok, err := h.Store.Get(t.Context(), task.Ref{Agent: "sanctions-screening-agent", ID: "t-1"})
	if !ok || err != nil || rec.Task.State != task.Running {
		t.Fatalf("the honest agent's task: %+v %v %v", rec.Task, ok, err)
	}
	if _, ok, _ := h.Store.Get(t.Context(), task.Ref{Agent: "rogue-agent", ID: "t-1"}); ok {
		t.Error("the rogue's report created a record")
	}
	if h.Core.Stats().Violations.Load() != 1 {
		t.Errorf("violations %d, want 1", h.Core.Stats().Violations.Load())
	}
}

// TestSecurityEvictedTaskClaim — Threat: with lifecycle.unknown_tasks: allow
// (a migration), an attacker fills the store until a victim's task is evicted,
// then follows it up to become its owner. Defence: an evicted task leaves a
// tombstone with its owner; a claim by anyone else is answered like a missing
// task.
func TestSecurityEvictedTaskClaim(t *testing.T) {
	var n atomic.Int32
	up := proxytest.NewFakeAgent(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		// The victim's task finishes (finished tasks are evicted first); the
		// attacker's stay working.
		id, state := n.Add(1), "TASK_STATE_WORKING"
		if id == 1 {
			state = "TASK_STATE_COMPLETED"
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-%d","contextId":"c-%d","status":{"state":%q}}}}`, id, id, state)
	})
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, func(c *config.Config) {
		c.Lifecycle.UnknownTasks = "allow"
	})
	// A store of three tasks: the victim's finished t-1 goes when the attacker
	// floods it.
	h.Store = task.NewMemoryStore(task.MemoryLimits{MaxTasks: 3, MaxPerOwner: 3})
	h.Core.SetStore(h.Store)
	if _, a := h.RPC("/", h.Token(proxytest.Investigator), "1.0", "SendMessage", proxytest.SendParams); a.Error != nil {
		t.Fatal(string(a.Raw))
	}
	attacker := h.Token(proxytest.RetailBot)
	for range 4 {
		h.RPC("/", attacker, "1.0", "SendMessage", proxytest.SendParams)
	}
	if _, ok, _ := h.Store.Get(t.Context(), task.Ref{Agent: "sanctions-screening-agent", ID: "t-1"}); ok {
		t.Fatal("the flood did not evict t-1; the test proves nothing")
	}
	before := len(up.Requests())
	status, a := h.RPC("/", attacker, "1.0", "GetTask", map[string]any{"id": "t-1"})
	if a.Error == nil || a.Error.Code != -32001 {
		t.Fatalf("the attacker's claim: %d %s", status, a.Raw)
	}
	if len(up.Requests()) != before {
		t.Error("the claim reached the agent")
	}
	if rec, ok, _ := h.Store.Get(t.Context(), task.Ref{Agent: "sanctions-screening-agent", ID: "t-1"}); ok {
		t.Errorf("the attacker now owns t-1: %+v", rec.Task.Owner)
	}
}

// TestSecurityTaskExistenceAudited — Threat: task ids are an oracle (a foreign
// id answered differently, or at a different cost, than an unknown one), and
// probing leaves no trace. Defence: both are decided by the policy and
// answered alike (no decision id either way), and both leave a decision line
// saying the caller got task_not_found, and a log line saying why.
func TestSecurityTaskExistenceAudited(t *testing.T) {
	up := proxytest.NewFakeAgent(t, nil)
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, nil)
	logs := &syncbuf.Buffer{}
	h.Core.SetLogger(slog.New(slog.NewJSONHandler(logs, nil)))
	rec := &recordingSink{}
	h.Bus.Subscribe(rec)
	if _, a := h.RPC("/", h.Token(proxytest.Investigator), "1.0", "SendMessage", proxytest.SendParams); a.Error != nil {
		t.Fatal(string(a.Raw))
	}
	retail := h.Token(proxytest.RetailBot)
	_, foreign := h.RPC("/", retail, "1.0", "GetTask", map[string]any{"id": "t-1"})
	_, unknown := h.RPC("/", retail, "1.0", "GetTask", map[string]any{"id": "t-unknown"})
	if foreign.Error == nil || unknown.Error == nil || foreign.Error.Code != unknown.Error.Code ||
		strings.ReplaceAll(string(foreign.Raw), "t-1", "ID") != strings.ReplaceAll(string(unknown.Raw), "t-unknown", "ID") {
		t.Fatalf("foreign %s / unknown %s", foreign.Raw, unknown.Raw)
	}
	rec.mu.Lock()
	var refused []string
	for _, d := range rec.decisions[1:] {
		refused = append(refused, d.TaskID+":"+d.Refused)
	}
	rec.mu.Unlock()
	if !slices.Equal(refused, []string{"t-1:task_not_found", "t-unknown:task_not_found"}) {
		t.Errorf("decision events %v: both probes must be decided and audited", refused)
	}
	for _, why := range []string{`"why":"foreign_task"`, `"why":"unknown_task"`} {
		if !strings.Contains(logs.String(), why) {
			t.Errorf("no log line with %s:\n%s", why, logs.String())
		}
	}
}

// TestSecurityWritHeaderSpellings — Threat: a caller sends writ's own identity
// header in a spelling the agent's server folds into Writ-Caller (case,
// Writ_Caller). Defence: every spelling is stripped before writ sets its own.
func TestSecurityWritHeaderSpellings(t *testing.T) {
	up := proxytest.NewFakeAgent(t, nil)
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, nil)
	forged := `{"agent_id":"root","tenant":"wholesale","chain":[]}`
	h.RPCWith("/", h.Token(proxytest.Investigator), "1.0", "SendMessage", proxytest.SendParams, map[string]string{"Writ_Caller": forged, "writ-caller": forged, "WRIT_DECISION_ID": "forged"})
	reqs := up.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	for k, v := range reqs[0].Header {
		if writheader.Is(k) && (len(v) != 1 || strings.Contains(v[0], "root") || v[0] == "forged") {
			t.Errorf("the agent got %s: %v", k, v)
		}
	}
	if got := reqs[0].Header.Values(writheader.Caller); len(got) != 1 || !strings.Contains(got[0], "payments-investigator") {
		t.Errorf("Writ-Caller %v", got)
	}
}

// TestSecurityJSONRPCPath — Threat: an agent serving JSON-RPC elsewhere than
// "/" gets requests writ parsed as REST (or not at all) and decided
// differently. Defence: agents[].jsonrpc_path is where writ parses JSON-RPC,
// and where writ's own requests go.
func TestSecurityJSONRPCPath(t *testing.T) {
	up := proxytest.NewFakeAgent(t, nil)
	a := proxytest.SanctionsAgent(up.Srv.URL)
	a.JSONRPCPath = "/rpc"
	h := proxytest.New(t, []config.Agent{a}, nil)
	status, ans := h.RPC("/rpc", h.Token(proxytest.Investigator), "1.0", "SendMessage", proxytest.SendParams)
	if status != 200 || ans.Error != nil {
		t.Fatalf("JSON-RPC at /rpc: %d %s", status, ans.Raw)
	}
	if got := up.Requests(); len(got) != 1 || got[0].URL.Path != "/rpc" {
		t.Fatalf("the agent saw %v", got)
	}
	resp, body := h.Do("POST", "/", h.Token(proxytest.Investigator), map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
		"params": proxytest.SendParams}, map[string]string{"A2A-Version": "1.0"})
	if resp.StatusCode != 404 || len(up.Requests()) != 1 {
		t.Errorf("JSON-RPC at / on an agent that serves it at /rpc: %d %s", resp.StatusCode, body)
	}
}

// TestSecurityCardFetchIsolation — Threat: one hung agent makes every
// directory call wait for it (each call its own 10 s fetch, queued behind a
// mutex). Defence: one fetch per agent at a time, failures remembered, and the
// directory lists a slow agent from writ's config after a short wait.
func TestSecurityCardFetchIsolation(t *testing.T) {
	release := make(chan struct{})
	var cardFetches atomic.Int32
	slow := proxytest.NewFakeAgent(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if strings.HasPrefix(r.URL.Path, "/.well-known/") {
			cardFetches.Add(1)
			<-release
		}
		w.WriteHeader(404)
	})
	t.Cleanup(func() { close(release) })
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(slow.Srv.URL)}, func(c *config.Config) {
		c.Limits.DirectoryCardWait = 50 * time.Millisecond
	})
	tok := h.Token(proxytest.Investigator)
	var wg sync.WaitGroup
	bodies := make([]string, 8)
	for i := range bodies {
		wg.Go(func() {
			_, b := h.Do("GET", adapters.DirectoryPath, tok, nil, nil)
			bodies[i] = string(b)
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the directory waits for a hung agent")
	}
	for _, b := range bodies {
		if !strings.Contains(b, "sanctions-screening-agent") {
			t.Errorf("the directory dropped the slow agent: %s", b)
		}
	}
	if n := cardFetches.Load(); n != 1 {
		t.Errorf("%d card fetches for %d concurrent directory calls, want 1", n, len(bodies))
	}
}

// TestSecurityExtendedCardRewritten — Threat: the extended card, forwarded
// verbatim, shows callers the agent's own address (to bypass writ), its own
// security schemes and skills the platform does not publish. Defence: it is
// rewritten like the public card.
func TestSecurityExtendedCardRewritten(t *testing.T) {
	up := proxytest.NewFakeAgent(t, nil)
	up.Handle = func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"name":"sanctions","version":"1","supportedInterfaces":[{"url":"%s/","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],`+
			`"capabilities":{"extendedAgentCard":true},"securitySchemes":{"internal":{"apiKeySecurityScheme":{"location":"header","name":"X-Internal-Key"}}},`+
			`"securityRequirements":[{"schemes":{"internal":{}}}],"defaultInputModes":[],"defaultOutputModes":[],`+
			`"skills":[{"id":"unpublished-admin","name":"admin","description":"x","tags":["internal"]}]}}`, up.Srv.URL)
	}
	a := proxytest.SanctionsAgent(up.Srv.URL)
	a.PublicURL = "https://sanctions.agents.bank.example"
	h := proxytest.New(t, []config.Agent{a}, nil)
	status, ans := h.RPC("/", h.Token(proxytest.Investigator), "1.0", "GetExtendedAgentCard", map[string]any{})
	if status != 200 || ans.Error != nil {
		t.Fatalf("%d %s", status, ans.Raw)
	}
	body := string(ans.Raw)
	for _, leak := range []string{up.Srv.URL, "X-Internal-Key", "unpublished-admin"} {
		if strings.Contains(body, leak) {
			t.Errorf("the extended card shows %q: %s", leak, body)
		}
	}
	for _, want := range []string{"https://sanctions.agents.bank.example", `"bearerFormat":"JWT"`, `"id":"screen"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the extended card lacks %q: %s", want, body)
		}
	}
}

// TestSecurityRequestTenant — Threat: a caller of one tenant names another
// tenant in an A2A 1.0 request (the /{tenant}/ path segment of the REST
// binding, or params.tenant), and the agent acts in that tenant; or names a
// path such as ".." that the agent resolves elsewhere. Defence: the tenant a
// request names is input.request.tenant; the shipped policy denies one other
// than the caller's (TENANT_NOT_PERMITTED), and a tenant that is not a plain
// name is refused before the policy; the agent receives neither.
func TestSecurityRequestTenant(t *testing.T) {
	up := proxytest.NewFakeAgent(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"task":{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_COMPLETED"}}}`)
	})
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, nil)
	inv := h.Token(proxytest.Investigator) // tenant wholesale
	rest := func(path string) (int, string) {
		resp, body := h.Do("POST", path, inv, proxytest.SendParams, map[string]string{"A2A-Version": "1.0"})
		return resp.StatusCode, string(body)
	}
	if st, body := rest("/retail/message:send"); st != 403 || !strings.Contains(body, "TENANT_NOT_PERMITTED") {
		t.Errorf("another tenant in the path: %d %s", st, body)
	}
	params := map[string]any{"message": proxytest.SendParams["message"], "tenant": "retail"}
	if _, a := h.RPC("/", inv, "1.0", "SendMessage", params); a.Error == nil || !strings.Contains(string(a.Raw), "TENANT_NOT_PERMITTED") {
		t.Errorf("another tenant in params: %s", a.Raw)
	}
	if st, body := rest("/../message:send"); st < 400 || st == 404 && strings.Contains(body, "TENANT") {
		t.Errorf("a tenant that is not a plain name: %d %s", st, body)
	}
	if n := len(up.Requests()); n != 0 {
		t.Fatalf("the agent received %d of the refused requests", n)
	}
	if st, body := rest("/wholesale/message:send"); st != 200 {
		t.Errorf("the caller's own tenant in the path: %d %s", st, body)
	}
	if n := len(up.Requests()); n != 1 {
		t.Fatalf("the agent received %d requests, want the one allowed", n)
	}
}
