package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/server"
)

// validateCmd runs `writ validate`: the checks of server.Validate, printed as
// file:line: kind: key: message on stderr; errors make the exit status 1,
// warnings do not (unless -strict).
func validateCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("validate", "writ validate [-config writ.yaml] [-token JWT] [-offline] [-strict]",
		"Checks a configuration as writ serve loads it, and what would load but cannot work. Problems go to\n"+
			"stderr as FILE:LINE: error|warning: KEY: message; errors make the exit status 1 (warnings too with -strict).")
	path := fs.String("config", "writ.yaml", "the configuration file")
	token := fs.String("token", "", "a sample token from your issuer: are the configured claim names in it? does it verify?")
	offline := fs.Bool("offline", false, "do not fetch JWKS URLs")
	strict := fs.Bool("strict", false, "warnings fail too (exit 1)")
	if done, code := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	p := &printer{path: *path, out: stderr}
	cfg, err := config.Load(*path)
	if err != nil {
		var ps *config.Problems
		if !errors.As(err, &ps) {
			p.print(server.Finding{Kind: "error", Problem: config.Problem{Msg: err.Error()}})
			return p.done(stdout, "", *strict)
		}
		for _, pr := range ps.List {
			p.print(server.Finding{Kind: "error", Problem: pr})
		}
		return p.done(stdout, "", *strict)
	}
	v := server.Validate(context.Background(), cfg, server.ValidateOptions{Token: *token, Offline: *offline})
	for _, f := range v.Findings {
		p.print(f)
	}
	return p.done(stdout, v.Summary, *strict)
}

// printer prints what `writ validate` finds and counts it.
type printer struct {
	path             string
	out              io.Writer
	errors, warnings int
}

func (p *printer) print(f server.Finding) {
	switch f.Kind {
	case "note":
		fmt.Fprintf(p.out, "%s: note: %s\n", p.path, f.Msg)
		return
	case "error":
		p.errors++
	default:
		p.warnings++
	}
	where := p.path
	if f.Line > 0 {
		where = fmt.Sprintf("%s:%d", p.path, f.Line)
	}
	key := ""
	if f.Key != "" {
		key = f.Key + ": "
	}
	fmt.Fprintf(p.out, "%s: %s: %s%s\n", where, f.Kind, key, f.Msg)
}

func (p *printer) done(w io.Writer, summary string, strict bool) int {
	if p.errors > 0 || strict && p.warnings > 0 {
		fmt.Fprintf(w, "invalid: %s: %d error(s), %d warning(s)\n", p.path, p.errors, p.warnings)
		return 1
	}
	fmt.Fprintf(w, "ok: %s: %s, %d warning(s)\n", p.path, summary, p.warnings)
	return 0
}
