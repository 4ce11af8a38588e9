package sts

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
)

// TestExchangeNarrowsAndChains: two hops of one delegation. agent-a (HTTP
// Basic) exchanges alice's token for agent:b with less scope and a lower
// ceiling; agent-b (a JWT-SVID) exchanges that for agent:c. Each token's act
// is the previous chain plus the actor, with the authority it held; txn is
// kept; writ's identity reads the chain as DESIGN.md says.
func TestExchangeNarrowsAndChains(t *testing.T) {
	w := startSTS(t, nil)
	subject := w.userToken(t, nil)
	f := exchangeForm(subject, "agent:b", "read write")
	f.Set("classification", "internal")
	a := w.asA(t, f)
	if a.Status != http.StatusOK || a.TokenType != "Bearer" || a.IssuedTokenType != TokenTypeAccessToken || a.Scope != "read write" {
		t.Fatalf("first hop: %+v", a)
	}
	if a.ExpiresIn <= 0 || a.ExpiresIn > int64(config.DefaultSTSMaxLifetime/time.Second) {
		t.Errorf("expires_in = %d", a.ExpiresIn)
	}
	if cc := a.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q", cc)
	}
	c1 := claimsOf(t, a.AccessToken)
	want := map[string]any{"iss": w.sts.Issuer(), "aud": "agent:b", "sub": "alice", "scope": "read write",
		"tenant": "t1", "classification": "internal", "client_id": agentA}
	for k, v := range want {
		if c1[k] != v {
			t.Errorf("first token's %s = %v, want %v", k, c1[k], v)
		}
	}
	// The subject token was issued to web-ui (azp), the caller agent-a's own
	// writ saw: the chain's first hop, nested under agent-a.
	act1, _ := c1["act"].(map[string]any)
	first, _ := act1["act"].(map[string]any)
	if act1["sub"] != agentA || act1["scope"] != "read write pay" || act1["tenant"] != "t1" ||
		act1["classification"] != "confidential" || len(first) != 1 || first["sub"] != "web-ui" {
		t.Errorf("first token's act = %v", c1["act"])
	}
	txn, _ := c1["txn"].(string)
	if len(txn) != 22 {
		t.Errorf("txn %q is not 128 bits base64url", txn)
	}

	b := w.asB(t, exchangeForm(a.AccessToken, "agent:c", "read"))
	if b.Status != http.StatusOK || b.Scope != "read" {
		t.Fatalf("second hop: %+v", b)
	}
	c2 := claimsOf(t, b.AccessToken)
	if c2["txn"] != txn || c2["sub"] != "alice" || c2["aud"] != "agent:c" || c2["classification"] != "internal" {
		t.Errorf("second token = %v", c2)
	}
	act2, _ := c2["act"].(map[string]any)
	inner, _ := act2["act"].(map[string]any)
	if act2["sub"] != agentB || act2["scope"] != "read write" || act2["classification"] != "internal" || inner["sub"] != agentA {
		t.Errorf("second token's act = %v", c2["act"])
	}
	if c2["exp"].(float64) > c1["exp"].(float64) {
		t.Errorf("second token outlives the first: %v > %v", c2["exp"], c1["exp"])
	}

	// writ's own identity, pointed at the STS's JWKS, reads the chain.
	r, err := identity.New(identity.Config{JWT: []config.JWTIssuer{{Issuer: w.sts.Issuer(), Audiences: []string{"agent:c"},
		JWKSURL: w.sts.JWKSURL()}}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	caller, err := r.VerifyToken(b.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	if caller.AgentID != agentB || caller.UserID != "alice" || strings.Join(caller.Chain, ",") != "web-ui,"+agentA ||
		caller.Tenant != "t1" || caller.Classification != "internal" || strings.Join(caller.Scopes, " ") != "read" {
		t.Errorf("identity reads %+v", caller)
	}
}

// TestExchangeRefusesWidening: every exchange that would widen authority, or
// that the STS cannot attribute, is refused with its RFC code and a reason.
//
// Threat: an agent that holds its caller's token asks the STS for more than
// the caller gave it (scope, a higher classification ceiling, another
// tenant, a longer life), for a chain that loops or grows without bound, in
// the name of an actor the caller did not name, with a token from an issuer
// the STS does not trust, a forged signature, or a credential that is not
// its own.
// Defence: each check refuses the whole exchange (nothing narrowed is
// issued in its place), with invalid_scope, invalid_grant,
// unauthorized_client, invalid_client or invalid_target and a description
// naming the check; no token is in the answer.
func TestExchangeRefusesWidening(t *testing.T) {
	w := startSTS(t, func(c *config.STS) { c.MaxChainDepth = 3 })
	other := newIssuer(t, idpIssuer, "idp-1") // the IdP's name and kid, another key
	evil := newIssuer(t, "https://evil.example", "e-1")
	chain := func(hops ...string) map[string]any { // oldest first
		var act map[string]any
		for _, h := range hops {
			next := map[string]any{"sub": h}
			if act != nil {
				next["act"] = act
			}
			act = next
		}
		return act
	}
	cases := []struct {
		name       string
		form       func() url.Values
		as         func(url.Values) answer
		code, want string
		status     int
	}{
		{"scope", func() url.Values { return exchangeForm(w.userToken(t, nil), "agent:b", "read admin") }, nil,
			CodeInvalidScope, "requested scope widens the subject token's: admin", 400},
		{"scope of a token with none", func() url.Values {
			return exchangeForm(w.userToken(t, map[string]any{"scope": nil}), "agent:b", "read")
		}, nil, CodeInvalidScope, "widens the subject token's: read", 400},
		{"classification", func() url.Values {
			f := exchangeForm(w.userToken(t, nil), "agent:b", "read")
			f.Set("classification", "restricted")
			return f
		}, nil, CodeInvalidGrant, "requested classification restricted is above the subject token's ceiling confidential", 400},
		{"tenant", func() url.Values {
			f := exchangeForm(w.userToken(t, nil), "agent:b", "read")
			f.Set("tenant", "t2")
			return f
		}, nil, CodeInvalidGrant, "an exchange never changes tenant", 400},
		{"lifetime beyond the maximum", func() url.Values {
			f := exchangeForm(w.userToken(t, nil), "agent:b", "read")
			f.Set("requested_lifetime", "3600")
			return f
		}, nil, CodeInvalidGrant, "requested lifetime 1h0m0s exceeds this STS's maximum 10m0s", 400},
		{"lifetime beyond the subject's", func() url.Values {
			f := exchangeForm(w.userToken(t, map[string]any{"exp": time.Now().Add(time.Minute).Unix()}), "agent:b", "read")
			f.Set("requested_lifetime", "300")
			return f
		}, nil, CodeInvalidGrant, "requested lifetime 5m0s outlives the subject token", 400},
		{"depth", func() url.Values {
			return exchangeForm(w.userToken(t, map[string]any{"act": chain("x", "y", "z")}), "agent:b", "read")
		}, nil, CodeInvalidGrant, "the delegation chain would be 4 actors deep; this STS allows at most 3", 400},
		{"depth beyond what is read", func() url.Values {
			return exchangeForm(w.userToken(t, map[string]any{"act": chain("v", "x", "y", "z")}), "agent:b", "read")
		}, nil, CodeInvalidGrant, "its act chain is deeper than 3", 400},
		{"cycle", func() url.Values {
			return exchangeForm(w.userToken(t, map[string]any{"act": chain(agentA, "x")}), "agent:b", "read")
		}, nil, CodeInvalidGrant, `actor "agent-a" is already in the delegation chain`, 400},
		{"cycle through the subject", func() url.Values {
			return exchangeForm(w.userToken(t, map[string]any{"sub": agentA}), "agent:b", "read")
		}, nil, CodeInvalidGrant, `actor "agent-a" is the subject of the delegation`, 400},
		{"may_act", func() url.Values {
			return exchangeForm(w.userToken(t, map[string]any{"may_act": map[string]any{"sub": []any{"agent-z", "agent-y"}}}), "agent:b", "read")
		}, nil, CodeUnauthorizedClient, `may_act does not name actor "agent-a"`, 400},
		{"may_act of another issuer", func() url.Values {
			return exchangeForm(w.userToken(t, map[string]any{"may_act": map[string]any{"sub": agentA, "iss": idpIssuer}}), "agent:b", "read")
		}, nil, CodeUnauthorizedClient, "may_act names another issuer", 400},
		{"unknown subject issuer", func() url.Values {
			return exchangeForm(evil.sign(t, map[string]any{"sub": "alice", "aud": "agent:a", "scope": "read"}), "agent:b", "read")
		}, nil, CodeInvalidGrant, "subject token refused: its issuer is not trusted by this STS", 400},
		{"bad signature", func() url.Values {
			return exchangeForm(other.sign(t, map[string]any{"sub": "alice", "aud": "agent:a", "scope": "read"}), "agent:b", "read")
		}, nil, CodeInvalidGrant, "subject token refused: its signature does not verify", 400},
		{"subject for an audience the STS does not accept", func() url.Values {
			return exchangeForm(w.userToken(t, map[string]any{"aud": "elsewhere"}), "agent:b", "read")
		}, nil, CodeInvalidGrant, "subject token refused: its audience is not one this STS accepts", 400},
		{"expired subject", func() url.Values {
			return exchangeForm(w.userToken(t, map[string]any{"exp": time.Now().Add(-time.Hour).Unix()}), "agent:b", "read")
		}, nil, CodeInvalidGrant, "subject token refused: it has expired", 400},
		{"unknown target", func() url.Values { return exchangeForm(w.userToken(t, nil), "agent:nowhere", "read") }, nil,
			CodeInvalidTarget, `"agent:nowhere" is not a target of this STS`, 400},
		{"wrong client secret", func() url.Values { return exchangeForm(w.userToken(t, nil), "agent:b", "read") },
			func(f url.Values) answer { return w.post(t, f, agentA, "not-the-secret") },
			CodeInvalidClient, "client authentication failed", 401},
		{"unknown client", func() url.Values { return exchangeForm(w.userToken(t, nil), "agent:b", "read") },
			func(f url.Values) answer { return w.post(t, f, "agent-q", secretA) },
			CodeInvalidClient, "client authentication failed", 401},
		{"actor token from another key", func() url.Values {
			f := exchangeForm(w.userToken(t, nil), "agent:b", "read")
			f.Set("actor_token", newIssuer(t, spireIssuer, "spire-1").sign(t, map[string]any{"sub": agentB, "aud": stsAudience}))
			f.Set("actor_token_type", TokenTypeJWT)
			return f
		}, func(f url.Values) answer { return w.post(t, f, "", "") },
			CodeInvalidClient, "actor token refused: its signature does not verify", 401},
		{"actor token that is delegated", func() url.Values {
			f := exchangeForm(w.userToken(t, nil), "agent:b", "read")
			f.Set("actor_token", w.spire.sign(t, map[string]any{"sub": "alice", "aud": stsAudience, "act": map[string]any{"sub": agentB}}))
			f.Set("actor_token_type", TokenTypeJWT)
			return f
		}, func(f url.Values) answer { return w.post(t, f, "", "") },
			CodeInvalidClient, "the actor token is itself delegated", 401},
		{"actor token of another agent than the client", func() url.Values {
			f := exchangeForm(w.userToken(t, nil), "agent:b", "read")
			f.Set("actor_token", w.svid(t, agentB))
			f.Set("actor_token_type", TokenTypeJWT)
			return f
		}, nil, CodeInvalidClient, `the actor token names "spiffe://example.org/agent-b" but the client authenticated as "agent-a"`, 401},
		{"no actor at all", func() url.Values { return exchangeForm(w.userToken(t, nil), "agent:b", "read") },
			func(f url.Values) answer { return w.post(t, f, "", "") },
			CodeInvalidClient, "no actor credential", 401},
		{"the subject's txn is not a chain id", func() url.Values {
			return exchangeForm(w.userToken(t, map[string]any{"txn": "a b\nc"}), "agent:b", "read")
		}, nil, CodeInvalidGrant, "txn is not a chain id", 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			as := tc.as
			if as == nil {
				as = func(f url.Values) answer { return w.asA(t, f) }
			}
			a := as(tc.form())
			if a.Status != tc.status || a.Error != tc.code || !strings.Contains(a.Description, tc.want) || a.AccessToken != "" {
				t.Fatalf("got %d %s %q (token %t), want %d %s %q", a.Status, a.Error, a.Description, a.AccessToken != "",
					tc.status, tc.code, tc.want)
			}
			if tc.code == CodeInvalidClient && tc.as != nil && strings.Contains(tc.name, "client") &&
				a.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("invalid_client after HTTP Basic without WWW-Authenticate")
			}
		})
	}
}

