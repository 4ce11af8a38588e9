package authz

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// DefaultQuery is the decision the shipped policy defines.
const DefaultQuery = "data.writ.authz.decision"

// Policy is one compiled, immutable policy set: the compiled decision query, the
// files it came from and its revision, what of the input it reads, and the
// residuals of its partial evaluation per target (built on first use). A reload
// builds a new Policy fully or not at all.
type Policy struct {
	Revision string
	Files    []string
	Loaded   time.Time
	Tests    TestSummary
	// BundleRevision is the manifest revision of the bundle the set came
	// from ("" for files); Revision then ends in "@" and it (LoadOptions).
	BundleRevision string

	store    storage.Store
	compiler *ast.Compiler
	// modules are the parsed (uncompiled) non-test modules; a residual is
	// compiled from them and its support rules.
	modules map[string]*ast.Module
	// full is the decision query on the whole policy.
	full *program
	// reads is what of the input the policy can read, every rule of it;
	// view is what its decision reads of it: the decision-cache key and the
	// OPA input of the whole policy cover that and nothing else (a
	// residual's cover what the residual reads, partial.go).
	reads reads
	view  *view
	// noPartial: every target evaluates the whole policy.
	noPartial bool
	targets   targets
	// required is the scopes each operation requires (RequiredScopes).
	required requiredScopes
	// rules are the compiled queries of the policy's other rules (rule.go).
	rules ruleQueries
}

// TestSummary counts the results of a policy set's own Rego tests.
type TestSummary struct {
	Passed, Failed, Errored int
	Failures                []string
}

// ErrPolicyTests is returned when a policy set fails its own tests.
var ErrPolicyTests = errors.New("policy tests failed")

// LoadOptions control how a policy set is loaded.
type LoadOptions struct {
	// Query is the decision to prepare (default DefaultQuery).
	Query string
	// SkipTests loads a set without running its _test.rego files.
	SkipTests bool
	// NoPartial turns off partial evaluation per target: every decision
	// evaluates the whole policy.
	NoPartial bool
	// Facts are the configuration's facts (config.PolicyFacts), merged over
	// the data files for decisions (withFacts) and named in the revision. The
	// set's own tests run on its files alone, as `opa test` runs them.
	Facts map[string]any
	// Smoke are known requests the set must decide without an error before
	// it is accepted (at start and on every reload): a set that compiles and
	// passes its tests (or has none) but fails on real requests is refused.
	Smoke []Smoke
	// Rules are references to rules other than the decision that the set
	// must define (an AuthZEN application's decision, named in writ's
	// configuration): a set that defines nothing at one of them is refused,
	// at start and on every reload. Their queries are compiled at load.
	Rules []string
	// BundleRevision is the manifest revision of the OPA bundle the set
	// came from. It is folded into Policy.Revision as "<digest>@<bundle
	// revision>", so every place that names the revision (decision lines,
	// /readyz, the admin API, metrics) names the bundle's too, and it is
	// kept in Policy.BundleRevision for whoever wants it alone.
	BundleRevision string
}

// Smoke is one known request of LoadOptions.Smoke, and what to call it in an
// error.
type Smoke struct {
	Name  string
	Input *Input
}

// policyFiles is the loader filter: it keeps .rego, .json and .yaml files (it
// returns true for what to skip).
func policyFiles(abspath string, info fs.FileInfo, _ int) bool {
	if strings.HasPrefix(info.Name(), "..") {
		// Kubernetes mounts a ConfigMap as ..data and ..<timestamp> beside links
		// to them: load each file once, through its link.
		return true
	}
	return !info.IsDir() && !isPolicyFile(abspath)
}

// isTest reports whether a file holds Rego tests (kept out of the decision query).
func isTest(path string) bool { return strings.HasSuffix(path, "_test.rego") }

