package proxy_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/peers"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/proxy/push"
)

// pushHarness is writ in front of agent a on the push test policies,
// keeping push configs and delivering them itself to receivers on loopback
// (the SSRF guard trusts 127.0.0.1 here), retrying within milliseconds.
func pushHarness(t *testing.T, a config.Agent) *proxytest.Harness {
	t.Helper()
	guard := push.NewGuard(push.GuardConfig{TrustedHosts: []string{"127.0.0.1"}})
	deliverer := push.NewDeliverer(push.DelivererConfig{Client: guard.Client(5*time.Second, 1<<20),
		BaseBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	t.Cleanup(func() { deliverer.Close(t.Context()) })
	return proxytest.NewWith(t, []config.Agent{a}, func(c *config.Config) { c.Policies = []string{proxytest.PushPolicies(t)} }, deliverer)
}

// TestPushThroughWrit: writ keeps a send's push config (the agent never sees
// it), delivers every state change in order with the token and auth header, and
// serves the push-config operations itself, owner-only.
func TestPushThroughWrit(t *testing.T) {
	clar, err := seedagents.StartClarifier()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { clar.Close() })
	rcv := proxytest.NewReceiver(t)
	a := proxytest.SanctionsAgent(clar.URL)
	a.Name = "sanctions-screening-agent"
	h := pushHarness(t, a)
	inv := h.Token(proxytest.Investigator)
	cb := rcv.Srv.URL + "/cb"

	// The seed's section 6: an outside host, a missing token and plain http to a
	// host not allowed it are refused by policy; then deliveries arrive.
	for push, code := range map[string]string{
		`{"url":"https://evil.example/hook","token":"x"}`: "CALLBACK_NOT_ALLOWED",
		`{"url":"` + cb + `"}`:                            "CALLBACK_UNAUTHENTICATED",
		`{"url":"http://agents.bank.ae/cb","token":"x"}`:  "CALLBACK_NOT_ALLOWED",
	} {
		var p map[string]any
		json.Unmarshal([]byte(push), &p)
		_, ans := h.RPC("/", inv, "", "message/send", map[string]any{"message": proxytest.Msg03("x", nil),
			"configuration": map[string]any{"pushNotificationConfig": p}})
		if !contains(ans.Reasons(), code) {
			t.Errorf("push %s: %s", push, ans.Raw)
		}
	}

	_, ans := h.RPC("/", inv, "", "message/send", map[string]any{"message": proxytest.Msg03("Screen this entity", nil),
		"configuration": map[string]any{"pushNotificationConfig": map[string]any{"url": cb, "token": "tok-1",
			"authentication": map[string]any{"schemes": []string{"Bearer"}, "credentials": "cred-1"}}}})
	id, state := proxytest.Result03(t, ans)
	if state != "input-required" {
		t.Fatalf("send: %s", ans.Raw)
	}
	for _, o := range clar.Requests() {
		if strings.Contains(o.Body, rcv.Srv.URL) || strings.Contains(o.Body, "tok-1") {
			t.Fatalf("the agent saw the push config: %s", o.Body)
		}
	}
	_, ans = h.RPC("/", inv, "", "message/send", map[string]any{"message": proxytest.Msg03("UAE and UN lists", map[string]any{"taskId": id})})
	if _, state := proxytest.Result03(t, ans); state != "completed" {
		t.Fatalf("reply: %s", ans.Raw)
	}
	hdrs, bodies := rcv.Wait(t, 2)
	want := []string{"input-required", "completed"}
	for i, b := range bodies[:2] {
		var tk struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		}
		json.Unmarshal([]byte(b), &tk)
		if tk.ID != id || tk.Status.State != want[i] {
			t.Errorf("notification %d: %s, want %s", i, b, want[i])
		}
		if hdrs[i].Get("X-A2A-Notification-Token") != "tok-1" || hdrs[i].Get("Authorization") != "Bearer cred-1" {
			t.Errorf("notification %d headers %v", i, hdrs[i])
		}
	}

	// The push-config operations are served by writ, owner-only.
	_, ans = h.RPC("/", inv, "", "tasks/pushNotificationConfig/list", map[string]any{"id": id})
	if ans.Error != nil || !strings.Contains(string(ans.Result), cb) {
		t.Fatalf("list: %s", ans.Raw)
	}
	_, ans = h.RPC("/", h.Token(proxytest.RetailBot), "", "tasks/pushNotificationConfig/list", map[string]any{"id": id})
	if ans.Error == nil || ans.Error.Code != -32001 {
		t.Fatalf("foreign list: %s", ans.Raw)
	}
	_, ans = h.RPC("/", inv, "", "tasks/pushNotificationConfig/set", map[string]any{"taskId": id,
		"pushNotificationConfig": map[string]any{"id": "second", "url": "https://evil.example/x", "token": "t"}})
	if !contains(ans.Reasons(), "CALLBACK_NOT_ALLOWED") {
		t.Fatalf("set to an outside host: %s", ans.Raw)
	}
	_, ans = h.RPC("/", inv, "", "tasks/pushNotificationConfig/set", map[string]any{"taskId": id,
		"pushNotificationConfig": map[string]any{"id": "second", "url": cb, "token": "t2"}})
	if ans.Error != nil || !strings.Contains(string(ans.Result), `"id":"second"`) {
		t.Fatalf("set: %s", ans.Raw)
	}
	_, ans = h.RPC("/", inv, "", "tasks/pushNotificationConfig/delete", map[string]any{"id": id, "pushNotificationConfigId": "second"})
	if ans.Error != nil {
		t.Fatalf("delete: %s", ans.Raw)
	}
	_, ans = h.RPC("/", inv, "", "tasks/pushNotificationConfig/get", map[string]any{"id": id, "pushNotificationConfigId": "second"})
	if ans.Error == nil || ans.Error.Code != -32001 {
		t.Fatalf("get after delete: %s", ans.Raw)
	}
	// The push-config operations never reached the agent: it saw the two sends
	// (a task waiting for input is not followed: the caller's reply moves it).
	sends, follows := 0, 0
	for _, o := range clar.Requests() {
		switch o.Method {
		case "message/send":
			sends++
		case "tasks/resubscribe", "tasks/get":
			follows++
		case "GET /.well-known/agent-card.json":
		default:
			t.Errorf("the agent saw %s", o.Method)
		}
	}
	if sends != 2 || follows != 0 {
		t.Errorf("the agent saw %d sends and %d follow-ups", sends, follows)
	}
	// The card advertises push: writ's own capability.
	_, body := h.Do("GET", "/.well-known/agent-card.json", inv, nil, nil)
	if !strings.Contains(string(body), `"pushNotifications":true`) {
		t.Errorf("card: %s", body)
	}
}

