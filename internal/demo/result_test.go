package demo

import (
	"bytes"
	"strings"
	"testing"
)

// TestPrinter: a step prints under its ruled heading; a verdict line shows
// whatever the check's outcome; a silent check shows only when it fails, as an
// UNEXPECTED line in place; the summary counts and lists the failures.
func TestPrinter(t *testing.T) {
	res := Result{Title: "9. A STEP"}
	r := &recorder{&res}
	r.say("  story")
	r.verdict("  case a -> ALLOW", "case a", true, "ALLOW", "ALLOW")
	r.verdict("  case b -> DENY", "case b", false, "DENY", "ALLOW")
	r.equal("silent and fine", 1, 1)
	r.equal("silent and broken", []string{"x"}, []string{"y"})
	r.say("")

	var out bytes.Buffer
	PrintStep(&out, res)
	if n := PrintSummary(&out, []Result{res}); n != 2 {
		t.Errorf("PrintSummary counts %d failures, want 2", n)
	}
	rule := strings.Repeat("=", 78)
	want := "\n" + rule + "\n9. A STEP\n" + rule + `
  story
  case a -> ALLOW
  case b -> DENY
  !! UNEXPECTED: case b: got DENY, want ALLOW
  !! UNEXPECTED: silent and broken: got [x], want [y]


2 check(s) FAILED:
  - case b: got DENY, want ALLOW
  - silent and broken: got [x], want [y]
`
	if got := out.String(); got != want {
		t.Errorf("printed:\n%s\nwant:\n%s", got, want)
	}
	if v := res.Verdicts(); len(v) != 2 || v[0] != "  case a -> ALLOW" {
		t.Errorf("verdicts %q", v)
	}
	if c := res.Checks(); len(c) != 4 {
		t.Errorf("%d checks, want 4", len(c))
	}

	out.Reset()
	PrintSummary(&out, []Result{{Title: "fine", Entries: []Entry{{Check: &Check{Name: "x", OK: true}}}}})
	if out.String() != "\nAll steps behaved as expected.\n" {
		t.Errorf("summary of a clean run: %q", out.String())
	}
}
