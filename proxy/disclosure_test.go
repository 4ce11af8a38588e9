package proxy

import (
	"net/http"
	"strings"
	"testing"

	"github.com/writ-authz/writ/config"
)

// TestForeignTaskNoDecisionOracle: a foreign task and a missing one answer the
// same, headers included. A missing task is refused before the policy runs (no
// decision), a foreign one by the policy: a Writ-Decision-Id on the second alone
// tells a caller which task ids exist.
//
// Threat: insecure direct object reference: another caller's task read by
// its id, or its existence learnt from the answer. Defence: a foreign task
// is answered exactly like a missing one, headers included.
func TestForeignTaskNoDecisionOracle(t *testing.T) {
	up := newFakeAgent(t, nil) // answers every send with task t-1
	h := newHarness(t, []config.Agent{sanctionsAgent(up.srv.URL)}, nil)
	if _, a := h.rpc("/", h.token(investigator), "1.0", "SendMessage", sendParams); a.Error != nil {
		t.Fatalf("send: %s", a.raw)
	}
	retail := h.token(retailBot)
	get := func(id string) (*http.Response, string) {
		resp, body := h.do("POST", "/", retail, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "GetTask",
			"params": map[string]any{"id": id}}, map[string]string{"A2A-Version": "1.0"})
		return resp, strings.ReplaceAll(string(body), id, "ID")
	}
	fr, fb := get("t-1")
	mr, mb := get("no-such-task")
	if fr.StatusCode != mr.StatusCode || fb != mb {
		t.Fatalf("bodies differ: foreign %d %s / missing %d %s", fr.StatusCode, fb, mr.StatusCode, mb)
	}
	for _, k := range []string{DecisionHeader, "Content-Type", "Cache-Control"} {
		if (fr.Header.Get(k) == "") != (mr.Header.Get(k) == "") {
			t.Errorf("header %s: foreign %q, missing %q: the foreign task is distinguishable", k, fr.Header.Get(k), mr.Header.Get(k))
		}
	}
}

// TestHiddenCardNoDecisionOracle: a card the caller may not see is a plain 404,
// the same as a path no route serves; a Writ-Decision-Id on it would tell the
// caller the agent exists.
//
// Threat: an agent's existence learnt from its card by a caller who may
// not see it. Defence: a plain 404, the same as for no agent at all.
func TestHiddenCardNoDecisionOracle(t *testing.T) {
	up := newFakeAgent(t, nil)
	a := sanctionsAgent(up.srv.URL)
	a.Route = "/sanctions/"
	h := newHarness(t, []config.Agent{a}, nil)
	hr, hb := h.do("GET", "/sanctions/.well-known/agent-card.json", "", nil, nil)
	mr, mb := h.do("GET", "/no-such-agent/.well-known/agent-card.json", "", nil, nil)
	if hr.StatusCode != 404 || mr.StatusCode != 404 || string(hb) != string(mb) {
		t.Fatalf("hidden %d %s / missing %d %s", hr.StatusCode, hb, mr.StatusCode, mb)
	}
	if hr.Header.Get(DecisionHeader) != mr.Header.Get(DecisionHeader) {
		t.Errorf("hidden card carries %s %q, a missing agent %q", DecisionHeader, hr.Header.Get(DecisionHeader), mr.Header.Get(DecisionHeader))
	}
}
