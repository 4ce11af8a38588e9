// Package replay decides again the policy inputs a decision log recorded
// (decision_log.include_input), by a proposed policy set and by a base (the
// decision each line records, or another set), and counts the decisions
// that flip between the two: allow→deny and deny→allow, by code, caller and
// target, with the first examples of each (writ policy replay). It streams:
// a log is read one line at a time, and what it keeps is bounded (the
// groups, their examples, the engines' caches), so a log of any length
// replays in the same memory. A line it cannot replay (no input, an input
// of another version, not JSON) is counted and reported, never guessed at.
package replay

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/inputpaths"
	"github.com/writ-authz/writ/report"
)

// Bounds of what a replay keeps, whatever the log holds.
const (
	// Examples is how many flips each group gives as examples.
	Examples = 3
	// maxGroups bounds the callers, targets and codes each way of flipping
	// counts apart; the rest are folded into one "(others)" group.
	maxGroups = 1000
	// maxSkipKinds bounds the reasons lines are skipped for (each input
	// version is one); the rest are counted under one.
	maxSkipKinds = 16
	// maxMasked bounds the masked paths counted.
	maxMasked = 64
	// maxRevisions bounds the logged revisions named.
	maxRevisions = 8
	// progressEvery is how many lines pass between calls of Progress.
	progressEvery = 1024
)

// others names the group the flips beyond maxGroups are counted in.
const others = "(others)"

// Source is one log to replay.
type Source struct {
	Name string
	R    io.Reader
}

// Options say what to replay the logs on.
type Options struct {
	// Proposed decides every logged input; ProposedName names it.
	Proposed     *authz.Policy
	ProposedName string
	// Base, when set, decides every logged input too, and its decisions are
	// the base of the comparison; nil: the decisions the log records (their
	// allow, or in dry-run mode the denial the policy made, and their codes).
	Base     *authz.Policy
	BaseName string
	// Expect are the flips the change is expected to make; the others are
	// unexpected. None: every flip is.
	Expect []Expectation
	// Progress, when set, is called every so often with the counts so far
	// (and once at the end).
	Progress func(Progress)
	// Logger receives the engines' own warnings (default: discarded).
	Logger *slog.Logger
}

// Progress is how far a replay is.
type Progress struct {
	Lines, Decisions, Replayed, Flips int
}

// Run replays the sources, in order, and returns what flipped. An error
// means a source could not be read (the lines before it were replayed);
// a line that cannot be replayed is reported in the Impact instead.
func Run(ctx context.Context, srcs []Source, opt Options) (*report.Impact, error) {
	if opt.Proposed == nil {
		return nil, fmt.Errorf("replay: no proposed policy")
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	r := &run{opt: opt, im: &report.Impact{Proposed: opt.ProposedName, Base: opt.BaseName, Expected: len(opt.Expect) > 0},
		skips: map[string]*report.Skip{}, masked: map[string]int{}, matched: make([]bool, len(opt.Expect))}
	r.ways[0], r.ways[1] = newWay(&r.im.AllowToDeny), newWay(&r.im.DenyToAllow)
	var err error
	if r.proposed, err = authz.NewEngine(opt.Proposed, authz.Options{Logger: opt.Logger}); err != nil {
		return nil, err
	}
	if opt.Base != nil {
		if r.base, err = authz.NewEngine(opt.Base, authz.Options{Logger: opt.Logger}); err != nil {
			return nil, err
		}
	}
	for _, src := range srcs {
		r.im.Logs = append(r.im.Logs, src.Name)
		if err := r.source(ctx, src); err != nil {
			r.finish()
			return r.im, fmt.Errorf("%s: %w", src.Name, err)
		}
	}
	r.finish()
	return r.im, nil
}

type run struct {
	opt            Options
	proposed, base *authz.Engine
	im             *report.Impact
	ways           [2]*way // allow→deny, deny→allow
	skips          map[string]*report.Skip
	skipOrder      []string
	masked         map[string]int
	revisions      []string
	matched        []bool
	buf            []byte
}

// way is the flips of one direction as they are counted.
type way struct {
	flips                      *report.Flips
	byCode, byCaller, byTarget *groups
}

func newWay(f *report.Flips) *way {
	return &way{flips: f, byCode: newGroups(), byCaller: newGroups(), byTarget: newGroups()}
}

// source replays one log.
func (r *run) source(ctx context.Context, src Source) error {
	br := bufio.NewReaderSize(src.R, 64<<10)
	line := 0
	for {
		b, err := readLine(br, r.buf)
		if errors.Is(err, io.EOF) {
			return nil
		}
		line++
		where := src.Name + ":" + strconv.Itoa(line)
		r.im.Lines++
		if r.im.Lines%progressEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			r.progress()
		}
		switch {
		case errors.Is(err, errTooLong):
			r.skip(fmt.Sprintf("longer than %d bytes", maxLine), where)
			continue
		case err != nil:
			return err
		}
		if cap(b) <= 1<<20 {
			r.buf = b // a huge line's buffer is not kept
		}
		if b = bytes.TrimSpace(b); len(b) > 0 {
			r.line(ctx, b, where)
		}
	}
}

