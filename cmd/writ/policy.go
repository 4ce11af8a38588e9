package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/policies"
	"github.com/writ-authz/writ/server"
)

// policyUsage lists writ policy's subcommands.
const policyUsage = `usage: writ policy test [-v] [DIR...]   run a policy set's Rego tests (opa test-like output)

The policies writ decides with are Rego files (the shipped set is embedded;
policies: in writ.yaml names yours). Related commands: writ eval decides one
request with them, writ inspect shows the input they see, writ validate loads
a config and its policies as serve would. writ policy test -h gives the flags.
`

// policyCmd runs `writ policy test [-v] [DIR...]`: the policy set's Rego tests
// through the embedded engine, with `opa test`-like output.
func policyCmd(args []string, stdout, stderr io.Writer) int {
	const synopsis = "writ policy test [-v] [DIR...]"
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
			"when it exists, else the shipped policies embedded in writ.")
	verbose := fs.Bool("v", false, "list every test")
	if done, code := parseFlags(fs, args[1:], stdout, stderr); done {
		return code
	}
	paths := fs.Args()
	if len(paths) == 0 {
		if st, err := os.Stat("policies"); err == nil && st.IsDir() {
			paths = []string{"policies"}
		} else {
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
	results, sum, err := authz.TestPolicies(context.Background(), paths)
	if err != nil && !errors.Is(err, authz.ErrPolicyTests) {
		fmt.Fprintf(stderr, "writ policy test: %v\n", err)
		return 2
	}
	for _, r := range results {
		switch {
		case r.Err != "":
			fmt.Fprintf(stdout, "ERROR: %s.%s (%s)\n  %s\n", r.Package, r.Name, r.Location, r.Err)
		case !r.Pass && !r.Skipped:
			fmt.Fprintf(stdout, "FAIL: %s.%s (%s)\n", r.Package, r.Name, r.Location)
		case *verbose:
			fmt.Fprintf(stdout, "PASS: %s.%s (%s)\n", r.Package, r.Name, r.Duration)
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

// evalCmd runs `writ eval`: one request through identity, input building and the
// policy (server.Eval), printing the input document and the decision.
func evalCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("eval", "writ eval -request FILE [-config writ.yaml] [-agent NAME] [-token JWT | -caller FILE] [-explain]",
		"One request through identity and the policy: prints the writ/v1 input document and the decision\n(exit 1 when denied).")
	reqFile := fs.String("request", "", "a whole HTTP/1.1 request message (see writ inspect)")
	cfgPath := fs.String("config", "writ.yaml", "the configuration file (agents, identity, policies)")
	agentName := fs.String("agent", "", "the target agent (default: the one whose route matches the request path)")
	token := fs.String("token", "", "a bearer token to verify (default: the request's Authorization header)")
	callerFile := fs.String("caller", "", "a JSON caller to use as is, unverified (testing policies)")
	explain := fs.Bool("explain", false, "list the rules that fired")
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
	out, err := server.Eval(context.Background(), cfg, server.EvalRequest{Message: raw, Agent: *agentName,
		Token: *token, CallerFile: *callerFile, Explain: *explain})
	if err != nil {
		fmt.Fprintf(stderr, "writ eval: %v\n", err)
		return 2
	}
	if out.DecideErr != nil {
		fmt.Fprintf(stderr, "writ eval: %v (the request would be denied: fail closed)\n", out.DecideErr)
	}
	if out.ExplainErr != nil {
		fmt.Fprintf(stderr, "writ eval: explain: %v\n", out.ExplainErr)
	}
	writeJSON(stdout, out)
	if out.Fault != nil || !out.Decision.Allow {
		return 1
	}
	return 0
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
