package proxy_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/writheader"
)

// TestAdmitMatchesServe: the outcomes of Admit are the sidecar's answers for
// allowed, denied, hidden-card and directory requests.
func TestAdmitMatchesServe(t *testing.T) {
	w := newSeedWorld(t)
	inv := w.Token(proxytest.Investigator)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send",
		"params": map[string]any{"message": proxytest.Msg03("x", nil)}})
	inc := func(path, token string, body []byte) proxy.Incoming {
		h := http.Header{}
		if token != "" {
			h.Set("Authorization", "Bearer "+token)
		}
		h.Set("Writ-Caller", `{"agent_id":"forged"}`)
		return proxy.Incoming{Method: "POST", Path: path, Host: "writ.test", RemoteAddr: "127.0.0.1:1", Header: h, Body: body, Query: url.Values{}}
	}
	v := w.Core.Admit(t.Context(), inc("/", inv, body))
	if v.Kind != proxy.Forward || v.DecisionID == "" || !strings.Contains(v.Plan.Header.Get(writheader.Caller), "payments-investigator") ||
		strings.Contains(v.Plan.Header.Get(writheader.Caller), "forged") || v.Operation != "send" {
		t.Fatalf("allowed: %+v", v)
	}
	v = w.Core.Admit(t.Context(), inc("/kyc/", inv, body))
	_, sidecar := w.RPC("/kyc/", inv, "", "message/send", map[string]any{"message": proxytest.Msg03("x", nil)})
	var checked proxytest.RPCAnswer
	json.Unmarshal(v.Answer.Body, &checked)
	checked.Raw = v.Answer.Body
	if v.Kind != proxy.Refuse || v.Answer.Status != 403 || strings.Join(checked.Reasons(), ",") != strings.Join(sidecar.Reasons(), ",") {
		t.Fatalf("denied: %+v\n%s\nsidecar %s", v, v.Answer.Body, sidecar.Raw)
	}
	card := inc("/.well-known/agent-card.json", "", nil)
	card.Method = "GET"
	if v = w.Core.Admit(t.Context(), card); v.Kind != proxy.NotFound || v.Answer.Status != 404 || v.DecisionID != "" {
		t.Fatalf("hidden card: %+v", v)
	}
	card.Header.Set("Authorization", "Bearer "+inv)
	if v = w.Core.Admit(t.Context(), card); v.Kind != proxy.Serve || v.Answer.Status != 200 || !strings.Contains(string(v.Answer.Body), `"bearerFormat":"JWT"`) {
		t.Fatalf("card: %+v %s", v, v.Answer.Body)
	}
	dir := inc(adapters.DirectoryPath, inv, nil)
	dir.Method, dir.Query = "GET", url.Values{"tags": {"sanctions"}}
	if v = w.Core.Admit(t.Context(), dir); v.Kind != proxy.Serve || v.Answer.Status != 200 || !strings.Contains(string(v.Answer.Body), "sanctions-screening-agent") ||
		strings.Contains(string(v.Answer.Body), "kyc-refresh-agent") {
		t.Fatalf("directory: %+v %s", v, v.Answer.Body)
	}
}

func TestRebase(t *testing.T) {
	up, _ := url.Parse("http://127.0.0.1:9000/agent")
	for raw, want := range map[string]string{
		"http://127.0.0.1:9000/agent":        "https://writ.example/s",
		"http://127.0.0.1:9000/agent/v1":     "https://writ.example/s/v1",
		"https://writ.example/s":             "https://writ.example/s", // already public: not doubled
		"https://writ.example/s/rest":        "https://writ.example/s/rest",
		"https://elsewhere.example/backdoor": "https://writ.example/s",
		"::not a url":                        "https://writ.example/s",
	} {
		if got := proxy.Rebase(raw, "https://writ.example/s", up); got != want {
			t.Errorf("rebase(%q) = %q, want %q", raw, got, want)
		}
	}
}
