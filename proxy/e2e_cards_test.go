package proxy_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/peers"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/proxy"
)

// getBody GETs url (with a bearer token when token is set) and wants a 200.
func getBody(t *testing.T, url, token string) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	return body
}

// sdkVerify runs the JS SDK's own signature check (card-verify.mjs) on the
// card at base.
func sdkVerify(t *testing.T, base, path, token string, extra ...string) (map[string]any, error) {
	t.Helper()
	var args []string
	if base != "" {
		args = append(args, "--url", base, "--token", token)
	}
	if path != "" {
		args = append(args, "--path", path)
	}
	args = append(args, extra...)
	lines, err := peers.RunScript(t, 30*time.Second, "card-verify.mjs", args...)
	if len(lines) != 1 {
		t.Fatalf("card-verify printed %v (%v)", lines, err)
	}
	return lines[0], err
}

// TestSignedCardSDKVerifiesWrit — Threat: a client that checks card
// signatures (A2A §8.4) cannot trust the card writ serves, because writ
// rewrites the agent's card (its own URL, the schemes it verifies), which
// breaks the agent's signature — so the client either drops the check or
// accepts an unsigned card from anyone in the path. Defence: writ signs the
// card it serves with its own key (ES256, kid the key's RFC 7638 thumbprint,
// jku its JWKS at /.well-known/writ/jwks.json on the card's origin), over the
// JCS content of exactly the bytes it serves; the @a2a-js/sdk 1.3.0 client's
// own verifyAgentCardSignature accepts it, whether the agent signed its card
// or not, and the agent's own signature is never passed on over a rewritten
// card.
func TestSignedCardSDKVerifiesWrit(t *testing.T) {
	peers.EnsureNode(t)
	plain := peers.StartJSAgent(t, "sanctions", "")
	signed := peers.StartJSAgent(t, "sanctions", "", "--sign")
	a := proxytest.SanctionsAgent(plain)
	a.PublicURL = "self"
	b := proxytest.SanctionsAgent(signed)
	b.Name, b.Route, b.PublicURL = "signed", "/signed", "self"
	h := proxytest.New(t, []config.Agent{a, b}, func(c *config.Config) {
		c.Cards.JKUTrustedHosts = []string{"127.0.0.1"} // the signed agent's jku is on loopback
	})
	tok := h.Token(proxytest.Investigator)
	var jwks struct {
		Keys []struct {
			Kid string `json:"kid"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(getBody(t, h.Srv.URL+proxy.JWKSPath, ""), &jwks); err != nil || len(jwks.Keys) != 1 {
		t.Fatalf("writ's JWKS: %+v %v", jwks, err)
	}
	for _, route := range []string{"", "/signed"} {
		res, err := sdkVerify(t, h.Srv.URL+route+"/", "", tok)
		if err != nil || res["verified"] != true {
			t.Fatalf("%q: the SDK does not verify writ's card: %v %v", route, res, err)
		}
		if res["kid"] != jwks.Keys[0].Kid || res["jku"] != h.Srv.URL+proxy.JWKSPath {
			t.Errorf("%q: verified with kid %v from %v, want writ's %s from %s", route, res["kid"], res["jku"],
				jwks.Keys[0].Kid, h.Srv.URL+proxy.JWKSPath)
		}
		var card struct {
			Signatures []json.RawMessage `json:"signatures"`
		}
		if err := json.Unmarshal(getBody(t, h.Srv.URL+route+"/.well-known/agent-card.json", tok), &card); err != nil || len(card.Signatures) != 1 {
			t.Errorf("%q: writ's card carries %d signatures (%v), want its own one only", route, len(card.Signatures), err)
		}
	}
}

// refusal is one way an agent's card is tampered with, and what readiness
// must then say.
type refusal struct {
	name    string
	card    func(signed []byte) []byte
	require bool
	want    string // in the readiness error; "" is ready
}

// TestTamperedAgentCardRefused — Threat: whoever sits between an agent and
// writ (or serves the agent's card for it) alters the card the agent signed
// — one byte of it, or its signatures stripped — or signs it with a jku that
// points writ's key fetch at an internal address (cloud metadata, a private
// service: SSRF), and writ publishes the altered card as the agent's.
// Defence: a card carrying signatures is read only when one verifies (keys
// from the jku under the card-fetch SSRF rules: https, no private, loopback
// or link-local address unless cards.jku_trusted_hosts names it, checked at
// dial time), and then the content the signature covers is what writ reads;
// agents[].require_signed_card refuses an unsigned card too; a refused card
// is not served, the legacy card path is not asked instead, and readiness
// names the reason.
func TestTamperedAgentCardRefused(t *testing.T) {
	peers.EnsureNode(t)
	agent := peers.StartJSAgent(t, "sanctions", "", "--sign")
	private := peers.StartJSAgent(t, "sanctions", "", "--sign", "--jku", "https://10.1.2.3/jwks.json")
	genuine := getBody(t, agent+"/.well-known/agent-card.json", "")
	privateCard := getBody(t, private+"/.well-known/agent-card.json", "")
	if !bytes.Contains(genuine, []byte(`"signatures"`)) || !bytes.Contains(genuine, []byte(`"version":"3.1.0"`)) {
		t.Fatalf("the agent's card is not what this test tampers with: %s", genuine)
	}
	strip := func(b []byte) []byte {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "signatures")
		out, _ := json.Marshal(m)
		return out
	}
	same := func(b []byte) []byte { return b }
	for _, c := range []refusal{
		{name: "genuine", card: same, require: true},
		{name: "one byte", card: func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"version":"3.1.0"`), []byte(`"version":"3.1.1"`), 1)
		}, want: "the signature does not match the card"},
		{name: "one byte, required", card: func(b []byte) []byte {
			return bytes.Replace(b, []byte(`Screen a counterparty`), []byte(`Screen a counterpartY`), 1)
		}, require: true, want: "the signature does not match the card"},
		{name: "a member added", card: func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"name":`), []byte(`"NAME":"evil","name":`), 1)
		}, want: "the signature does not match the card"},
		{name: "a duplicate member", card: func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"version":"3.1.0"`), []byte(`"version":"3.1.0","version":"9"`), 1)
		}, want: "no canonical form"},
		{name: "stripped signature, required", card: strip, require: true, want: "unsigned, and require_signed_card is set"},
		{name: "stripped signature, not required", card: strip},
		{name: "a jku to a private address", card: func([]byte) []byte { return privateCard },
			want: "jku https://10.1.2.3/jwks.json refused: private"},
	} {
		t.Run(c.name, func(t *testing.T) {
			card := c.card(genuine)
			asked := map[string]int{}
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				asked[r.URL.Path]++
				if r.URL.Path != "/.well-known/agent-card.json" && r.URL.Path != "/.well-known/agent.json" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(card)
			}))
			t.Cleanup(up.Close)
			a := proxytest.SanctionsAgent(up.URL)
			a.PublicURL, a.RequireSignedCard = "self", c.require
			h := proxytest.New(t, []config.Agent{a}, func(cfg *config.Config) {
				cfg.Cards.JKUTrustedHosts = []string{"127.0.0.1"}
			})
			err := h.Core.Ready(t.Context())
			if c.want == "" {
				if err != nil {
					t.Fatalf("not ready: %v", err)
				}
				getBody(t, h.Srv.URL+"/.well-known/agent-card.json", h.Token(proxytest.Investigator))
				return
			}
			if err == nil || !strings.Contains(err.Error(), "its card is refused") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("readiness says %v, want the card refused: %s", err, c.want)
			}
			if asked["/.well-known/agent.json"] != 0 {
				t.Errorf("the legacy card path was asked after the card was refused")
			}
			resp, err := http.DefaultClient.Do(mustGet(t, h.Srv.URL+"/.well-known/agent-card.json", h.Token(proxytest.Investigator)))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || bytes.Contains(body, []byte("evil")) {
				t.Errorf("a refused card was served: %d %s", resp.StatusCode, body)
			}
		})
	}
}

