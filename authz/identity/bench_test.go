package identity

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
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

// BenchmarkCacheBytes reports the heap a cached verified token holds (B/token):
// the growth of the live heap over 5,000 distinct tokens of one caller (claims
// like the benchmark token's, new jti and iat each).
func BenchmarkCacheBytes(b *testing.B) {
	clock := newClock()
	k := newKey(b, jose.ES256, "es")
	srv := newJWKSServer(b, k)
	r := newTestResolver(b, Config{JWT: []IssuerConfig{issuerFor(srv)}}, clock)
	const n = 5000
	toks := make([]string, n)
	for i := range toks {
		c := claimsAt(clock.Now())
		c["jti"] = fmt.Sprintf("bench-%07d", i)
		c["data_classification"] = "restricted"
		toks[i] = k.sign(b, c)
	}
	if _, err := r.Identify(context.Background(), bearerCreds(toks[0])); err != nil { // JWKS fetched, issuer warm
		b.Fatal(err)
	}
	r.cache.Purge()
	before := liveHeap()
	for _, tok := range toks {
		if _, err := r.Identify(context.Background(), bearerCreds(tok)); err != nil {
			b.Fatal(err)
		}
	}
	after := liveHeap()
	runtime.KeepAlive(toks)
	for b.Loop() {
	}
	b.ReportMetric(float64(int64(after)-int64(before))/n, "B/token")
}

func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
