// Command writ is the delegation authorizer for A2A and ACP agents. This binary
// carries every job.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/writ-authz/writ/internal/buildinfo"
)

// version and buildTime may be set at build time (make build and make
// install set buildTime): -ldflags "-X main.version=v1.2.3 -X
// main.buildTime=2026-12-01T16:00:00Z". Otherwise `writ version` reads the
// module version and the commit from the binary's build info.
var (
	version   = ""
	buildTime = ""
)

// usage is `writ -h`. Every command's own -h starts with its line here, and
// README's command table spells every flag as these do (one dash).
const usage = `writ — policy-as-code delegation authorizer for A2A and ACP agents

Usage:
  writ serve [-config writ.yaml]          run the sidecar in front of the configured agents
  writ validate [-config writ.yaml]       check a configuration: keys, identity sources, policies, agents
  writ dev token [-aud AUD] [-scope S]    sign a development token (writ dev token -h for its claims)
  writ dev jwks [-o FILE]                 the development key's JWKS, for identity.jwt[].jwks_file
  writ sts [-config sts.yaml]             run the development and CI token exchange service (RFC 8693)
  writ demo [-serve]                      run writ in front of real demo agents through the whole scenario
  writ inspect -file req.http             show the internal request a policy sees (or the protocol error)
  writ eval -request req.http             one request through identity and the policy: input and decision
  writ policy test [-v] [DIR...]          run the policies' Rego tests through the embedded engine
  writ report -log FILE [-o out.html]     render decision logs as a self-contained HTML page (-chain ID: one delegation)
  writ report -verify [-key PUB] LOG...   check decision logs' digest chain and signed checkpoints
  writ version                            print the version, commit and build time

Run "writ <command> -h" for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command line and returns the exit code: 0 success (and
// -h), 1 the command's own negative answer (inspect: the request would be
// refused; validate: the configuration is invalid), 2 usage.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "inspect":
		return inspect(args[1:], stdin, stdout, stderr)
	case "serve":
		return serveCmd(args[1:], stdout, stderr)
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
	case "dev":
		return devCmd(args[1:], stdout, stderr)
	case "sts":
		return stsCmd(args[1:], stdout, stderr)
	case "version", "-version", "--version":
		fs := newFlags("version", "writ version", "Prints the module version, the commit and the build time.")
		if done, code := parseFlags(fs, args[1:], stdout, stderr); done {
			return code
		}
		fmt.Fprint(stdout, versionText())
		return 0
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "writ: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// newFlags is a command's flag set: its usage starts with synopsis and what
// the command does, then the flags.
func newFlags(name, synopsis, what string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s\n\n%s\n", synopsis, what)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(fs.Output(), "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args. done says the command is over: -h printed its
// usage on stdout (code 0), or a bad flag its error and usage on stderr
// (code 2).
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (done bool, code int) {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		return true, 0
	case err != nil:
		fs.SetOutput(stderr)
		fmt.Fprintf(stderr, "writ %s: %v\n", fs.Name(), err)
		fs.Usage()
		return true, 2
	}
	fs.SetOutput(stderr)
	return false, 0
}

// versionString is the one-line version for logs.
func versionString() string { return buildinfo.Read(version, buildTime).Line() }

// versionText is what `writ version` prints.
func versionText() string { return buildinfo.Read(version, buildTime).Text() }
