package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/policies"
	"github.com/writ-authz/writ/task"
)

// policyUsage lists writ policy's subcommands.
const policyUsage = `usage: writ policy test [-v] [-config writ.yaml] [DIR...]   run a policy set's Rego tests (opa test-like output)

The policies writ decides with are Rego files (the shipped set is embedded;
policies: in writ.yaml names yours). Related commands: writ eval decides one
request with them (-policies DIR: a candidate set), writ inspect shows the
input they see, writ validate loads a config and its policies as serve would.
writ policy test -h gives the flags.
`

// policyCmd runs `writ policy test [-v] [-config writ.yaml] [DIR...]`: the
// policy set's Rego tests through the embedded engine, with `opa test`-like
// output; with -config, then the gate a reload of the running writ applies
// (the configuration's facts and known requests), and the revision it would
// serve.
func policyCmd(args []string, stdout, stderr io.Writer) int {
	const synopsis = "writ policy test [-v] [-config writ.yaml] [DIR...]"
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stdout, policyUsage)
		return 0
	}
	if len(args) == 0 || args[0] != "test" {
		if len(args) > 0 {
			fmt.Fprintf(stderr, "writ policy: unknown command %q\n\n", args[0])
		}
		fmt.Fprint(stderr, policyUsage)
		return 2
	}
	fs := newFlags("policy test", synopsis,
		"Runs the policies' Rego tests through the embedded engine (opa test-like output). Without DIR: ./policies\n"+
			"when it exists, else the shipped policies embedded in writ. With -config: DIR is a candidate for that\n"+
			"configuration (without DIR, its own policies), and after the tests it must pass what a reload would ask\n"+
			"(the configuration's facts, a known request to every agent); the revision it would serve is printed.")
	verbose := fs.Bool("v", false, "list every test")
	cfgPath := fs.String("config", "", "a configuration the set is a candidate for (writ.yaml of a running writ)")
	if done, code := parseFlags(fs, args[1:], stdout, stderr); done {
		return code
	}
	var cfg *config.Config
	if *cfgPath != "" {
		c, err := config.Load(*cfgPath)
		if err != nil {
			fmt.Fprintf(stderr, "writ policy test: %v\n", err)
			return 2
		}
		cfg = c
	}
	candidate := fs.Args()
	paths := candidate
	if len(paths) == 0 {
		switch st, err := os.Stat("policies"); {
		case cfg != nil && !cfg.EmbeddedPolicies():
			paths = cfg.Policies
		case cfg == nil && err == nil && st.IsDir():
			paths = []string{"policies"}
		default:
			dir, err := os.MkdirTemp("", "writ-policies-")
			if err != nil {
				fmt.Fprintf(stderr, "writ policy test: %v\n", err)
				return 2
			}
			defer os.RemoveAll(dir)
			if err := os.CopyFS(dir, policies.FS); err != nil {
				fmt.Fprintf(stderr, "writ policy test: %v\n", err)
				return 2
			}
			paths = []string{dir}
			fmt.Fprintln(stdout, "testing the shipped policies embedded in writ")
		}
	}
	if code := printPolicyTests(paths, *verbose, stdout, stderr); code != 0 || cfg == nil {
		return code
	}
	return policyGate(cfg, *cfgPath, candidate, stdout, stderr)
}

// printPolicyTests runs the Rego tests of the set under paths and prints
// them as opa test does: a failed test's line, then the expression it failed
// at and what it printed (the shipped tests print what they expected and what
// came out).
func printPolicyTests(paths []string, verbose bool, stdout, stderr io.Writer) int {
	results, sum, err := authz.TestPolicies(context.Background(), paths)
	if err != nil && !errors.Is(err, authz.ErrPolicyTests) {
		fmt.Fprintf(stderr, "writ policy test: %v\n", err)
		return 2
	}
	for _, r := range results {
		switch {
		case r.Err != "":
			fmt.Fprintf(stdout, "ERROR: %s.%s (%s)\n  %s\n", r.Package, r.Name, r.Location, r.Err)
			printIndented(stdout, r.Output)
		case !r.Pass && !r.Skipped:
			fmt.Fprintf(stdout, "FAIL: %s.%s (%s)\n", r.Package, r.Name, r.Location)
			if r.FailedAt != "" {
				fmt.Fprintf(stdout, "  failed at %s\n", r.FailedAt)
			}
			if r.Output == "" {
				// A test that prints nothing of what it expected: the failed
				// expression with the values of its parts.
				printIndented(stdout, r.FailedValues)
			}
			printIndented(stdout, r.Output)
		case verbose:
			fmt.Fprintf(stdout, "PASS: %s.%s (%s)\n", r.Package, r.Name, r.Duration)
			printIndented(stdout, r.Output)
		}
	}
	total := sum.Passed + sum.Failed + sum.Errored
	fmt.Fprintln(stdout, strings.Repeat("-", 80))
	fmt.Fprintf(stdout, "PASS: %d/%d\n", sum.Passed, total)
	if sum.Failed+sum.Errored > 0 {
		fmt.Fprintf(stdout, "FAIL: %d/%d\n", sum.Failed+sum.Errored, total)
		return 1
	}
	if total == 0 {
		fmt.Fprintln(stdout, "no tests found")
		return 1
	}
	return 0
}

