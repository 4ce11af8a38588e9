package egress_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestSTSFailures: an STS that is down, slow, answers garbage or a token for
// another audience: each a clear protocol error to the agent, nothing
// forwarded, counted, and the decision logged as refused for it.
// Threat: a token service that fails or is confused makes writ forward the
// call anyway — unauthenticated, with a stale token, or with a token meant
// for another target (which that target's writ would accept). Defence: the
// exchange client verifies what the STS answers (its signature, iss, aud,
// exp, scope); any failure fails the call closed, with a 503 (unavailable,
// slow) or a 502 (an answer that is not a token for the target) naming the
// failure's kind.
func TestSTSFailures(t *testing.T) {
	w := newWorld(t, worldOptions{})
	for _, c := range []struct {
		mode, kind string
		status     int
	}{
		{"down", "unavailable", 503},
		{"slow", "timeout", 503},
		{"garbage", "invalid_answer", 502},
		{"wrong_audience", "wrong_audience", 502},
	} {
		t.Run(c.mode, func(t *testing.T) {
			parent := w.inbound(w.token(orchestrator)) // a fresh token: nothing cached
			w.front.mode.Store(c.mode)
			defer w.front.mode.Store("")
			resp, body := w.call(parent, "/to/"+screener+"/", send03, nil)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			var a struct {
				Error struct {
					Message string `json:"message"`
					Data    struct {
						Denials []struct{ Code, Reason string } `json:"denials"`
					} `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &a); err != nil || !strings.Contains(a.Error.Message, "token service") ||
				len(a.Error.Data.Denials) != 1 || a.Error.Data.Denials[0].Code != "TOKEN_EXCHANGE_FAILED" ||
				a.Error.Data.Denials[0].Reason != c.kind {
				t.Fatalf("not a clear error: %s", body)
			}
			if n := len(w.screener.Requests()); n != 0 {
				t.Fatalf("forwarded without a token (%d requests)", n)
			}
			if n := w.a.egress.Stats().ExchangeFailures[c.kind]; n != 1 {
				t.Fatalf("counted %d %s failures: %+v", n, c.kind, w.a.egress.Stats())
			}
			eg := w.a.rec.egressDecisions()
			if d := eg[len(eg)-1]; !d.Allow || d.Refused != "exchange:"+c.kind || d.ParentDecisionID != parent {
				t.Fatalf("the decision %+v", d)
			}
		})
	}
	// The STS is back: the same world delegates again.
	parent := w.inbound(w.token(orchestrator))
	if resp, body := w.call(parent, "/to/"+screener+"/", send03, nil); resp.StatusCode != 200 {
		t.Fatalf("after the failures: %d %s", resp.StatusCode, body)
	}
}

// TestSTSRefusal: the STS refusing the exchange is a 403 naming its RFC 6749
// code; what it said goes to the log only.
// Threat: a refused delegation goes out anyway, or the STS's description
// (which may quote claims) reaches the agent's model. Defence: a refusal is
// DELEGATION_REFUSED with the error code alone, nothing forwarded.
func TestSTSRefusal(t *testing.T) {
	w := newWorld(t, worldOptions{})
	// The STS serves audience agent:raw; a target whose audience it does not
	// serve is invalid_target.
	parent := w.inbound(w.token(orchestrator))
	resp, body := w.call(parent, "/to/raw/", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`,
		map[string]string{"A2A-Version": "1.0"})
	if resp.StatusCode != 200 {
		t.Fatalf("raw: %d %s", resp.StatusCode, body)
	}
	// A scope the subject token does not hold is never asked for: the door
	// asks for what the caller holds of what the hop needs.
	if got, _ := w.verify.VerifyFor(bearer(w.raw.Requests()[0].Header), "agent:raw"); !slices.Equal(got.Scopes, []string{"delegate"}) {
		t.Fatalf("scope %v", got.Scopes)
	}
	// Refused: an actor the subject token's may_act does not name.
	tok, err := w.idp.Token(devidpCaller(orchestrator, []string{"someone-else"}))
	if err != nil {
		t.Fatal(err)
	}
	parent = w.inbound(tok)
	resp, body = w.call(parent, "/to/"+screener+"/", send03, nil)
	if code, reasons := rpcError(t, body); resp.StatusCode != 403 || code != -32000 ||
		!slices.Contains(reasons, "DELEGATION_REFUSED") || strings.Contains(string(body), "someone-else") {
		t.Fatalf("a refused exchange: %d %s", resp.StatusCode, body)
	}
	if n := len(w.screener.Requests()); n != 0 {
		t.Fatalf("forwarded after a refusal (%d requests)", n)
	}
	if n := w.a.egress.Stats().ExchangeFailures["refused:unauthorized_client"]; n != 1 {
		t.Fatalf("not counted: %+v", w.a.egress.Stats())
	}
}

// TestTokenForAnotherDelegation: the STS answers with a good token, for the
// right target, but for another delegation than the one decided on.
// Threat: a confused or compromised STS (or whatever sits between writ and
// it) hands back a token whose chain is not the one the policy decided —
// another caller's, a shorter or a longer one — and the target's writ, which
// only sees that token, decides on a delegation writ never approved.
// Defence: Plan.Delegate checks the token's act chain (exactly the decided
// chain plus this agent), its txn and its sub against the decision before
// anything is forwarded; a token that differs is a 502, nothing goes out.
func TestTokenForAnotherDelegation(t *testing.T) {
	w := newWorld(t, worldOptions{})
	mallory := orchestrator
	mallory.Agent = "mallory"
	w.front.swap.Store(w.token(mallory))
	w.front.mode.Store("swap_subject")
	parent := w.inbound(w.token(orchestrator))
	resp, body := w.call(parent, "/to/"+screener+"/", send03, nil)
	if resp.StatusCode != 502 || !strings.Contains(string(body), "chain_mismatch") {
		t.Fatalf("a token for another delegation: %d %s", resp.StatusCode, body)
	}
	if n := len(w.screener.Requests()); n != 0 {
		t.Fatalf("forwarded with another delegation's token (%d requests)", n)
	}
	eg := w.a.rec.egressDecisions()
	if d := eg[len(eg)-1]; d.Refused != "exchange:chain_mismatch" || !slices.Equal(d.Intermediaries, []string{"orchestrator", local}) {
		t.Fatalf("the decision %+v", d)
	}
}
