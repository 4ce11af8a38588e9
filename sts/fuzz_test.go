package sts

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// FuzzTokenEndpoint feeds arbitrary forms and Authorization headers to the
// token endpoint (parsing, client authentication, token verification and
// the exchange rules, one handler call each). It must never panic; every
// answer is RFC 6749 JSON; a refusal carries a known code and no token; and
// whatever is issued is signed by the STS, for one of its targets, with no
// scope beyond the one the seeds' subject tokens hold.
func FuzzTokenEndpoint(f *testing.F) {
	w := startSTS(f, nil)
	st := w.sts.state()
	h := w.sts.handler(st)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(agentA+":"+secretA))
	subject := w.userToken(f, nil)
	chained := w.userToken(f, map[string]any{"act": map[string]any{"sub": "x", "act": map[string]any{"sub": "y"}},
		"may_act": map[string]any{"sub": []any{agentA}}, "txn": "chain-1"})
	for _, form := range []url.Values{
		exchangeForm(subject, "agent:b", "read write"),
		exchangeForm(chained, "agent:c", "pay"),
		exchangeForm(subject, "agent:b", "read admin"),
		{"grant_type": {GrantClientCredentials}},
		{"grant_type": {GrantTokenExchange}, "subject_token": {"a.b.c"}, "subject_token_type": {TokenTypeJWT}, "resource": {"agent:a"}},
	} {
		f.Add(form.Encode(), basic)
		f.Add(form.Encode()+"&classification=internal&tenant=t1&requested_lifetime=60", basic)
	}
	f.Add(exchangeForm(subject, "agent:b", "read").Encode()+"&actor_token="+w.svid(f, agentB)+"&actor_token_type="+url.QueryEscape(TokenTypeJWT), "")
	f.Add("grant_type=password&username=x", "Basic Og==")
	f.Add("%zz", "Bearer x")
	known := []string{CodeInvalidRequest, CodeInvalidClient, CodeInvalidGrant, CodeUnauthorizedClient,
		CodeUnsupportedGrantType, CodeInvalidScope, CodeInvalidTarget}
	pub := w.sts.key.public()
	f.Fuzz(func(t *testing.T, body, auth string) {
		req := httptest.NewRequest(http.MethodPost, TokenPath, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var a struct {
			AccessToken string `json:"access_token"`
			Scope       string `json:"scope"`
			Error       string `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
			t.Fatalf("answer %d is not JSON: %q", rec.Code, rec.Body.Bytes())
		}
		if rec.Code != http.StatusOK {
			if !slices.Contains(known, a.Error) || a.AccessToken != "" {
				t.Fatalf("refusal %d %q with token %t", rec.Code, a.Error, a.AccessToken != "")
			}
			return
		}
		jws, err := jose.ParseSignedCompact(a.AccessToken, []jose.SignatureAlgorithm{jose.ES256})
		if err != nil {
			t.Fatal(err)
		}
		payload, err := jws.Verify(pub)
		if err != nil {
			t.Fatalf("an issued token does not verify: %v", err)
		}
		var c struct {
			Iss, Aud, Scope string
			Exp             int64
		}
		if err := json.Unmarshal(payload, &c); err != nil {
			t.Fatal(err)
		}
		if c.Iss != st.issuer || (!st.audiences[c.Aud] && c.Aud != st.issuer) || c.Exp > time.Now().Add(w.sts.cfg.MaxLifetime).Unix()+1 {
			t.Fatalf("issued %+v", c)
		}
		for _, v := range strings.Fields(c.Scope) {
			if !slices.Contains([]string{"read", "write", "pay"}, v) {
				t.Fatalf("issued scope %q beyond the subject's", c.Scope)
			}
		}
	})
}