func mustGet(t *testing.T, url, token string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return req
}

// TestAgentCardKeysPinned — Threat: with only the card's own jku to go by,
// anyone who can replace the card signs it with a key set of their own;
// or the jku points writ's fetch somewhere it must not go. Defence: with
// agents[].card_keys the card must verify with one of those keys, and the
// card's jku is never fetched (here it names a private address, and the
// card is still read); a card signed by another key is refused with the
// reason.
func TestAgentCardKeysPinned(t *testing.T) {
	peers.EnsureNode(t)
	agent := peers.StartJSAgent(t, "sanctions", "", "--sign", "--jku", "https://10.1.2.3/jwks.json")
	other := peers.StartJSAgent(t, "sanctions", "", "--sign")
	dir := t.TempDir()
	pinned := filepath.Join(dir, "agent.jwks")
	if err := os.WriteFile(pinned, getBody(t, agent+"/jwks.json", ""), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, upstream, want string
	}{
		{"the pinned key", agent, ""},
		{"another key", other, "the signature does not match the card"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := proxytest.SanctionsAgent(c.upstream)
			a.RequireSignedCard, a.CardKeys = true, pinned
			h := proxytest.New(t, []config.Agent{a}, nil)
			err := h.Core.Ready(t.Context())
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("not ready: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("readiness says %v, want %q", err, c.want)
			}
		})
	}
}

