package authz

import (
	"context"
	"net/http"
	"os"
	"runtime"
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

// BenchmarkDecideMiss: one decision that the cache cannot answer, for the seed's
// allowed delegation: every iteration a new push callback origin (a new port
// on the allowed host), which the policy reads. (A new path is not a miss:
// input.push.url is the origin; nor is a new context id: the shipped policy
// does not read it.)
func BenchmarkDecideMiss(b *testing.B) {
	e, err := NewEngine(loadShipped(b), Options{})
	if err != nil {
		b.Fatal(err)
	}
	f := benchFacts(benchCaller(b))
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		newCallback(f, "", i)
		d, _ := e.Decide(ctx, BuildInput(f))
		if !d.Allow || d.CacheHit {
			b.Fatalf("%+v", d)
		}
	}
}

// newCallback gives f the i-th new push callback of a series: another origin
// on the allowed host (a port), and past the ports another auth scheme, which
// the policy reads but does not judge.
func newCallback(f *Facts, series string, i int) {
	f.Request.Push.URL = "https://agents.bank.ae:" + strconv.Itoa(1024+i%64000) + "/cb"
	f.Request.Push.AuthScheme = "Bearer" + series + strconv.Itoa(i/64000)
}

// BenchmarkDecideNewContext: the allowed delegation with a new context id each
// time (a new conversation from a known caller): what the new-context workload
// asks of the engine.
func BenchmarkDecideNewContext(b *testing.B) {
	e, err := NewEngine(loadShipped(b), Options{})
	if err != nil {
		b.Fatal(err)
	}
	f := benchFacts(benchCaller(b))
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		f.Request.ContextID = strconv.Itoa(i)
		if d, _ := e.Decide(ctx, BuildInput(f)); !d.Allow {
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

// BenchmarkEvaluatePartial: the evaluation of the target's residual alone, on
// the input the policy reads (what a cache miss evaluates).
func BenchmarkEvaluatePartial(b *testing.B) {
	p := loadShipped(b)
	in := BuildInput(benchFacts(benchCaller(b)))
	ctx := context.Background()
	tp := p.forTarget(ctx, &in.Target, in.Operation, in.Task.ID != "", nil)
	prog := tp.prog.Load()
	if prog == nil {
		b.Fatal("no residual")
	}
	input := prog.view.value(p.Revision, in, prog.tv)
	b.ReportAllocs()
	for b.Loop() {
		if d, err := p.decision(ctx, prog, input); err != nil || !d.Allow {
			b.Fatal(d, err)
		}
	}
}

// BenchmarkEvaluate: the whole policy's evaluation alone on the whole input,
// without the cache or partial evaluation.
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

// BenchmarkBuildInput: building the writ/v1 input and its OPA value (what a
// decision that reaches OPA converts), for the benchmark caller.
func BenchmarkBuildInput(b *testing.B) {
	f := benchFacts(benchCaller(b))
	b.ReportAllocs()
	for b.Loop() {
		if BuildInput(f).Value() == nil {
			b.Fatal("no value")
		}
	}
}

// newTokenCallers are n callers as n fresh tokens of the benchmark caller would
// make them: the same claims but jti and iat, each with its claims digest (which
// identity computes when it verifies a token).
func newTokenCallers(c identity.Caller, n int) []identity.Caller {
	out := make([]identity.Caller, n)
	for i := range out {
		claims := make(map[string]any, len(c.Claims)+1)
		for k, v := range c.Claims {
			claims[k] = v
		}
		claims["jti"] = "bench-" + strconv.Itoa(i)
		claims["iat"] = float64(1796017495 + i)
		out[i] = c
		out[i].Claims, out[i].ClaimsDigest = claims, identity.DigestClaims(claims)
	}
	return out
}

// BenchmarkDecideNewToken: the benchmark delegation from a new token each time
// (same claims but jti and iat): what the new-token workload asks of the engine.
func BenchmarkDecideNewToken(b *testing.B) {
	e, err := NewEngine(loadShipped(b), Options{})
	if err != nil {
		b.Fatal(err)
	}
	callers := newTokenCallers(benchCaller(b), 20000)
	f := benchFacts(callers[0])
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		f.Caller = callers[i%len(callers)]
		if d, _ := e.Decide(ctx, BuildInput(f)); !d.Allow {
			b.Fatalf("%+v", d)
		}
	}
}

// newSubjectCallers are n callers as tokens of n different subjects of the
// benchmark caller's agent would make them: another sub (user id) each, the
// rest of the claims the same, each with its claims digest.
func newSubjectCallers(c identity.Caller, n int) []identity.Caller {
	out := newTokenCallers(c, n)
	for i := range out {
		out[i].UserID = "u-bench-" + strconv.Itoa(i)
		out[i].Claims["sub"] = out[i].UserID
		out[i].ClaimsDigest = identity.DigestClaims(out[i].Claims)
	}
	return out
}

// BenchmarkDecideNewSubject: the benchmark delegation (a send that names no
// task) from another subject each time, every request from another person:
// the distinct-subject workload. The residual of such a send reads nothing
// of the subject, so after the first decision each is a hit.
func BenchmarkDecideNewSubject(b *testing.B) {
	e, err := NewEngine(loadShipped(b), Options{})
	if err != nil {
		b.Fatal(err)
	}
	callers := newSubjectCallers(benchCaller(b), 20000)
	f := benchFacts(callers[0])
	ctx := context.Background()
	e.Decide(ctx, BuildInput(f))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		f.Caller = callers[i%len(callers)]
		if d, _ := e.Decide(ctx, BuildInput(f)); !d.Allow || !d.CacheHit {
			b.Fatalf("%+v", d)
		}
	}
}

