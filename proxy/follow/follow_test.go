package follow_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/proxy/push"
)

// TestPushFollowsTaskAfterRequest: a non-blocking send returns while the task
// works; writ follows the task and delivers its completion to the callback.
func TestPushFollowsTaskAfterRequest(t *testing.T) {
	slow, err := seedagents.StartSlow(seedagents.WithDelay(300 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slow.Close() })
	rcv := proxytest.NewReceiver(t)
	guard := push.NewGuard(push.GuardConfig{TrustedHosts: []string{"127.0.0.1"}})
	deliverer := push.NewDeliverer(push.DelivererConfig{Client: guard.Client(5*time.Second, 1<<20),
		BaseBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	t.Cleanup(func() { deliverer.Close(t.Context()) })
	h := proxytest.NewWith(t, []config.Agent{proxytest.SanctionsAgent(slow.URL)}, func(c *config.Config) { c.Policies = []string{proxytest.PushPolicies(t)} }, deliverer)
	_, ans := h.RPC("/", h.Token(proxytest.Investigator), "", "message/send", map[string]any{"message": proxytest.Msg03("Screen slowly", nil),
		"configuration": map[string]any{"blocking": false, "pushNotificationConfig": map[string]any{"url": rcv.Srv.URL + "/cb", "token": "tok"}}})
	id, state := proxytest.Result03(t, ans)
	if state != "working" && state != "submitted" {
		t.Fatalf("send: %s", ans.Raw)
	}
	_, bodies := rcv.Wait(t, 2)
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
			_, bodies = rcv.Wait(t, len(bodies)+1)
			last = bodies[len(bodies)-1]
		}
		if !strings.Contains(last, `"state":"completed"`) {
			t.Fatalf("notifications %v", bodies)
		}
	}
}

// TestPushFollowByPolling: an agent whose card does not say it streams is
// followed by asking for the task again until it ends.
func TestPushFollowByPolling(t *testing.T) {
	var gets atomic.Int32
	up := proxytest.NewFakeAgent(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
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
	rcv := proxytest.NewReceiver(t)
	guard := push.NewGuard(push.GuardConfig{TrustedHosts: []string{"127.0.0.1"}})
	deliverer := push.NewDeliverer(push.DelivererConfig{Client: guard.Client(5*time.Second, 1<<20),
		BaseBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	t.Cleanup(func() { deliverer.Close(t.Context()) })
	h := proxytest.NewWith(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, func(c *config.Config) { c.Policies = []string{proxytest.PushPolicies(t)} }, deliverer)
	params := map[string]any{"message": proxytest.SendParams["message"], "configuration": map[string]any{"returnImmediately": true,
		"taskPushNotificationConfig": map[string]any{"url": rcv.Srv.URL + "/cb", "token": "tok"}}}
	if _, a := h.RPC("/", h.Token(proxytest.Investigator), "1.0", "SendMessage", params); a.Error != nil {
		t.Fatalf("send: %s", a.Raw)
	}
	_, bodies := rcv.WaitFor(t, "TASK_STATE_COMPLETED")
	if !strings.Contains(bodies[0], "TASK_STATE_WORKING") || gets.Load() < 2 {
		t.Fatalf("notifications %v after %d gets", bodies, gets.Load())
	}
	up.Mu.Lock()
	defer up.Mu.Unlock()
	for _, b := range up.Body {
		if strings.Contains(string(b), rcv.Srv.URL) {
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
	up := proxytest.NewFakeAgent(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
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
	rcv := proxytest.NewReceiver(t)
	guard := push.NewGuard(push.GuardConfig{TrustedHosts: []string{"127.0.0.1"}})
	deliverer := push.NewDeliverer(push.DelivererConfig{Client: guard.Client(5*time.Second, 1<<20)})
	t.Cleanup(func() { deliverer.Close(t.Context()) })
	h := proxytest.NewWith(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, func(c *config.Config) {
		c.Policies = []string{proxytest.PushPolicies(t)}
		c.Lifecycle.MaxFollowers, c.Lifecycle.MaxFollowersPerOwner = 8, 2
	}, deliverer)
	send := func(who proxytest.Caller, text string) {
		params := map[string]any{"message": map[string]any{"messageId": "m-" + text, "role": "ROLE_USER",
			"parts": []any{map[string]any{"text": text}}},
			"configuration": map[string]any{"returnImmediately": true,
				"taskPushNotificationConfig": map[string]any{"url": rcv.Srv.URL + "/cb", "token": "tok"}}}
		if _, a := h.RPC("/", h.Token(who), "1.0", "SendMessage", params); a.Error != nil {
			t.Fatalf("send %s: %s", text, a.Raw)
		}
	}
	for i := range 4 {
		send(proxytest.Investigator, fmt.Sprintf("flood%d", i))
	}
	colleague := proxytest.Investigator
	colleague.Agent = "payments-reviewer" // an owner is a tenant's calling agent
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
