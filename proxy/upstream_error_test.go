package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/decisionlog"
	"github.com/writ-authz/writ/internal/peers"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/internal/syncbuf"
	"github.com/writ-authz/writ/proxy/writheader"
)

// TestAgentRefusalIsTheAgents: the real @a2a-js/sdk 1.3.0 agent (A2A 1.0,
// legacyCompat off) answers an allowed A2A 0.3 message/send with -32009
// VersionNotSupported. The caller gets the agent's error as the agent sent
// it, with the decision id and without writ's mark; the decision log says
// the request was allowed, and an upstream_error line with that decision id
// names the agent's code, kind and message. writ's own refusal of the same
// request (no credentials) is marked.
func TestAgentRefusalIsTheAgents(t *testing.T) {
	peers.EnsureNode(t)
	js := peers.StartJSAgent(t, "sanctions", "")
	a := proxytest.SanctionsAgent(js)
	a.PublicURL = "self"
	h := proxytest.New(t, []config.Agent{a}, nil)
	var out syncbuf.Buffer
	dl, err := decisionlog.NewWriter(&out, config.DecisionLog{})
	if err != nil {
		t.Fatal(err)
	}
	h.Bus.Subscribe(dl)
	send := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send",
		"params": map[string]any{"message": proxytest.Msg03("Screen Acme Trading FZE", nil)}}

	resp, body := h.Do("POST", "/", h.Token(proxytest.Investigator), send, nil)
	id := resp.Header.Get(writheader.Decision)
	var ans struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &ans)
	if resp.StatusCode != 200 || ans.Error == nil || ans.Error.Code != -32009 || id == "" {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
	if got := resp.Header.Get(writheader.AnsweredBy); got != "" {
		t.Errorf("the agent's own -32009 is marked %s: %s", writheader.AnsweredBy, got)
	}
	if strings.Contains(string(body), "decision "+id) || strings.Contains(string(body), `"domain":"writ"`) {
		t.Errorf("the agent's answer was rewritten: %s", body)
	}
	resp, body = h.Do("POST", "/", "", send, nil)
	if resp.StatusCode != 401 || resp.Header.Get(writheader.AnsweredBy) != writheader.Writ {
		t.Errorf("writ's own refusal: %d %v %s", resp.StatusCode, resp.Header, body)
	}

	if err := dl.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var allowed, upstream bool
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		var ln decisionlog.Line
		if err := json.Unmarshal(sc.Bytes(), &ln); err != nil {
			t.Fatal(err)
		}
		if ln.DecisionID != id {
			continue
		}
		switch ln.Type {
		case decisionlog.TypeDecision:
			allowed = ln.Allow && ln.Refused == ""
		case decisionlog.TypeUpstreamError:
			u := ln.UpstreamError
			upstream = u != nil && u.Code == -32009 && u.Kind == "version_not_supported" && u.Message == ans.Error.Message &&
				ln.Route == "sanctions-screening-agent"
		}
	}
	if !allowed || !upstream {
		t.Errorf("decision %s: allowed %v, upstream_error %v in\n%s", id, allowed, upstream, out.String())
	}
}
