// Package soak is writ's soak: a fixed-rate mixed workload against the built
// `writ serve` in front of fast agents, sampled every second (throughput,
// latency percentiles, errors, RSS, goroutines, open files, store size) to a
// CSV, judged for flatness after warm-up, and drawn as a PNG. The run itself
// is TestSoak (make soak; SOAK=60s for the short one); this file is the
// sample model, the summary and its pass criteria.
package soak

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Sample is one second of the run.
type Sample struct {
	T          float64 // seconds since the start
	Requests   int     // requests answered in this second
	Unexpected int     // answers that were not what the workload expects
	Expected   int     // expected refusals (denials, TaskNotCancelable)
	P50, P99   float64 // latency of this second's answers, ms
	P999       float64
	RSSMiB     float64 // writ's resident set
	Goroutines int     // go_goroutines from writ's /metrics
	FDs        int     // entries of /proc/<pid>/fd
	StoreTasks int     // sum of writ_tasks{state}
	StoreMiB   float64 // the file store's file (0 without one)
	Pushed     int     // push notifications delivered so far
	Reloads    int     // policy reloads so far (ok + failed)
	InFlight   int     // requests in flight at the sample
}

var header = []string{"t_s", "requests", "unexpected_errors", "expected_refusals", "p50_ms", "p99_ms", "p999_ms",
	"rss_mib", "goroutines", "open_fds", "store_tasks", "store_file_mib", "push_delivered", "policy_reloads", "in_flight"}

