package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/replay"
	"github.com/writ-authz/writ/report"
)

// ReplayRequest is what Replay replays: decision logs, on a proposed
// policy set, against a base.
type ReplayRequest struct {
	// Logs are the decision log files, replayed in order.
	Logs []string
	// Policies are the proposed set (directories or files).
	Policies []string
	// Base is the set to compare with; none: the decisions the logs record.
	Base []string
	// Config, when set, is the configuration whose facts (callback hosts)
	// both sets decide with, as the writ running it would.
	Config *config.Config
	// Expect is a file of the flips the change is expected to make
	// (replay.ParseExpectations); none: every flip is unexpected.
	Expect string
	// Progress, when set, is told how far the replay is, every so often.
	Progress func(ReplayProgress)
}

// ReplayProgress is how far a replay is.
type ReplayProgress = replay.Progress

// ErrReplay marks what makes a replay impossible (a set that does not
// load, a log or an expectations file that cannot be read): the request's
// fault, not a finding.
var ErrReplay = errors.New("cannot replay")

// Replay decides every policy input the logs recorded
// (decision_log.include_input) by the proposed set, and by the base set or
// as the log records it, and returns what flipped. The sets are loaded as
// `writ eval -policies` loads a candidate (the configuration's facts, none
// of their own tests: writ policy test runs them); a set that does not
// compile is refused with its file and line. No running writ is asked.
// An error wraps ErrReplay when the request cannot be replayed; the Impact
// returned with a read error holds what was replayed before it.
func Replay(ctx context.Context, r ReplayRequest) (*report.Impact, error) {
	opt := authz.LoadOptions{SkipTests: true}
	if r.Config != nil {
		opt.Facts = r.Config.PolicyFacts()
	}
	if len(r.Policies) == 0 {
		return nil, fmt.Errorf("%w: no proposed policies", ErrReplay)
	}
	if len(r.Logs) == 0 {
		return nil, fmt.Errorf("%w: no decision log", ErrReplay)
	}
	ro := replay.Options{BaseName: "the logged decisions"}
	var err error
	if ro.Proposed, err = authz.LoadPolicy(ctx, r.Policies, opt); err != nil {
		return nil, fmt.Errorf("%w: the proposed policies %s: %w", ErrReplay, strings.Join(r.Policies, ", "), err)
	}
	ro.ProposedName = setName(r.Policies, ro.Proposed)
	if len(r.Base) > 0 {
		if ro.Base, err = authz.LoadPolicy(ctx, r.Base, opt); err != nil {
			return nil, fmt.Errorf("%w: the base policies %s: %w", ErrReplay, strings.Join(r.Base, ", "), err)
		}
		ro.BaseName = setName(r.Base, ro.Base)
	}
	if r.Expect != "" {
		raw, err := os.ReadFile(r.Expect)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrReplay, err)
		}
		if ro.Expect, err = replay.ParseExpectations(raw); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrReplay, r.Expect, err)
		}
	}
	if r.Progress != nil {
		ro.Progress = func(p replay.Progress) { r.Progress(p) }
	}
	var srcs []replay.Source
	var files []*os.File
	defer func() {
		for _, f := range files {
			_ = f.Close() // read only: nothing to lose
		}
	}()
	for _, path := range r.Logs {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrReplay, err)
		}
		files = append(files, f)
		srcs = append(srcs, replay.Source{Name: path, R: f})
	}
	im, err := replay.Run(ctx, srcs, ro)
	if err != nil {
		return im, fmt.Errorf("%w: %w", ErrReplay, err)
	}
	return im, nil
}

func setName(paths []string, p *authz.Policy) string {
	return strings.Join(paths, ", ") + " (revision " + p.Revision + ")"
}

// ReplayProgressLine rewrites one line on a terminal with how far a
// replay is (replay.ProgressLine).
type ReplayProgressLine = replay.ProgressLine

// NewReplayProgressLine is a progress line on w when w is a terminal, else
// nil (replay.NewProgressLine).
func NewReplayProgressLine(w io.Writer) *ReplayProgressLine { return replay.NewProgressLine(w) }
