package authz

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writ-authz/writ/task"
)

// stricterShipped is a copy of the shipped policies with
// max_delegation_depth set to depth in its data.json.
func stricterShipped(t testing.TB, depth string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(shipped)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "data.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Replace(string(raw), `"max_delegation_depth": 4`, `"max_delegation_depth": `+depth, 1)
	if out == string(raw) {
		t.Fatal("data.json has no max_delegation_depth of 4")
	}
	if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// shadowPair is the shipped policy live and a stricter copy (max depth 2)
// in shadow.
func shadowPair(t testing.TB) (live, shadow *Engine) {
	t.Helper()
	live, err := NewEngine(loadShipped(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := LoadPolicy(context.Background(), []string{stricterShipped(t, "2")}, LoadOptions{SkipTests: true})
	if err != nil {
		t.Fatal(err)
	}
	if shadow, err = NewEngine(p, Options{}); err != nil {
		t.Fatal(err)
	}
	return live, shadow
}

// TestShadowNeverBlocksTheAnswer: a shadow whose worker is stuck neither
// delays nor changes a live decision; what its full queue cannot take is
// dropped and counted, and what it evaluates later is compared.
//
// Threat: a shadow policy set (a draft under review) that is slow or stuck
// holds requests up or changes their answers: a denial of service, or a
// draft's verdict served as the live one. Defence: Shadowed.Decide returns
// the live engine's decision unchanged and only offers the input to the
// shadow's bounded queue, which drops (and counts) what it cannot take
// instead of waiting.
func TestShadowNeverBlocksTheAnswer(t *testing.T) {
	live, shadowEngine := shadowPair(t)
	var got []ShadowDisagreement
	var mu sync.Mutex
	sh := NewShadow(shadowEngine, ShadowOptions{Queue: 2, Report: func(d ShadowDisagreement) {
		mu.Lock()
		got = append(got, d)
		mu.Unlock()
	}})
	inside, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	sh.before = func() {
		once.Do(func() { close(inside) })
		<-release
	}
	dec := Shadowed{Engine: live, Shadow: sh}
	deep := investigator
	deep.Chain = []string{"a", "b", "c"} // 3 deep: live (max 4) allows, the shadow (max 2) denies
	for i := range 10 {
		in := BuildInput(facts(deep, sanctions))
		start := time.Now()
		d, err := dec.Decide(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allow || len(d.Denials) != 0 || d.Revision != live.Revision() {
			t.Fatalf("decision %d: %+v, want the live allow", i, d)
		}
		if el := time.Since(start); el > time.Second {
			t.Fatalf("decision %d took %v with the shadow stuck", i, el)
		}
		if i == 0 {
			<-inside // the worker holds the first; the queue takes two more
		}
	}
	if c := sh.Counts(); c.Dropped != 7 {
		t.Fatalf("counts %+v with the worker stuck, want 7 dropped", c)
	}
	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sh.Close(ctx); err != nil {
		t.Fatal(err)
	}
	c := sh.Counts()
	if c != (ShadowCounts{Disagree: 3, Dropped: 7}) {
		t.Fatalf("counts %+v, want 3 disagreements and 7 dropped", c)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, d := range got {
		if d.Direction != ShadowAllowToDeny || d.Code != "DEPTH_EXCEEDED" || !d.Live.Allow || d.Shadow.Allow ||
			!slices.Equal(d.Shadow.Codes, []string{"DEPTH_EXCEEDED"}) || d.Live.Revision != live.Revision() ||
			d.Shadow.Revision != shadowEngine.Revision() || d.Route != "sanctions-screening-agent" || d.Operation != "send" ||
			d.DecisionID == "" {
			t.Errorf("disagreement %+v", d)
		}
	}
	// After Close, an offer is dropped, never sent on the closed queue.
	dec.Decide(context.Background(), BuildInput(facts(deep, sanctions))) //nolint:errcheck // counted below
	if sh.Counts().Dropped != 8 {
		t.Fatalf("an offer after Close: %+v", sh.Counts())
	}
}

// TestShadowCompare: how two verdicts differ, and that a dry-run pass is
// compared as the denial it stands for.
func TestShadowCompare(t *testing.T) {
	for _, c := range []struct {
		live, shadow ShadowVerdict
		dir, code    string
		same         bool
	}{
		{ShadowVerdict{Allow: true}, ShadowVerdict{Allow: true}, "", "", true},
		{ShadowVerdict{Allow: true}, ShadowVerdict{Codes: []string{"A", "B"}}, ShadowAllowToDeny, "A", false},
		{ShadowVerdict{Codes: []string{"B"}}, ShadowVerdict{Allow: true}, ShadowDenyToAllow, "B", false},
		{ShadowVerdict{Codes: []string{"A"}}, ShadowVerdict{Codes: []string{"A"}}, "", "", true},
		{ShadowVerdict{Codes: []string{"A"}}, ShadowVerdict{Codes: []string{"A", "C"}}, ShadowCodes, "C", false},
		{ShadowVerdict{Codes: []string{"A", "D"}}, ShadowVerdict{Codes: []string{"A"}}, ShadowCodes, "D", false},
	} {
		dir, code, same := compareVerdicts(c.live, c.shadow)
		if dir != c.dir || code != c.code || same != c.same {
			t.Errorf("%+v vs %+v: %q %q %v", c.live, c.shadow, dir, code, same)
		}
	}
	v := verdictOf(Decision{Allow: true, DryRun: true, Denials: []task.Denial{{Code: "Z"}, {Code: "A"}, {Code: "Z"}}})
	if v.Allow || !slices.Equal(v.Codes, []string{"A", "Z"}) {
		t.Fatalf("dry-run verdict %+v", v)
	}
}

// BenchmarkShadow is the shadow's cost on the request path: a decision
// without a shadow, with the stricter shadow beside it, and with a shadow
// whose every evaluation takes 1ms (its queue fills; the request path
// still only pays the offer).
func BenchmarkShadow(b *testing.B) {
	live, shadowEngine := shadowPair(b)
	deep := investigator
	deep.Chain = []string{"a", "b", "c"}
	in := BuildInput(facts(deep, sanctions))
	run := func(b *testing.B, dec interface {
		Decide(context.Context, *Input) (Decision, error)
	}) {
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := dec.Decide(ctx, in); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("none", func(b *testing.B) { run(b, live) })
	b.Run("shadow", func(b *testing.B) {
		sh := NewShadow(shadowEngine, ShadowOptions{Queue: 1024})
		defer sh.Close(context.Background()) //nolint:errcheck // no deadline
		run(b, Shadowed{Engine: live, Shadow: sh})
		c := sh.Counts()
		b.ReportMetric(float64(c.Dropped)/float64(max(1, c.Agree+c.Disagree+c.Dropped)), "dropped/op")
	})
	b.Run("slow", func(b *testing.B) {
		sh := NewShadow(shadowEngine, ShadowOptions{Queue: 1024})
		sh.before = func() { time.Sleep(time.Millisecond) }
		defer sh.Close(context.Background()) //nolint:errcheck // no deadline
		run(b, Shadowed{Engine: live, Shadow: sh})
	})
}
