package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/writ-authz/writ/decisionlog"
	"github.com/writ-authz/writ/report"
)

// logList is a repeatable -log flag.
type logList []string

func (l *logList) String() string { return strings.Join(*l, ",") }

func (l *logList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// reportCmd runs `writ report -log FILE... [LOG...] [-context ID] [-chain ID]
// [-text] [-title T] [-o out.html]`: one self-contained HTML page of the
// decision logs (or, with -text, one delegation's story or the list of
// delegations), on stdout unless -o names a file; and `writ report -verify
// [-key FILE] [-closed] LOG...`. Exit 2 on usage, 1 when a log cannot be
// read or parsed, or does not verify.
func reportCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("report", "writ report -log FILE... [LOG...] [-context ID] [-chain ID] [-text] [-title TEXT] [-o out.html]\n"+
		"       writ report -verify [-key pub.pem|jwks.json] [-closed] LOG...",
		"Renders decision logs (JSON lines; several writs' logs, or one writ's rotated files) as one HTML page that\n"+
			"fetches nothing, or with -chain the story of one delegation across them. -verify checks each log's digest\n"+
			"chain and signed checkpoints across its rotated files, and names the first line that does not verify.")
	var logs logList
	fs.Var(&logs, "log", "a decision log to read, JSON lines (- for stdin); repeat it, or name the logs as arguments")
	contextID := fs.String("context", "", "also tell the story of this context_id: delegation chains, task states, every event")
	chain := fs.String("chain", "", "also tell the story of this chain_id: every writ's ingress and egress decisions of one delegation, in order")
	text := fs.Bool("text", false, "write text instead of the page: the -chain story, or the list of delegations")
	title := fs.String("title", "", "the page's title (default \"writ decision report\")")
	out := fs.String("o", "", "write the page to this file instead of stdout")
	verify := fs.Bool("verify", false, "verify the logs' digest chain and checkpoints instead of rendering them")
	key := fs.String("key", "", "with -verify: the checkpoints' public key, a PEM PUBLIC KEY or a JWKS file")
	closed := fs.Bool("closed", false, "with -verify: also fail a log that does not end with writ's closing checkpoint")
	if done, code := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	paths := append(logs, fs.Args()...)
	if len(paths) == 0 {
		fmt.Fprintln(stderr, "writ report: -log is required (or name the logs as arguments)")
		fs.Usage()
		return 2
	}
	if *verify {
		return verifyLogs(paths, *key, *closed, stdout, stderr)
	}
	if *key != "" || *closed {
		fmt.Fprintln(stderr, "writ report: -key and -closed go with -verify")
		return 2
	}
	if i := slices.Index(paths, "-"); i >= 0 && slices.Contains(paths[i+1:], "-") {
		fmt.Fprintln(stderr, "writ report: stdin (-) named twice")
		return 2
	}
	sum, err := report.ReadFiles(paths, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "writ report: %v\n", err)
		return 1
	}
	var page bytes.Buffer
	err = report.Write(&page, sum, report.Options{Context: *contextID, Chain: *chain, Title: *title}, *text)
	if err != nil {
		fmt.Fprintf(stderr, "writ report: %v\n", err)
		return 1
	}
	if *out == "" || *out == "-" {
		if _, err := stdout.Write(page.Bytes()); err != nil {
			fmt.Fprintf(stderr, "writ report: %v\n", err)
			return 1
		}
		return 0
	}
	if err := os.WriteFile(*out, page.Bytes(), 0o644); err != nil { //nolint:gosec // a page to share, like any document: readable by others
		fmt.Fprintf(stderr, "writ report: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "writ report: %d decisions (%d allowed, %d denied) from %s written to %s\n",
		sum.Totals.Decisions, sum.Totals.Allowed, sum.Totals.Denied, strings.Join(sum.Logs, ", "), *out)
	return 0
}

// verifyLogs runs writ report -verify: one "ok:" line per log (its files in
// chain order), its notes, or the first line that does not verify.
func verifyLogs(paths []string, keyFile string, closed bool, stdout, stderr io.Writer) int {
	var keys *decisionlog.Keys
	if keyFile != "" {
		k, err := decisionlog.LoadKeys(keyFile)
		if err != nil {
			fmt.Fprintf(stderr, "writ report: -key: %v\n", err)
			return 2
		}
		keys = k
	}
	for _, p := range paths {
		if p == "-" {
			fmt.Fprintln(stderr, "writ report: -verify reads files (their order and ends matter), not stdin")
			return 2
		}
	}
	v, err := decisionlog.Verify(paths, keys)
	if err != nil {
		fmt.Fprintf(stderr, "writ report: %v\n", err)
		return 1
	}
	if !v.Print(stdout, keys != nil, closed) {
		return 1
	}
	return 0
}