// TestMayAct: a may_act naming the actor (string or list) is honoured;
// may_act: require refuses a subject token from another issuer without one,
// but lets the STS's own tokens continue the delegation.
//
// Threat: an agent exchanges a token its caller meant for another agent, or
// (with require) one whose user never said who may act for them.
// Defence: may_act is checked against the authenticated actor; under
// require, its absence on a token entering the STS is unauthorized_client.
func TestMayAct(t *testing.T) {
	w := startSTS(t, func(c *config.STS) { c.MayAct = config.STSMayActRequire })
	for _, mayAct := range []any{agentA, []any{"agent-z", agentA}} {
		a := w.asA(t, exchangeForm(w.userToken(t, map[string]any{"may_act": map[string]any{"sub": mayAct}}), "agent:b", "read"))
		if a.Status != http.StatusOK {
			t.Fatalf("may_act %v: %+v", mayAct, a)
		}
		if _, copied := claimsOf(t, a.AccessToken)["may_act"]; copied {
			t.Errorf("may_act is copied into the issued token")
		}
		// The STS's own token continues without may_act.
		if b := w.asB(t, exchangeForm(a.AccessToken, "agent:c", "read")); b.Status != http.StatusOK {
			t.Fatalf("second hop under require: %+v", b)
		}
	}
	a := w.asA(t, exchangeForm(w.userToken(t, nil), "agent:b", "read"))
	if a.Status != http.StatusBadRequest || a.Error != CodeUnauthorizedClient || !strings.Contains(a.Description, "requires one") {
		t.Fatalf("no may_act under require: %+v", a)
	}
}

