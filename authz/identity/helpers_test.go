package identity

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

const (
	testIssuer   = "https://idp.test.example"
	testAudience = "a2a-gateway"
)

// fakeClock is the Resolver's clock in tests: time moves only when a test says so.
type fakeClock struct{ ns atomic.Int64 }

func newClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// testKey is a generated signing key and the JWK that verifies it.
type testKey struct {
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
	jwk  jose.JSONWebKey
}

func newKey(t testing.TB, alg jose.SignatureAlgorithm, kid string) testKey {
	t.Helper()
	var priv crypto.Signer
	var err error
	switch alg {
	case jose.RS256:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.EdDSA:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		t.Fatalf("no key type for %s", alg)
	}
	if err != nil {
		t.Fatal(err)
	}
	return testKey{alg: alg, priv: priv, jwk: jose.JSONWebKey{Key: priv.Public(), KeyID: kid, Algorithm: string(alg), Use: "sig"}}
}

// sign makes a compact JWS of claims with k.
func (k testKey) sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.priv, KeyID: k.jwk.KeyID}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// claimsAt are valid claims for testIssuer, issued at now and valid for an hour.
func claimsAt(now time.Time) map[string]any {
	return map[string]any{
		"iss": testIssuer, "aud": testAudience, "sub": "u-42",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		"tenant": "wholesale", "scope": "delegate tasks.read",
		"act": map[string]any{"sub": "payments-investigator", "act": map[string]any{"sub": "orchestrator"}},
	}
}

// jwksServer serves a JWKS over TLS; the test swaps its keys and reads its hit count.
type jwksServer struct {
	*httptest.Server
	body atomic.Pointer[[]byte]
	hits atomic.Int64
}

func newJWKSServer(t testing.TB, keys ...testKey) *jwksServer {
	t.Helper()
	s := &jwksServer{}
	s.setKeys(t, keys...)
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.hits.Add(1)
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(*s.body.Load())
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) setKeys(t testing.TB, keys ...testKey) {
	t.Helper()
	var set jose.JSONWebKeySet
	for _, k := range keys {
		set.Keys = append(set.Keys, k.jwk)
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	s.body.Store(&b)
}

// issuerFor is an issuer config that fetches from s.
func issuerFor(s *jwksServer) IssuerConfig {
	trustServer(s.Server)
	return IssuerConfig{
		Issuer: testIssuer, Audiences: []string{"other", testAudience},
		JWKSURL: s.URL + "/jwks.json",
	}
}

// testClients maps a test server's host to the client that trusts its
// certificate; routing is the one JWKS client every test resolver uses.
var testClients sync.Map

func trustServer(s *httptest.Server) { testClients.Store(s.Listener.Addr().String(), s.Client()) }

type routing struct{}

func (routing) RoundTrip(r *http.Request) (*http.Response, error) {
	if c, ok := testClients.Load(r.URL.Host); ok {
		return c.(*http.Client).Transport.RoundTrip(r)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func newTestResolver(t testing.TB, cfg Config, clock *fakeClock) *Resolver {
	t.Helper()
	r, err := newResolver(cfg, clock.Now, WithHTTPClient(&http.Client{Transport: routing{}, Timeout: 10 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func bearerCreds(tok string) Credentials {
	return Credentials{Header: http.Header{"Authorization": {"Bearer " + tok}}}
}
