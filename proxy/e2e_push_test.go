package proxy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/peers"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/proxy/push"
)

// receiver records push notifications.
type receiver struct {
	mu   sync.Mutex
	got  []http.Header
	body []string
	srv  *httptest.Server
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, req.Header.Clone())
		r.body = append(r.body, string(b))
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// wait returns the notifications once n arrived (or fails after a deadline).
func (r *receiver) wait(t *testing.T, n int) ([]http.Header, []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		if len(r.body) >= n {
			h, b := append([]http.Header(nil), r.got...), append([]string(nil), r.body...)
			r.mu.Unlock()
			return h, b
		}
		r.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("only %d of %d notifications arrived", len(r.body), n)
	return nil, nil
}

// waitFor returns the notifications once one containing s arrived.
func (r *receiver) waitFor(t *testing.T, s string) ([]http.Header, []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		for i, b := range r.body {
			if strings.Contains(b, s) {
				h, bs := append([]http.Header(nil), r.got[:i+1]...), append([]string(nil), r.body[:i+1]...)
				r.mu.Unlock()
				return h, bs
			}
		}
		r.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no notification with %s arrived", s)
	return nil, nil
}

// pushPolicies copies the shipped policies with 127.0.0.1 (this test's receiver)
// on the callback allow-list, over http — trusted only in this test.
func pushPolicies(t *testing.T) string {
	dir := t.TempDir()
	entries, _ := os.ReadDir("../policies")
	for _, e := range entries {
		raw, _ := os.ReadFile(filepath.Join("../policies", e.Name()))
		if e.Name() == "data.json" {
			s := strings.Replace(string(raw), `"wholesale": ["agents.bank.ae"]`, `"wholesale": ["agents.bank.ae", "127.0.0.1"]`, 1)
			s = strings.Replace(s, `"allow_http_hosts": []`, `"allow_http_hosts": ["127.0.0.1"]`, 1)
			raw = []byte(s)
		}
		os.WriteFile(filepath.Join(dir, e.Name()), raw, 0o644)
	}
	return dir
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
	rcv := newReceiver(t)
	guard := push.NewGuard(push.GuardConfig{TrustedHosts: []string{"127.0.0.1"}})
	deliverer := push.NewDeliverer(push.DelivererConfig{Client: guard.Client(5*time.Second, 1<<20),
		BaseBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	t.Cleanup(func() { deliverer.Close(t.Context()) })
	a := sanctionsAgent(clar.URL)
	a.Name = "sanctions-screening-agent"
	h := newHarnessWith(t, []config.Agent{a}, func(c *config.Config) { c.Policies = []string{pushPolicies(t)} }, deliverer)
	inv := h.token(investigator)
	cb := rcv.srv.URL + "/cb"

	// The seed's section 6: an outside host, a missing token and plain http to a
	// host not allowed it are refused by policy; then deliveries arrive.
	for push, code := range map[string]string{
		`{"url":"https://evil.example/hook","token":"x"}`: "CALLBACK_NOT_ALLOWED",
		`{"url":"` + cb + `"}`:                            "CALLBACK_UNAUTHENTICATED",
		`{"url":"http://agents.bank.ae/cb","token":"x"}`:  "CALLBACK_NOT_ALLOWED",
	} {
		var p map[string]any
		json.Unmarshal([]byte(push), &p)
		_, ans := h.rpc("/", inv, "", "message/send", map[string]any{"message": msg03("x", nil),
			"configuration": map[string]any{"pushNotificationConfig": p}})
		if !contains(ans.reasons(), code) {
			t.Errorf("push %s: %s", push, ans.raw)
		}
	}

	_, ans := h.rpc("/", inv, "", "message/send", map[string]any{"message": msg03("Screen this entity", nil),
		"configuration": map[string]any{"pushNotificationConfig": map[string]any{"url": cb, "token": "tok-1",
			"authentication": map[string]any{"schemes": []string{"Bearer"}, "credentials": "cred-1"}}}})
	id, state := result03(t, ans)
	if state != "input-required" {
		t.Fatalf("send: %s", ans.raw)
	}
	for _, o := range clar.Requests() {
		if strings.Contains(o.Body, rcv.srv.URL) || strings.Contains(o.Body, "tok-1") {
			t.Fatalf("the agent saw the push config: %s", o.Body)
		}
	}
	_, ans = h.rpc("/", inv, "", "message/send", map[string]any{"message": msg03("UAE and UN lists", map[string]any{"taskId": id})})
	if _, state := result03(t, ans); state != "completed" {
		t.Fatalf("reply: %s", ans.raw)
	}
	hdrs, bodies := rcv.wait(t, 2)
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
	_, ans = h.rpc("/", inv, "", "tasks/pushNotificationConfig/list", map[string]any{"id": id})
	if ans.Error != nil || !strings.Contains(string(ans.Result), cb) {
		t.Fatalf("list: %s", ans.raw)
	}
	_, ans = h.rpc("/", h.token(retailBot), "", "tasks/pushNotificationConfig/list", map[string]any{"id": id})
	if ans.Error == nil || ans.Error.Code != -32001 {
		t.Fatalf("foreign list: %s", ans.raw)
	}
	_, ans = h.rpc("/", inv, "", "tasks/pushNotificationConfig/set", map[string]any{"taskId": id,
		"pushNotificationConfig": map[string]any{"id": "second", "url": "https://evil.example/x", "token": "t"}})
	if !contains(ans.reasons(), "CALLBACK_NOT_ALLOWED") {
		t.Fatalf("set to an outside host: %s", ans.raw)
	}
	_, ans = h.rpc("/", inv, "", "tasks/pushNotificationConfig/set", map[string]any{"taskId": id,
		"pushNotificationConfig": map[string]any{"id": "second", "url": cb, "token": "t2"}})
	if ans.Error != nil || !strings.Contains(string(ans.Result), `"id":"second"`) {
		t.Fatalf("set: %s", ans.raw)
	}
	_, ans = h.rpc("/", inv, "", "tasks/pushNotificationConfig/delete", map[string]any{"id": id, "pushNotificationConfigId": "second"})
	if ans.Error != nil {
		t.Fatalf("delete: %s", ans.raw)
	}
	_, ans = h.rpc("/", inv, "", "tasks/pushNotificationConfig/get", map[string]any{"id": id, "pushNotificationConfigId": "second"})
	if ans.Error == nil || ans.Error.Code != -32001 {
		t.Fatalf("get after delete: %s", ans.raw)
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
	_, body := h.do("GET", "/.well-known/agent-card.json", inv, nil, nil)
	if !strings.Contains(string(body), `"pushNotifications":true`) {
		t.Errorf("card: %s", body)
	}
}

// TestPushFollowsTaskAfterRequest: a non-blocking send returns while the task
// works; writ follows the task and delivers its completion to the callback.
func TestPushFollowsTaskAfterRequest(t *testing.T) {
	slow, err := seedagents.StartSlow(seedagents.WithDelay(300 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slow.Close() })
	rcv := newReceiver(t)
	guard := push.NewGuard(push.GuardConfig{TrustedHosts: []string{"127.0.0.1"}})
	deliverer := push.NewDeliverer(push.DelivererConfig{Client: guard.Client(5*time.Second, 1<<20),
		BaseBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	t.Cleanup(func() { deliverer.Close(t.Context()) })
	h := newHarnessWith(t, []config.Agent{sanctionsAgent(slow.URL)}, func(c *config.Config) { c.Policies = []string{pushPolicies(t)} }, deliverer)
	_, ans := h.rpc("/", h.token(investigator), "", "message/send", map[string]any{"message": msg03("Screen slowly", nil),
		"configuration": map[string]any{"blocking": false, "pushNotificationConfig": map[string]any{"url": rcv.srv.URL + "/cb", "token": "tok"}}})
	id, state := result03(t, ans)
	if state != "working" && state != "submitted" {
		t.Fatalf("send: %s", ans.raw)
	}
	_, bodies := rcv.wait(t, 2)
	defer func() {
		subscribed := false
		for _, o := range slow.Requests() {
			subscribed = subscribed || o.Method == "tasks/resubscribe"
		}
		if !subscribed {
			t.Error("writ did not subscribe to a task on an agent whose card streams")
		}
	}()
	last := bodies[len(bodies)-1]
	if !strings.Contains(last, id) || !strings.Contains(last, `"state":"completed"`) {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) && !strings.Contains(last, `"state":"completed"`) {
			_, bodies = rcv.wait(t, len(bodies)+1)
			last = bodies[len(bodies)-1]
		}
		if !strings.Contains(last, `"state":"completed"`) {
			t.Fatalf("notifications %v", bodies)
		}
	}
}

// TestPushJSClient: the real @a2a-js/sdk 1.0 client sets a push config in a send
// that returns immediately, to a real JS SDK agent that finishes later; writ
// follows the task and the callback receives 1.0 StreamResponse notifications.
func TestPushJSClient(t *testing.T) {
	peers.EnsureNode(t)
	slow := peers.StartJSAgent(t, "slow", "", "--delay", "300")
	rcv := newReceiver(t)
	guard := push.NewGuard(push.GuardConfig{TrustedHosts: []string{"127.0.0.1"}})
	deliverer := push.NewDeliverer(push.DelivererConfig{Client: guard.Client(5*time.Second, 1<<20),
		BaseBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	t.Cleanup(func() { deliverer.Close(t.Context()) })
	a := sanctionsAgent(slow)
	a.PublicURL = "self"
	h := newHarnessWith(t, []config.Agent{a}, func(c *config.Config) { c.Policies = []string{pushPolicies(t)} }, deliverer)
	lines, err := peers.RunJSClient(t, "--url", h.srv.URL+"/", "--token", h.token(investigator), "--scenario", "send",
		"--return-immediately", "--push-url", rcv.srv.URL+"/cb", "--push-token", "tok-js", "--push-scheme", "Bearer", "--push-credentials", "cred-js")
	if err != nil || len(lines) == 0 || lines[0]["state"] == "completed" {
		t.Fatalf("send: %v %v", lines, err)
	}
	id, _ := lines[0]["taskId"].(string)
	hdrs, bodies := rcv.waitFor(t, `"TASK_STATE_COMPLETED"`)
	last, h1 := bodies[len(bodies)-1], hdrs[len(hdrs)-1]
	if !strings.Contains(last, id) || !strings.Contains(last, `"statusUpdate"`) || h1.Get("Content-Type") != "application/a2a+json" ||
		h1.Get("X-A2A-Notification-Token") != "tok-js" || h1.Get("Authorization") != "Bearer cred-js" {
		t.Fatalf("notification %s %v", last, h1)
	}
}

// TestPushFollowByPolling: an agent whose card does not say it streams is
// followed by asking for the task again until it ends.
func TestPushFollowByPolling(t *testing.T) {
	var gets atomic.Int32
	up := newFakeAgent(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.Method == http.MethodGet { // the card: none here
			http.NotFound(w, r)
			return
		}
		state := "TASK_STATE_WORKING"
		if strings.Contains(string(body), `"GetTask"`) && gets.Add(1) >= 2 {
			state = "TASK_STATE_COMPLETED"
		}
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(string(body), `"GetTask"`) {
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":"writ-follow","result":{"id":"t-p","contextId":"c","status":{"state":%q}}}`, state)
			return
		}
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-p","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}}`)
	})
	rcv := newReceiver(t)
	guard := push.NewGuard(push.GuardConfig{TrustedHosts: []string{"127.0.0.1"}})
	deliverer := push.NewDeliverer(push.DelivererConfig{Client: guard.Client(5*time.Second, 1<<20),
		BaseBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	t.Cleanup(func() { deliverer.Close(t.Context()) })
	h := newHarnessWith(t, []config.Agent{sanctionsAgent(up.srv.URL)}, func(c *config.Config) { c.Policies = []string{pushPolicies(t)} }, deliverer)
	params := map[string]any{"message": sendParams["message"], "configuration": map[string]any{"returnImmediately": true,
		"taskPushNotificationConfig": map[string]any{"url": rcv.srv.URL + "/cb", "token": "tok"}}}
	if _, a := h.rpc("/", h.token(investigator), "1.0", "SendMessage", params); a.Error != nil {
		t.Fatalf("send: %s", a.raw)
	}
	_, bodies := rcv.waitFor(t, "TASK_STATE_COMPLETED")
	if !strings.Contains(bodies[0], "TASK_STATE_WORKING") || gets.Load() < 2 {
		t.Fatalf("notifications %v after %d gets", bodies, gets.Load())
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	for _, b := range up.body {
		if strings.Contains(string(b), rcv.srv.URL) {
			t.Fatalf("the agent saw the callback: %s", b)
		}
	}
}

// Threat: one caller starts many long-running tasks with push configs and
// takes every follower, so nobody else's tasks are followed and their push
// notifications never come. Defence: lifecycle.max_followers_per_owner bounds
// the tasks followed for one owner; another caller's task is followed at once.
func TestFollowersPerOwnerShare(t *testing.T) {
	textRE := regexp.MustCompile(`"text":"([^"]+)"`)
	idRE := regexp.MustCompile(`"id":"(t-[^"]+)"`)
	var mu sync.Mutex
	polled := map[string]bool{}
	up := newFakeAgent(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.Method == http.MethodGet { // no card: followed by polling
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(string(body), `"GetTask"`) {
			id := idRE.FindStringSubmatch(string(body))[1]
			mu.Lock()
			polled[id] = true
			mu.Unlock()
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":"writ-follow","result":{"id":%q,"contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}`, id)
			return
		}
		id := "t-" + textRE.FindStringSubmatch(string(body))[1]
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":%q,"contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}}`, id)
	})
	rcv := newReceiver(t)
	guard := push.NewGuard(push.GuardConfig{TrustedHosts: []string{"127.0.0.1"}})
	deliverer := push.NewDeliverer(push.DelivererConfig{Client: guard.Client(5*time.Second, 1<<20)})
	t.Cleanup(func() { deliverer.Close(t.Context()) })
	h := newHarnessWith(t, []config.Agent{sanctionsAgent(up.srv.URL)}, func(c *config.Config) {
		c.Policies = []string{pushPolicies(t)}
		c.Lifecycle.MaxFollowers, c.Lifecycle.MaxFollowersPerOwner = 8, 2
	}, deliverer)
	send := func(who caller, text string) {
		params := map[string]any{"message": map[string]any{"messageId": "m-" + text, "role": "ROLE_USER",
			"parts": []any{map[string]any{"text": text}}},
			"configuration": map[string]any{"returnImmediately": true,
				"taskPushNotificationConfig": map[string]any{"url": rcv.srv.URL + "/cb", "token": "tok"}}}
		if _, a := h.rpc("/", h.token(who), "1.0", "SendMessage", params); a.Error != nil {
			t.Fatalf("send %s: %s", text, a.raw)
		}
	}
	for i := range 4 {
		send(investigator, fmt.Sprintf("flood%d", i))
	}
	colleague := investigator
	colleague.agent = "payments-reviewer" // an owner is a tenant's calling agent
	send(colleague, "other")
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		other, flood := polled["t-other"], 0
		for id := range polled {
			if strings.HasPrefix(id, "t-flood") {
				flood++
			}
		}
		mu.Unlock()
		if other {
			// Every follower polls first after the same delay, so the flood's
			// (started earlier) have all polled by now.
			if flood != 2 {
				t.Fatalf("%d of one owner's tasks followed, share is 2", flood)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("another caller's task was never followed (flood followed: %d)", flood)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
