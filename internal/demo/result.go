package demo

import (
	"fmt"
	"io"
	"reflect"
	"strings"
)

// Check is one expectation of a step as it was checked: what, whether it held,
// what writ did and what the scenario wants.
type Check struct {
	Name string
	OK   bool
	Got  string
	Want string
}

func (c Check) String() string { return fmt.Sprintf("%s: got %s, want %s", c.Name, c.Got, c.Want) }

// Entry is one thing a step shows, in order: a line of its story, or a check
// together with the line that shows its verdict (Text may then be empty).
type Entry struct {
	Text  string
	Check *Check
}

// Result is one step as it ran.
type Result struct {
	Title   string
	Entries []Entry
}

// Checks are the step's checks, in order.
func (r Result) Checks() []Check {
	var out []Check
	for _, e := range r.Entries {
		if e.Check != nil {
			out = append(out, *e.Check)
		}
	}
	return out
}

// Failures are the checks that did not hold.
func (r Result) Failures() []Check {
	var out []Check
	for _, c := range r.Checks() {
		if !c.OK {
			out = append(out, c)
		}
	}
	return out
}

// Verdicts are the lines that show a check's outcome.
func (r Result) Verdicts() []string {
	var out []string
	for _, e := range r.Entries {
		if e.Check != nil && e.Text != "" {
			out = append(out, e.Text)
		}
	}
	return out
}

// recorder is what a step writes its story and its checks to.
type recorder struct{ res *Result }

// say adds one line of the story (an empty format adds a blank line).
func (r *recorder) say(format string, args ...any) {
	r.res.Entries = append(r.res.Entries, Entry{Text: fmt.Sprintf(format, args...)})
}

// verdict records a check shown by line (which may be empty: shown only when
// it fails) and reports whether it held.
func (r *recorder) verdict(line, name string, ok bool, got, want any) bool {
	c := &Check{Name: name, OK: ok, Got: show(got), Want: show(want)}
	r.res.Entries = append(r.res.Entries, Entry{Text: line, Check: c})
	return ok
}

// check records a check that no line shows unless it fails.
func (r *recorder) check(name string, ok bool, got, want any) bool {
	return r.verdict("", name, ok, got, want)
}

// equal checks got == want (deeply).
func (r *recorder) equal(name string, got, want any) bool {
	return r.check(name, reflect.DeepEqual(got, want), got, want)
}

// noError checks that a call succeeded.
func (r *recorder) noError(name string, err error) bool {
	return r.check(name, err == nil, errText(err), "no error")
}

func show(v any) string {
	switch v := v.(type) {
	case string:
		if v == "" {
			return `""`
		}
		return v
	case error:
		return errText(v)
	}
	return fmt.Sprint(v)
}

// errText is err's message, or "no error".
func errText(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// PrintStep writes one step the way the seed's worked example does: a ruled
// heading, its story and verdicts, and every failed check where it happened.
func PrintStep(w io.Writer, r Result) {
	if r.Title != "" {
		rule := strings.Repeat("=", 78)
		fmt.Fprintf(w, "\n%s\n%s\n%s\n", rule, r.Title, rule)
	}
	for _, e := range r.Entries {
		if e.Check == nil || e.Text != "" {
			fmt.Fprintln(w, e.Text)
		}
		if e.Check != nil && !e.Check.OK {
			fmt.Fprintf(w, "  !! UNEXPECTED: %s\n", e.Check)
		}
	}
}

// PrintSummary writes the run's verdict and returns how many checks failed.
func PrintSummary(w io.Writer, results []Result) int {
	var failed []Check
	for _, r := range results {
		failed = append(failed, r.Failures()...)
	}
	fmt.Fprintln(w)
	if len(failed) == 0 {
		fmt.Fprintln(w, "All steps behaved as expected.")
		return 0
	}
	fmt.Fprintf(w, "%d check(s) FAILED:\n", len(failed))
	for _, c := range failed {
		fmt.Fprintf(w, "  - %s\n", c)
	}
	return len(failed)
}
