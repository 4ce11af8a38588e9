package proxy_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/proxy"
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
	rcv := proxytest.NewReceiver(t)
	a := proxytest.SanctionsAgent(clar.URL)
	a.Name = "sanctions-screening-agent"
	h := pushHarness(t, a)
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
