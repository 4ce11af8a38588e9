package proxy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/task"
)

// seedWorld is writ in front of the seed's agents, built with the real a2a-go
// v0.3.3 server (A2A 0.3, JSON-RPC).
type seedWorld struct {
	*proxytest.Harness
	sanctions, clarifier, slow *seedagents.Agent
}

func newSeedWorld(t *testing.T) *seedWorld {
	t.Helper()
	start := func(f func(...seedagents.Option) (*seedagents.Agent, error), opts ...seedagents.Option) *seedagents.Agent {
		a, err := f(opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	}
	w := &seedWorld{
		sanctions: start(seedagents.StartSanctions),
		clarifier: start(seedagents.StartClarifier),
		slow:      start(seedagents.StartSlow),
	}
	kyc := start(seedagents.StartSanctions, seedagents.WithName("kyc-refresh-agent"))
	marketing := start(seedagents.StartSanctions, seedagents.WithName("marketing-copy-agent"))
	like := func(name, route string, up *seedagents.Agent) config.Agent {
		a := proxytest.SanctionsAgent(up.URL)
		a.Name, a.Route = name, route
		return a
	}
	agents := []config.Agent{
		like("sanctions-screening-agent", "/", w.sanctions),
		like("sanctions-clarifier", "/clarifier", w.clarifier),
		like("sanctions-slow", "/slow", w.slow),
		{Name: "kyc-refresh-agent", Route: "/kyc", Upstream: kyc.URL, Protocol: "a2a", Owner: "retail-onboarding",
			Tenants: []string{"retail"}, MaxDataClassification: task.Confidential, SecuritySchemes: []string{"oauth2"},
			Skills: []task.Skill{{ID: "refresh", Tags: []string{"kyc", "compliance"}}}},
		{Name: "marketing-copy-agent", Route: "/marketing", Upstream: marketing.URL, Protocol: "a2a", Owner: "brand",
			MaxDataClassification: task.Internal, SecuritySchemes: []string{"apikey"},
			Skills: []task.Skill{{ID: "copy", Tags: []string{"marketing"}}}},
	}
	w.Harness = proxytest.New(t, agents, func(c *config.Config) { c.Limits.StreamIdleTimeout = 10 * time.Second })
	return w
}

// TestA2AGoAgent drives writ in front of the a2a-go 0.3 agents through every
// lifecycle path of the issue, with raw JSON-RPC as a 0.3 client sends it.
func TestA2AGoAgent(t *testing.T) {
	w := newSeedWorld(t)
	inv := w.Token(proxytest.Investigator)
	retail := w.Token(proxytest.RetailBot)

	// An allowed send: the task completes, writ records it, owned by the caller.
	status, a := w.RPC("/", inv, "", "message/send", map[string]any{"message": proxytest.Msg03("Screen the beneficiary of PMT-771", nil)})
	id, state := proxytest.Result03(t, a)
	if status != 200 || state != "completed" {
		t.Fatalf("send: %d %s", status, a.Raw)
	}
	rec, ok, _ := w.Task(id)
	if !ok || rec.Task.State != task.Succeeded || rec.Task.Owner.AgentID != "payments-investigator" ||
		rec.Agent != "sanctions-screening-agent" || rec.Task.Classification != task.Restricted {
		t.Fatalf("record %+v", rec)
	}
	obs := w.sanctions.Requests()
	last := obs[len(obs)-1]
	if !strings.Contains(last.Caller, `"agent_id":"payments-investigator"`) {
		t.Errorf("the agent saw Writ-Caller %q", last.Caller)
	}

	// Denied sends: every check's code reaches the caller, all of them at once.
	for _, c := range []struct {
		path  string
		token string
		codes []string
	}{
		{"/kyc/", inv, []string{"CLASSIFICATION_EXCEEDED", "TENANT_NOT_PERMITTED"}},
		{"/marketing/", inv, []string{"CLASSIFICATION_EXCEEDED", "NO_ACCEPTABLE_AUTH"}},
		{"/", w.Token(proxytest.Caller{Agent: "x", Tenant: "wholesale", Scopes: "delegate", Chain: []string{"a", "b", "c", "d"}}), []string{"DEPTH_EXCEEDED"}},
		{"/", w.Token(proxytest.Caller{Agent: "x", Tenant: "wholesale", Scopes: "delegate", Chain: []string{"sanctions-screening-agent"}}), []string{"CYCLE_DETECTED"}},
		{"/", w.Token(proxytest.Caller{Agent: "x", Tenant: "wholesale", Scopes: "read"}), []string{"SCOPE_MISSING"}},
		{"/", "", []string{"UNAUTHENTICATED"}},
	} {
		before := len(w.sanctions.Requests())
		status, a := w.RPC(c.path, c.token, "", "message/send", map[string]any{"message": proxytest.Msg03("x", nil)})
		got := a.Reasons()
		if c.token == "" && slices.Equal(got, []string{"UNAUTHENTICATED"}) {
			// Anonymous: the fault's own reason is its one denial, listed once.
			got = []string{"UNAUTHENTICATED", "UNAUTHENTICATED"}
		}
		if a.Error == nil || len(got) < 1 || !sameSet(got[1:], c.codes) {
			t.Errorf("%s: %d %s, want %v", c.path, status, a.Raw, c.codes)
		}
		want := 403
		if c.token == "" {
			want = 401
		}
		if status != want {
			t.Errorf("%s: status %d, want %d", c.path, status, want)
		}
		if c.path == "/" && len(w.sanctions.Requests()) != before {
			t.Errorf("%s: a denied request reached the agent", c.path)
		}
	}
	// Callbacks: an outside host and a missing token are refused by policy.
	for _, c := range []struct {
		push map[string]any
		code string
	}{
		{map[string]any{"url": "https://evil.example/hook", "token": "t"}, "CALLBACK_NOT_ALLOWED"},
		{map[string]any{"url": "https://agents.bank.ae/cb"}, "CALLBACK_UNAUTHENTICATED"},
	} {
		_, a := w.RPC("/", inv, "", "message/send", map[string]any{"message": proxytest.Msg03("x", nil),
			"configuration": map[string]any{"pushNotificationConfig": c.push}})
		if !contains(a.Reasons(), c.code) {
			t.Errorf("push %v: %s", c.push, a.Raw)
		}
	}

	// A follow-up from another tenant is TaskNotFound, exactly like a task that
	// does not exist.
	_, other := w.RPC("/", retail, "", "tasks/get", map[string]any{"id": id})
	_, missing := w.RPC("/", retail, "", "tasks/get", map[string]any{"id": "no-such-task"})
	if other.Error == nil || other.Error.Code != -32001 || missing.Error == nil || missing.Error.Code != -32001 {
		t.Errorf("foreign get %s / missing get %s", other.Raw, missing.Raw)
	}
	if strings.Replace(other.Error.Message, id, "ID", 1) != strings.Replace(missing.Error.Message, "no-such-task", "ID", 1) {
		t.Errorf("a foreign task is distinguishable: %q vs %q", other.Error.Message, missing.Error.Message)
	}
	// The owner gets it.
	if _, a := w.RPC("/", inv, "", "tasks/get", map[string]any{"id": id}); a.Error != nil {
		t.Errorf("owner get: %s", a.Raw)
	}
	// A message to the finished task never reaches the agent.
	before := len(w.sanctions.Requests())
	_, a = w.RPC("/", inv, "", "message/send", map[string]any{"message": proxytest.Msg03("again", map[string]any{"taskId": id})})
	if a.Error == nil || a.Error.Code != -32004 || !contains(a.Reasons(), "TASK_TERMINAL") || len(w.sanctions.Requests()) != before {
		t.Errorf("message to a terminal task: %s", a.Raw)
	}

	// Input-required, then the reply completes the task.
	_, a = w.RPC("/clarifier/", inv, "", "message/send", map[string]any{"message": proxytest.Msg03("Screen this entity", nil)})
	cid, state := proxytest.Result03(t, a)
	if state != "input-required" {
		t.Fatalf("clarifier: %s", a.Raw)
	}
	_, a = w.RPC("/clarifier/", inv, "", "message/send", map[string]any{"message": proxytest.Msg03("UAE and UN lists", map[string]any{"taskId": cid})})
	if _, state := proxytest.Result03(t, a); state != "completed" {
		t.Fatalf("reply: %s", a.Raw)
	}
	if rec, _, _ := w.Task(cid); rec.Task.State != task.Succeeded {
		t.Errorf("clarifier record %+v", rec)
	}

	// Cancel, then cancel again: the second is answered by writ.
	_, a = w.RPC("/slow/", inv, "", "message/send", map[string]any{"message": proxytest.Msg03("Screen something slow", nil),
		"configuration": map[string]any{"blocking": false}})
	sid, _ := proxytest.Result03(t, a)
	_, a = w.RPC("/slow/", inv, "", "tasks/cancel", map[string]any{"id": sid})
	if _, state := proxytest.Result03(t, a); state != "canceled" {
		t.Fatalf("cancel: %s", a.Raw)
	}
	before = len(w.slow.Requests())
	_, a = w.RPC("/slow/", inv, "", "tasks/cancel", map[string]any{"id": sid})
	if a.Error == nil || a.Error.Code != -32002 || len(w.slow.Requests()) != before {
		t.Errorf("cancel again: %s", a.Raw)
	}
	// A task of one agent is not found through another agent's route.
	if _, a = w.RPC("/clarifier/", inv, "", "tasks/get", map[string]any{"id": sid}); a.Error == nil || a.Error.Code != -32001 {
		t.Errorf("cross-route get: %s", a.Raw)
	}
}

// TestA2AGoStream: a stream through writ arrives event by event, and the store
// follows it to the end.
func TestA2AGoStream(t *testing.T) {
	w := newSeedWorld(t)
	resp, body := w.Do("POST", "/", w.Token(proxytest.Investigator), map[string]any{"jsonrpc": "2.0", "id": "s-1",
		"method": "message/stream", "params": map[string]any{"message": proxytest.Msg03("Screen the beneficiary of PMT-771", nil)}}, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var kinds []string
	var id string
	for _, block := range strings.Split(strings.TrimSpace(string(body)), "\n\n") {
		for _, line := range strings.Split(block, "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var env struct {
					Result struct {
						Kind   string `json:"kind"`
						ID     string `json:"id"`
						TaskID string `json:"taskId"`
					} `json:"result"`
				}
				if err := json.Unmarshal([]byte(data), &env); err != nil {
					t.Fatalf("event %q: %v", data, err)
				}
				kinds = append(kinds, env.Result.Kind)
				if env.Result.ID != "" {
					id = env.Result.ID
				}
			}
		}
	}
	if strings.Join(kinds, ",") != "task,status-update,artifact-update,status-update" {
		t.Fatalf("events %v", kinds)
	}
	rec, ok, _ := w.Task(id)
	if !ok || rec.Task.State != task.Succeeded || len(rec.Task.Artifacts) != 1 || rec.Task.Artifacts[0] != "sanctions-screening" {
		t.Fatalf("record %+v", rec)
	}
}

