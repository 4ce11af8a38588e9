package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/internal/devidp"
)

// DevIssuer is the iss of `writ dev token`'s tokens: what identity.jwt[].issuer
// names to accept them.
const DevIssuer = identity.DevelopmentIssuer

const devUsage = `usage: writ dev token [flags]   sign a development token
       writ dev jwks [-o FILE]   the development key's JWKS

A development identity for trying writ in front of your own agent: an ES256
key kept in a local directory (-dir, default $WRIT_DEV_DIR, else
$XDG_STATE_HOME/writ/dev, ~/.local/state/writ/dev when unset), created on
first use. Point identity.jwt at it:

  identity:
    jwt: [{issuer: writ-dev, audiences: [my-agent], jwks_file: dev-jwks.json}]

Never use it in production: anyone with the directory signs any caller. Its
tokens are for the issuer writ-dev (or writ-dev-<name>) only, and writ validate
warns about (writ serve logs) a configuration that accepts its key or issuer.
`

// devCmd runs `writ dev token|jwks`.
func devCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, devUsage)
		return 2
	}
	switch args[0] {
	case "token":
		return devToken(args[1:], stdout, stderr)
	case "jwks":
		return devJWKS(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, devUsage)
		return 0
	}
	fmt.Fprintf(stderr, "writ dev: unknown command %q\n\n%s", args[0], devUsage)
	return 2
}

func devToken(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("dev token", "writ dev token [-aud AUD] [-sub USER] [-agent AGENT] [-tenant T] [-scope 'S ...'] [-classification LEVEL] [-chain A,B] [-may-act A,B] [-exp 1h] [-nbf 0s] [-iss writ-dev] [-dir DIR]",
		"Signs a development JWT with the key in -dir and prints it. The shipped policy needs scope delegate\n"+
			"for send, stream, cancel and push_config.set.")
	dir := fs.String("dir", devidp.DefaultDir(), "the directory that keeps the development key")
	iss := fs.String("iss", DevIssuer, "the issuer (identity.jwt[].issuer): writ-dev, or writ-dev-<name>")
	aud := fs.String("aud", "writ", "the audience (one of identity.jwt[].audiences)")
	sub := fs.String("sub", "dev-user", "the user the caller acts for (sub: input.caller.user_id)")
	agent := fs.String("agent", "dev-agent", "the calling agent (the outermost act.sub: input.caller.agent_id)")
	tenant := fs.String("tenant", "", "the tenant claim (input.caller.tenant)")
	scope := fs.String("scope", "delegate", "space-separated scopes (input.caller.scopes)")
	class := fs.String("classification", "", "the classification claim: public, internal, confidential or restricted")
	chain := fs.String("chain", "", "earlier hops of the delegation, oldest first, comma-separated (nested act claims)")
	mayAct := fs.String("may-act", "", "the actors that may exchange the token at an STS, comma-separated (the RFC 8693 may_act claim)")
	exp := fs.Duration("exp", time.Hour, "how long the token is valid; negative mints a token that expired that long ago (for tests)")
	nbf := fs.Duration("nbf", 0, "how long until the token becomes valid (an nbf claim; for tests of not-yet-valid tokens)")
	if done, code := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "writ dev token: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *exp == 0 {
		fmt.Fprintln(stderr, "writ dev token: -exp must not be zero (a negative -exp mints an expired token)")
		return 2
	}
	if *nbf < 0 || (*nbf > 0 && *nbf >= *exp) {
		fmt.Fprintln(stderr, "writ dev token: -nbf must be positive and before -exp")
		return 2
	}
	// The development key signs as the development issuer only: a token for
	// a production issuer's name would pass wherever that issuer is
	// configured with this key by mistake, and look like the real thing.
	if !identity.IsDevelopmentIssuer(*iss) {
		fmt.Fprintf(stderr, "writ dev token: -iss %q: the development key signs for %s (or %s-<name>) only, never for a real issuer\n",
			*iss, DevIssuer, DevIssuer)
		return 2
	}
	p, err := devidp.Open(*dir, *iss, *aud)
	if err != nil {
		fmt.Fprintf(stderr, "writ dev token: %v\n", err)
		return 1
	}
	c := devidp.Caller{Agent: *agent, User: *sub, Tenant: *tenant, Classification: *class, Scope: *scope,
		Expires: time.Now().Add(*exp)}
	if *nbf > 0 {
		c.NotBefore = time.Now().Add(*nbf)
	}
	c.Chain = commaList(*chain)
	c.MayAct = commaList(*mayAct)
	claims := p.Claims(c)
	if *tenant == "" {
		delete(claims, "tenant")
	}
	tok, err := p.Sign(claims)
	if err != nil {
		fmt.Fprintf(stderr, "writ dev token: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, tok)
	return 0
}

func devJWKS(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("dev jwks", "writ dev jwks [-o FILE] [-dir DIR]",
		"Prints the development key's JWKS (its public half), or writes it to -o: the file identity.jwt[].jwks_file names.")
	dir := fs.String("dir", devidp.DefaultDir(), "the directory that keeps the development key")
	out := fs.String("o", "", "write the JWKS to this file instead of stdout")
	if done, code := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	p, err := devidp.Open(*dir, DevIssuer, "")
	if err != nil {
		fmt.Fprintf(stderr, "writ dev jwks: %v\n", err)
		return 1
	}
	jwks, err := p.JWKS()
	if err != nil {
		fmt.Fprintf(stderr, "writ dev jwks: %v\n", err)
		return 1
	}
	jwks = append(jwks, '\n')
	if *out == "" || *out == "-" {
		_, _ = stdout.Write(jwks)
		return 0
	}
	if err := os.WriteFile(*out, jwks, 0o644); err != nil { //nolint:gosec // a public key set
		fmt.Fprintf(stderr, "writ dev jwks: %v\n", err)
		return 1
	}
	return 0
}

// commaList is a comma-separated flag's non-empty items.
func commaList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
