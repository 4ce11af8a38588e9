package proxy_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/push"
)

// nopNotifier takes notifications and drops them.
type nopNotifier struct{}

func (nopNotifier) Enqueue(push.Notification) error { return nil }

// TestPushOpsOnUnknownTaskAllowed: with lifecycle.unknown_tasks: allow the policy
// may allow a push-config get or list on a task writ has no record of. writ
// serves those from the record: it must answer TaskNotFound, not dereference a
// missing record (a panic: in the gRPC ext_authz server, nothing recovers it and
// the process dies).
func TestPushOpsOnUnknownTaskAllowed(t *testing.T) {
	up := proxytest.NewFakeAgent(t, nil)
	h := proxytest.NewWith(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)},
		func(c *config.Config) { c.Lifecycle.UnknownTasks = "allow" }, nopNotifier{})
	tok := h.Token(proxytest.Investigator)
	for _, rpc := range []struct {
		method string
		params map[string]any
	}{
		{"GetTaskPushNotificationConfig", map[string]any{"taskId": "never-seen", "id": "c-1"}},
		{"ListTaskPushNotificationConfigs", map[string]any{"taskId": "never-seen"}},
	} {
		t.Run(rpc.method, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": rpc.method, "params": rpc.params})
			hdr := http.Header{}
			hdr.Set("Authorization", "Bearer "+tok)
			hdr.Set("A2A-Version", "1.0")
			hdr.Set("Content-Type", "application/json")
			var v proxy.Outcome
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("Admit panicked: %v", r)
					}
				}()
				v = h.Core.Admit(t.Context(), proxy.Incoming{Method: "POST", Path: "/", Host: "writ.test", RemoteAddr: "127.0.0.1:1",
					Header: hdr, Body: body, Query: url.Values{}})
			}()
			var a proxytest.RPCAnswer
			if err := json.Unmarshal(v.Answer.Body, &a); err != nil || v.Kind != proxy.Refuse || a.Error == nil || a.Error.Code != -32001 {
				t.Fatalf("%s %d %s", v.Kind, v.Answer.Status, v.Answer.Body)
			}
		})
	}
}