// bearer is an a2a-go call interceptor that presents a token.
type bearer struct {
	a2aclient.PassthroughInterceptor
	token string
}

func (b bearer) Before(ctx context.Context, req *a2aclient.Request) (context.Context, error) {
	req.Meta["Authorization"] = []string{"Bearer " + b.token}
	return ctx, nil
}

// TestA2AGoClientThroughWrit: the real a2a-go client, pointed at writ's URL,
// completes a delegation unchanged — card, send, stream, cancel errors.
func TestA2AGoClientThroughWrit(t *testing.T) {
	w := newSeedWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := a2aclient.NewFromEndpoints(ctx, []a2a.AgentInterface{{URL: w.Srv.URL + "/", Transport: a2a.TransportProtocolJSONRPC}},
		a2aclient.WithInterceptors(bearer{token: w.Token(proxytest.Investigator)}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.SendMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser,
		a2a.TextPart{Text: "Screen the beneficiary of PMT-771"}, a2a.DataPart{Data: map[string]any{"beneficiary": "Acme Trading FZE"}})})
	if err != nil {
		t.Fatal(err)
	}
	tk, ok := res.(*a2a.Task)
	if !ok || tk.Status.State != a2a.TaskStateCompleted || len(tk.Artifacts) != 1 {
		t.Fatalf("result %#v", res)
	}
	var states []a2a.TaskState
	for ev, err := range client.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "again"})}) {
		if err != nil {
			t.Fatal(err)
		}
		if su, ok := ev.(*a2a.TaskStatusUpdateEvent); ok {
			states = append(states, su.Status.State)
		}
	}
	if len(states) == 0 || states[len(states)-1] != a2a.TaskStateCompleted {
		t.Fatalf("streamed states %v", states)
	}
	// The client sees writ's lifecycle answer as an ordinary A2A error.
	_, err = client.CancelTask(ctx, &a2a.TaskIDParams{ID: tk.ID})
	if err == nil || !strings.Contains(err.Error(), "cancel") {
		t.Fatalf("cancel of a completed task: %v", err)
	}
	// A denied caller gets an error the SDK understands.
	denied, err := a2aclient.NewFromEndpoints(ctx, []a2a.AgentInterface{{URL: w.Srv.URL + "/kyc/", Transport: a2a.TransportProtocolJSONRPC}},
		a2aclient.WithInterceptors(bearer{token: w.Token(proxytest.Investigator)}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := denied.SendMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "x"})}); err == nil {
		t.Fatal("a denied send succeeded")
	}
}

