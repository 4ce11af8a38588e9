package egress_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/writ-authz/writ/internal/peers"
)

// TestJSAgentDelegatesThroughEgress: a real @a2a-js/sdk agent behind writ A
// delegates each message onward through writ A's egress listener, passing
// the Writ-Decision-Id of the inbound request as Writ-Parent on every call of
// its SDK client; the screener behind writ B answers, and the chain writ B
// saw is the inbound one grown by the delegating agent.
func TestJSAgentDelegatesThroughEgress(t *testing.T) {
	peers.EnsureNode(t)
	w := newWorld(t, worldOptions{agent: func(egressURL string) string {
		return peers.StartScript(t, "agent.mjs", "--agent", "delegator", "--egress", egressURL, "--delegate-to", screener)
	}})
	status, body := w.send10("/", w.token(orchestrator))
	if status != 200 || !strings.Contains(body, "delegated to "+screener+": completed") {
		t.Fatalf("the delegation: %d %s", status, body)
	}
	reqs := w.screener.Requests()
	var card, send int
	for _, r := range reqs {
		switch {
		case strings.Contains(r.Method, "agent-card"):
			card++
		case r.Method == "message/send":
			send++
			out, err := w.verify.VerifyFor(bearer(r.Header), "agent:"+screener)
			if err != nil || out.AgentID != local || !slices.Equal(out.Chain, []string{"orchestrator"}) || out.UserID != "u-42" {
				t.Fatalf("the screener's caller %+v %v", out, err)
			}
		}
	}
	if send != 1 {
		t.Fatalf("the screener saw %d sends (%d requests)", send, len(reqs))
	}
	eg := w.a.rec.egressDecisions()
	if len(eg) < 2 { // the card, then the send
		t.Fatalf("%d egress decisions", len(eg))
	}
	ingress := w.a.rec.decisions[0]
	for _, d := range eg {
		if !d.Allow || d.ParentDecisionID != ingress.ID || !slices.Equal(d.Intermediaries, []string{"orchestrator", local}) {
			t.Fatalf("egress decision %+v (ingress %s)", d, ingress.ID)
		}
	}

	// A call the policy refuses at egress comes back to the SDK as an error.
	deep := orchestrator
	deep.Chain = []string{"a", "b", "c"}
	status, body = w.send10("/", w.token(deep))
	if status != 200 || !strings.Contains(body, "delegation refused") || len(w.screener.Requests()) != len(reqs) {
		t.Fatalf("a refused delegation: %d %s", status, body)
	}
}
