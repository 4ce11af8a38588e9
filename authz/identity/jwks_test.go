package identity

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

func identify(t *testing.T, r *Resolver, tok string) (Caller, error) {
	t.Helper()
	return r.Identify(context.Background(), bearerCreds(tok))
}

func TestJWKSLazyFetchUnknownKidAndRotation(t *testing.T) {
	clock := newClock()
	oldKey, newK := newKey(t, jose.RS256, "2026-01"), newKey(t, jose.RS256, "2026-02")
	srv := newJWKSServer(t, oldKey)
	r := newTestResolver(t, Config{JWT: []IssuerConfig{issuerFor(srv)}}, clock)
	if srv.hits.Load() != 0 {
		t.Fatal("New fetched the JWKS; it must wait for first use")
	}
	if _, err := identify(t, r, oldKey.sign(t, claimsAt(clock.Now()))); err != nil {
		t.Fatal(err)
	}

	// The IdP rotates. A token with the new kid right after our fetch is refused: the
	// unknown-kid refetch is rate-limited to once a minute.
	srv.setKeys(t, newK)
	clock.Advance(10 * time.Second)
	if _, err := identify(t, r, newK.sign(t, claimsAt(clock.Now()))); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("err = %v, want ErrUnknownKey", err)
	}
	if n := srv.hits.Load(); n != 1 {
		t.Fatalf("JWKS fetched %d times, want 1 (rate limit)", n)
	}

	// A minute later the unknown kid triggers one refetch and verifies.
	clock.Advance(time.Minute)
	c, err := identify(t, r, newK.sign(t, claimsAt(clock.Now())))
	if err != nil || c.AgentID != "payments-investigator" {
		t.Fatalf("after rotation: %+v, %v", c, err)
	}
	if n := srv.hits.Load(); n != 2 {
		t.Fatalf("JWKS fetched %d times, want 2", n)
	}

	// A kid nobody has: one more refetch at most per minute, however many tokens.
	clock.Advance(2 * time.Minute)
	stranger := newKey(t, jose.RS256, "nobody")
	for range 5 {
		if _, err := identify(t, r, stranger.sign(t, claimsAt(clock.Now()))); !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("err = %v, want ErrUnknownKey", err)
		}
	}
	if n := srv.hits.Load(); n != 3 {
		t.Fatalf("JWKS fetched %d times, want 3", n)
	}
}

func TestJWKSPeriodicRefresh(t *testing.T) {
	clock := newClock()
	k1, k2 := newKey(t, jose.ES256, "k1"), newKey(t, jose.ES256, "k2")
	srv := newJWKSServer(t, k1)
	r := newTestResolver(t, Config{JWT: []IssuerConfig{issuerFor(srv)}}, clock)
	if _, err := identify(t, r, k1.sign(t, claimsAt(clock.Now()))); err != nil {
		t.Fatal(err)
	}
	srv.setKeys(t, k1, k2)
	clock.Advance(11 * time.Minute) // past the 10m default refresh
	// This request is served from the old keys and starts a refresh in the background.
	if _, err := identify(t, r, k1.sign(t, claimsAt(clock.Now()))); err != nil {
		t.Fatal(err)
	}
	r.bg.wg.Wait() // the refresh is done
	if n := srv.hits.Load(); n != 2 {
		t.Fatalf("JWKS fetched %d times, want 2", n)
	}
	// k2 is known now without an unknown-kid refetch; and Identify works after Close.
	r.Close()
	if _, err := identify(t, r, k2.sign(t, claimsAt(clock.Now()))); err != nil {
		t.Fatal(err)
	}
	if n := srv.hits.Load(); n != 2 {
		t.Fatalf("JWKS fetched %d times, want 2", n)
	}
}

func TestJWKSUnreachableKeepsCachedKeys(t *testing.T) {
	clock := newClock()
	k := newKey(t, jose.EdDSA, "ed")
	srv := newJWKSServer(t, k)
	r := newTestResolver(t, Config{JWT: []IssuerConfig{issuerFor(srv)}}, clock)
	if _, err := identify(t, r, k.sign(t, claimsAt(clock.Now()))); err != nil {
		t.Fatal(err)
	}
	srv.Close()

	clock.Advance(11 * time.Minute) // the refresh is due and will fail
	for i := range 3 {
		claims := claimsAt(clock.Now())
		claims["jti"] = i // a new token each time, so the token cache cannot answer
		if _, err := identify(t, r, k.sign(t, claims)); err != nil {
			t.Fatalf("cached keys not served while the JWKS is unreachable: %v", err)
		}
		clock.Advance(2 * time.Minute)
	}
	// An unknown kid still fails cleanly.
	if _, err := identify(t, r, newKey(t, jose.EdDSA, "new").sign(t, claimsAt(clock.Now()))); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("err = %v, want ErrUnknownKey", err)
	}
}

func TestJWKSFirstFetchFails(t *testing.T) {
	clock := newClock()
	k := newKey(t, jose.RS256, "k")
	down := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	trustServer(down)
	ic := IssuerConfig{Issuer: testIssuer, Audiences: []string{testAudience}, JWKSURL: down.URL}
	r := newTestResolver(t, Config{JWT: []IssuerConfig{ic}}, clock)
	if _, err := identify(t, r, k.sign(t, claimsAt(clock.Now()))); !errors.Is(err, ErrKeysUnavailable) {
		t.Fatalf("err = %v, want ErrKeysUnavailable", err)
	}
}

func TestJWKSFileSkipsUnusableKeys(t *testing.T) {
	clock := newClock()
	k := newKey(t, jose.RS256, "rsa")
	path := filepath.Join(t.TempDir(), "jwks.json")
	doc := `{"keys":[{"kty":"oct","kid":"hmac","k":"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA"},
		{"kty":"XYZ","kid":"future"},` + string(mustJSON(t, k.jwk)) + `]}`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	ic := IssuerConfig{Issuer: testIssuer, Audiences: []string{testAudience}, JWKSFile: path}
	r := newTestResolver(t, Config{JWT: []IssuerConfig{ic}}, clock)
	if _, err := identify(t, r, k.sign(t, claimsAt(clock.Now()))); err != nil {
		t.Fatal(err)
	}
	if got := r.issuers[testIssuer].keys.cur.Load().keys; len(got) != 1 || got[0].KeyID != "rsa" {
		t.Fatalf("kept keys %v, want only the RSA key", got)
	}
}

func mustJSON(t *testing.T, k jose.JSONWebKey) []byte {
	t.Helper()
	b, err := k.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
