package identity

import (
	"errors"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// TestVerifyToken: a token given as a string is verified exactly as a bearer
// token, through the same cache; what is not a JWT, is too long or is empty
// fails with ErrTokenInvalid; a bad signature and a foreign audience say
// which check failed (ErrBadSignature, ErrAudienceRejected) and still wrap
// ErrTokenInvalid.
//
// Threat: an RFC 8693 subject or actor token is checked by a second, weaker
// verifier (no audience, no algorithm allow-list), or a static token string
// passes as a JWT.
// Defence: VerifyToken is identifyBearer's JWT path: the same issuers,
// algorithms, audience and expiry checks, and no static-token fallback.
func TestVerifyToken(t *testing.T) {
	clock := newClock()
	k := newKey(t, jose.ES256, "ec-1")
	// The issuer's keys come from code, not from a file or URL.
	r2, err := newResolver(Config{JWT: []IssuerConfig{{Issuer: testIssuer, Audiences: []string{testAudience}}}},
		clock.Now, WithIssuerKeys(testIssuer, []jose.JSONWebKey{{Key: k.priv, KeyID: "ec-1", Algorithm: "ES256"}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r2.Close)
	tok := k.sign(t, claimsAt(clock.Now()))
	c, err := r2.VerifyToken(tok)
	if err != nil || c.AgentID != "payments-investigator" || c.UserID != "u-42" || len(c.Chain) != 1 {
		t.Fatalf("VerifyToken = %+v, %v", c, err)
	}
	if _, err := r2.VerifyToken(tok); err != nil {
		t.Fatal(err)
	}
	if hits, _ := r2.CacheStats(); hits != 1 {
		t.Errorf("the second verification was not a cache hit (%d hits)", hits)
	}
	other := newKey(t, jose.ES256, "ec-1")
	_, err = r2.VerifyToken(other.sign(t, claimsAt(clock.Now())))
	if !errors.Is(err, ErrTokenInvalid) || !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), "signature does not verify") {
		t.Errorf("another key: %v", err)
	}
	c2 := claimsAt(clock.Now())
	c2["aud"] = "elsewhere"
	_, err = r2.VerifyToken(k.sign(t, c2))
	if !errors.Is(err, ErrTokenInvalid) || !errors.Is(err, ErrAudienceRejected) || errors.Is(err, ErrBadSignature) {
		t.Errorf("another audience: %v", err)
	}
	for _, bad := range []string{"", "dev-token-kyc", strings.Repeat("a", maxTokenBytes+1)} {
		if c, err := r2.VerifyToken(bad); !errors.Is(err, ErrTokenInvalid) || c.Authenticated {
			t.Errorf("VerifyToken(%.20q) = %+v, %v", bad, c, err)
		}
	}
	// Code keys and a file or URL are one too many.
	_, err = newResolver(Config{JWT: []IssuerConfig{{Issuer: testIssuer, Audiences: []string{testAudience}, JWKSFile: "x.json"}}},
		clock.Now, WithIssuerKeys(testIssuer, []jose.JSONWebKey{k.jwk}), WithConfigKey("subject_issuers"))
	if err == nil || !strings.Contains(err.Error(), "subject_issuers[0]: its keys are given by the program") {
		t.Errorf("code keys and a file: %v", err)
	}

	// VerifyFor: the audience named, not the configured ones, and no cache.
	c3 := claimsAt(clock.Now())
	c3["aud"] = []any{"x", "agent:b"}
	forB := k.sign(t, c3)
	if c, err := r2.VerifyFor(forB, "agent:b"); err != nil || c.AgentID != "payments-investigator" {
		t.Errorf("VerifyFor agent:b = %+v, %v", c, err)
	}
	if _, err := r2.VerifyFor(forB, testAudience); !errors.Is(err, ErrAudienceRejected) {
		t.Errorf("VerifyFor another audience: %v", err)
	}
	if _, err := r2.VerifyToken(forB); !errors.Is(err, ErrAudienceRejected) {
		t.Errorf("a token VerifyFor accepted passes VerifyToken's configured audiences: %v", err)
	}
	if _, err := r2.VerifyFor(tok, ""); !errors.Is(err, ErrAudienceRejected) {
		t.Errorf("VerifyFor no audience: %v", err)
	}
}
