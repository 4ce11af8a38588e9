// Command writ is the delegation authorizer for A2A and ACP agents. This binary
// carries every job.
package main

import (
	"fmt"
	"io"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `writ — policy-as-code delegation authorizer for A2A and ACP agents

Usage:
  writ serve [flags]     run the sidecar in front of the configured agents
  writ demo [-serve]     run writ in front of real demo agents through the whole scenario
  writ inspect [flags]   show the internal request a policy sees (or the protocol error)
  writ eval [flags]      one request through identity and the policy: input and decision
  writ policy test [DIR] run the policies' Rego tests through the embedded engine
  writ validate [flags]  check a configuration file and its policies
  writ report --log FILE render a decision log as a self-contained HTML page
  writ version           print the version

Run "writ <command> -h" for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command line and returns the exit code: 0 success, 1 the
// command's own negative answer (inspect: the request would be refused), 2 usage.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "inspect":
		return inspect(args[1:], stdin, stdout, stderr)
	case "serve":
		return serveCmd(args[1:], stderr)
	case "demo":
		return demoCmd(args[1:], stdout, stderr)
	case "eval":
		return evalCmd(args[1:], stdout, stderr)
	case "policy":
		return policyCmd(args[1:], stdout, stderr)
	case "validate":
		return validateCmd(args[1:], stdout, stderr)
	case "report":
		return reportCmd(args[1:], stdin, stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "writ", version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "writ: unknown command %q\n\n%s", args[0], usage)
	return 2
}
