package main

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/writ-authz/writ/report"
)

// reportCmd runs `writ report -log FILE [-context ID] [-title T] [-o out.html]`:
// one self-contained HTML page of a decision log, on stdout unless -o names a
// file. Exit 2 on usage, 1 when the log cannot be read or parsed.
func reportCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("report", "writ report -log FILE [-context ID] [-title TEXT] [-o out.html]",
		"Renders a decision log (JSON lines) as one HTML page that fetches nothing.")
	logPath := fs.String("log", "", "the decision log to read, JSON lines (- for stdin)")
	contextID := fs.String("context", "", "also tell the story of this context_id: delegation chains, task states, every event")
	title := fs.String("title", "", "the page's title (default \"writ decision report\")")
	out := fs.String("o", "", "write the page to this file instead of stdout")
	if done, code := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "writ report: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	if *logPath == "" {
		fmt.Fprintln(stderr, "writ report: -log is required")
		fs.Usage()
		return 2
	}

	in, name := stdin, "stdin"
	if *logPath != "-" {
		f, err := os.Open(*logPath)
		if err != nil {
			fmt.Fprintf(stderr, "writ report: %v\n", err)
			return 1
		}
		defer f.Close()
		in, name = f, *logPath
	}
	sum, err := report.Read(in)
	if err != nil {
		fmt.Fprintf(stderr, "writ report: %s: %v\n", name, err)
		return 1
	}
	if *contextID != "" && len(sum.Context(*contextID)) == 0 {
		fmt.Fprintf(stderr, "writ report: %s: no event has context_id %q\n", name, *contextID)
		return 1
	}

	var page bytes.Buffer
	if err := report.Render(&page, sum, report.Options{Context: *contextID, Title: *title}); err != nil {
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
		sum.Totals.Decisions, sum.Totals.Allowed, sum.Totals.Denied, name, *out)
	return 0
}
