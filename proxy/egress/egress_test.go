package egress_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/writ-authz/writ/events"
)

// TestDelegationGrowsTheChainByOneHop: the local agent's call, linked to the
// inbound request it serves, reaches the target through its writ with an
// STS token whose act chain is the inbound one plus this agent, exactly;
// the scope narrowed to what the operation needs; the chain id the same on
// both sides; and the egress decision logged with every custody field.
// Threat: an agent that delegates onward drops hops, widens the scope it was
// given, or forwards its caller's token as its own. Defence: writ owns the
// chain on the delegating side: the outbound token is the STS's exchange of
// the inbound token, checked against the decision (one hop more, the same
// chain id and subject), and the target's writ verifies it.
func TestDelegationGrowsTheChainByOneHop(t *testing.T) {
	w := newWorld(t, worldOptions{})
	inboundTok := w.token(orchestrator)
	parent := w.inbound(inboundTok)
	resp, body := w.call(parent, "/to/"+screener+"/", send03, map[string]string{"Authorization": "Bearer the-agents-own-secret"})
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"completed"`) {
		t.Fatalf("the call did not complete: %d %s", resp.StatusCode, body)
	}
	reqs := w.screener.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the screener saw %d requests", len(reqs))
	}
	out, err := w.verify.VerifyFor(bearer(reqs[0].Header), "agent:"+screener)
	if err != nil {
		t.Fatalf("the token the screener got is not the STS's for it: %v", err)
	}
	// Inbound: orchestrator acting for u-42, no earlier hops. Outbound: this
	// agent, the orchestrator the one hop before it.
	if out.AgentID != local || !slices.Equal(out.Chain, []string{"orchestrator"}) || out.UserID != "u-42" ||
		out.Tenant != "wholesale" || !slices.Equal(out.Scopes, []string{"delegate"}) || out.ChainID == "" {
		t.Fatalf("outbound caller %+v", out)
	}
	// Writ B decided on that caller.
	var bDecision *events.Decision
	for _, d := range w.b.rec.decisions {
		if d.Route == screener {
			bDecision = &d
		}
	}
	if bDecision == nil || !bDecision.Allow || bDecision.Caller.AgentID != local || bDecision.ChainID != out.ChainID {
		t.Fatalf("writ B's decision %+v", bDecision)
	}
	// The egress decision: every custody field, as events.Decision defines it.
	eg := w.a.rec.egressDecisions()
	if len(eg) != 1 {
		t.Fatalf("%d egress decisions", len(eg))
	}
	d := eg[0]
	if !d.Allow || d.Mode != events.ModeEgress || d.Route != local || d.Target != screener || d.ParentDecisionID != parent ||
		d.Initiator != "u-42" || !slices.Equal(d.Intermediaries, []string{"orchestrator", local}) ||
		d.ChainID != out.ChainID || d.ID == "" || d.ID != resp.Header.Get("Writ-Decision-Id") {
		t.Fatalf("egress decision %+v", d)
	}
	// What writ report joins on: the egress decision's intermediaries are
	// the ingress caller's chain and agent on the next hop.
	if hop := append(slices.Clone(bDecision.Caller.Chain), bDecision.Caller.AgentID); !slices.Equal(d.Intermediaries, hop) {
		t.Fatalf("egress intermediaries %v, next hop's caller %v", d.Intermediaries, hop)
	}
	assertNeverLeft(t, w, inboundTok, "the-agents-own-secret")
}

// assertNeverLeft fails when any of secrets reached an agent behind writ.
func assertNeverLeft(t *testing.T, w *world, secrets ...string) {
	t.Helper()
	var seen []string
	for _, o := range w.screener.Requests() {
		raw, _ := json.Marshal(o.Header)
		seen = append(seen, string(raw), o.Body)
	}
	for _, f := range []*fakeAgent{w.raw, w.trap} {
		bodies := f.Bodies()
		for i, r := range f.Requests() {
			raw, _ := json.Marshal(r.Header)
			seen = append(seen, string(raw), string(bodies[i]))
		}
	}
	for _, s := range seen {
		for _, secret := range secrets {
			if strings.Contains(s, secret) {
				t.Fatalf("a credential that must not leave reached a target: %.40s...", secret)
			}
		}
	}
}

// TestWhatLeavesTheHost: what the door sends a target, seen by a fake agent
// called directly: the STS's token for that target in Authorization, and
// none of writ's own headers.
// Threat: the agent's own credential, its forged Writ-Caller or the
// Writ-Parent link leaves the host, where the target (or whatever is in
// front of it) could replay or believe them. Defence: the plan drops every
// credential header and writ's headers before the exchanged token is put on.
func TestWhatLeavesTheHost(t *testing.T) {
	w := newWorld(t, worldOptions{})
	inboundTok := w.token(orchestrator)
	parent := w.inbound(inboundTok)
	resp, body := w.call(parent, "/to/raw/", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`,
		map[string]string{"A2A-Version": "1.0", "Authorization": "Bearer the-agents-own-secret",
			"Writ-Caller": `{"agent_id":"root"}`, "Writ_Decision_Id": "forged"})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	reqs := w.raw.Requests()
	if len(reqs) != 1 {
		t.Fatalf("raw saw %d requests", len(reqs))
	}
	h := reqs[0].Header
	if got, err := w.verify.VerifyFor(bearer(h), "agent:raw"); err != nil || got.AgentID != local {
		t.Fatalf("raw got %q: %v", h.Get("Authorization"), err)
	}
	for name := range h {
		if n := strings.ToLower(strings.ReplaceAll(name, "_", "-")); strings.HasPrefix(n, "writ-") {
			t.Fatalf("writ's header %s left the host: %v", name, h[name])
		}
	}
	if len(h.Values("Authorization")) != 1 {
		t.Fatalf("Authorization %v", h.Values("Authorization"))
	}
	assertNeverLeft(t, w, inboundTok, "the-agents-own-secret")
}
