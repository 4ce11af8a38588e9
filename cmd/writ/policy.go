package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/server"
)

// policyUsage lists writ policy's subcommands.
const policyUsage = `usage: writ policy test [-v] [-config writ.yaml] [DIR...]   run a policy set's Rego tests (opa test-like output)
       writ policy replay -log decisions.jsonl -policies DIR [-base DIR] [-expect FILE] [-o impact.html]
                                                          what a proposed set would change: every decision a
                                                          log recorded, decided again, and what flips

The policies writ decides with are Rego files (the shipped set is embedded;
policies: in writ.yaml names yours). Related commands: writ eval decides one
request with them (-policies DIR: a candidate set), writ inspect shows the
input they see, writ validate loads a config and its policies as serve would.
writ policy replay needs a log written with decision_log.include_input: true;
it exits 0 when nothing flipped beyond -expect, 1 when something did, 2 when
it cannot replay. writ policy test -h and writ policy replay -h give the flags.
`

// policyCmd runs `writ policy test [-v] [-config writ.yaml] [DIR...]`: the
// policy set's Rego tests through the embedded engine, with `opa test`-like
// output; with -config, then the gate a reload of the running writ applies
// (server.CheckReload: the configuration's facts and known requests), and
// the revision it would serve.
func policyCmd(args []string, stdout, stderr io.Writer) int {
	const synopsis = "writ policy test [-v] [-config writ.yaml] [DIR...]"
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stdout, policyUsage)
		return 0
	}
	if len(args) > 0 && args[0] == "replay" {
		return replayCmd(args[1:], stdout, stderr)
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
			"(the configuration's facts, a known request to every agent); the revision it would serve is printed.\n"+
			"Without DIR, the configuration's shadow set (policies_shadow:) is then tested the same way.")
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
	ok, err := server.RunPolicyTests(context.Background(), cfg, *cfgPath, fs.Args(), *verbose, stdout)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "writ policy test: %v\n", err)
		return 2
	case !ok:
		return 1
	}
	return 0
}

// evalCmd runs `writ eval`: one request through identity, input building and the
// policy (server.Eval), printing the input document and the decision.
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
	out, err := server.Eval(context.Background(), cfg, server.EvalRequest{Message: raw, Agent: *agentName,
		Token: *token, CallerFile: *callerFile, Explain: *explain, Policies: commaList(*candidate)})
	if err != nil {
		fmt.Fprintf(stderr, "writ eval: %v\n", err)
		return 2
	}
	if out.LiveErr != nil {
		fmt.Fprintf(stderr, "writ eval: %v\n", out.LiveErr)
	}
	for _, d := range []*server.EvalDecision{out.Live, &out.Decision} {
		if d != nil && d.Err != nil {
			fmt.Fprintf(stderr, "writ eval: %v (revision %s: the request would be denied: fail closed)\n", d.Err, d.Revision)
		}
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
