package grpcsidecar_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/peers"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/proxy/push"
	"github.com/writ-authz/writ/task"
)

// jsAgent is grpc-agent.mjs: the JS SDK's 1.0 gRPC server.
type jsAgent struct {
	t    *testing.T
	base string // its HTTP side (the records)
	grpc string // its gRPC address
}

func startJSAgent(t *testing.T, kind string) *jsAgent {
	t.Helper()
	base := peers.StartScript(t, "grpc-agent.mjs", "--agent", kind)
	var port struct {
		Port int `json:"port"`
	}
	getJSON(t, base+"/_writ/grpc", &port)
	return &jsAgent{t: t, base: base, grpc: fmt.Sprintf("127.0.0.1:%d", port.Port)}
}

// jsCall is one call the JS agent received.
type jsCall struct {
	Method string              `json:"method"`
	Header map[string][]string `json:"header"`
	Caller string              `json:"caller"`
	Body   string              `json:"body"`
}

func (a *jsAgent) calls() []jsCall {
	var out []jsCall
	getJSON(a.t, a.base+"/_writ/requests", &out)
	return out
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v: %s", url, err, b)
	}
}

// jsLines runs grpc-client.mjs and returns its lines by op.
func jsLines(t *testing.T, args ...string) map[string][]map[string]any {
	t.Helper()
	lines, err := peers.RunScript(t, 40*time.Second, "grpc-client.mjs", args...)
	if err != nil && !slices.Contains(args, "send") {
		t.Fatalf("grpc-client.mjs: %v (%v)", err, lines)
	}
	out := map[string][]map[string]any{}
	for _, l := range lines {
		op, _ := l["op"].(string)
		out[op] = append(out[op], l)
	}
	return out
}

// jsErr is the error of a line: its gRPC code and reasons (code -1: none).
func jsErr(l map[string]any) (int, []string) {
	e, ok := l["error"].(map[string]any)
	if !ok {
		return -1, nil
	}
	code, _ := e["code"].(float64)
	var rs []string
	for _, r := range e["reasons"].([]any) {
		rs = append(rs, r.(string))
	}
	return int(code), rs
}

// TestJSSDKGRPC drives writ's gRPC door with the JS SDK's 1.0 gRPC client
// in front of the JS SDK's 1.0 gRPC server (lf.a2a.v1): send, get, push
// configs kept by writ, the reply, a cancel of the terminal task answered by
// writ, a stream to an interrupted state, another caller told the task does
// not exist, a denied caller given its codes.
func TestJSSDKGRPC(t *testing.T) {
	agent := startJSAgent(t, "clarifier")
	rcv := proxytest.NewReceiver(t)
	guard := push.NewGuard(push.GuardConfig{TrustedHosts: []string{"127.0.0.1"}})
	deliverer := push.NewDeliverer(push.DelivererConfig{Client: guard.Client(5*time.Second, 1<<20),
		BaseBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	t.Cleanup(func() { deliverer.Close(t.Context()) })
	a := proxytest.SanctionsAgent("http://" + agent.grpc)
	a.Route, a.Protocol, a.GRPCListen = "/js", "a2a-grpc", "127.0.0.1:0"
	h := proxytest.NewWith(t, []config.Agent{a}, func(c *config.Config) { c.Policies = []string{proxytest.PushPolicies(t)} }, deliverer)
	addr := h.Server.ListenerAddr("agents[0].grpc_listen")
	inv := h.Token(proxytest.Investigator)
	cb := rcv.Srv.URL + "/cb"

	got := jsLines(t, "--addr", addr, "--token", inv, "--scenario", "clarify", "--push-url", cb, "--push-token", "tok-1")
	send := got["send"][0]
	if send["state"] != "input-required" {
		t.Fatalf("send: %v", got)
	}
	id := send["taskId"].(string)
	if g := got["get"][0]; g["taskId"] != id {
		t.Errorf("get: %v", g)
	}
	if p := got["push-get"][0]; p["url"] != cb {
		t.Errorf("push get: %v", p)
	}
	if p := got["push-list"][0]; p["count"] != float64(1) {
		t.Errorf("push list: %v", p)
	}
	if r := got["reply"][0]; r["state"] != "completed" {
		t.Errorf("reply: %v", r)
	}
	if code, rs := jsErr(got["cancel-terminal"][0]); code != 9 || !slices.Contains(rs, "TASK_NOT_CANCELABLE") {
		t.Errorf("cancel of a terminal task: %v", got["cancel-terminal"])
	}
	rec, ok, _ := h.Task(id)
	if !ok || rec.Task.State != task.Succeeded || rec.Task.Owner.AgentID != "payments-investigator" || rec.Version != "1.0" {
		t.Errorf("record %+v", rec)
	}
	rcv.WaitFor(t, "TASK_STATE_COMPLETED")
	calls := agent.calls()
	if len(calls) != 3 { // send, get, reply
		t.Errorf("the agent was called %d times: %v", len(calls), calls)
	}
	for _, c := range calls {
		if strings.Contains(c.Body, cb) || strings.Contains(c.Body, "tok-1") {
			t.Errorf("the agent received the push config: %s %s", c.Method, c.Body)
		}
		if c.Method == "/lf.a2a.v1.A2AService/CancelTask" || strings.Contains(c.Method, "PushNotificationConfig") {
			t.Errorf("the agent was asked %s, which writ answers", c.Method)
		}
		if !strings.Contains(c.Caller, `"agent_id":"payments-investigator"`) {
			t.Errorf("the agent saw writ-caller %q", c.Caller)
		}
	}

	// Another tenant's caller: the task does not exist, for every operation.
	before := len(agent.calls())
	other := jsLines(t, "--addr", addr, "--token", h.Token(proxytest.RetailBot), "--scenario", "get", "--task", id)
	for _, op := range []string{"get", "cancel", "subscribe"} {
		if code, rs := jsErr(other[op][0]); code != 5 || !slices.Contains(rs, "TASK_NOT_FOUND") {
			t.Errorf("foreign %s: %v", op, other[op])
		}
	}
	// A denied caller gets its codes.
	denied := jsLines(t, "--addr", addr, "--token", h.Token(proxytest.Caller{Agent: "x", Tenant: "wholesale", Scopes: "read"}), "--scenario", "send")
	if code, rs := jsErr(denied["send"][0]); code != 7 || !slices.Contains(rs, "SCOPE_MISSING") {
		t.Errorf("denied: %v", denied)
	}
	if len(agent.calls()) != before {
		t.Error("a refused call reached the agent")
	}

	// A stream to the interrupted state, every event observed.
	st := jsLines(t, "--addr", addr, "--token", inv, "--scenario", "stream")
	evs := st["stream"]
	if len(evs) == 0 || evs[len(evs)-1]["state"] != "input-required" {
		t.Fatalf("stream: %v", st)
	}
	sid, _ := evs[0]["taskId"].(string)
	if rec, ok, _ := h.Task(sid); !ok || rec.Task.State != task.AwaitingInput {
		t.Errorf("streamed task record %+v", rec)
	}
}