// LoadPolicy compiles every .rego and data file under the given paths (files or
// directories), runs the set's own Rego tests, and prepares the decision query.
// Any failure returns an error naming the file and line; nothing is half-loaded.
func LoadPolicy(ctx context.Context, paths []string, opt LoadOptions) (*Policy, error) {
	if opt.Query == "" {
		opt.Query = DefaultQuery
	}
	if len(paths) == 0 {
		return nil, errors.New("no policy paths given")
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("policy path: %w", err)
		}
	}
	res, err := loader.NewFileLoader().WithRegoVersion(ast.RegoV1).Filtered(paths, policyFiles)
	if err != nil {
		return nil, fmt.Errorf("loading policies: %w", err)
	}
	if len(res.Modules) == 0 {
		return nil, fmt.Errorf("no .rego files under %s", strings.Join(paths, ", "))
	}
	revision, files, err := revisionOf(paths)
	if err != nil {
		return nil, fmt.Errorf("reading policies: %w", err)
	}
	// The data document is stored as OPA values, so a decision reads
	// data.writ.config without converting it from Go values on every evaluation.
	store, err := res.StoreWithOpts(inmem.OptReturnASTValuesOnRead(true), inmem.OptRoundTripOnWrite(false))
	if err != nil {
		return nil, fmt.Errorf("loading policy data: %w", err)
	}
	p := &Policy{Revision: revision, Files: files, Loaded: time.Now(), store: store, noPartial: opt.NoPartial,
		targets: targets{m: map[string]*targetProgram{}}}
	if !opt.SkipTests {
		_, sum, err := runTests(ctx, res.ParsedModules(), store)
		p.Tests = sum
		if err != nil {
			return nil, err
		}
		if ctx.Err() != nil {
			// A cancelled run reports no failures: it is not a passing one.
			return nil, fmt.Errorf("policy tests did not finish: %w", ctx.Err())
		}
	}
	if opt.Facts != nil {
		digest, err := factsDigest(opt.Facts)
		if err != nil {
			return nil, fmt.Errorf("configuration facts: %w", err)
		}
		p.Revision = withDigest(p.Revision, digest)
		p.store = inmem.NewFromObjectWithOpts(withFacts(res.Documents, opt.Facts),
			inmem.OptReturnASTValuesOnRead(true), inmem.OptRoundTripOnWrite(false))
	}
	if opt.BundleRevision != "" {
		p.Revision, p.BundleRevision = p.Revision+"@"+opt.BundleRevision, opt.BundleRevision
	}
	if err := p.compile(ctx, res.Modules, opt.Query); err != nil {
		return nil, err
	}
	for _, ref := range opt.Rules {
		if _, err := p.rule(ref); err != nil {
			return nil, fmt.Errorf("the policy lacks a rule the configuration names: %w", err)
		}
	}
	for _, s := range opt.Smoke {
		// The whole policy, with built-in errors strict as in every decision.
		if _, err := p.decision(ctx, p.full, p.value(s.Input, nil)); err != nil {
			return nil, fmt.Errorf("the policy fails on a known request (%s): %w", s.Name, err)
		}
	}
	return p, nil
}

// compile compiles the non-test modules and the decision query, and analyzes
// what of the input the policy reads.
func (p *Policy) compile(ctx context.Context, files map[string]*loader.RegoFile, query string) error {
	body, err := decisionQuery(query)
	if err != nil {
		return err
	}
	p.modules = map[string]*ast.Module{}
	for path, m := range files {
		if !isTest(path) {
			p.modules[path] = m.Parsed
		}
	}
	txn, err := p.store.NewTransaction(ctx)
	if err != nil {
		return err
	}
	defer p.store.Abort(ctx, txn)
	c := p.newCompiler(ctx, txn)
	c.Compile(p.modules)
	if c.Failed() {
		return fmt.Errorf("compiling policies: %w", c.Errors)
	}
	q, err := c.QueryCompiler().Compile(body)
	if err != nil {
		return fmt.Errorf("compiling policies: %w", err)
	}
	p.compiler, p.full = c, &program{compiler: c, query: q}
	p.reads = analyzeReads(c.Modules)
	p.view = newView(p.reads, false)
	return nil
}

// newCompiler is the compiler every program of the policy is compiled with.
func (p *Policy) newCompiler(ctx context.Context, txn storage.Transaction) *ast.Compiler {
	return ast.NewCompiler().WithDefaultRegoVersion(ast.RegoV1).
		WithPathConflictsCheck(storage.NonEmpty(ctx, p.store, txn))
}

// TestResult is one Rego test's outcome.
type TestResult struct {
	Name     string
	Package  string
	Location string
	Pass     bool
	Skipped  bool
	Err      string
	// Output is what the test printed (print()). A shipped test that fails
	// prints what it expected and what came out (docs/policy-authoring.md).
	Output string
	// FailedAt is the expression a failed test stopped at, "file:line: text"
	// (TestPolicies only; empty when it cannot be told).
	FailedAt string
	// FailedValues is that expression drawn with the values of its parts, as
	// `opa test --var-values` draws it.
	FailedValues string
	Duration     time.Duration
}

// TestPolicies loads the policy and data files under paths and runs their Rego
// tests, as `opa test` does. A failed test is run once more, traced, to find
// the expression it failed at (as `opa test --var-values` does, for the
// failed tests alone).
func TestPolicies(ctx context.Context, paths []string) ([]TestResult, TestSummary, error) {
	res, err := loader.NewFileLoader().WithRegoVersion(ast.RegoV1).Filtered(paths, policyFiles)
	if err != nil {
		return nil, TestSummary{}, fmt.Errorf("loading policies: %w", err)
	}
	store, err := res.Store()
	if err != nil {
		return nil, TestSummary{}, fmt.Errorf("loading policy data: %w", err)
	}
	modules := res.ParsedModules()
	results, sum, err := runTests(ctx, modules, store)
	if errors.Is(err, ErrPolicyTests) {
		at := failedAt(ctx, modules, store, results)
		for i := range results {
			f := at[results[i].Location]
			results[i].FailedAt, results[i].FailedValues = f.at, f.values
		}
	}
	return results, sum, err
}

