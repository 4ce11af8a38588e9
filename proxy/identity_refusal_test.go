package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/decisionlog"
	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/internal/syncbuf"
)

// TestIdentityRefusalIsLogged: a token minted for another audience makes
// the caller anonymous and the answer a 401 that carries the decision id
// (header and message); the decision line of that id names the failure's
// code, the presented audience, issuer and key id, and the accepted ones;
// the token is in neither the decision log nor writ's own log. JSON-RPC and
// HTTP+JSON alike.
//
// Threat: a refused credential leaves no trace an operator can find from
// the caller's answer, so the only way to learn why is to paste the token
// somewhere (or writ logs it itself).
// Defence: the 401 names its decision id (no disclosure: the reason stays
// neutral, DESIGN section 7); the decision line carries the identity
// failure's detail (identity.Refusal), quoting iss, aud, kid and alg only.
func TestIdentityRefusalIsLogged(t *testing.T) {
	up := proxytest.NewFakeAgent(t, nil)
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, nil)
	var out syncbuf.Buffer
	dl, err := decisionlog.NewWriter(&out, config.DecisionLog{})
	if err != nil {
		t.Fatal(err)
	}
	h.Bus.Subscribe(dl)
	h.IDP.Audience = "payments-api"
	tok := h.Token(proxytest.Caller{Agent: "ops-bot", User: "u-1", Tenant: "retail", Scopes: "delegate"})
	sig := tok[strings.LastIndex(tok, ".")+1:]

	v10 := map[string]string{"A2A-Version": "1.0"}
	rpc := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": proxytest.SendParams}
	var ids []string
	for name, send := range map[string]func() (int, string, []byte){
		"jsonrpc": func() (int, string, []byte) {
			resp, body := h.Do("POST", "/", tok, rpc, v10)
			return resp.StatusCode, resp.Header.Get("Writ-Decision-Id"), body
		},
		"rest": func() (int, string, []byte) {
			resp, body := h.Do("POST", "/message:send", tok, proxytest.SendParams, v10)
			return resp.StatusCode, resp.Header.Get("Writ-Decision-Id"), body
		},
	} {
		status, id, body := send()
		if status != 401 || id == "" || !strings.Contains(string(body), "decision "+id) {
			t.Fatalf("%s: %d, Writ-Decision-Id %q: %s", name, status, id, body)
		}
		if strings.Contains(string(body), "payments-api") || strings.Contains(string(body), "audience") {
			t.Errorf("%s: the 401 tells the caller why: %s", name, body)
		}
		ids = append(ids, id)
	}
	if err := dl.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	found := 0
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		var ln decisionlog.Line
		if err := json.Unmarshal(sc.Bytes(), &ln); err != nil {
			t.Fatal(err)
		}
		if ln.Type != decisionlog.TypeDecision || !slices.Contains(ids, ln.DecisionID) {
			continue
		}
		found++
		ie := ln.IdentityError
		if ln.Allow || ie == nil || ie.Code != "audience_rejected" {
			t.Fatalf("decision line: %s", sc.Text())
		}
		p, a := ie.Presented, ie.Accepted
		if p.Issuer != proxytest.Issuer || !slices.Equal(p.Audiences, []string{"payments-api"}) || p.KeyID != devidp.KeyID || p.Algorithm != "ES256" {
			t.Errorf("presented: %s", sc.Text())
		}
		if !slices.Equal(a.Issuers, []string{proxytest.Issuer}) || !slices.Equal(a.Audiences, []string{"writ"}) || !slices.Equal(a.KeyIDs, []string{devidp.KeyID}) {
			t.Errorf("accepted: %s", sc.Text())
		}
	}
	if found != len(ids) {
		t.Fatalf("%d decision lines for the refused credentials %v:\n%s", found, ids, out.String())
	}
	for name, text := range map[string]string{"the decision log": out.String(), "writ's log": h.Log.String()} {
		if strings.Contains(text, tok) || strings.Contains(text, sig) {
			t.Errorf("%s holds the token:\n%s", name, text)
		}
	}
	if !strings.Contains(h.Log.String(), `"presented_aud":["payments-api"]`) || !strings.Contains(h.Log.String(), `"accepted_audiences":["writ"]`) {
		t.Errorf("writ's log does not say which audiences:\n%s", h.Log.String())
	}
}
