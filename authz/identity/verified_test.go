package identity

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestVerifiedClaims: claims verified in front of writ (Envoy's jwt_authn) map to
// the same Caller as the token verified by writ itself, and keep every claim check
// that is not the signature's.
func TestVerifiedClaims(t *testing.T) {
	clock := newClock()
	k := newKey(t, "ES256", "k1")
	srv := newJWKSServer(t, k)
	r := newTestResolver(t, Config{JWT: []IssuerConfig{issuerFor(srv)}}, clock)
	now := clock.Now()

	// A configured issuer: the same Caller as Identify's, claim for claim.
	claims := claimsAt(now)
	viaToken, err := r.Identify(t.Context(), bearerCreds(k.sign(t, claims)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.VerifiedClaims(structClaims(now))
	if err != nil {
		t.Fatal(err)
	}
	if got.AgentID != viaToken.AgentID || got.UserID != viaToken.UserID || got.Tenant != viaToken.Tenant ||
		!slices.Equal(got.Chain, viaToken.Chain) || !slices.Equal(got.Scopes, viaToken.Scopes) ||
		got.Method != MethodJWT || !got.Authenticated || !reflect.DeepEqual(got.Claims, viaToken.Claims) {
		t.Errorf("verified claims %+v, token %+v", got, viaToken)
	}
	// Each carries a digest of its claims (of the map here, of the verified
	// payload's bytes for the token), so neither is encoded again per request.
	if got.ClaimsDigest != DigestClaims(got.Claims) || viaToken.ClaimsDigest == ([32]byte{}) ||
		viaToken.ClaimsDigest == DigestClaims(viaToken.Claims) {
		t.Errorf("digests: verified %x (want DigestClaims), token %x (want its payload's)", got.ClaimsDigest, viaToken.ClaimsDigest)
	}

	// A configured issuer still has its audience checked.
	wrongAud := structClaims(now)
	wrongAud["aud"] = "someone-else"
	if _, err := r.VerifiedClaims(wrongAud); !errors.Is(err, ErrTokenInvalid) {
		t.Errorf("wrong audience: %v", err)
	}

	// An issuer only Envoy verifies: default claim names, no audience check.
	other := structClaims(now)
	other["iss"], other["aud"] = "https://idp.elsewhere", "envoy-only"
	got, err = r.VerifiedClaims(other)
	if err != nil || got.Issuer != "https://idp.elsewhere" || got.AgentID != "payments-investigator" ||
		got.Tenant != "wholesale" || !slices.Equal(got.Chain, []string{"orchestrator"}) {
		t.Errorf("unconfigured issuer: %+v %v", got, err)
	}

	// Checks that are not the signature's still apply.
	for name, c := range map[string]struct {
		edit func(map[string]any)
		want error
	}{
		"no iss":      {func(m map[string]any) { delete(m, "iss") }, ErrUnknownIssuer},
		"no exp":      {func(m map[string]any) { delete(m, "exp") }, ErrTokenInvalid},
		"expired":     {func(m map[string]any) { m["exp"] = float64(now.Add(-time.Hour).Unix()) }, ErrTokenExpired},
		"not yet":     {func(m map[string]any) { m["nbf"] = float64(now.Add(time.Hour).Unix()) }, ErrTokenNotYetValid},
		"bad act":     {func(m map[string]any) { m["act"] = "orchestrator" }, ErrClaimType},
		"deep act":    {func(m map[string]any) { m["act"] = nest(17) }, ErrChainTooDeep},
		"bad tenant":  {func(m map[string]any) { m["tenant"] = 7.0 }, ErrClaimType},
		"bad classif": {func(m map[string]any) { m["classification"] = "secret" }, ErrClaimType},
	} {
		m := structClaims(now)
		m["iss"], m["aud"] = "https://idp.elsewhere", "x"
		c.edit(m)
		if got, err := r.VerifiedClaims(m); !errors.Is(err, c.want) || got.Authenticated {
			t.Errorf("%s: %+v %v, want %v", name, got, err, c.want)
		}
	}
}

// structClaims are claimsAt(now) with numbers as float64, as a protobuf Struct (and
// encoding/json) decodes them.
func structClaims(now time.Time) map[string]any {
	m := claimsAt(now)
	for _, n := range []string{"iat", "exp"} {
		m[n] = float64(m[n].(int64))
	}
	return m
}

// TestDigestClaimsNotJSON: claims JSON cannot encode (a NaN from Envoy's
// metadata) still get a digest of their own, never the shared zero digest:
// two such claim sets that differ elsewhere never share a decision key.
func TestDigestClaimsNotJSON(t *testing.T) {
	admin := DigestClaims(map[string]any{"x": math.NaN(), "role": "admin"})
	user := DigestClaims(map[string]any{"x": math.NaN(), "role": "user"})
	if admin == ([32]byte{}) || user == ([32]byte{}) {
		t.Fatal("the zero digest, which means not computed")
	}
	if admin == user {
		t.Fatal("claim sets that differ share a digest")
	}
	if again := DigestClaims(map[string]any{"role": "admin", "x": math.NaN()}); again != admin {
		t.Fatal("the same claims gave two digests")
	}
}