// newRunner is the test runner every run of a set's tests uses.
func newRunner(modules map[string]*ast.Module, store storage.Store) *tester.Runner {
	return tester.NewRunner().SetStore(store).SetModules(modules).SetTimeout(30 * time.Second)
}

// runTests runs the set's _test.rego files through OPA's tester.
func runTests(ctx context.Context, modules map[string]*ast.Module, store storage.Store) ([]TestResult, TestSummary, error) {
	var sum TestSummary
	hasTests := false
	for path := range modules {
		if isTest(path) {
			hasTests = true
		}
	}
	if !hasTests {
		return nil, sum, nil
	}
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		return nil, sum, err
	}
	defer store.Abort(ctx, txn)
	ch, err := newRunner(modules, store).RunTests(ctx, txn)
	if err != nil {
		return nil, sum, fmt.Errorf("running policy tests: %w", err)
	}
	var results []TestResult
	for r := range ch {
		tr := TestResult{Name: r.Name, Package: r.Package, Duration: r.Duration, Output: string(r.Output)}
		if r.Location != nil {
			tr.Location = r.Location.String()
		}
		switch {
		case r.Error != nil:
			sum.Errored++
			tr.Err = r.Error.Error()
			sum.Failures = append(sum.Failures, fmt.Sprintf("%s.%s: %v%s", r.Package, r.Name, r.Error, printed(tr.Output)))
		case r.Fail:
			sum.Failed++
			sum.Failures = append(sum.Failures, fmt.Sprintf("%s.%s (%s)%s", r.Package, r.Name, tr.Location, printed(tr.Output)))
		case r.Skip:
			tr.Skipped = true
		default:
			sum.Passed++
			tr.Pass = true
		}
		results = append(results, tr)
	}
	if sum.Failed+sum.Errored > 0 {
		return results, sum, fmt.Errorf("%w: %d failed, %d errored: %s", ErrPolicyTests, sum.Failed, sum.Errored, strings.Join(sum.Failures, "; "))
	}
	return results, sum, nil
}

// maxPrinted bounds what a failed test's output adds to TestSummary.Failures
// (and so to a refused reload's error and its log line).
const maxPrinted = 1024

// printed is a failed test's output for TestSummary.Failures: on one line,
// after a colon, at most maxPrinted bytes.
func printed(output string) string {
	s := strings.Join(strings.Fields(output), " ")
	if s == "" {
		return ""
	}
	if len(s) > maxPrinted {
		s = strings.ToValidUTF8(s[:maxPrinted], "") + " …"
	}
	return ": " + s
}

// maxFailedAt bounds the expression text of TestResult.FailedAt.
const maxFailedAt = 240

// failure is where a failed test stopped (TestResult.FailedAt, FailedValues).
type failure struct{ at, values string }

// failedAt runs the failed tests of results again with tracing and returns,
// by test location, the expression each failed at: the last expression of
// the test's own evaluation that failed (not the query of the test, nor an
// every, whose failing body expression is the one to show).
func failedAt(ctx context.Context, modules map[string]*ast.Module, store storage.Store, results []TestResult) map[string]failure {
	var names []string
	for _, r := range results {
		if !r.Pass && !r.Skipped && r.Err == "" {
			names = append(names, regexp.QuoteMeta(r.Package+"."+strings.SplitN(r.Name, "#", 2)[0]))
		}
	}
	out := map[string]failure{}
	if len(names) == 0 {
		return out
	}
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		return out
	}
	defer store.Abort(ctx, txn)
	ch, err := newRunner(modules, store).EnableTracing(true).Filter("^("+strings.Join(names, "|")+")$").RunTests(ctx, txn)
	if err != nil {
		return out
	}
	for r := range ch {
		if !r.Fail || r.Location == nil {
			continue
		}
		for _, e := range slices.Backward(r.Trace) {
			if e.Op != topdown.FailOp || e.Location == nil || e.QueryID == 0 {
				continue
			}
			if expr, ok := e.Node.(*ast.Expr); ok {
				if _, every := expr.Terms.(*ast.Every); every {
					continue
				}
			}
			text := strings.Join(strings.Fields(string(e.Location.Text)), " ")
			if len(text) > maxFailedAt {
				text = strings.ToValidUTF8(text[:maxFailedAt], "") + " …"
			}
			var values strings.Builder
			if err := topdown.PrettyEvent(&values, e, topdown.PrettyEventOpts{PrettyVars: true}); err != nil {
				values.Reset()
			}
			out[r.Location.String()] = failure{at: fmt.Sprintf("%s:%d: %s", e.Location.File, e.Location.Row, text), values: values.String()}
			break
		}
	}
	return out
}
