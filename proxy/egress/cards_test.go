package egress_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/writ-authz/writ/internal/peers"
)

// send10 is an A2A 1.0 SendMessage, as the JS SDK agents read it.
const send10 = `{"jsonrpc":"2.0","id":3,"method":"SendMessage","params":{"message":{"messageId":"m-3","role":"ROLE_USER","parts":[{"text":"Screen Acme Trading FZE"}]}}}`

var a2a10 = map[string]string{"A2A-Version": "1.0"}

// cardOf is the card URL of a JS agent.
func cardOf(agent string) string { return agent + "/.well-known/agent-card.json" }

// byCard is the listener's path of a call to the target named by card.
func byCard(card, rest string) string { return "/card/" + url.PathEscape(card) + rest }

// jsTarget is an egress target named by its card alone (no upstream).
func jsTarget(name, card, extra string) string {
	return fmt.Sprintf("    - {name: %s, card_url: %q, protocol: a2a, max_data_classification: restricted, security_schemes: [oauth2]%s}\n",
		name, card, extra)
}

// sendsTo counts the messages a JS agent received, and checks each carried
// the STS's token for the target (never the inbound one).
func sendsTo(t *testing.T, w *world, agent, target string) int {
	t.Helper()
	n := 0
	for _, o := range peers.JSAgentRequests(t, agent) {
		if o.Method != "SendMessage" {
			continue
		}
		n++
		if out, err := w.verify.VerifyFor(bearer(o.Header), "agent:"+target); err != nil || out.AgentID != local {
			t.Fatalf("%s got a message without the STS's token for it: %+v %v", target, out, err)
		}
	}
	return n
}

