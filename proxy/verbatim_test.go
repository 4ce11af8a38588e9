package proxy_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/push"
)

// TestVerbatimPlanBody: where writ keeps push configs, a Forward plan's body
// is the send without its push config, unless the door forwards the
// caller's own bytes whatever writ decides (Incoming.Verbatim: Envoy's
// ext_authz), where the plan's body is the caller's, not a copy stripped
// for an agent that never receives it.
func TestVerbatimPlanBody(t *testing.T) {
	clar, err := seedagents.StartClarifier()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { clar.Close() })
	guard := push.NewGuard(push.GuardConfig{TrustedHosts: []string{"127.0.0.1"}})
	deliverer := push.NewDeliverer(push.DelivererConfig{Client: guard.Client(5*time.Second, 1<<20),
		BaseBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	t.Cleanup(func() { deliverer.Close(t.Context()) })
	rcv := proxytest.NewReceiver(t)
	a := proxytest.SanctionsAgent(clar.URL)
	a.Name = "sanctions-screening-agent"
	h := proxytest.NewWith(t, []config.Agent{a}, func(c *config.Config) { c.Policies = []string{proxytest.PushPolicies(t)} }, deliverer)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send",
		"params": map[string]any{"message": proxytest.Msg03("x", nil),
			"configuration": map[string]any{"pushNotificationConfig": map[string]any{"url": rcv.Srv.URL + "/cb", "token": "tok-1"}}}})
	for _, verbatim := range []bool{false, true} {
		hdr := http.Header{"Authorization": {"Bearer " + h.Token(proxytest.Investigator)}}
		v := h.Core.Admit(t.Context(), proxy.Incoming{Method: "POST", Path: "/", Host: "writ.test", RemoteAddr: "127.0.0.1:1",
			Header: hdr, Body: body, Query: url.Values{}, Verbatim: verbatim})
		if v.Kind != proxy.Forward {
			t.Fatalf("verbatim %v: %+v", verbatim, v)
		}
		got := v.Plan.Body
		if verbatim && !bytes.Equal(got, body) {
			t.Errorf("verbatim: the plan's body is not the caller's:\n%s", got)
		}
		if !verbatim && (strings.Contains(string(got), "pushNotificationConfig") || strings.Contains(string(got), "tok-1") ||
			!strings.Contains(string(got), `"message"`)) {
			t.Errorf("sidecar: the plan's body still carries the push config, or lost the message:\n%s", got)
		}
	}
}
