package egress_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/internal/proxytest"
)

// refusedAtEgress checks that a call was refused with code before any byte
// left the host: the trap target saw nothing, the STS was not asked.
func refusedAtEgress(t *testing.T, w *world, status int, body []byte, code string, exchangesBefore int64) {
	t.Helper()
	if status != 403 {
		t.Fatalf("status %d: %s", status, body)
	}
	if _, reasons := rpcError(t, body); !slices.Contains(reasons, code) {
		t.Fatalf("reasons %v, want %s: %s", reasons, code, body)
	}
	if n := len(w.trap.Requests()); n != 0 {
		t.Fatalf("the refused call reached a target (%d requests)", n)
	}
	if n := len(w.screener.Requests()); n != 0 {
		t.Fatalf("the refused call reached the screener (%d requests)", n)
	}
	if n := w.front.calls.Load(); n != exchangesBefore {
		t.Fatalf("the STS was asked for a refused call (%d exchanges, %d before)", n, exchangesBefore)
	}
}

// TestRefusedAtEgress: the chain rules fire on the delegating side, before
// any byte leaves the host.
// Threat: an agent delegates onward where the chain must stop — one hop too
// deep, back to an agent already in the chain (or to itself), restricted
// data to an agent cleared only for internal, a tenant the target does not
// serve — and relies on the target's side to notice, or on nobody at all.
// Defence: the egress decision is the same policy's, with the caller this
// agent inside the inbound task (the chain grown by the inbound caller, the
// task's classification), so DEPTH_EXCEEDED, CYCLE_DETECTED,
// CLASSIFICATION_EXCEEDED and TENANT_NOT_PERMITTED deny the call at egress:
// no exchange, no request to the target.
func TestRefusedAtEgress(t *testing.T) {
	w := newWorld(t, worldOptions{})
	deep := orchestrator
	deep.Chain = []string{"a", "b", "c"} // the call would be the fifth hop
	for _, c := range []struct {
		name, target, code string
		caller             proxytest.Caller
	}{
		{"depth", screener, "DEPTH_EXCEEDED", deep},
		{"cycle back to the caller", "orchestrator", "CYCLE_DETECTED", orchestrator},
		{"cycle to itself", local, "CYCLE_DETECTED", orchestrator},
		{"restricted data to an internal-only agent", "internal-only", "CLASSIFICATION_EXCEEDED", orchestrator},
		{"a tenant the target does not serve", "retail-only", "TENANT_NOT_PERMITTED", orchestrator},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent := w.inbound(w.token(c.caller))
			before := w.front.calls.Load()
			resp, body := w.call(parent, "/to/"+c.target+"/", send03, nil)
			refusedAtEgress(t, w, resp.StatusCode, body, c.code, before)
			eg := w.a.rec.egressDecisions()
			if d := eg[len(eg)-1]; d.Allow || d.Target != c.target || d.ParentDecisionID != parent {
				t.Fatalf("the refusal's decision %+v", d)
			}
		})
	}
}

// TestParentMustBeLive: Writ-Parent must name a live inbound request of this
// agent.
// Threat: the agent (or anything else that reaches the egress listener)
// names a decision id it was not given — made up, of a request to another
// agent this writ protects, or of one whose token has expired — to act with
// an authority that is not, or no longer, its caller's. Defence: a parent is
// the link writ recorded when it forwarded that request to this agent, alive
// until the inbound token's exp or egress.link_ttl; any other is refused
// PARENT_UNKNOWN before any decision, exchange or byte out.
func TestParentMustBeLive(t *testing.T) {
	w := newWorld(t, worldOptions{linkTTL: "1s"})
	expired := w.inbound(w.token(orchestrator))
	time.Sleep(1100 * time.Millisecond)
	foreign := w.inboundTo("/other/", w.token(orchestrator)) // a live request, to the other agent
	for name, parent := range map[string]string{"made up": "0123456789abcdef01234567", "another agent's": foreign,
		"expired": expired} {
		t.Run(name, func(t *testing.T) {
			before := w.front.calls.Load()
			resp, body := w.call(parent, "/to/"+screener+"/", send03, nil)
			refusedAtEgress(t, w, resp.StatusCode, body, "PARENT_UNKNOWN", before)
		})
	}
	if eg := w.a.rec.egressDecisions(); len(eg) != 0 {
		t.Fatalf("a call with an unknown parent was decided: %+v", eg)
	}
}

// TestRootChain: a call that names no parent starts a new delegation at this
// agent, on the credential it presents; policy sees input.egress.root and
// can refuse it.
// Threat: an agent makes calls outside any inbound request (its own
// schedule, a prompt injected into it) with whatever authority it can find.
// Defence: such a call is a root of a new chain: decided on the credential
// the agent presents (verified as callers are; none is unauthenticated),
// marked root for the policy, and exchanged like any other.
func TestRootChain(t *testing.T) {
	w := newWorld(t, worldOptions{})
	own := w.own("u-9")
	resp, body := w.call("", "/to/"+screener+"/", send03, map[string]string{"Authorization": "Bearer " + own})
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"completed"`) {
		t.Fatalf("a root call: %d %s", resp.StatusCode, body)
	}
	out, err := w.verify.VerifyFor(bearer(w.screener.Requests()[0].Header), "agent:"+screener)
	if err != nil || out.AgentID != local || len(out.Chain) != 0 || out.UserID != "u-9" || out.ChainID == "" {
		t.Fatalf("a root chain's token: %+v %v", out, err)
	}
	eg := w.a.rec.egressDecisions()
	if d := eg[len(eg)-1]; !d.Allow || d.ParentDecisionID != "" || d.Initiator != "u-9" ||
		!slices.Equal(d.Intermediaries, []string{local}) || d.ChainID != out.ChainID {
		t.Fatalf("the root call's decision %+v", d)
	}
	// No credential at all: unauthenticated.
	resp, body = w.call("", "/to/"+screener+"/", send03, nil)
	if resp.StatusCode != 401 {
		t.Fatalf("a root call without a credential: %d %s", resp.StatusCode, body)
	}

	// A policy that refuses new chains at egress.
	dir := t.TempDir()
	rule := filepath.Join(dir, "roots.rego")
	if err := os.WriteFile(rule, []byte(`package writ.authz

denials contains {"code": "ROOT_REFUSED", "reason": "calls must serve an inbound request"} if {
	input.direction == "egress"
	input.egress.root
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	strict := newWorld(t, worldOptions{policies: []string{proxytest.Policies(), rule}})
	before := strict.front.calls.Load()
	resp, body = strict.call("", "/to/"+screener+"/", send03, map[string]string{"Authorization": "Bearer " + strict.own("u-9")})
	refusedAtEgress(t, strict, resp.StatusCode, body, "ROOT_REFUSED", before)
	// ... while a call that serves an inbound request goes out.
	parent := strict.inbound(strict.token(orchestrator))
	if resp, body := strict.call(parent, "/to/"+screener+"/", send03, nil); resp.StatusCode != 200 {
		t.Fatalf("a linked call under the strict policy: %d %s", resp.StatusCode, body)
	}
}
