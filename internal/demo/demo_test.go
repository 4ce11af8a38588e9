package demo

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestScenario plays the whole scenario end to end: the seed agents, writ in
// front of them (the real binary, `writ serve`), real a2a-go clients with
// signed JWTs. Every check of every step must hold; then the printer must
// show each step's heading and verdict lines, and the verdicts the scenario's
// tables want.
func TestScenario(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	decisions := filepath.Join(t.TempDir(), "decisions.jsonl")
	st, err := Start(ctx, Options{Listen: "127.0.0.1:0", Start: serveWrit(t), DecisionLog: decisions})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	results := st.Play(ctx, Scenario, nil)
	t.Logf("the scenario took %s", time.Since(start).Round(time.Millisecond))
	// The demo's policies and configuration, kept for the replay of its log.
	played := t.TempDir()
	if err := os.CopyFS(played, os.DirFS(st.dir)); err != nil {
		t.Fatal(err)
	}
	st.Close()
	defer replayDemoLog(t, decisions, played)

	if len(results) != len(Scenario) {
		t.Fatalf("%d steps played, want %d", len(results), len(Scenario))
	}
	for i, res := range results {
		if res.Title != Scenario[i].Title {
			t.Errorf("step %d is %q, want %q", i, res.Title, Scenario[i].Title)
		}
		if len(res.Checks()) == 0 {
			t.Errorf("%s: no checks", res.Title)
		}
		for _, c := range res.Failures() {
			t.Errorf("%s\n    %s", res.Title, c)
		}
	}

	var out bytes.Buffer
	for _, r := range results {
		PrintStep(&out, r)
	}
	if n := PrintSummary(&out, results); n != 0 || !strings.Contains(out.String(), "All steps behaved as expected.") {
		t.Errorf("the summary counts %d failures", n)
	}
	got := out.String()
	for _, r := range results {
		if len(r.Verdicts()) == 0 {
			t.Errorf("%s shows no verdict line", r.Title)
		}
		for _, line := range append([]string{r.Title}, r.Verdicts()...) {
			if !strings.Contains(got, line+"\n") {
				t.Errorf("the output lacks the line %q", line)
			}
		}
	}
	// The verdict lines of the tables' cases: label -> what the case wants.
	var want [][2]string
	for _, s := range Scenario {
		switch s := s.Run.(type) {
		case Admission:
			for _, c := range s.Cases {
				v := "ALLOW"
				if c.Want != nil {
					v = strings.Join(c.Want, ", ")
				}
				want = append(want, [2]string{c.Label, v})
			}
		case Push:
			for _, c := range s.Refused {
				want = append(want, [2]string{c.Label, c.Want})
			}
		}
	}
	for _, v := range want {
		re := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(v[0]) + ` +-> ` + regexp.QuoteMeta(v[1]) + `$`)
		if !re.MatchString(got) {
			t.Errorf("no line %q -> %q", v[0], v[1])
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", got)
	}
}
