package identity

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// TestDevelopmentUses: the resolver names every way it accepts writ's
// development identity — an issuer named writ-dev (or writ-dev-<name>), the
// development key (by its kid, today's or the legacy one) in a JWKS file or
// among the keys fetched from a JWKS URL — and nothing for a production
// configuration.
func TestDevelopmentUses(t *testing.T) {
	clock := newClock()
	dev, legacy, prod := newKey(t, jose.ES256, DevelopmentKeyID), newKey(t, jose.ES256, "dev-1"), newKey(t, jose.ES256, "bank-1")
	file := func(k testKey) string {
		b, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k.jwk}})
		p := filepath.Join(t.TempDir(), "jwks.json")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	srv := newJWKSServer(t, prod, dev)
	url := issuerFor(srv)
	r := newTestResolver(t, Config{JWT: []IssuerConfig{
		{Issuer: "https://idp.bank.ae", Audiences: []string{"a"}, JWKSFile: file(dev)},
		{Issuer: "writ-dev-team", Audiences: []string{"a"}, JWKSFile: file(prod)},
		{Issuer: "https://idp.old", Audiences: []string{"a"}, JWKSFile: file(legacy)},
		url,
	}}, clock)
	keys := func() []string {
		var out []string
		for _, u := range r.DevelopmentUses() {
			out = append(out, u.Key)
		}
		return out
	}
	want := "identity.jwt[0].jwks_file identity.jwt[1].issuer identity.jwt[2].jwks_file"
	if got := strings.Join(keys(), " "); got != want {
		t.Fatalf("before the URL is fetched: %s, want %s", got, want)
	}
	// A token makes the resolver fetch the URL's keys; then they count too.
	_, _ = r.Identify(context.Background(), bearerCreds(prod.sign(t, claimsAt(clock.Now()))))
	if got := strings.Join(keys(), " "); got != want+" identity.jwt[3].jwks_url" {
		t.Fatalf("after the fetch: %s", got)
	}
	clean := newTestResolver(t, Config{JWT: []IssuerConfig{{Issuer: "https://idp.bank.ae", Audiences: []string{"a"}, JWKSFile: file(prod)}}}, clock)
	if u := clean.DevelopmentUses(); len(u) != 0 {
		t.Fatalf("a production configuration: %+v", u)
	}
}