// WriteCSV writes the samples with a header row.
func WriteCSV(w io.Writer, s []Sample) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(header); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	for _, x := range s {
		if err := cw.Write([]string{f(x.T), strconv.Itoa(x.Requests), strconv.Itoa(x.Unexpected), strconv.Itoa(x.Expected),
			f(x.P50), f(x.P99), f(x.P999), f(x.RSSMiB), strconv.Itoa(x.Goroutines), strconv.Itoa(x.FDs),
			strconv.Itoa(x.StoreTasks), f(x.StoreMiB), strconv.Itoa(x.Pushed), strconv.Itoa(x.Reloads), strconv.Itoa(x.InFlight)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// ReadCSV reads samples WriteCSV wrote, and the times (s) at which the
// policy reload count went up.
func ReadCSV(r io.Reader) ([]Sample, []float64, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, nil, err
	}
	if len(rows) == 0 || strings.Join(rows[0], ",") != strings.Join(header, ",") {
		return nil, nil, fmt.Errorf("not a soak CSV (header %v)", rows[0])
	}
	var out []Sample
	var reloads []float64
	for i, row := range rows[1:] {
		var x Sample
		fs := []*float64{&x.T, nil, nil, nil, &x.P50, &x.P99, &x.P999, &x.RSSMiB, nil, nil, nil, &x.StoreMiB}
		is := map[int]*int{1: &x.Requests, 2: &x.Unexpected, 3: &x.Expected, 8: &x.Goroutines, 9: &x.FDs, 10: &x.StoreTasks,
			12: &x.Pushed, 13: &x.Reloads, 14: &x.InFlight}
		for j, v := range row {
			if j < len(fs) && fs[j] != nil {
				if *fs[j], err = strconv.ParseFloat(v, 64); err != nil {
					return nil, nil, fmt.Errorf("row %d: %w", i+2, err)
				}
			} else if p, ok := is[j]; ok {
				if *p, err = strconv.Atoi(v); err != nil {
					return nil, nil, fmt.Errorf("row %d: %w", i+2, err)
				}
			}
		}
		if len(out) > 0 && x.Reloads > out[len(out)-1].Reloads {
			reloads = append(reloads, x.T)
		}
		out = append(out, x)
	}
	return out, reloads, nil
}

// Percentile returns the p-th percentile (0..100) of sorted values, nearest
// rank; 0 for none.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// Criteria are the pass conditions of a run.
type Criteria struct {
	// Warmup is the part of the run not judged for flatness (the bounded
	// caches and the store fill during it).
	Warmup time.Duration
	// Growth is the largest relative rise allowed from the middle third of
	// the judged part to its last third, on top of the absolute slack.
	Growth                  float64
	RSSSlackMiB             float64
	GoroutineSlack, FDSlack float64
	MaxStoreTasks           int
	MinRateShare            float64 // achieved / target rate
	TargetRate              float64
	MaxUnexpected           int
}

// Summary is a run judged.
type Summary struct {
	Duration                      time.Duration
	Requests, Unexpected          int
	Expected                      int
	Rate                          float64 // answered per second, whole run
	P50, P99, P999, Max           float64 // ms, whole run
	Pushed, Reloads               int
	StartRSS, MidRSS, LastRSS     float64 // MiB: after warm-up, middle third mean, last third mean
	EndRSS, MaxRSS                float64
	StartG, MidG, LastG, EndG     float64
	StartFD, MidFD, LastFD, EndFD float64
	MaxStore                      int
	MaxStoreMiB, EndStoreMiB      float64
	Failures                      []string
}

// Judge summarises the samples and the run's latencies (ms) against c.
func Judge(s []Sample, latencies []float64, c Criteria) Summary {
	var sum Summary
	if len(s) == 0 {
		sum.Failures = append(sum.Failures, "no samples")
		return sum
	}
	sum.Duration = time.Duration(s[len(s)-1].T * float64(time.Second))
	for _, x := range s {
		sum.Requests += x.Requests
		sum.Unexpected += x.Unexpected
		sum.Expected += x.Expected
		sum.MaxStore = max(sum.MaxStore, x.StoreTasks)
		sum.MaxRSS = math.Max(sum.MaxRSS, x.RSSMiB)
		sum.MaxStoreMiB = math.Max(sum.MaxStoreMiB, x.StoreMiB)
	}
	last := s[len(s)-1]
	sum.Pushed, sum.Reloads = last.Pushed, last.Reloads
	sum.EndRSS, sum.EndG, sum.EndFD, sum.EndStoreMiB = last.RSSMiB, float64(last.Goroutines), float64(last.FDs), last.StoreMiB
	if sum.Duration > 0 {
		sum.Rate = float64(sum.Requests) / sum.Duration.Seconds()
	}
	l := slices.Clone(latencies)
	slices.Sort(l)
	sum.P50, sum.P99, sum.P999 = Percentile(l, 50), Percentile(l, 99), Percentile(l, 99.9)
	if len(l) > 0 {
		sum.Max = l[len(l)-1]
	}

	var judged []Sample
	for _, x := range s {
		if x.T >= c.Warmup.Seconds() {
			judged = append(judged, x)
		}
	}
	fail := func(f string, a ...any) { sum.Failures = append(sum.Failures, fmt.Sprintf(f, a...)) }
	if len(judged) < 6 {
		fail("too few samples after the warm-up (%d)", len(judged))
		return sum
	}
	third := len(judged) / 3
	mid, end := judged[third:2*third], judged[2*third:]
	mean := func(xs []Sample, f func(Sample) float64) float64 {
		t := 0.0
		for _, x := range xs {
			t += f(x)
		}
		return t / float64(len(xs))
	}
	rss := func(x Sample) float64 { return x.RSSMiB }
	gor := func(x Sample) float64 { return float64(x.Goroutines) }
	fds := func(x Sample) float64 { return float64(x.FDs) }
	sum.StartRSS, sum.StartG, sum.StartFD = judged[0].RSSMiB, float64(judged[0].Goroutines), float64(judged[0].FDs)
	sum.MidRSS, sum.LastRSS = mean(mid, rss), mean(end, rss)
	sum.MidG, sum.LastG = mean(mid, gor), mean(end, gor)
	sum.MidFD, sum.LastFD = mean(mid, fds), mean(end, fds)
	flat := func(name string, m, e, slack float64) {
		if e > m*(1+c.Growth)+slack {
			fail("%s grew: last-third mean %.1f > middle-third mean %.1f × %.2f + %.0f", name, e, m, 1+c.Growth, slack)
		}
	}
	flat("RSS (MiB)", sum.MidRSS, sum.LastRSS, c.RSSSlackMiB)
	flat("goroutines", sum.MidG, sum.LastG, c.GoroutineSlack)
	flat("open files", sum.MidFD, sum.LastFD, c.FDSlack)
	if sum.Unexpected > c.MaxUnexpected {
		fail("%d unexpected errors", sum.Unexpected)
	}
	if c.MaxStoreTasks > 0 && sum.MaxStore > c.MaxStoreTasks {
		fail("the store held %d tasks, above its bound %d", sum.MaxStore, c.MaxStoreTasks)
	}
	if c.TargetRate > 0 && sum.Rate < c.TargetRate*c.MinRateShare {
		fail("answered %.1f requests/s, below %.0f%% of the target %.0f", sum.Rate, c.MinRateShare*100, c.TargetRate)
	}
	return sum
}

// Markdown renders the summary as a small report.
func (s Summary) Markdown(c Criteria, target float64) string {
	var b strings.Builder
	verdict := "PASS"
	if len(s.Failures) > 0 {
		verdict = "FAIL: " + strings.Join(s.Failures, "; ")
	}
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| duration | %s at a target of %.0f requests/s |\n", s.Duration.Round(time.Second), target)
	fmt.Fprintf(&b, "| requests answered | %d (%.1f/s); %d expected refusals, %d unexpected errors |\n", s.Requests, s.Rate, s.Expected, s.Unexpected)
	fmt.Fprintf(&b, "| latency (whole run) | p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.1f ms |\n", s.P50, s.P99, s.P999, s.Max)
	fmt.Fprintf(&b, "| RSS | %.1f MiB after warm-up → %.1f (middle third) → %.1f (last third); %.1f at the end, %.1f max |\n", s.StartRSS, s.MidRSS, s.LastRSS, s.EndRSS, s.MaxRSS)
	fmt.Fprintf(&b, "| goroutines | %.0f → %.1f → %.1f; %.0f at the end |\n", s.StartG, s.MidG, s.LastG, s.EndG)
	fmt.Fprintf(&b, "| open files | %.0f → %.1f → %.1f; %.0f at the end |\n", s.StartFD, s.MidFD, s.LastFD, s.EndFD)
	fmt.Fprintf(&b, "| store | at most %d tasks (bound %d); file %.1f MiB at the end, %.1f max |\n", s.MaxStore, c.MaxStoreTasks, s.EndStoreMiB, s.MaxStoreMiB)
	fmt.Fprintf(&b, "| push deliveries, policy reloads | %d, %d |\n", s.Pushed, s.Reloads)
	fmt.Fprintf(&b, "| criteria | warm-up %s not judged; last-third mean ≤ middle-third mean × %.2f + slack (RSS %.0f MiB, goroutines %.0f, open files %.0f); zero unexpected errors; store within its bound; ≥ %.0f%% of the target rate |\n",
		c.Warmup, 1+c.Growth, c.RSSSlackMiB, c.GoroutineSlack, c.FDSlack, c.MinRateShare*100)
	fmt.Fprintf(&b, "| verdict | %s |\n", verdict)
	return b.String()
}
