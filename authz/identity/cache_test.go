package identity

import (
	"errors"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

func TestTokenCache(t *testing.T) {
	clock := newClock()
	k := newKey(t, jose.RS256, "rsa")
	srv := newJWKSServer(t, k)
	r := newTestResolver(t, Config{JWT: []IssuerConfig{issuerFor(srv)}}, clock)
	claims := claimsAt(clock.Now())
	claims["exp"] = clock.Now().Add(5 * time.Minute).Unix()
	tok := k.sign(t, claims)

	first, err := identify(t, r, tok)
	if err != nil {
		t.Fatal(err)
	}
	second, err := identify(t, r, tok)
	if err != nil {
		t.Fatal(err)
	}
	if hits, misses := r.CacheStats(); hits != 1 || misses != 1 {
		t.Fatalf("hits, misses = %d, %d, want 1, 1", hits, misses)
	}
	if n := r.verifications.Load(); n != 1 {
		t.Fatalf("%d signature verifications, want 1: the hit must not verify again", n)
	}
	if first.AgentID != second.AgentID || first.Tenant != second.Tenant || !first.Expires.Equal(second.Expires) {
		t.Fatalf("cached caller %+v differs from %+v", second, first)
	}

	// Past exp but inside the leeway: the cached entry is not served; the token is
	// verified again (and accepted, by the leeway), but not cached again.
	clock.Advance(5*time.Minute + 10*time.Second)
	for range 2 {
		if _, err := identify(t, r, tok); err != nil {
			t.Fatalf("inside leeway: %v", err)
		}
	}
	if n := r.verifications.Load(); n != 3 {
		t.Fatalf("%d signature verifications, want 3", n)
	}
	if hits, _ := r.CacheStats(); hits != 1 {
		t.Fatalf("hits = %d: an expired entry was served from the cache", hits)
	}

	// Past the leeway: expired.
	clock.Advance(time.Minute)
	if _, err := identify(t, r, tok); !errors.Is(err, ErrTokenExpired) {
		t.Fatalf("err = %v, want ErrTokenExpired", err)
	}
}

func TestTokenCacheFailuresNotCached(t *testing.T) {
	clock := newClock()
	k := newKey(t, jose.RS256, "rsa")
	srv := newJWKSServer(t, k)
	r := newTestResolver(t, Config{JWT: []IssuerConfig{issuerFor(srv)}}, clock)
	claims := claimsAt(clock.Now())
	claims["tenant"] = 1
	tok := k.sign(t, claims)
	for range 2 {
		if _, err := identify(t, r, tok); !errors.Is(err, ErrClaimType) {
			t.Fatalf("err = %v, want ErrClaimType", err)
		}
	}
	if hits, misses := r.CacheStats(); hits != 0 || misses != 2 {
		t.Fatalf("hits, misses = %d, %d, want 0, 2", hits, misses)
	}
}

// TestConcurrentIdentify runs cached, uncached and unknown-kid tokens from many
// goroutines while time passes the refresh interval; it is meant for -race.
func TestConcurrentIdentify(t *testing.T) {
	clock := newClock()
	k := newKey(t, jose.ES256, "ec")
	srv := newJWKSServer(t, k)
	r := newTestResolver(t, Config{JWT: []IssuerConfig{issuerFor(srv)}, TokenCacheSize: 16}, clock)
	stranger := newKey(t, jose.ES256, "stranger")
	shared := k.sign(t, claimsAt(clock.Now()))
	var toks []string
	for i := range 32 {
		c := claimsAt(clock.Now())
		c["jti"] = i
		toks = append(toks, k.sign(t, c))
	}
	unknown := stranger.sign(t, claimsAt(clock.Now()))
	done := make(chan error)
	for g := range 8 {
		go func() {
			var err error
			for i := range 40 {
				if _, e := identify(t, r, shared); e != nil {
					err = e
				}
				if _, e := identify(t, r, toks[(g*40+i)%len(toks)]); e != nil {
					err = e
				}
				if _, e := identify(t, r, unknown); !errors.Is(e, ErrUnknownKey) {
					err = e
				}
				clock.Advance(3 * time.Second) // 16 minutes in all: past the 10m refresh
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	if hits, misses := r.CacheStats(); hits == 0 || misses == 0 {
		t.Errorf("hits, misses = %d, %d", hits, misses)
	}
}
