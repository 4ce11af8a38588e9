package soak

import (
	"bytes"
	"image/png"
	"strings"
	"testing"
	"time"
)

func samples(n int, rss func(i int) float64) []Sample {
	var s []Sample
	for i := 0; i < n; i++ {
		s = append(s, Sample{T: float64(i + 1), Requests: 50, P50: 2, P99: 9, P999: 20, RSSMiB: rss(i),
			Goroutines: 40, FDs: 20, StoreTasks: 900, Pushed: i, Reloads: i / 20})
	}
	return s
}

var crit = Criteria{Warmup: 10 * time.Second, Growth: 0.10, RSSSlackMiB: 4, GoroutineSlack: 10, FDSlack: 5,
	MaxStoreTasks: 1000, MinRateShare: 0.95, TargetRate: 50}

func TestJudgeFlat(t *testing.T) {
	s := samples(120, func(i int) float64 { return 40 + float64(i%3) })
	sum := Judge(s, []float64{1, 2, 3, 4, 100}, crit)
	if len(sum.Failures) != 0 {
		t.Fatalf("a flat run failed: %v", sum.Failures)
	}
	if sum.P50 != 3 || sum.Max != 100 || sum.Requests != 6000 {
		t.Fatalf("summary %+v", sum)
	}
	if md := sum.Markdown(crit, 50); !strings.Contains(md, "| verdict | PASS |") {
		t.Fatalf("markdown:\n%s", md)
	}
}

func TestJudgeGrowthAndErrors(t *testing.T) {
	s := samples(120, func(i int) float64 { return 40 + float64(i) }) // a leak: +1 MiB/s
	s[50].Unexpected = 2
	s[60].StoreTasks = 1001
	sum := Judge(s, nil, crit)
	got := strings.Join(sum.Failures, "\n")
	for _, want := range []string{"RSS (MiB) grew", "2 unexpected errors", "1001 tasks"} {
		if !strings.Contains(got, want) {
			t.Errorf("failures lack %q:\n%s", want, got)
		}
	}
}

func TestRenderPNG(t *testing.T) {
	s := samples(90, func(i int) float64 { return 40 })
	var ts []float64
	for _, x := range s {
		ts = append(ts, x.T)
	}
	var b bytes.Buffer
	if err := RenderPNG(&b, "writ soak 90s: 50 req/s", ts, Panels(s, []float64{20, 40})); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds().Dx() != plotW {
		t.Fatalf("width %d", img.Bounds().Dx())
	}
	var csv bytes.Buffer
	if err := WriteCSV(&csv, s); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(csv.String(), "\n"); lines != 91 {
		t.Fatalf("%d CSV lines", lines)
	}
	back, reloads, err := ReadCSV(&csv)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(s) || back[89] != s[89] || len(reloads) != 4 || reloads[0] != 21 {
		t.Fatalf("read back %d samples (%+v), reloads at %v", len(back), back[89], reloads)
	}
}
