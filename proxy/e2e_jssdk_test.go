package proxy_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/peers"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/task"
)

// jsWorld is writ in front of @a2a-js/sdk 1.3.0 agents (A2A 1.0, JSON-RPC and
// HTTP+JSON), with writ's public URL in the cards it serves.
func jsWorld(t *testing.T) *proxytest.Harness {
	t.Helper()
	peers.EnsureNode(t)
	sanctions := peers.StartJSAgent(t, "sanctions", "")
	clarifier := peers.StartJSAgent(t, "clarifier", "")
	slow := peers.StartJSAgent(t, "slow", "")
	like := func(name, route, up string) config.Agent {
		a := proxytest.SanctionsAgent(up)
		a.Name, a.Route, a.PublicURL = name, route, "self"
		return a
	}
	return proxytest.New(t, []config.Agent{like("sanctions-screening-agent", "/", sanctions),
		like("sanctions-clarifier", "/clarifier", clarifier), like("sanctions-slow", "/slow", slow)}, nil)
}

// jsClient runs the real JS SDK client through writ.
func jsClient(t *testing.T, h *proxytest.Harness, route, token, scenario, binding string) []map[string]any {
	t.Helper()
	// A trailing slash: the JS SDK resolves the card path relative to the URL.
	lines, err := peers.RunJSClient(t, "--url", strings.TrimSuffix(h.Srv.URL+route, "/")+"/", "--token", token,
		"--scenario", scenario, "--binding", binding)
	if err != nil {
		t.Fatalf("%s %s: %v (%v)", scenario, binding, err, lines)
	}
	return lines
}