// line replays one line.
func (r *run) line(ctx context.Context, b []byte, where string) {
	d, in, k := parse(b)
	switch k {
	case notJSON:
		r.skip("not JSON", where)
		return
	case notDecision:
		return
	}
	r.im.Decisions++
	if rev := d.revision; rev != "" && !slices.Contains(r.revisions, rev) && len(r.revisions) < maxRevisions {
		r.revisions = append(r.revisions, rev)
	}
	switch v := d.version; {
	case !d.hasInput:
		r.skip("no input (decision_log.include_input was off)", where)
		return
	case v != authz.InputVersion:
		r.skip(fmt.Sprintf("input version %s, not %s", quoteShort(v), authz.InputVersion), where)
		return
	}
	if in == nil || in.Version != authz.InputVersion {
		r.skip("an input that is not a "+authz.InputVersion+" document", where)
		return
	}
	for _, m := range d.masked {
		if _, ok := r.masked[m]; ok || len(r.masked) < maxMasked {
			r.masked[m]++
		}
	}
	baseAllow, baseCodes := d.allow, d.codes
	if r.base != nil {
		baseAllow, baseCodes = r.decide(ctx, r.base, in)
	}
	allow, codes := r.decide(ctx, r.proposed, in)
	r.im.Replayed++
	switch {
	case baseAllow && !allow:
		r.flip(0, AllowToDeny, d, codes, where)
	case !baseAllow && allow:
		r.flip(1, DenyToAllow, d, baseCodes, where)
	case !allow && !sameCodes(codes, baseCodes):
		r.im.Recoded++
	default:
		r.im.Unchanged++
	}
}

// decide is e's decision on in: allow, and the denial codes. A decision
// that fails denies (POLICY_ERROR), as writ does, and is counted.
func (r *run) decide(ctx context.Context, e *authz.Engine, in *authz.Input) (bool, []string) {
	d, err := e.Decide(ctx, in)
	if err != nil {
		if r.im.Errors++; r.im.FirstError == "" {
			r.im.FirstError = err.Error()
		}
	}
	codes := make([]string, len(d.Denials))
	for i, x := range d.Denials {
		codes[i] = x.Code
	}
	return d.Allow, codes
}

// flip counts one flipped decision in direction i (dir), with the codes
// it is grouped under.
func (r *run) flip(i int, dir string, d *decision, codes []string, where string) {
	caller, target := report.CallerNameOf(d.caller), d.target
	if target == "" {
		target = "(no target)"
	}
	expected := false
	for j := range r.opt.Expect {
		if r.opt.Expect[j].matches(dir, codes, caller, target) {
			expected, r.matched[j] = true, true
		}
	}
	w := r.ways[i]
	w.flips.Count++
	if !expected {
		w.flips.Unexpected++
		r.im.Unexpected++
	}
	ex := report.Example{DecisionID: d.id, Where: where}
	seen := make([]string, 0, len(codes))
	for _, c := range codes {
		if !slices.Contains(seen, c) {
			seen = append(seen, c)
			w.byCode.add(c, expected, ex)
		}
	}
	w.byCaller.add(caller, expected, ex)
	w.byTarget.add(target, expected, ex)
}