// TestSubjectAudienceBinding: with subject_audience, only the agent a token
// was issued to can exchange it.
//
// Threat: a token leaked to (or forwarded to) a third agent is exchanged by
// it, which then appears in the chain as a legitimate hop.
// Defence: the subject token's aud must contain subject_audience with the
// authenticated actor's id; otherwise invalid_grant.
func TestSubjectAudienceBinding(t *testing.T) {
	w := startSTS(t, func(c *config.STS) { c.SubjectAudience = "agent:{actor}" })
	// agent-a's own token names agent:agent-a besides agent:x, which the IdP's
	// audiences accept.
	ok := w.asA(t, exchangeForm(w.userToken(t, map[string]any{"aud": []any{"agent:x", "agent:agent-a"}}), "agent:b", "read"))
	if ok.Status != http.StatusOK {
		t.Fatalf("the holder's own token: %+v", ok)
	}
	a := w.asA(t, exchangeForm(w.userToken(t, map[string]any{"aud": "agent:x"}), "agent:b", "read"))
	if a.Error != CodeInvalidGrant || !strings.Contains(a.Description, `was not issued to actor "agent-a"`) {
		t.Fatalf("a token for another agent: %+v", a)
	}
}

// TestActorTokenSeparation: a client-credentials actor token works as an
// actor token and nothing else; an exchanged token is not an actor token.
//
// Threat: a token of one kind is replayed as the other: an actor token (no
// authority of its own) as a subject token, or an exchanged token (someone
// else's authority) as the actor's credential.
// Defence: actor tokens are addressed to the STS's issuer, which can never be
// a target; the actor verifier accepts only that audience.
func TestActorTokenSeparation(t *testing.T) {
	w := startSTS(t, nil)
	cc := w.post(t, url.Values{"grant_type": {GrantClientCredentials}}, agentA, secretA)
	if cc.Status != http.StatusOK || cc.Scope != "" {
		t.Fatalf("client_credentials: %+v", cc)
	}
	if c := claimsOf(t, cc.AccessToken); c["sub"] != agentA || c["aud"] != w.sts.Issuer() || c["act"] != nil {
		t.Fatalf("actor token claims %v", c)
	}
	f := exchangeForm(w.userToken(t, nil), "agent:b", "read")
	f.Set("actor_token", cc.AccessToken)
	f.Set("actor_token_type", TokenTypeAccessToken)
	ex := w.post(t, f, "", "")
	if ex.Status != http.StatusOK {
		t.Fatalf("exchange with the client-credentials actor token: %+v", ex)
	}
	if act, _ := claimsOf(t, ex.AccessToken)["act"].(map[string]any); act["sub"] != agentA {
		t.Fatalf("act = %v", act)
	}
	if a := w.asB(t, exchangeForm(cc.AccessToken, "agent:c", "")); a.Error != CodeInvalidGrant ||
		!strings.Contains(a.Description, "audience is not one this STS accepts") {
		t.Errorf("actor token as subject: %+v", a)
	}
	f = exchangeForm(w.userToken(t, nil), "agent:b", "read")
	f.Set("actor_token", ex.AccessToken)
	f.Set("actor_token_type", TokenTypeAccessToken)
	if a := w.post(t, f, "", ""); a.Error != CodeInvalidClient {
		t.Errorf("exchanged token as actor token: %+v", a)
	}
	if a := w.post(t, url.Values{"grant_type": {GrantClientCredentials}, "scope": {"read"}}, agentA, secretA); a.Error != CodeInvalidScope {
		t.Errorf("client_credentials with a scope: %+v", a)
	}
	if a := w.post(t, url.Values{"grant_type": {GrantClientCredentials}}, "", ""); a.Error != CodeInvalidClient {
		t.Errorf("client_credentials without Basic: %+v", a)
	}
}