func states(lines []map[string]any) []string {
	var out []string
	for _, l := range lines {
		if s, ok := l["state"].(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// TestJSClientAndAgentThroughWrit: the real JS SDK client, pointed at writ,
// completes delegations to real JS SDK agents unchanged, over both bindings.
func TestJSClientAndAgentThroughWrit(t *testing.T) {
	h := jsWorld(t)
	tok := h.Token(proxytest.Investigator)
	for _, binding := range []string{"jsonrpc", "rest"} {
		t.Run(binding, func(t *testing.T) {
			lines := jsClient(t, h, "/", tok, "send", binding)
			st := states(lines)
			if len(st) == 0 || st[len(st)-1] != "completed" {
				t.Fatalf("send: %v", lines)
			}
			id, _ := lines[len(lines)-1]["taskId"].(string)
			if rec, ok, _ := h.Task(id); !ok || rec.Task.State != task.Succeeded || rec.Version != "1.0" {
				t.Fatalf("record of %s: %+v", id, rec)
			}
			st = states(jsClient(t, h, "/", tok, "stream", binding))
			if strings.Join(st, ",") != "submitted,working,completed" && (len(st) < 2 || st[len(st)-1] != "completed") {
				t.Fatalf("stream states %v", st)
			}
			st = states(jsClient(t, h, "/clarifier", tok, "clarify", binding))
			if len(st) < 2 || !contains(st, "input-required") || st[len(st)-1] != "completed" {
				t.Fatalf("clarify states %v", st)
			}
			lines = jsClient(t, h, "/slow", tok, "cancel", binding)
			var again map[string]any
			for _, l := range lines {
				if l["op"] == "cancel-again" {
					again = l
				}
			}
			errObj, _ := again["error"].(map[string]any)
			if errObj == nil || errObj["code"] != float64(-32002) {
				t.Fatalf("cancel again through writ: %v", lines)
			}
		})
	}
}

// TestJSClientDenied: a denial reaches the JS client as an A2A error it decodes.
func TestJSClientDenied(t *testing.T) {
	h := jsWorld(t)
	outsider := h.Token(proxytest.Caller{Agent: "corp-bot", Tenant: "corporate", Class: "internal", Scopes: "delegate"})
	// The card itself is hidden from a caller of another tenant (404), so the
	// client stops there.
	lines, _ := peers.RunJSClient(t, "--url", h.Srv.URL, "--token", outsider, "--scenario", "send")
	found := false
	for _, l := range lines {
		if e, ok := l["error"].(map[string]any); ok {
			found = true
			if hs, _ := e["httpStatus"].(float64); hs != 404 {
				t.Errorf("outsider: %v", l)
			}
		}
	}
	if !found {
		t.Fatalf("outsider got no error: %v", lines)
	}
	// With the card cached by an allowed caller, raw 1.0 requests show the denial
	// shapes both bindings carry.
	resp, body := h.Do("POST", "/message:send", outsider, map[string]any{"message": map[string]any{
		"messageId": "m", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "x"}}}}, map[string]string{"A2A-Version": "1.0"})
	var rest struct {
		Error struct {
			Code    int    `json:"code"`
			Status  string `json:"status"`
			Details []struct {
				Reason string `json:"reason"`
			} `json:"details"`
		} `json:"error"`
	}
	json.Unmarshal(body, &rest)
	if resp.StatusCode != 403 || rest.Error.Status != "PERMISSION_DENIED" || len(rest.Error.Details) < 2 ||
		rest.Error.Details[1].Reason != "TENANT_NOT_PERMITTED" {
		t.Fatalf("REST denial: %d %s", resp.StatusCode, body)
	}
}

// TestJSAgentLifecycleAndVisibility: in front of the JS SDK agents, over 1.0
// REST: a follow-up by another caller is TaskNotFound, a message to a finished
// task never reaches the agent, the card for an allowed and a denied caller, and
// discovery for two callers.
func TestJSAgentLifecycleAndVisibility(t *testing.T) {
	h := jsWorld(t)
	inv := h.Token(proxytest.Investigator)
	v10 := map[string]string{"A2A-Version": "1.0"}
	resp, body := h.Do("POST", "/message:send", inv, map[string]any{"message": map[string]any{
		"messageId": "m-1", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "Screen Acme Trading FZE"}}}}, v10)
	var sent struct {
		Task struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"task"`
	}
	json.Unmarshal(body, &sent)
	if resp.StatusCode >= 300 || sent.Task.Status.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("send: %d %s", resp.StatusCode, body)
	}
	id := sent.Task.ID
	// Another caller of the same tenant: not the owner, so the task does not exist.
	other := h.Token(proxytest.Caller{Agent: "other-bot", User: "u-9", Tenant: "wholesale", Class: "internal", Scopes: "delegate"})
	r1, b1 := h.Do("GET", "/tasks/"+id, other, nil, v10)
	r2, b2 := h.Do("GET", "/tasks/no-such-task", other, nil, v10)
	if r1.StatusCode != 404 || r2.StatusCode != 404 ||
		strings.Replace(string(b1), id, "ID", -1) != strings.Replace(string(b2), "no-such-task", "ID", -1) {
		t.Fatalf("foreign get %d %s / missing %d %s", r1.StatusCode, b1, r2.StatusCode, b2)
	}
	if r, b := h.Do("GET", "/tasks/"+id, inv, nil, v10); r.StatusCode != 200 {
		t.Fatalf("owner get: %d %s", r.StatusCode, b)
	}
	// A message to the finished task: UnsupportedOperation, and the agent never sees it.
	before := len(peers.JSAgentRequests(t, h.Cfg.Agents[0].Upstream))
	resp, body = h.Do("POST", "/message:send", inv, map[string]any{"message": map[string]any{
		"messageId": "m-2", "role": "ROLE_USER", "taskId": id, "parts": []any{map[string]any{"text": "again"}}}}, v10)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "UNSUPPORTED_OPERATION") || !strings.Contains(string(body), "TASK_TERMINAL") {
		t.Fatalf("message to a finished task: %d %s", resp.StatusCode, body)
	}
	if after := len(peers.JSAgentRequests(t, h.Cfg.Agents[0].Upstream)); after != before {
		t.Fatalf("the agent saw the refused message (%d → %d requests)", before, after)
	}
	// The card: allowed caller gets writ's rewritten 1.0 card; an outsider gets 404.
	resp, body = h.Do("GET", "/.well-known/agent-card.json", inv, nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"supportedInterfaces"`) || !strings.Contains(string(body), h.Srv.URL) {
		t.Fatalf("card: %d %s", resp.StatusCode, body)
	}
	outsider := h.Token(proxytest.Caller{Agent: "corp-bot", Tenant: "corporate", Class: "internal", Scopes: "delegate"})
	if resp, _ = h.Do("GET", "/.well-known/agent-card.json", outsider, nil, nil); resp.StatusCode != 404 {
		t.Fatalf("outsider card: %d", resp.StatusCode)
	}
	// Discovery: the investigator sees the three agents; the outsider none.
	count := func(tok string) int {
		_, body := h.Do("GET", adapters.DirectoryPath, tok, nil, nil)
		var d struct {
			Agents []json.RawMessage `json:"agents"`
		}
		json.Unmarshal(body, &d)
		return len(d.Agents)
	}
	if n, m := count(inv), count(outsider); n != 3 || m != 0 {
		t.Fatalf("directory: investigator %d, outsider %d", n, m)
	}
}