// TestPushJSClient: the real @a2a-js/sdk 1.0 client sets a push config in a send
// that returns immediately, to a real JS SDK agent that finishes later; writ
// follows the task and the callback receives 1.0 StreamResponse notifications.
func TestPushJSClient(t *testing.T) {
	peers.EnsureNode(t)
	slow := peers.StartJSAgent(t, "slow", "", "--delay", "300")
	rcv := proxytest.NewReceiver(t)
	a := proxytest.SanctionsAgent(slow)
	a.PublicURL = "self"
	h := pushHarness(t, a)
	lines, err := peers.RunJSClient(t, "--url", h.Srv.URL+"/", "--token", h.Token(proxytest.Investigator), "--scenario", "send",
		"--return-immediately", "--push-url", rcv.Srv.URL+"/cb", "--push-token", "tok-js", "--push-scheme", "Bearer", "--push-credentials", "cred-js")
	if err != nil || len(lines) == 0 || lines[0]["state"] == "completed" {
		t.Fatalf("send: %v %v", lines, err)
	}
	id, _ := lines[0]["taskId"].(string)
	hdrs, bodies := rcv.WaitFor(t, `"TASK_STATE_COMPLETED"`)
	last, h1 := bodies[len(bodies)-1], hdrs[len(hdrs)-1]
	if !strings.Contains(last, id) || !strings.Contains(last, `"statusUpdate"`) || h1.Get("Content-Type") != "application/a2a+json" ||
		h1.Get("X-A2A-Notification-Token") != "tok-js" || h1.Get("Authorization") != "Bearer cred-js" {
		t.Fatalf("notification %s %v", last, h1)
	}
}
