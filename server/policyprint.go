package server

import (
	"fmt"
	"io"
	"strings"
)

// Print writes the set's test results as opa test does: a failed test's
// line, then the expression it failed at and what it printed (the shipped
// tests print what they expected and what came out); with verbose every
// passing test too; then the summary. It reports whether every test passed
// (and there was one).
func (t *PolicyTests) Print(w io.Writer, verbose bool) bool {
	for _, r := range t.Results {
		switch {
		case r.Err != "":
			fmt.Fprintf(w, "ERROR: %s.%s (%s)\n  %s\n", r.Package, r.Name, r.Location, r.Err)
			printIndented(w, r.Output)
		case !r.Pass && !r.Skipped:
			fmt.Fprintf(w, "FAIL: %s.%s (%s)\n", r.Package, r.Name, r.Location)
			if r.FailedAt != "" {
				fmt.Fprintf(w, "  failed at %s\n", r.FailedAt)
			}
			if r.Output == "" {
				// A test that prints nothing of what it expected: the failed
				// expression with the values of its parts.
				printIndented(w, r.FailedValues)
			}
			printIndented(w, r.Output)
		case verbose:
			fmt.Fprintf(w, "PASS: %s.%s (%s)\n", r.Package, r.Name, r.Duration)
			printIndented(w, r.Output)
		}
	}
	sum := t.Summary
	total := sum.Passed + sum.Failed + sum.Errored
	fmt.Fprintln(w, strings.Repeat("-", 80))
	fmt.Fprintf(w, "PASS: %d/%d\n", sum.Passed, total)
	if sum.Failed+sum.Errored > 0 {
		fmt.Fprintf(w, "FAIL: %d/%d\n", sum.Failed+sum.Errored, total)
		return false
	}
	if total == 0 {
		fmt.Fprintln(w, "no tests found")
		return false
	}
	return true
}

// printIndented prints a test's output below its line, indented.
func printIndented(w io.Writer, output string) {
	for line := range strings.SplitSeq(strings.TrimRight(output, "\n"), "\n") {
		if line != "" {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
}

// Print writes what the check found of the set against the configuration
// at cfgPath: refused and why, or the revision a reload would serve beside
// the one the configuration's own set has. It reports whether a reload
// would take the set.
func (c *ReloadCheck) Print(w io.Writer, cfgPath string) bool {
	if c.Refused != nil {
		fmt.Fprintf(w, "FAIL: %s would be refused by %s: %v\n", c.Source, cfgPath, c.Refused)
		return false
	}
	fmt.Fprintf(w, "ok: %s passes what a reload of %s asks (%d known requests decided); revision %s\n",
		c.Source, cfgPath, c.Known, c.Revision)
	switch {
	case !c.Candidate:
	case c.LiveErr != nil:
		fmt.Fprintf(w, "the configuration's own policies (%s) do not load: %v\n", c.LiveSource, c.LiveErr)
	case c.LiveRevision == c.Revision:
		fmt.Fprintf(w, "the configuration's own policies (%s) are revision %s too: the same content\n", c.LiveSource, c.LiveRevision)
	default:
		fmt.Fprintf(w, "the configuration's own policies (%s) are revision %s\n", c.LiveSource, c.LiveRevision)
	}
	return true
}
