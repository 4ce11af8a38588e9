package identity

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// TestRefusalDetail: every refused credential's error is a *Refusal naming
// the failure's code, what the credential presented (iss, aud, kid, alg)
// and what writ accepts of the issuer it named (or the issuers, when it
// named none writ knows); it wraps the sentinel as before, and the token is
// nowhere in it.
//
// Threat: an operator cannot tell why a token was refused without the token
// itself (which then lands in a log or a ticket), or the detail written for
// them carries the token's signature.
// Defence: Refusal quotes iss, aud, kid and alg only, each bounded, and the
// accepted issuers, audiences and key ids from writ's own config.
func TestRefusalDetail(t *testing.T) {
	clock := newClock()
	k := newKey(t, jose.ES256, "ec-1")
	r, err := newResolver(Config{JWT: []IssuerConfig{{Issuer: testIssuer, Audiences: []string{testAudience}},
		{Issuer: "https://second.example", Audiences: []string{"x"}}}},
		clock.Now, WithIssuerKeys(testIssuer, []jose.JSONWebKey{{Key: k.priv, KeyID: "ec-1", Algorithm: "ES256"}}),
		WithIssuerKeys("https://second.example", []jose.JSONWebKey{{Key: k.priv, KeyID: "ec-2", Algorithm: "ES256"}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	with := func(f func(map[string]any)) map[string]any { c := claimsAt(clock.Now()); f(c); return c }
	cases := []struct {
		name      string
		tok       string
		code      string
		sentinel  error
		presented Presented
		accepted  Accepted
	}{
		{"wrong audience", k.sign(t, with(func(c map[string]any) { c["aud"] = []any{"payments-api", "ledger"} })),
			CodeAudienceRejected, ErrAudienceRejected,
			Presented{Issuer: testIssuer, Audiences: []string{"payments-api", "ledger"}, KeyID: "ec-1", Algorithm: "ES256"},
			Accepted{Issuers: []string{testIssuer}, Audiences: []string{testAudience}, KeyIDs: []string{"ec-1"}}},
		{"unknown issuer", k.sign(t, with(func(c map[string]any) { c["iss"] = "https://elsewhere.example" })),
			CodeUnknownIssuer, ErrUnknownIssuer,
			Presented{Issuer: "https://elsewhere.example", Audiences: []string{testAudience}, KeyID: "ec-1", Algorithm: "ES256"},
			Accepted{Issuers: []string{testIssuer, "https://second.example"}}},
		{"unknown key", newKey(t, jose.ES256, "rotated-9").sign(t, claimsAt(clock.Now())),
			CodeUnknownKey, ErrUnknownKey,
			Presented{Issuer: testIssuer, Audiences: []string{testAudience}, KeyID: "rotated-9", Algorithm: "ES256"},
			Accepted{Issuers: []string{testIssuer}, Audiences: []string{testAudience}, KeyIDs: []string{"ec-1"}}},
		{"expired", k.sign(t, with(func(c map[string]any) { c["exp"] = clock.Now().Add(-time.Hour).Unix() })),
			CodeTokenExpired, ErrTokenExpired,
			Presented{Issuer: testIssuer, Audiences: []string{testAudience}, KeyID: "ec-1", Algorithm: "ES256"},
			Accepted{Issuers: []string{testIssuer}, Audiences: []string{testAudience}, KeyIDs: []string{"ec-1"}}},
		{"static token", "dev-token-not-known", CodeTokenInvalid, ErrTokenInvalid, Presented{}, Accepted{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := r.Identify(t.Context(), bearerCreds(c.tok))
			var ref *Refusal
			if !errors.As(err, &ref) || !errors.Is(err, c.sentinel) || Code(err) != c.code || ref.Code != c.code {
				t.Fatalf("Identify: %T %v (code %q)", err, err, Code(err))
			}
			p, a := ref.Presented, ref.Accepted
			if p.Issuer != c.presented.Issuer || !slices.Equal(p.Audiences, c.presented.Audiences) || p.KeyID != c.presented.KeyID ||
				p.Algorithm != c.presented.Algorithm {
				t.Errorf("presented = %+v, want %+v", p, c.presented)
			}
			if !slices.Equal(a.Issuers, c.accepted.Issuers) || !slices.Equal(a.Audiences, c.accepted.Audiences) ||
				!slices.Equal(a.KeyIDs, c.accepted.KeyIDs) {
				t.Errorf("accepted = %+v, want %+v", a, c.accepted)
			}
			sig := c.tok[strings.LastIndex(c.tok, ".")+1:]
			if dump := fmt.Sprintf("%+v %v", *ref, err); strings.Contains(dump, c.tok) || strings.Contains(dump, sig) {
				t.Errorf("the refusal quotes the token: %s", dump)
			}
		})
	}
	// A hostile token's aud list is quoted bounded.
	many := make([]any, 40)
	for i := range many {
		many[i] = strings.Repeat("a", 200)
	}
	_, err = r.Identify(t.Context(), bearerCreds(k.sign(t, with(func(c map[string]any) { c["aud"] = many }))))
	var ref *Refusal
	if !errors.As(err, &ref) || len(ref.Presented.Audiences) != maxPresentedAudiences || len(ref.Presented.Audiences[0]) > 70 {
		t.Errorf("forty long audiences: %+v", ref)
	}
}
