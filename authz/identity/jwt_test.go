package identity

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// nest builds an act claim n levels deep: hop-1 outermost.
func nest(n int) map[string]any {
	var act map[string]any
	for i := n; i >= 1; i-- {
		next := map[string]any{"sub": "hop-" + strconv.Itoa(i)}
		if act != nil {
			next["act"] = act
		}
		act = next
	}
	return act
}

// unsigned hand-builds a token with alg "none" and an empty signature.
func unsigned(t *testing.T, claims map[string]any) string {
	t.Helper()
	h, _ := json.Marshal(map[string]any{"alg": "none", "typ": "JWT", "kid": "rsa-1"})
	p, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p) + "."
}

// hmacWithPublicKey signs with HS256 using the RSA public key's PEM as the secret:
// the key-confusion attack on verifiers that let the token pick the algorithm.
func hmacWithPublicKey(t *testing.T, k testKey, claims map[string]any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k.jwk.Key)
	if err != nil {
		t.Fatal(err)
	}
	secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: jose.JSONWebKey{Key: secret, KeyID: k.jwk.KeyID}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := json.Marshal(claims)
	jws, err := s.Sign(p)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := jws.CompactSerialize()
	return tok
}

// Threat: a forged, replayed or confused token: alg none, HS256 signed with the
// public key, an expired or not-yet-valid token, another audience or issuer, an
// unknown key. Defence: asymmetric algorithms only, issuer, audience, exp and nbf
// checked, keys only from the issuer's JWKS.
func TestJWT(t *testing.T) {
	clock := newClock()
	rsaKey, ecKey, edKey := newKey(t, jose.RS256, "rsa-1"), newKey(t, jose.ES256, "ec-1"), newKey(t, jose.EdDSA, "ed-1")
	srv := newJWKSServer(t, rsaKey, ecKey, edKey)
	r := newTestResolver(t, Config{JWT: []IssuerConfig{issuerFor(srv)}}, clock)
	now := clock.Now()

	with := func(mut func(c map[string]any)) map[string]any {
		c := claimsAt(now)
		mut(c)
		return c
	}
	delegated := func(t *testing.T, c Caller) {
		t.Helper()
		if !c.Authenticated || c.Method != MethodJWT || c.Issuer != testIssuer || c.UserID != "u-42" ||
			c.AgentID != "payments-investigator" || !slices.Equal(c.Chain, []string{"orchestrator"}) ||
			c.Tenant != "wholesale" || !slices.Equal(c.Scopes, []string{"delegate", "tasks.read"}) ||
			!c.Expires.Equal(time.Unix(now.Add(time.Hour).Unix(), 0)) || c.Claims["sub"] != "u-42" {
			t.Errorf("caller = %+v", c)
		}
	}
	cases := []struct {
		name  string
		tok   string
		want  error
		check func(*testing.T, Caller)
	}{
		{"RS256", rsaKey.sign(t, claimsAt(now)), nil, delegated},
		{"ES256", ecKey.sign(t, claimsAt(now)), nil, delegated},
		{"EdDSA", edKey.sign(t, claimsAt(now)), nil, delegated},
		{"expired", rsaKey.sign(t, with(func(c map[string]any) { c["exp"] = now.Add(-time.Minute).Unix() })), ErrTokenExpired, nil},
		{"expired within leeway", rsaKey.sign(t, with(func(c map[string]any) { c["exp"] = now.Add(-20 * time.Second).Unix() })), nil, nil},
		{"not yet valid", rsaKey.sign(t, with(func(c map[string]any) { c["nbf"] = now.Add(time.Minute).Unix() })), ErrTokenNotYetValid, nil},
		{"nbf within leeway", rsaKey.sign(t, with(func(c map[string]any) { c["nbf"] = now.Add(20 * time.Second).Unix() })), nil, nil},
		{"no exp", rsaKey.sign(t, with(func(c map[string]any) { delete(c, "exp") })), ErrTokenInvalid, nil},
		{"wrong issuer", rsaKey.sign(t, with(func(c map[string]any) { c["iss"] = "https://evil.example" })), ErrUnknownIssuer, nil},
		{"no issuer", rsaKey.sign(t, with(func(c map[string]any) { delete(c, "iss") })), ErrUnknownIssuer, nil},
		{"wrong audience", rsaKey.sign(t, with(func(c map[string]any) { c["aud"] = "someone-else" })), ErrTokenInvalid, nil},
		{"audience list", rsaKey.sign(t, with(func(c map[string]any) { c["aud"] = []string{"x", testAudience} })), nil, nil},
		{"no audience", rsaKey.sign(t, with(func(c map[string]any) { delete(c, "aud") })), ErrTokenInvalid, nil},
		{"alg none", unsigned(t, claimsAt(now)), ErrTokenInvalid, nil},
		{"HS256 with the RSA public key", hmacWithPublicKey(t, rsaKey, claimsAt(now)), ErrTokenInvalid, nil},
		{"signature by another key", newKey(t, jose.RS256, "rsa-1").sign(t, claimsAt(now)), ErrTokenInvalid, nil},
		{"tenant is a number", rsaKey.sign(t, with(func(c map[string]any) { c["tenant"] = 7 })), ErrClaimType, nil},
		{"scope is an object", rsaKey.sign(t, with(func(c map[string]any) { c["scope"] = map[string]any{"a": 1} })), ErrClaimType, nil},
		{"scp is a list", rsaKey.sign(t, with(func(c map[string]any) { delete(c, "scope"); c["scp"] = []string{"a", "b"} })), nil,
			func(t *testing.T, c Caller) {
				if !slices.Equal(c.Scopes, []string{"a", "b"}) {
					t.Errorf("scopes = %q", c.Scopes)
				}
			}},
		{"scp has a number", rsaKey.sign(t, with(func(c map[string]any) { delete(c, "scope"); c["scp"] = []any{"a", 1} })), ErrClaimType, nil},
		{"act without grants has no hops", rsaKey.sign(t, claimsAt(now)), nil, func(t *testing.T, c Caller) {
			if c.Hops != nil {
				t.Errorf("hops = %+v", c.Hops)
			}
		}},
		{"act with grants", rsaKey.sign(t, with(func(c map[string]any) {
			c["act"] = map[string]any{"sub": "payments-investigator", "scope": "delegate", "tenant": "wholesale", "classification": "internal",
				"act": map[string]any{"sub": "orchestrator", "scope": []any{"delegate", "pay"}, "classification": "restricted"}}
		})), nil, func(t *testing.T, c Caller) {
			want := []Hop{{AgentID: "orchestrator", Scopes: []string{"delegate", "pay"}, HasScopes: true, Classification: "restricted"},
				{AgentID: "payments-investigator", Scopes: []string{"delegate"}, HasScopes: true, Tenant: "wholesale", Classification: "internal"}}
			if fmt.Sprint(c.Hops) != fmt.Sprint(want) || !slices.Equal(c.Chain, []string{"orchestrator"}) || c.AgentID != "payments-investigator" {
				t.Errorf("hops = %+v, chain %q, agent %q", c.Hops, c.Chain, c.AgentID)
			}
		}},
		{"act granting an empty scope", rsaKey.sign(t, with(func(c map[string]any) {
			c["act"] = map[string]any{"sub": "payments-investigator", "scope": ""}
		})), nil, func(t *testing.T, c Caller) {
			if len(c.Hops) != 1 || !c.Hops[0].HasScopes || len(c.Hops[0].Scopes) != 0 {
				t.Errorf("hops = %+v", c.Hops)
			}
		}},
		{"act with an unknown ceiling", rsaKey.sign(t, with(func(c map[string]any) {
			c["act"] = map[string]any{"sub": "payments-investigator", "classification": "secret"}
		})), ErrClaimType, nil},
		{"act with a numeric tenant", rsaKey.sign(t, with(func(c map[string]any) {
			c["act"] = map[string]any{"sub": "payments-investigator", "tenant": 7}
		})), ErrClaimType, nil},
		{"act is a string", rsaKey.sign(t, with(func(c map[string]any) { c["act"] = "orchestrator" })), ErrClaimType, nil},
		{"act.sub is a number", rsaKey.sign(t, with(func(c map[string]any) { c["act"] = map[string]any{"sub": 1} })), ErrClaimType, nil},
		{"act nested 100 deep", rsaKey.sign(t, with(func(c map[string]any) { c["act"] = nest(100) })), ErrChainTooDeep, nil},
		{"act nested 16 deep", rsaKey.sign(t, with(func(c map[string]any) { c["act"] = nest(16) })), nil,
			func(t *testing.T, c Caller) {
				if c.AgentID != "hop-1" || len(c.Chain) != 15 || c.Chain[0] != "hop-16" || c.Chain[14] != "hop-2" {
					t.Errorf("agent %q chain %q", c.AgentID, c.Chain)
				}
			}},
		{"classification", rsaKey.sign(t, with(func(c map[string]any) { c["classification"] = "confidential" })), nil,
			func(t *testing.T, c Caller) {
				if c.Classification != "confidential" {
					t.Errorf("classification = %q", c.Classification)
				}
			}},
		{"txn is the chain id", rsaKey.sign(t, with(func(c map[string]any) { c["txn"] = "q3Zr8sXyT1m0cV2bNf7LkA" })), nil,
			func(t *testing.T, c Caller) {
				if c.ChainID != "q3Zr8sXyT1m0cV2bNf7LkA" {
					t.Errorf("chain id = %q", c.ChainID)
				}
			}},
		{"no txn: no chain id", rsaKey.sign(t, claimsAt(now)), nil,
			func(t *testing.T, c Caller) {
				if c.ChainID != "" {
					t.Errorf("chain id = %q", c.ChainID)
				}
			}},
		{"txn is a number", rsaKey.sign(t, with(func(c map[string]any) { c["txn"] = 7 })), ErrClaimType, nil},
		{"classification unknown", rsaKey.sign(t, with(func(c map[string]any) { c["classification"] = "top-secret" })), ErrClaimType, nil},
		{"classification a number", rsaKey.sign(t, with(func(c map[string]any) { c["data_classification"] = 3 })), ErrClaimType, nil},
		{"exp a string", rsaKey.sign(t, with(func(c map[string]any) { c["exp"] = "tomorrow" })), ErrClaimType, nil},
		{"no act: agent is azp", rsaKey.sign(t, with(func(c map[string]any) { delete(c, "act"); c["azp"] = "kyc"; c["client_id"] = "x" })), nil,
			func(t *testing.T, c Caller) {
				if c.AgentID != "kyc" || c.UserID != "" || c.Chain != nil {
					t.Errorf("caller = %+v", c)
				}
			}},
		{"no act: agent is client_id, then sub", rsaKey.sign(t, with(func(c map[string]any) { delete(c, "act"); c["client_id"] = "svc" })), nil,
			func(t *testing.T, c Caller) {
				if c.AgentID != "svc" {
					t.Errorf("agent = %q", c.AgentID)
				}
			}},
		{"no subject at all", rsaKey.sign(t, with(func(c map[string]any) { delete(c, "act"); delete(c, "sub") })), ErrTokenInvalid, nil},
		{"payload not JSON", "eyJhbGciOiJSUzI1NiJ9.bm90LWpzb24.c2ln", ErrTokenInvalid, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := r.Identify(context.Background(), bearerCreds(tc.tok))
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if err != nil {
				if c.Authenticated || c.Method != MethodAnonymous {
					t.Errorf("failed identify returned %+v, want Anonymous()", c)
				}
				return
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

func TestBearerHeader(t *testing.T) {
	r := newTestResolver(t, Config{}, newClock())
	for name, tc := range map[string]struct {
		h    []string
		want error
	}{
		"no header":        {nil, nil},
		"basic auth":       {[]string{"Basic dXNlcjpwYXNz"}, nil},
		"empty bearer":     {[]string{"Bearer "}, ErrTokenInvalid},
		"two headers":      {[]string{"Bearer a", "Bearer b"}, ErrTokenInvalid},
		"inner whitespace": {[]string{"Bearer a b"}, ErrTokenInvalid},
		"no source for it": {[]string{"bearer opaque-token"}, ErrTokenInvalid},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := r.Identify(context.Background(), Credentials{Header: map[string][]string{"Authorization": tc.h}})
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if c.Authenticated || c.Method != MethodAnonymous {
				t.Errorf("caller = %+v, want anonymous", c)
			}
		})
	}
}

// signRaw signs payload bytes as they are (json.Marshal of a map cannot repeat
// a key): a real RS256/ES256 JWS whose signature verifies.
func (k testKey) signRaw(t *testing.T, payload string) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.priv, KeyID: k.jwk.KeyID}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	jws, err := s.Sign([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestJWTDuplicateClaims: a validly signed token whose payload names a claim
// twice (encoding/json keeps the last, other readers the first) is refused as
// invalid, like a request body with a duplicate key; at any depth, escaped or
// not. The same payload without the repetition verifies.
//
// Threat: a token that names a claim twice is read one way by writ and
// another by the agent's JWT library. Defence: such a token is invalid.
func TestJWTDuplicateClaims(t *testing.T) {
	clock := newClock()
	rsaKey, ecKey := newKey(t, jose.RS256, "rsa-1"), newKey(t, jose.ES256, "ec-1")
	srv := newJWKSServer(t, rsaKey, ecKey)
	r := newTestResolver(t, Config{JWT: []IssuerConfig{issuerFor(srv)}}, clock)
	now := clock.Now()
	head := `{"iss":"` + testIssuer + `","aud":"` + testAudience + `","iat":` + strconv.FormatInt(now.Unix(), 10) +
		`,"exp":` + strconv.FormatInt(now.Add(time.Hour).Unix(), 10) + `,"scope":"delegate"`

	good := head + `,"sub":"u-42","tenant":"retail","act":{"sub":"payments-investigator","act":{"sub":"orchestrator"}}}`
	for _, k := range []testKey{rsaKey, ecKey} {
		c, err := r.Identify(context.Background(), bearerCreds(k.signRaw(t, good)))
		if err != nil || c.Tenant != "retail" || c.AgentID != "payments-investigator" {
			t.Fatalf("%s control token: %+v, %v", k.alg, c, err)
		}
	}
	for name, payload := range map[string]string{
		"tenant twice":         head + `,"sub":"u-42","tenant":"retail","tenant":"wholesale"}`,
		"sub twice":            head + `,"sub":"u-42","sub":"admin"}`,
		"iss twice":            head + `,"sub":"u-42","iss":"` + testIssuer + `"}`,
		"escaped repeat":       head + `,"sub":"u-42","tenant":"retail","\u0074enant":"wholesale"}`,
		"inside act":           head + `,"sub":"u-42","act":{"sub":"payments-investigator","sub":"orchestrator"}}`,
		"deeper in act":        head + `,"sub":"u-42","act":{"sub":"a","act":{"sub":"b","act":{"sub":"c","sub":"d"}}}}`,
		"inside a list object": head + `,"sub":"u-42","roles":[{"r":"x","r":"y"}]}`,
		// Not UTF-8: readers disagree on how many U+FFFD a bad sequence
		// becomes, so the claim names (or values) are not the same to all.
		"names not UTF-8": head + ",\"sub\":\"u-42\",\"x\xff\":1,\"x\xfe\":2}",
		"value not UTF-8": head + ",\"sub\":\"u-42\",\"tenant\":\"retail\xe2\x82\"}",
	} {
		for _, k := range []testKey{rsaKey, ecKey} {
			c, err := r.Identify(context.Background(), bearerCreds(k.signRaw(t, payload)))
			if !errors.Is(err, ErrTokenInvalid) {
				t.Errorf("%s (%s): err = %v (caller %+v), want ErrTokenInvalid", name, k.alg, err, c)
			} else if c.Authenticated {
				t.Errorf("%s (%s): caller %+v", name, k.alg, c)
			}
		}
	}
}

// TestLooksLikeJWS: a token is judged as a JWT exactly when its first part is a
// base64url JSON object.
func TestLooksLikeJWS(t *testing.T) {
	enc := func(s string) string { return b64.EncodeToString([]byte(s)) }
	for tok, want := range map[string]bool{
		enc(`{"alg":"RS256","kid":"k1"}`) + ".e30.sig": true,
		enc(` {}`) + ".e30.sig":                        true,
		enc(`null`) + ".e30.sig":                       false,
		enc(`[]`) + ".e30.sig":                         false,
		enc(`"x"`) + ".e30.sig":                        false,
		enc(`{"alg":`) + ".e30.sig":                    false,
		enc(`{} x`) + ".e30.sig":                       false,
		enc(`{}`) + ".e30":                             false, // two parts
		enc(`{}`) + ".e30.sig.x":                       false, // four parts
		"not base64!.e30.sig":                          false,
		"static-token-value":                           false,
	} {
		if got := looksLikeJWS(tok); got != want {
			t.Errorf("%q: %v, want %v", tok, got, want)
		}
	}
}

// respell writes seg (unpadded base64url) with the unused low bits of its last
// character set: the same bytes to a lenient decoder, a different string.
// ok is false when seg has no unused bits (its length is a multiple of 4).
func respell(seg string) (string, bool) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	spare := map[int]int{2: 0b1111, 3: 0b11}[len(seg)%4]
	if spare == 0 {
		return seg, false
	}
	last := strings.IndexByte(alphabet, seg[len(seg)-1])
	return seg[:len(seg)-1] + string(alphabet[last|spare]), true
}

// TestJWTNonCanonicalBase64Refused: a token one of whose segments (header,
// payload or signature) is re-spelled in the unused low bits of its last
// base64url character decodes to the same bytes, so its signature still
// verifies; it is refused, and the canonical spelling verifies.
//
// Threat: a malleable token: one signed token has several spellings, each
// a different string (a different token-cache key, a different value to
// any log or replay check that compares tokens). Defence: every JOSE segment
// must be canonical base64url (what encoding it again gives back), or the
// token is invalid.
func TestJWTNonCanonicalBase64Refused(t *testing.T) {
	clock := newClock()
	rsaKey, ecKey := newKey(t, jose.RS256, "rsa-1"), newKey(t, jose.ES256, "ec-1")
	srv := newJWKSServer(t, rsaKey, ecKey)
	r := newTestResolver(t, Config{JWT: []IssuerConfig{issuerFor(srv)}}, clock)
	now := clock.Now()
	claims := `{"iss":"` + testIssuer + `","aud":"` + testAudience + `","sub":"u-42","exp":` +
		strconv.FormatInt(now.Add(time.Hour).Unix(), 10) + `,"act":{"sub":"payments-investigator"}`
	respelled := 0
	for _, k := range []testKey{rsaKey, ecKey} {
		// Payloads of three lengths mod 3, so that some have spare bits.
		for _, pad := range []string{"", " ", "  "} {
			tok := k.signRaw(t, claims+pad+"}")
			if c, err := r.Identify(context.Background(), bearerCreds(tok)); err != nil || c.AgentID != "payments-investigator" {
				t.Fatalf("%s canonical token: %+v, %v", k.alg, c, err)
			}
			segs := strings.Split(tok, ".")
			for i, name := range []string{"header", "payload", "signature"} {
				alt, ok := respell(segs[i])
				if !ok {
					continue
				}
				// A lenient decoder (go-jose's) reads both spellings alike.
				if a, _ := base64.RawURLEncoding.DecodeString(alt); !bytes.Equal(a, mustDecode(t, segs[i])) {
					t.Fatalf("%s: the re-spelling decodes to other bytes", name)
				}
				respelled++
				bad := slices.Clone(segs)
				bad[i] = alt
				c, err := r.Identify(context.Background(), bearerCreds(strings.Join(bad, ".")))
				if !errors.Is(err, ErrTokenInvalid) || c.Authenticated {
					t.Errorf("%s, %s re-spelled: authenticated %v, err %v; want ErrTokenInvalid", k.alg, name, c.Authenticated, err)
				}
			}
		}
	}
	if respelled < 4 {
		t.Fatalf("only %d segments had spare bits to re-spell", respelled)
	}
}

func mustDecode(t *testing.T, seg string) []byte {
	t.Helper()
	b, err := b64.DecodeString(seg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
