package authz

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/task"
)

// benchCaller verifies the benchmark token of ../shared/BENCHMARKS.md (RS256, the
// two-hop act chain) once, as the sidecar would, so the decision benchmarks run
// with a real JWT caller and its claims.
func benchCaller(b *testing.B) identity.Caller { return identifyBench(b) }

func identifyBench(b testing.TB) identity.Caller {
	b.Helper()
	token, err := os.ReadFile("../testdata/identity/bench_token.txt")
	if err != nil {
		b.Fatal("benchmark token missing:", err)
	}
	r, err := identity.New(identity.Config{JWT: []identity.IssuerConfig{{Issuer: "https://idp.bank.ae",
		Audiences: []string{"a2a-gateway"}, JWKSFile: "../testdata/identity/bench_jwks.json"}}})
	if err != nil {
		b.Fatal(err)
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	c, err := r.Identify(context.Background(), identity.Credentials{Header: h})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func benchFacts(c identity.Caller) *Facts {
	f := facts(c, sanctions)
	f.Request.Classification = task.Restricted
	f.Request.Push = &task.PushConfig{URL: "https://agents.bank.ae/cb", Token: "s3cret", AuthScheme: "Bearer"}
	return f
}

// BenchmarkDecideMiss: one decision that the cache cannot answer (every iteration
// a new context id), for the seed's allowed delegation.
func BenchmarkDecideMiss(b *testing.B) {
	e, err := NewEngine(loadShipped(b), Options{})
	if err != nil {
		b.Fatal(err)
	}
	f := benchFacts(benchCaller(b))
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		f.Request.ContextID = strconv.Itoa(i)
		d, _ := e.Decide(ctx, BuildInput(f))
		if !d.Allow || d.CacheHit {
			b.Fatalf("%+v", d)
		}
	}
}

// BenchmarkDecideHit: the same delegation again, answered from the cache
// (including building the input and its key).
func BenchmarkDecideHit(b *testing.B) {
	e, err := NewEngine(loadShipped(b), Options{})
	if err != nil {
		b.Fatal(err)
	}
	f := benchFacts(benchCaller(b))
	ctx := context.Background()
	e.Decide(ctx, BuildInput(f))
	b.ReportAllocs()
	for b.Loop() {
		d, _ := e.Decide(ctx, BuildInput(f))
		if !d.Allow || !d.CacheHit {
			b.Fatalf("%+v", d)
		}
	}
}

// BenchmarkEvaluate: the policy evaluation alone, without the cache.
func BenchmarkEvaluate(b *testing.B) {
	p := loadShipped(b)
	in := BuildInput(benchFacts(benchCaller(b)))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := evaluate(ctx, p, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEvaluateAlwaysAllow is the baseline for the figures above: the same
// input through a policy that only answers allow, measured in the same run.
func BenchmarkEvaluateAlwaysAllow(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(dir+"/p.rego", []byte("package writ.authz\n\ndecision := {\"allow\": true, \"denials\": []}\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	p, err := LoadPolicy(context.Background(), []string{dir}, LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	in := BuildInput(benchFacts(benchCaller(b)))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := evaluate(ctx, p, in); err != nil {
			b.Fatal(err)
		}
	}
}
