package identity

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
)

// benchResolver verifies the token of the shared benchmark request
// (testdata/identity/bench_token.txt, a copy of the bearer in bench/request_allow.json)
// against its key set.
func benchResolver(t testing.TB) (*Resolver, string) {
	t.Helper()
	tok, err := os.ReadFile(testdata + "bench_token.txt")
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{JWT: []IssuerConfig{{
		Issuer: "https://idp.bank.ae", Audiences: []string{"a2a-gateway"}, JWKSFile: testdata + "bench_jwks.json",
	}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r, strings.TrimSpace(string(tok))
}

func TestBenchmarkToken(t *testing.T) {
	r, tok := benchResolver(t)
	c, err := r.Identify(context.Background(), bearerCreds(tok))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Authenticated || c.Method != MethodJWT || c.Issuer != "https://idp.bank.ae" || c.UserID != "u-42" ||
		c.AgentID != "payments-investigator" || !slices.Equal(c.Chain, []string{"orchestrator"}) ||
		c.Tenant != "wholesale" || !slices.Equal(c.Scopes, []string{"delegate"}) || c.Classification != "restricted" ||
		c.Expires.Unix() != 4070908800 {
		t.Fatalf("caller = %+v", c)
	}
}

func BenchmarkIdentifyCached(b *testing.B) {
	r, tok := benchResolver(b)
	creds := bearerCreds(tok)
	ctx := context.Background()
	if _, err := r.Identify(ctx, creds); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Identify(ctx, creds); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkIdentifyUncached(b *testing.B) {
	r, tok := benchResolver(b)
	creds := bearerCreds(tok)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r.cache.Purge()
		if _, err := r.Identify(ctx, creds); err != nil {
			b.Fatal(err)
		}
	}
}