// TestTargetNamedByCard: a target configured by its card's URL alone is
// reached by that URL (/card/{escaped}/...) and by its name; writ fetches
// its card (with the call's outbound token, through the SSRF guard, its
// signature checked as the target requires) to learn where it is; the card
// read through the listener points the agent's client back at the listener;
// a card URL no target has is no target, and nothing is fetched for it.
func TestTargetNamedByCard(t *testing.T) {
	peers.EnsureNode(t)
	signed := peers.StartJSAgent(t, "sanctions", "", "--sign")
	decoy := peers.StartJSAgent(t, "sanctions", "")
	w := newWorld(t, worldOptions{audiences: []string{"agent:by-card"},
		top:     "cards: {jku_trusted_hosts: [127.0.0.1]}\n",
		targets: jsTarget("by-card", cardOf(signed), ", require_signed_card: true")})
	parent := w.inbound(w.token(orchestrator))
	for _, path := range []string{byCard(cardOf(signed), "/"), "/to/by-card/"} {
		resp, body := w.call(parent, path, send10, a2a10)
		if resp.StatusCode != 200 || !strings.Contains(string(body), "TASK_STATE_COMPLETED") {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
	if n := sendsTo(t, w, signed, "by-card"); n != 2 {
		t.Fatalf("the target received %d messages, want 2", n)
	}
	resp, body := w.call(parent, byCard(cardOf(signed), "/.well-known/agent-card.json"), "", a2a10)
	var card struct {
		Interfaces []struct {
			URL string `json:"url"`
		} `json:"supportedInterfaces"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &card) != nil || len(card.Interfaces) == 0 {
		t.Fatalf("the card through the listener: %d %s", resp.StatusCode, body)
	}
	for _, iface := range card.Interfaces {
		if !strings.HasPrefix(iface.URL, "http://"+w.a.egress.Addr()+"/to/by-card") {
			t.Fatalf("the card points the agent elsewhere than the listener: %s", body)
		}
	}
	for _, path := range []string{byCard(cardOf(decoy), "/"), byCard(cardOf(signed)+"x", "/"), "/card/not-a-card/", "/card//"} {
		if resp, body := w.call(parent, path, send10, a2a10); resp.StatusCode != 404 {
			t.Errorf("%s: %d %s, want 404", path, resp.StatusCode, body)
		}
	}
	if n := len(peers.JSAgentRequests(t, decoy)); n != 0 {
		t.Fatalf("a card URL that is no target's was fetched (%d requests)", n)
	}
}

// TestTargetCardMustVerify: a target with require_signed_card (or pinned
// card_keys) is called only when its card verifies.
// Threat: whoever can answer for the target's card URL (a hijacked host, a
// poisoned DNS entry, a card rewritten on the way) serves a card that points
// the agent's delegation — with a token for the target — at an endpoint of
// their own, or a card unsigned, tampered with, or signed by a key of their
// own; or a card URL makes writ fetch from an address it must not reach.
// Defence: the card is fetched under the card rules through the egress SSRF
// guard, and checked with the ingress card code (Core.checkCard): unsigned,
// not matching its signature, signed by another key than the pinned
// card_keys, or naming a jku the guard refuses — refused, the agent gets a
// 502, and neither the message nor the card reaches the agent.
func TestTargetCardMustVerify(t *testing.T) {
	peers.EnsureNode(t)
	unsigned := peers.StartJSAgent(t, "sanctions", "")
	plain := peers.StartJSAgent(t, "sanctions", "")
	signed := peers.StartJSAgent(t, "sanctions", "", "--sign")
	other := peers.StartJSAgent(t, "sanctions", "", "--sign")
	private := peers.StartJSAgent(t, "sanctions", "", "--sign", "--jku", "https://10.1.2.3/jwks.json")
	pinned := filepath.Join(t.TempDir(), "other.jwks")
	if err := os.WriteFile(pinned, get(t, other+"/jwks.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A card URL whose name the guard resolves to loopback, where it dials
	// (an address, or plain http, to an untrusted host is refused at load):
	// a listener that counts the connections made to it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var dialed atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dialed.Add(1)
			_ = c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	hidden := "https://localhost:" + port
	required := ", require_signed_card: true"
	cases := []struct{ name, agent, extra string }{
		{"unsigned", unsigned, required},
		{"signed by another key than the pinned one", signed, fmt.Sprintf(", card_keys: %q", pinned)},
		{"a jku to a private address", private, required},
		{"a card URL the SSRF guard refuses", hidden, ""},
	}
	var targets string
	var auds []string
	for i, c := range cases {
		targets += jsTarget(fmt.Sprintf("t%d", i), cardOf(c.agent), c.extra)
		auds = append(auds, fmt.Sprintf("agent:t%d", i))
	}
	targets += jsTarget("not-required", cardOf(plain), "")
	auds = append(auds, "agent:not-required")
	w := newWorld(t, worldOptions{audiences: auds, targets: targets, top: "cards: {jku_trusted_hosts: [127.0.0.1]}\n"})
	parent := w.inbound(w.token(orchestrator))
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := map[string]int{}
			for _, a := range []string{unsigned, signed, private} {
				before[a] = len(peers.JSAgentRequests(t, a))
			}
			for _, rest := range []string{"/", "/.well-known/agent-card.json"} {
				body := send10
				if rest != "/" {
					body = ""
				}
				resp, out := w.call(parent, fmt.Sprintf("/to/t%d%s", i, rest), body, a2a10)
				// A JSON-RPC call gets the protocol's error for an invalid
				// agent answer (-32006, HTTP 200); the card a 502.
				invalid := resp.StatusCode == 200 && strings.Contains(string(out), `"code":-32006,"message":"the agent's card is not valid"`)
				if resp.StatusCode != 502 && !invalid {
					t.Fatalf("%s: %d %s, want the card refused", rest, resp.StatusCode, out)
				}
			}
			for a, n := range before {
				for _, o := range peers.JSAgentRequests(t, a)[n:] {
					if o.Method != "GET /.well-known/agent-card.json" {
						t.Fatalf("the refused target got %s", o.Method)
					}
				}
			}
		})
	}
	if n := dialed.Load(); n != 0 {
		t.Fatalf("writ connected to a card URL on loopback %d times", n)
	}
	// An unsigned card, where the target does not require a signature.
	if resp, body := w.call(parent, "/to/not-required/", send10, a2a10); resp.StatusCode != 200 {
		t.Fatalf("a target that requires no signature: %d %s", resp.StatusCode, body)
	}
	if n := sendsTo(t, w, plain, "not-required"); n != 1 {
		t.Fatalf("the target that requires no signature received %d messages", n)
	}
}