// TestTokenRequestShape: what RFC 6749 says a token request is, strictly.
//
// Threat: a request read two ways (a parameter twice, parameters in the URL
// that proxies log, a secret in the body) or an oversized one.
// Defence: each is refused with invalid_request (invalid_client for the
// client's credentials) before anything is verified.
func TestTokenRequestShape(t *testing.T) {
	w := startSTS(t, nil)
	subject := w.userToken(t, nil)
	post := func(ct, query, body string) answer {
		req, err := http.NewRequest(http.MethodPost, w.sts.TokenEndpoint()+query, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", ct)
		req.SetBasicAuth(agentA, secretA)
		return do(t, req)
	}
	form := exchangeForm(subject, "agent:b", "read").Encode()
	const ct = "application/x-www-form-urlencoded"
	for _, tc := range []struct {
		name, ct, query, body, code, want string
	}{
		{"a parameter twice", ct, "", form + "&scope=pay", CodeInvalidRequest, "parameter scope is given 2 times"},
		{"parameters in the URL", ct, "?scope=pay", form, CodeInvalidRequest, "parameters belong in the body"},
		{"JSON body", "application/json", "", `{"grant_type":"x"}`, CodeInvalidRequest, "must be application/x-www-form-urlencoded"},
		{"secret in the body", ct, "", form + "&client_secret=x", CodeInvalidClient, "client_secret in the body"},
		{"unknown grant", ct, "", "grant_type=password", CodeUnsupportedGrantType, `"password" is not supported`},
		{"no grant", ct, "", "scope=read", CodeInvalidRequest, "grant_type is required"},
		{"two targets", ct, "", form + "&resource=agent:c", CodeInvalidTarget, "one target per exchange"},
		{"bad scope", ct, "", strings.Replace(form, "scope=read", "scope=read%22x", 1), CodeInvalidScope, "does not allow"},
		{"control character", ct, "", form + "&tenant=a%0Ab", CodeInvalidRequest, "not printable"},
		{"unknown token type", ct, "", strings.Replace(form, "access_token", "saml2", 1), CodeInvalidRequest, "subject_token_type must be"},
		{"unknown requested type", ct, "", form + "&requested_token_type=urn:ietf:params:oauth:token-type:id_token", CodeInvalidRequest, "requested_token_type"},
		{"too large", ct, "", form + "&x=" + strings.Repeat("a", maxBodyBytes), CodeInvalidRequest, "larger than"},
	} {
		a := post(tc.ct, tc.query, tc.body)
		if a.Error != tc.code || !strings.Contains(a.Description, tc.want) {
			t.Errorf("%s: %d %s %q, want %s %q", tc.name, a.Status, a.Error, a.Description, tc.code, tc.want)
		}
	}
	// requested_token_type jwt is issued as jwt.
	if a := post(ct, "", form+"&requested_token_type="+url.QueryEscape(TokenTypeJWT)); a.IssuedTokenType != TokenTypeJWT {
		t.Errorf("requested jwt: %+v", a)
	}
	resp, err := http.Get(w.sts.TokenEndpoint())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost {
		t.Errorf("GET /token: %d %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// TestDiscoveryAndJWKS: the RFC 8414 document names the endpoints, and the
// JWKS it points at verifies issued tokens with go-jose.
func TestDiscoveryAndJWKS(t *testing.T) {
	w := startSTS(t, nil)
	resp, err := http.Get(w.sts.DiscoveryURL())
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Issuer        string   `json:"issuer"`
		TokenEndpoint string   `json:"token_endpoint"`
		JWKSURI       string   `json:"jwks_uri"`
		Grants        []string `json:"grant_types_supported"`
		AuthMethods   []string `json:"token_endpoint_auth_methods_supported"`
	}
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if doc.Issuer != w.sts.Issuer() || doc.TokenEndpoint != w.sts.TokenEndpoint() || doc.JWKSURI != w.sts.JWKSURL() ||
		strings.Join(doc.Grants, " ") != GrantTokenExchange+" "+GrantClientCredentials || strings.Join(doc.AuthMethods, " ") != "client_secret_basic" {
		t.Fatalf("discovery = %+v", doc)
	}
	resp, err = http.Get(doc.JWKSURI)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/jwk-set+json" {
		t.Errorf("JWKS content type %q", ct)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(raw, &set); err != nil || len(set.Keys) != 1 || !set.Keys[0].IsPublic() {
		t.Fatalf("JWKS %s: %v", raw, err)
	}
	a := w.asA(t, exchangeForm(w.userToken(t, nil), "agent:b", "read"))
	jws, err := jose.ParseSignedCompact(a.AccessToken, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	hdr := jws.Signatures[0].Header
	keys := set.Key(hdr.KeyID)
	if len(keys) != 1 || hdr.ExtraHeaders["typ"] != "at+jwt" {
		t.Fatalf("kid %q typ %v: keys %d", hdr.KeyID, hdr.ExtraHeaders["typ"], len(keys))
	}
	if _, err := jws.Verify(keys[0]); err != nil {
		t.Fatalf("the published key does not verify an issued token: %v", err)
	}
}

// TestIssuerPathAndKeyFile: an issuer with a path serves its endpoints under
// it and its discovery document where RFC 8414 puts it; a key file is
// generated 0600 and kept across restarts; a key file others can read is
// refused.
func TestIssuerPathAndKeyFile(t *testing.T) {
	dir := t.TempDir()
	keyFile := dir + "/keys/sts.jwk"
	addr := freeLoopback(t)
	w := startSTS(t, func(c *config.STS) {
		c.Listen, c.Issuer, c.SigningKeyFile = addr, "http://"+addr+"/sts", keyFile
	})
	if got := w.sts.DiscoveryURL(); got != "http://"+addr+"/.well-known/oauth-authorization-server/sts" {
		t.Fatalf("discovery URL %s", got)
	}
	for _, u := range []string{w.sts.DiscoveryURL(), w.sts.Issuer() + DiscoveryPath, w.sts.JWKSURL()} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d", u, resp.StatusCode)
		}
	}
	if a := w.asA(t, exchangeForm(w.userToken(t, nil), "agent:b", "read")); a.Status != http.StatusOK {
		t.Fatalf("exchange under an issuer path: %+v", a)
	}
	first := w.sts.key.kid
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.sts.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := New(w.sts.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.key.kid != first {
		t.Errorf("the key file gave another key after a restart")
	}
	if err := os.Chmod(keyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(w.sts.cfg, nil); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Errorf("a world-readable key file: %v", err)
	}
}

// TestChainGrowsByOneHop: the chain an exchange issues is the subject
// token's plus the actor, exactly. A token without act names its agent in
// azp (the caller the actor's own writ saw): that agent is the first hop.
// The actor exchanging a token issued to itself (azp is the actor) starts
// the chain: it is not its own predecessor.
func TestChainGrowsByOneHop(t *testing.T) {
	w := startSTS(t, nil)
	for name, c := range map[string]struct {
		azp  string
		want []string // the issued token's act chain, outermost first
	}{
		"issued to another agent": {"orchestrator", []string{agentA, "orchestrator"}},
		"issued to the actor":     {agentA, []string{agentA}},
	} {
		a := w.asA(t, exchangeForm(w.userToken(t, map[string]any{"azp": c.azp}), "agent:b", "read"))
		if a.Status != http.StatusOK {
			t.Fatalf("%s: %+v", name, a)
		}
		var got []string
		for act, _ := claimsOf(t, a.AccessToken)["act"].(map[string]any); act != nil; act, _ = act["act"].(map[string]any) {
			got = append(got, act["sub"].(string))
		}
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%s: act chain %v, want %v", name, got, c.want)
		}
	}
}