// printIndented prints a test's output below its line, indented.
func printIndented(w io.Writer, output string) {
	for line := range strings.SplitSeq(strings.TrimRight(output, "\n"), "\n") {
		if line != "" {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
}

// policyGate loads the set under candidate (none: cfg's own) as a reload of
// the writ running cfg would (its facts and known requests; the tests have
// run), and prints the revision it would serve beside the one cfg's own set
// has: the same revision is the same content, wherever the files live.
func policyGate(cfg *config.Config, cfgPath string, candidate []string, stdout, stderr io.Writer) int {
	ctx := context.Background()
	opt, err := policyOptions(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "writ policy test: %v\n", err)
		return 2
	}
	opt.SkipTests = true
	live, liveErr := loadPolicy(ctx, cfg, opt)
	p := live
	source := policySource(cfg)
	if len(candidate) > 0 {
		p, err = authz.LoadPolicy(ctx, candidate, opt)
		source = strings.Join(candidate, ", ")
	} else {
		err = liveErr
	}
	if err != nil {
		fmt.Fprintf(stdout, "FAIL: %s would be refused by %s: %v\n", source, cfgPath, err)
		return 1
	}
	fmt.Fprintf(stdout, "ok: %s passes what a reload of %s asks (%d known requests decided); revision %s\n",
		source, cfgPath, len(opt.Smoke), p.Revision)
	switch {
	case len(candidate) == 0:
	case liveErr != nil:
		fmt.Fprintf(stdout, "the configuration's own policies (%s) do not load: %v\n", policySource(cfg), liveErr)
	case live.Revision == p.Revision:
		fmt.Fprintf(stdout, "the configuration's own policies (%s) are revision %s too: the same content\n", policySource(cfg), live.Revision)
	default:
		fmt.Fprintf(stdout, "the configuration's own policies (%s) are revision %s\n", policySource(cfg), live.Revision)
	}
	return 0
}

// evalOutput is what `writ eval` prints. With -policies, Decision is the
// candidate set's and Live the configuration's own set's, for comparison.
type evalOutput struct {
	Input    *authz.Input   `json:"input"`
	Decision evalDecision   `json:"decision"`
	Live     *evalDecision  `json:"live,omitempty"`
	Explain  []authz.Fired  `json:"explain,omitempty"`
	Identity string         `json:"identity_error,omitempty"`
	Fault    *task.Fault    `json:"fault,omitempty"`
	Answer   *wire.Rendered `json:"-"`
}

type evalDecision struct {
	Allow    bool          `json:"allow"`
	Denials  []task.Denial `json:"denials"`
	Revision string        `json:"revision"`
}

// evalCmd runs `writ eval`: one request through identity, input building and the
// policy, printing the input document and the decision.
func evalCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("eval", "writ eval -request FILE [-config writ.yaml] [-policies DIR] [-agent NAME] [-token JWT | -caller FILE] [-explain]",
		"One request through identity and the policy: prints the writ/v1 input document and the decision\n(exit 1 when denied). With -policies: the decision of that candidate set, on the configuration's\nagents, identity and facts, and the configuration's own set's as \"live\"; no running writ is asked\nor changed.")
	reqFile := fs.String("request", "", "a whole HTTP/1.1 request message (see writ inspect)")
	cfgPath := fs.String("config", "writ.yaml", "the configuration file (agents, identity, policies)")
	agentName := fs.String("agent", "", "the target agent (default: the one whose route matches the request path)")
	token := fs.String("token", "", "a bearer token to verify (default: the request's Authorization header)")
	callerFile := fs.String("caller", "", "a JSON caller to use as is, unverified (testing policies)")
	explain := fs.Bool("explain", false, "list the rules that fired")
	candidate := fs.String("policies", "", "a candidate policy directory (or several, comma-separated) to decide with instead of the configuration's")
	if done, code := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if *reqFile == "" {
		fmt.Fprintln(stderr, "writ eval: -request is required")
		fs.Usage()
		return 2
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "writ eval: %v\n", err)
		return 2
	}
	raw, err := os.ReadFile(*reqFile)
	if err != nil {
		fmt.Fprintf(stderr, "writ eval: %v\n", err)
		return 2
	}
	lim := wire.Limits{MaxBodyBytes: cfg.Limits.MaxBodyBytes, MaxJSONDepth: cfg.Limits.MaxJSONDepth}
	in, err := readMessage(raw, lim)
	if err != nil {
		fmt.Fprintf(stderr, "writ eval: %v\n", err)
		return 2
	}
	agent, rest, ok := cfg.Route(in.Path)
	if *agentName != "" {
		agent, ok = cfg.Agent(*agentName)
		rest = in.Path
	}
	if !ok {
		fmt.Fprintf(stderr, "writ eval: no agent routes %s (use -agent)\n", in.Path)
		return 2
	}
	fullPath := in.Path
	in.Path = rest
	edges, err := adapters.NewRoute(agent.Protocol, agent.JSONRPCPath)
	if err != nil {
		fmt.Fprintf(stderr, "writ eval: %v\n", err)
		return 2
	}
	edge := edges.For(in.Path)
	req, fault := edge.Parse(in, lim)
	out := evalOutput{}
	if fault != nil {
		out.Fault = fault
		writeJSON(stdout, out)
		return 1
	}
	caller, idErr := evalCaller(cfg, in.Header, *token, *callerFile)
	if idErr != nil && *callerFile != "" {
		fmt.Fprintf(stderr, "writ eval: %v\n", idErr)
		return 2
	}
	if idErr != nil {
		out.Identity = idErr.Error()
	}
	// The configuration's facts, but no smoke test: a policy that fails
	// shows its error in the decision printed.
	input := authz.BuildInput(&authz.Facts{Request: &req, Caller: caller, Target: authz.TargetOf(agent),
		HTTP:                  authz.HTTPInfo{Method: in.Method, Path: fullPath, Host: in.Header.Get("Host")},
		DefaultClassification: cfg.DefaultClassification})
	opt := authz.LoadOptions{Facts: cfg.PolicyFacts()}
	p, err := loadPolicy(context.Background(), cfg, opt)
	if *candidate != "" {
		// The live set is only compared with: one that does not load (an
		// edit in place the running writ refused) is said, not fatal.
		if err == nil {
			var live evalDecision
			if live, err = evalDecide(p, input, stderr); err == nil {
				out.Live = &live
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "writ eval: the configuration's own policies, for comparison: %v\n", err)
		}
		if p, err = authz.LoadPolicy(context.Background(), commaList(*candidate), opt); err != nil {
			fmt.Fprintf(stderr, "writ eval: the candidate policies %s: %v\n", *candidate, err)
			return 2
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "writ eval: %v\n", err)
		return 2
	}
	out.Input = input
	if out.Decision, err = evalDecide(p, input, stderr); err != nil {
		fmt.Fprintf(stderr, "writ eval: %v\n", err)
		return 2
	}
	if *explain {
		out.Explain, err = p.Explain(context.Background(), input)
		if err != nil {
			fmt.Fprintf(stderr, "writ eval: explain: %v\n", err)
		}
	}
	writeJSON(stdout, out)
	if !out.Decision.Allow {
		return 1
	}
	return 0
}