// TestCardsAndDiscovery: the card as an allowed and a denied caller sees it, and
// the directory for two callers with different views.
func TestCardsAndDiscovery(t *testing.T) {
	w := newSeedWorld(t)
	resp, body := w.Do("GET", "/.well-known/agent-card.json", w.Token(proxytest.Investigator), nil, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("card: %d %s", resp.StatusCode, body)
	}
	var card map[string]any
	if err := json.Unmarshal(body, &card); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(card["url"].(string), "http://"+w.Cfg.Listen) && !strings.Contains(string(body), w.Cfg.Listen) {
		t.Errorf("card url not rewritten: %v", card["url"])
	}
	if strings.Contains(string(body), w.sanctions.URL) {
		t.Errorf("the card leaks the upstream URL: %s", body)
	}
	for _, secret := range []string{"group-compliance", "wholesale", "restricted"} {
		if strings.Contains(string(body), secret) {
			t.Errorf("the card leaks platform metadata %q: %s", secret, body)
		}
	}
	if !strings.Contains(string(body), `"bearerFormat":"JWT"`) {
		t.Errorf("the card does not advertise writ's scheme: %s", body)
	}
	resp, _ = w.Do("GET", "/.well-known/agent-card.json", "", nil, nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("anonymous card: %d", resp.StatusCode)
	}
	resp, _ = w.Do("GET", "/kyc/.well-known/agent-card.json", w.Token(proxytest.Investigator), nil, nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("card of an agent the caller may not see: %d", resp.StatusCode)
	}

	names := func(tok, query string) []string {
		resp, body := w.Do("GET", adapters.DirectoryPath+query, tok, nil, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("directory: %d %s", resp.StatusCode, body)
		}
		var d struct {
			Agents []struct {
				Name string `json:"name"`
			} `json:"agents"`
		}
		json.Unmarshal(body, &d)
		var out []string
		for _, a := range d.Agents {
			out = append(out, a.Name)
		}
		return out
	}
	inv := names(w.Token(proxytest.Investigator), "?tags=sanctions")
	// Cards carry the agents' own names (the seed agents call two of themselves
	// "clarifier" and "slow"); ranking is by tag overlap, then writ's route name.
	if strings.Join(inv, ",") != "clarifier,sanctions-screening-agent,slow" {
		t.Errorf("investigator sees %v", inv)
	}
	if ret := names(w.Token(proxytest.RetailBot), ""); strings.Join(ret, ",") != "kyc-refresh-agent,clarifier,sanctions-screening-agent,slow" {
		t.Errorf("retail caller sees %v", ret)
	}
	if kyc := names(w.Token(proxytest.RetailBot), "?tags=kyc"); strings.Join(kyc, ",") != "kyc-refresh-agent" {
		t.Errorf("retail caller with tags=kyc sees %v", kyc)
	}
	if len(names("", "")) != 0 {
		t.Error("an anonymous caller sees agents")
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range b {
		if !contains(a, x) {
			return false
		}
	}
	return true
}