// TestCallerHeaderNonASCIIReadsTheSameInNode: a caller whose agent id, user
// and chain carry characters outside ASCII (Latin-1, CJK, an astral emoji)
// reaches the real JS SDK agent with a Writ-Caller header that Node — which
// decodes header bytes as Latin-1 — parses to the very same agent id.
//
// Threat: a header that servers decode differently: writ wrote UTF-8 bytes,
// Node and Python read them as Latin-1, so the agent trusts an agent name
// other than the one writ verified (and a crafted name could read as another
// agent's). Defence: every header value writ writes is ASCII; Writ-Caller
// escapes everything else inside its JSON (\uXXXX).
func TestCallerHeaderNonASCIIReadsTheSameInNode(t *testing.T) {
	peers.EnsureNode(t)
	up := peers.StartJSAgent(t, "sanctions", "")
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up)}, nil)
	const agent = "bänk-agent-名-😀"
	tok := h.Token(proxytest.Caller{Agent: agent, User: "ü-42", Tenant: "wholesale", Class: "internal", Scopes: "delegate",
		Chain: []string{"orchestrâtor"}})
	if _, a := h.RPC("/", tok, "1.0", "SendMessage", proxytest.SendParams); a.Error != nil {
		t.Fatalf("send: %s", a.Raw)
	}
	var seen *seedagents.Observed
	for _, o := range peers.JSAgentRequests(t, up) {
		if o.Method == "SendMessage" {
			seen = &o
		}
	}
	if seen == nil {
		t.Fatal("the agent saw no SendMessage")
	}
	for i := 0; i < len(seen.Caller); i++ {
		if c := seen.Caller[i]; c < 0x20 || c > 0x7e {
			t.Fatalf("Writ-Caller has byte %#x at %d: %q", c, i, seen.Caller)
		}
	}
	if seen.CallerAgentID != agent {
		t.Fatalf("Node read agent_id %q, writ verified %q (header %q)", seen.CallerAgentID, agent, seen.Caller)
	}
	var doc struct {
		UserID string   `json:"user_id"`
		Chain  []string `json:"chain"`
	}
	if err := json.Unmarshal([]byte(seen.Caller), &doc); err != nil || doc.UserID != "ü-42" || len(doc.Chain) != 1 || doc.Chain[0] != "orchestrâtor" {
		t.Fatalf("header %q: %+v %v", seen.Caller, doc, err)
	}
}

// TestConnectionNamingADecisionHeaderIsRefused: a request whose Connection
// header names a header writ's decision depends on — here A2A-Version, which
// the real JS SDK agent needs (without it the request is A2A 0.3 to the
// agent, which refuses it with -32009) — is refused by writ before any
// decision and never reaches the agent; so is every other header the adapter,
// the identity or the core read. A Connection header naming another header
// (or only keep-alive) passes, and the hop-by-hop header is dropped.
//
// Threat: what the agent executes is not what writ decided: writ decides on
// A2A-Version 1.0, then its hop-by-hop removal (RFC 9110 section 7.6.1)
// strips the very header it decided on, because the caller listed it in
// Connection. Defence: a Connection header that names a header the decision
// or the adapter reads (the adapter declares its own: Edge.DecisionHeaders)
// is refused as an invalid request, before the policy is asked.
func TestConnectionNamingADecisionHeaderIsRefused(t *testing.T) {
	peers.EnsureNode(t)
	up := peers.StartJSAgent(t, "sanctions", "")
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up)}, nil)
	rec := &recordingSink{}
	h.Bus.Subscribe(rec)
	tok := h.Token(proxytest.Investigator)
	sends := func() int {
		n := 0
		for _, o := range peers.JSAgentRequests(t, up) {
			if o.Method == "SendMessage" {
				n++
			}
		}
		return n
	}
	send := func(connection string) (int, proxytest.RPCAnswer) {
		resp, body := h.Do("POST", "/", tok, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": proxytest.SendParams},
			map[string]string{"A2A-Version": "1.0", "Connection": connection, "A2A-Extensions": "urn:x:ext", "Writ-Data-Classification": "internal"})
		var a proxytest.RPCAnswer
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatalf("Connection: %s: not JSON-RPC: %d %s", connection, resp.StatusCode, body)
		}
		a.Raw = body
		return resp.StatusCode, a
	}
	for _, named := range []string{"A2A-Version", "a2a-version", "keep-alive, A2A-Version", "A2A-Extensions", "Authorization",
		"Content-Type", "Writ-Data-Classification", "Content-Length", "Host", "Writ-Caller"} {
		decided := len(rec.decisions)
		_, a := send(named)
		if a.Error == nil || a.Error.Code != -32600 {
			t.Errorf("Connection: %s: %s; want an invalid-request refusal", named, a.Raw)
		}
		if len(rec.decisions) != decided {
			t.Errorf("Connection: %s: the policy was asked", named)
		}
	}
	if n := sends(); n != 0 {
		t.Fatalf("the agent received %d of the refused sends", n)
	}
	// Connection naming nothing writ decides on: forwarded, and answered by
	// the agent as A2A 1.0.
	if _, a := send("keep-alive, X-Trace-Hop"); a.Error != nil {
		t.Fatalf("Connection: keep-alive, X-Trace-Hop: %s", a.Raw)
	}
	if n := sends(); n != 1 {
		t.Fatalf("the agent received %d sends, want 1", n)
	}
}
