package identity

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
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

// BenchmarkCacheBytes reports the heap a cached verified token holds
// (B/token): the growth of the live heap over 3,000 distinct tokens of one
// caller (claims like the benchmark token's, new jti and iat each), each
// presented twice so that it stays in the cache, divided by the entries held;
// and B/one-time-token, the growth per token presented once, over 10,000: what
// a caller minting a token per request costs. B/estimated is the cache's own
// estimate of an entry, which its byte bound counts.
func BenchmarkCacheBytes(b *testing.B) {
	clock := newClock()
	k := newKey(b, jose.ES256, "es")
	srv := newJWKSServer(b, k)
	r := newTestResolver(b, Config{JWT: []IssuerConfig{issuerFor(srv)}}, clock)
	toks := make([]string, 13000)
	for i := range toks {
		c := claimsAt(clock.Now())
		c["jti"] = fmt.Sprintf("bench-%07d", i)
		c["data_classification"] = "restricted"
		toks[i] = k.sign(b, c)
	}
	ctx := context.Background()
	first, err := r.Identify(ctx, bearerCreds(toks[0])) // JWKS fetched, issuer warm
	if err != nil {
		b.Fatal(err)
	}
	present := func(toks []string, times int) float64 {
		r.cache.Purge()
		before := liveHeap()
		for _, tok := range toks {
			for range times {
				if _, err := r.Identify(ctx, bearerCreds(tok)); err != nil {
					b.Fatal(err)
				}
			}
		}
		return float64(int64(liveHeap()) - int64(before))
	}
	repeated := present(toks[:3000], 2) / float64(r.cache.Len())
	once := present(toks[3000:], 1) / 10000
	runtime.KeepAlive(toks)
	for b.Loop() {
	}
	b.ReportMetric(repeated, "B/token")
	b.ReportMetric(once, "B/one-time-token")
	b.ReportMetric(float64(callerBytes(first)), "B/estimated")
}

func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkRS256Verify is one RS256 signature check of the benchmark token
// and nothing else (crypto/rsa over the SHA-256 of its signing input, the key
// already parsed): the part of a cold check that no cache of writ's can
// remove, the floor bench/report adds to the bare gRPC server's cost.
func BenchmarkRS256Verify(b *testing.B) {
	_, tok := benchResolver(b)
	raw, err := os.ReadFile(testdata + "bench_jwks.json")
	if err != nil {
		b.Fatal(err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(raw, &set); err != nil {
		b.Fatal(err)
	}
	dot := strings.LastIndexByte(tok, '.')
	sig, err := base64.RawURLEncoding.DecodeString(tok[dot+1:])
	if err != nil {
		b.Fatal(err)
	}
	var pub *rsa.PublicKey
	for _, k := range set.Keys {
		if p, ok := k.Key.(*rsa.PublicKey); ok && rsa.VerifyPKCS1v15(p, crypto.SHA256, digest(tok[:dot]), sig) == nil {
			pub = p
		}
	}
	if pub == nil {
		b.Fatal("no key of bench_jwks.json verifies the benchmark token")
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest(tok[:dot]), sig); err != nil {
			b.Fatal(err)
		}
	}
}

func digest(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}