// TestEveryCardWritServesIsSigned — Threat: a card writ renders other than
// the public one (the extended card it rewrites in the agent's answer, an
// entry of its directory) goes out unsigned, or with the agent's own
// signature over content writ changed, so a client that checks signatures
// cannot trust it, or learns to skip the check; or an extended card whose
// signature does not verify is passed on rewritten (and so signed by writ).
// Defence: every card writ renders is signed in the one place that renders
// it (Core.renderCard, and the extended-card rewrite with the route's
// signer), and the SDK's own check verifies each; the extended card in the
// agent's answer is checked like the public card (Core.checkCard) before it
// is read, and one that fails is not passed on.
func TestEveryCardWritServesIsSigned(t *testing.T) {
	peers.EnsureNode(t)
	var forged atomic.Bool // the agent's extended card carries a signature that does not verify
	up := proxytest.NewFakeAgent(t, nil)
	up.Handle = func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/.well-known/agent-card.json" {
			fmt.Fprintf(w, `{"name":"sanctions","description":"d","version":"1","supportedInterfaces":[{"url":"%s/","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{"extendedAgentCard":true},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[]}`, up.Srv.URL)
			return
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"name":"sanctions","version":"1","supportedInterfaces":[{"url":"%s/","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],`+
			`"capabilities":{"extendedAgentCard":true,"extensions":[{"uri":"urn:x","required":false,"params":{"a":"","n":1.50}}]},"securitySchemes":{"internal":{"apiKeySecurityScheme":{"location":"header","name":"X-Internal-Key"}}},`+
			`"securityRequirements":[{"schemes":{"internal":{}}}],"defaultInputModes":[],"defaultOutputModes":[],`+
			`"skills":[{"id":"admin","name":"admin","description":"<x> & \"y\" ☃ \u00e9","tags":["internal"]}]%s}}`, up.Srv.URL, sigs(forged.Load()))
	}
	a := proxytest.SanctionsAgent(up.Srv.URL)
	a.PublicURL, a.Skills = "self", nil
	h := proxytest.New(t, []config.Agent{a}, nil)
	tok := h.Token(proxytest.Investigator)
	dir := t.TempDir()
	check := func(what string, card json.RawMessage) {
		t.Helper()
		file := filepath.Join(dir, strings.ReplaceAll(what, " ", "-")+".json")
		if err := os.WriteFile(file, card, 0o600); err != nil {
			t.Fatal(err)
		}
		res, err := sdkVerify(t, "", "", "", "--file", file)
		if err != nil || res["verified"] != true || res["jku"] != h.Srv.URL+proxy.JWKSPath {
			t.Errorf("%s: the SDK does not verify writ's signature: %v %v\n%s", what, res, err, card)
		}
		if n := bytes.Count(card, []byte(`"protected"`)); n != 1 {
			t.Errorf("%s: %d signatures, want writ's only: %s", what, n, card)
		}
	}
	status, ans := h.RPC("/", tok, "1.0", "GetExtendedAgentCard", map[string]any{})
	if status != 200 || ans.Error != nil {
		t.Fatalf("%d %s", status, ans.Raw)
	}
	var env struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(ans.Raw, &env); err != nil {
		t.Fatal(err)
	}
	check("extended card", env.Result)
	var directory struct {
		Agents []json.RawMessage `json:"agents"`
	}
	if err := json.Unmarshal(getBody(t, h.Srv.URL+"/.well-known/writ/directory", tok), &directory); err != nil || len(directory.Agents) != 1 {
		t.Fatalf("the directory: %v %v", directory, err)
	}
	check("directory entry", directory.Agents[0])
	forged.Store(true)
	status, ans = h.RPC("/", tok, "1.0", "GetExtendedAgentCard", map[string]any{})
	if ans.Error == nil || bytes.Contains(ans.Raw, []byte(`"name":"sanctions"`)) {
		t.Fatalf("an extended card whose signature does not verify was passed on: %d %s", status, ans.Raw)
	}
}

// sigs is a signatures member for the fake agent's extended card: one that
// names a kid and a jku writ is not allowed to ask (and so cannot verify),
// or none.
func sigs(forged bool) string {
	if !forged {
		return ""
	}
	// {"alg":"ES256","kid":"k","jku":"https://169.254.169.254/jwks.json"}
	protected := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","kid":"k","jku":"https://169.254.169.254/jwks.json"}`))
	return `,"signatures":[{"protected":"` + protected + `","signature":"AAAA"}]`
}