// skip counts a line not replayed, and why.
func (r *run) skip(why, where string) {
	s, ok := r.skips[why]
	if !ok {
		if len(r.skips) >= maxSkipKinds {
			why = "other reasons"
			if s, ok = r.skips[why]; !ok {
				s = &report.Skip{Why: why}
				r.skips[why] = s
				r.skipOrder = append(r.skipOrder, why)
			}
		} else {
			s = &report.Skip{Why: why}
			r.skips[why] = s
			r.skipOrder = append(r.skipOrder, why)
		}
	}
	s.Count++
	if len(s.First) < Examples {
		s.First = append(s.First, where)
	}
}

func (r *run) progress() {
	if r.opt.Progress != nil {
		r.opt.Progress(Progress{Lines: r.im.Lines, Decisions: r.im.Decisions, Replayed: r.im.Replayed,
			Flips: r.im.AllowToDeny.Count + r.im.DenyToAllow.Count})
	}
}

// finish puts the counts in the Impact's order and adds what the replay
// could not see.
func (r *run) finish() {
	r.progress()
	for _, w := range r.ways {
		w.flips.ByCode, _ = w.byCode.ranked()
		w.flips.ByCaller, w.flips.MoreCallers = w.byCaller.ranked()
		w.flips.ByTarget, w.flips.MoreTargets = w.byTarget.ranked()
	}
	for _, why := range r.skipOrder {
		r.im.Skipped = append(r.im.Skipped, *r.skips[why])
	}
	for j, e := range r.opt.Expect {
		if !r.matched[j] {
			r.im.Unmet = append(r.im.Unmet, fmt.Sprintf("%s (line %d)", e, e.Line))
		}
	}
	if r.opt.Base == nil && len(r.revisions) > 0 {
		r.im.Base += " (revision " + strings.Join(r.revisions, ", ") + ")"
	}
	r.notes()
}

// notes says what of the logged inputs the sets read but the log does not
// hold as the live decision saw it.
func (r *run) notes() {
	sets := []struct {
		name string
		p    *authz.Policy
	}{{"the proposed set", r.opt.Proposed}, {"the base set", r.opt.Base}}
	reads := func(path []string) string {
		var who []string
		for _, s := range sets {
			if s.p != nil && s.p.Reads(path) {
				who = append(who, s.name)
			}
		}
		return strings.Join(who, " and ")
	}
	for _, m := range sortedKeys(r.masked) {
		rest, ok := strings.CutPrefix(m, inputpaths.Prefix)
		if !ok {
			continue
		}
		if who := reads(strings.Split(rest, ".")); who != "" {
			r.im.Notes = append(r.im.Notes, fmt.Sprintf("%s reads %s, which %d logged inputs masked (decision_log.mask): their replay saw it absent, not as the live decision did",
				who, m, r.masked[m]))
		}
	}
	if who := reads([]string{"task", "file_uris"}); who != "" && r.im.Replayed > 0 {
		r.im.Notes = append(r.im.Notes, who+" reads input.task.file_uris: the log keeps each file URI's origin (scheme://host) only, which is what the replay saw")
	}
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sameCodes(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// quoteShort is s quoted, cut to 40 bytes (a version is short; a line is
// not trusted to keep it so).
func quoteShort(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return strconv.Quote(s)
}

// groups counts flips by a name, at most maxGroups names apart.
type groups struct {
	m      map[string]*report.FlipGroup
	folded bool
}

func newGroups() *groups { return &groups{m: map[string]*report.FlipGroup{}} }

func (g *groups) add(name string, expected bool, ex report.Example) {
	gr, ok := g.m[name]
	if !ok {
		if len(g.m) >= maxGroups {
			name, g.folded = others, true
			gr = g.m[name]
		}
		if gr == nil {
			gr = &report.FlipGroup{Name: name}
			g.m[name] = gr
		}
	}
	gr.Count++
	if !expected {
		gr.Unexpected++
	}
	if len(gr.Examples) < Examples {
		gr.Examples = append(gr.Examples, ex)
	}
}

// ranked are the groups, the most flips first.
func (g *groups) ranked() ([]report.FlipGroup, bool) {
	out := make([]report.FlipGroup, 0, len(g.m))
	for _, gr := range g.m {
		out = append(out, *gr)
	}
	slices.SortFunc(out, func(a, b report.FlipGroup) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, g.folded
}
