package server

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/writ-authz/writ/config"
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

// RunPolicyTests is `writ policy test`: the Rego tests of the set under
// candidate (none: cfg's own, or ./policies, or the embedded set), printed;
// with cfg, then the gate a reload of the writ running cfg would apply
// (CheckReload), and, without a candidate, cfg's shadow set the same way
// (a bundle's shadow is the service's to give: only named). ok is false
// when a test failed or the gate refused a set; an error is a check that
// could not be made.
func RunPolicyTests(ctx context.Context, cfg *config.Config, cfgPath string, candidate []string, verbose bool, w io.Writer) (ok bool, err error) {
	tests, err := TestPolicySet(ctx, cfg, candidate)
	if err != nil {
		return false, err
	}
	if tests.Embedded {
		fmt.Fprintln(w, "testing the shipped policies embedded in writ")
	}
	if passed := tests.Print(w, verbose); !passed || cfg == nil {
		return passed, nil
	}
	if ok, err := checkReloadPrint(ctx, cfg, cfgPath, candidate, w); !ok || err != nil || len(candidate) > 0 {
		return ok, err
	}
	switch {
	case cfg.PolicyBundleShadow != nil:
		fmt.Fprintf(w, "the shadow set comes from the policy bundle at %s: name its files to test them (writ policy test -config %s DIR)\n",
			cfg.PolicyBundleShadow.URL, cfgPath)
		return true, nil
	case len(cfg.PoliciesShadow) == 0:
		return true, nil
	}
	fmt.Fprintf(w, "testing the shadow set (policies_shadow: %s)\n", strings.Join(cfg.PoliciesShadow, ", "))
	if tests, err = TestPolicySet(ctx, cfg, cfg.PoliciesShadow); err != nil {
		return false, fmt.Errorf("policies_shadow: %w", err)
	}
	if !tests.Print(w, verbose) {
		return false, nil
	}
	return checkReloadPrint(ctx, cfg, cfgPath, cfg.PoliciesShadow, w)
}

// checkReloadPrint prints what CheckReload finds of the set under candidate.
func checkReloadPrint(ctx context.Context, cfg *config.Config, cfgPath string, candidate []string, w io.Writer) (bool, error) {
	c, err := CheckReload(ctx, cfg, candidate)
	if err != nil {
		return false, err
	}
	return c.Print(w, cfgPath), nil
}