// evalDecide is p's decision on input, by an engine of its own (no cache). A
// decision that errors is printed as writ makes it: denied (fail closed),
// and the error said on stderr.
func evalDecide(p *authz.Policy, input *authz.Input, stderr io.Writer) (evalDecision, error) {
	engine, err := authz.NewEngine(p, authz.Options{CacheSize: -1})
	if err != nil {
		return evalDecision{}, err
	}
	d, err := engine.Decide(context.Background(), input)
	if err != nil {
		fmt.Fprintf(stderr, "writ eval: %v (revision %s: the request would be denied: fail closed)\n", err, d.Revision)
	}
	out := evalDecision{Allow: d.Allow, Denials: d.Denials, Revision: d.Revision}
	if out.Denials == nil {
		out.Denials = []task.Denial{}
	}
	return out, nil
}

// evalCaller identifies the caller: a caller file as is, else the token (flag or
// the request's Authorization header) through the configured identity sources.
func evalCaller(cfg *config.Config, h http.Header, token, callerFile string) (identity.Caller, error) {
	if callerFile != "" {
		raw, err := os.ReadFile(callerFile)
		if err != nil {
			return identity.Anonymous(), err
		}
		var c identity.Caller
		if err := json.Unmarshal(raw, &c); err != nil {
			return identity.Anonymous(), fmt.Errorf("%s: %w", callerFile, err)
		}
		return c, nil
	}
	res, err := identity.New(cfg.Identity)
	if err != nil {
		return identity.Anonymous(), err
	}
	defer res.Close()
	hdr := h.Clone()
	if token != "" {
		hdr.Set("Authorization", "Bearer "+token)
	}
	return res.Identify(context.Background(), identity.Credentials{Header: hdr})
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
