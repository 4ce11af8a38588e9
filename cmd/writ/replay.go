package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/report"
	"github.com/writ-authz/writ/server"
)

// replayCmd runs `writ policy replay`: every policy input the logs recorded
// decided again by a proposed set (server.Replay), what flipped printed,
// and with -o the page. Exit 0 when nothing flipped beyond the expected
// flips, 1 when something did, 2 when the replay cannot be made (a bad
// flag, a set that does not load, a log that cannot be read, no decision
// with an input in it).
func replayCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("policy replay", "writ policy replay -log decisions.jsonl [LOG...] -policies DIR [-base DIR] [-config writ.yaml] [-expect FILE] [-o impact.html]",
		"Decides again every policy input a decision log recorded (decision_log.include_input: true) with the proposed\n"+
			"set, and compares with the decision the log records (or, with -base, with another set's): prints the\n"+
			"decisions that flip, allow→deny and deny→allow, by code, caller and target, with the first examples of each\n"+
			"(decision id, log line). Lines without an input, with an input of another version, or not JSON are counted\n"+
			"and reported, never guessed. Exit 0: nothing flipped beyond -expect; 1: something did; 2: cannot replay.")
	var logs logList
	fs.Var(&logs, "log", "a decision log to replay (JSON lines, writ or OPA format); repeat it, or name the logs as arguments")
	proposed := fs.String("policies", "", "the proposed policy directory (or several, comma-separated)")
	base := fs.String("base", "", "compare with this policy set (default: the decisions the log records)")
	cfgPath := fs.String("config", "", "decide with this configuration's facts (callback hosts), as the writ running it would")
	expect := fs.String("expect", "", "a YAML list of the flips the change is expected to make ({flip: allow_to_deny|deny_to_allow|any, code, caller, target})")
	out := fs.String("o", "", "also write the impact as an HTML page (the report's look) to this file")
	title := fs.String("title", "", "the page's title (default \"writ policy impact\")")
	if done, code := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	req := server.ReplayRequest{Logs: append(logs, fs.Args()...), Policies: commaList(*proposed), Base: commaList(*base), Expect: *expect}
	if len(req.Logs) == 0 || len(req.Policies) == 0 {
		fmt.Fprintln(stderr, "writ policy replay: -log and -policies are required")
		fs.Usage()
		return 2
	}
	if *cfgPath != "" {
		cfg, err := config.Load(*cfgPath)
		if err != nil {
			fmt.Fprintf(stderr, "writ policy replay: %v\n", err)
			return 2
		}
		req.Config = cfg
	}
	progress := server.NewReplayProgressLine(stderr)
	if progress != nil {
		req.Progress = progress.Show
	}
	im, err := server.Replay(context.Background(), req)
	progress.Done()
	if err != nil {
		fmt.Fprintf(stderr, "writ policy replay: %v\n", err)
		return 2
	}
	im.Title = *title
	if err := report.WriteImpact(stdout, im); err != nil {
		fmt.Fprintf(stderr, "writ policy replay: %v\n", err)
		return 2
	}
	if *out != "" {
		var page bytes.Buffer
		if err := report.RenderImpact(&page, im); err != nil {
			fmt.Fprintf(stderr, "writ policy replay: %v\n", err)
			return 2
		}
		if err := os.WriteFile(*out, page.Bytes(), 0o644); err != nil { //nolint:gosec // a page to share, like any document: readable by others
			fmt.Fprintf(stderr, "writ policy replay: %v\n", err)
			return 2
		}
	}
	switch {
	case im.Replayed == 0:
		fmt.Fprintf(stderr, "writ policy replay: no decision could be replayed (%d decision lines): turn decision_log.include_input on\n", im.Decisions)
		return 2
	case im.Unexpected > 0:
		return 1
	}
	return 0
}