// BenchmarkDecideNewSubjectReply: a reply to a running task of the caller's
// agent from another subject each time: the ownership check reads the
// subject, so each decision is a miss (the distinct-subject workload's cold
// path).
func BenchmarkDecideNewSubjectReply(b *testing.B) {
	e, err := NewEngine(loadShipped(b), Options{})
	if err != nil {
		b.Fatal(err)
	}
	callers := newSubjectCallers(benchCaller(b), 20000)
	f := benchFacts(callers[0])
	f.Request.TaskID = "t-bench"
	f.Record = &task.Task{ID: "t-bench", State: task.Running,
		Owner: task.Owner{AgentID: callers[0].AgentID, Tenant: callers[0].Tenant, UserID: callers[0].UserID}}
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		f.Caller = callers[i%len(callers)]
		if d, _ := e.Decide(ctx, BuildInput(f)); !d.Allow || (d.CacheHit && i < len(callers)) {
			b.Fatalf("%+v", d)
		}
	}
}

// BenchmarkCacheBytes reports the heap a cached decision holds (B/decision):
// the growth of the live heap over 5,000 decisions with distinct keys, each
// asked twice (so that it stays in the cache's main segment), divided by the
// entries held. B/one-time-decision is the growth per decision asked once,
// over 100,000 of them: what keys that never repeat cost.
func BenchmarkCacheBytes(b *testing.B) {
	e, err := NewEngine(loadShipped(b), Options{CacheSize: 10000})
	if err != nil {
		b.Fatal(err)
	}
	f := benchFacts(benchCaller(b))
	ctx := context.Background()
	for i := range 200 { // warm: OPA's own lazily built state is not a cache entry
		f.Request.TaskID = "w-" + strconv.Itoa(i)
		e.Decide(ctx, BuildInput(f))
	}
	decide := func(prefix string, n, times int) float64 {
		e.cache.Purge()
		before := liveHeap()
		for i := range n {
			newCallback(f, prefix, i)
			for range times {
				e.Decide(ctx, BuildInput(f))
			}
		}
		return float64(int64(liveHeap()) - int64(before))
	}
	repeated := decide("r", 5000, 2) / float64(e.cache.Len())
	once := decide("o", 100000, 1) / 100000
	for b.Loop() {
	}
	b.ReportMetric(repeated, "B/decision")
	b.ReportMetric(once, "B/one-time-decision")
}

func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
