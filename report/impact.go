package report

import (
	"fmt"
	"io"
	"strings"
)

// Impact is what a replay of decision logs found (writ policy replay): each
// policy input a log recorded, decided by a proposed policy set and by a
// base (the decision the log records, or another set), and the decisions
// that flipped between the two.
type Impact struct {
	// Title heads the page; empty means "writ policy impact".
	Title string
	// Proposed names the proposed set (its paths and revision); Base what it
	// is compared with.
	Proposed, Base string
	// Logs names the logs read, in order.
	Logs []string
	// Lines counts the lines read, Decisions the decision lines among them,
	// Replayed the decisions decided again.
	Lines, Decisions, Replayed int
	// Unchanged counts the replayed decisions decided as the base decided
	// them; Recoded those both deny, with other codes (not a flip).
	Unchanged, Recoded int
	// AllowToDeny and DenyToAllow are the flips.
	AllowToDeny, DenyToAllow Flips
	// Unexpected counts the flips no expectation covers (every flip when
	// none is given).
	Unexpected int
	// Expected says whether expectations were given; Unmet lists those no
	// flip matched.
	Expected bool
	Unmet    []string
	// Skipped are the lines not replayed, by why (never guessed at).
	Skipped []Skip
	// Errors counts the decisions a set failed to make (each then denies
	// with POLICY_ERROR, as writ fails closed); FirstError is the first
	// failure's text.
	Errors     int
	FirstError string
	// Notes say what the replay could not see as the live decision did: the
	// masked members a set reads, the file URIs logged as origins.
	Notes []string
}

// Flips are the decisions that flipped one way, grouped three ways. A
// decision denied for several reasons counts once under each of its codes
// (allow→deny: the proposed set's codes; deny→allow: the base's).
type Flips struct {
	Count, Unexpected          int
	ByCode, ByCaller, ByTarget []FlipGroup
	MoreCallers, MoreTargets   bool // groups beyond the bound were folded into one "(others)" group
}

// FlipGroup is the flips of one code, caller or target, busiest first.
type FlipGroup struct {
	Name              string
	Count, Unexpected int
	// Examples are the first flips of the group.
	Examples []Example
}

// Example is one flipped decision: its id and its log line.
type Example struct {
	DecisionID, Where string
}

// String is "id (log:line)".
func (e Example) String() string {
	if e.DecisionID == "" {
		return e.Where
	}
	return e.DecisionID + " (" + e.Where + ")"
}

// Skip counts the lines not replayed for one reason, with the first of them.
type Skip struct {
	Why   string
	Count int
	First []string
}

// Skips counts the skipped lines.
func (im *Impact) Skips() int {
	n := 0
	for _, s := range im.Skipped {
		n += s.Count
	}
	return n
}

// WriteImpact writes im as text: the headline, each way of flipping by
// code, caller and target with examples, what was not replayed, and the
// notes.
func WriteImpact(w io.Writer, im *Impact) error {
	ew := &errWriter{w: w}
	ew.printf("replayed %d of %d decisions (%d lines) from %s\n", im.Replayed, im.Decisions, im.Lines, strings.Join(im.Logs, ", "))
	ew.printf("proposed: %s\nbase:     %s\n", im.Proposed, im.Base)
	for _, f := range []struct {
		name string
		f    *Flips
	}{{"allow → deny", &im.AllowToDeny}, {"deny → allow", &im.DenyToAllow}} {
		ew.printf("%s: %d%s\n", f.name, f.f.Count, unexpectedOf(im, f.f))
		for _, g := range []struct {
			by     string
			groups []FlipGroup
		}{{"code", f.f.ByCode}, {"caller", f.f.ByCaller}, {"target", f.f.ByTarget}} {
			if len(g.groups) == 0 {
				continue
			}
			ew.printf("  by %s:\n", g.by)
			for _, gr := range g.groups {
				ew.printf("    %-28s %6d%s  e.g. %s\n", gr.Name, gr.Count, unexpected(im, gr.Unexpected), examples(gr.Examples))
			}
		}
	}
	if im.Recoded > 0 {
		ew.printf("denied by both, with other codes: %d\n", im.Recoded)
	}
	if im.Errors > 0 {
		ew.printf("policy errors: %d (denied, fail closed); the first: %s\n", im.Errors, im.FirstError)
	}
	for _, u := range im.Unmet {
		ew.printf("expected, but no flip matched: %s\n", u)
	}
	if n := im.Skips(); n > 0 {
		ew.printf("not replayed: %d lines\n", n)
		for _, s := range im.Skipped {
			ew.printf("  %6d  %s (first: %s)\n", s.Count, s.Why, strings.Join(s.First, ", "))
		}
	}
	for _, n := range im.Notes {
		ew.printf("note: %s\n", n)
	}
	return ew.err
}

// unexpectedOf says how many of a way's flips are unexpected, when
// expectations were given.
func unexpectedOf(im *Impact, f *Flips) string {
	if im.Expected && f.Count > 0 && f.Unexpected == 0 {
		return " (all expected)"
	}
	return unexpected(im, f.Unexpected)
}

func unexpected(im *Impact, n int) string {
	if !im.Expected || n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d unexpected)", n)
}

func examples(ex []Example) string {
	s := make([]string, len(ex))
	for i, e := range ex {
		s[i] = e.String()
	}
	return strings.Join(s, ", ")
}

// RenderImpact writes im as one self-contained HTML page in the report's
// look (its head and stylesheet): no script, nothing fetched.
func RenderImpact(w io.Writer, im *Impact) error {
	if im == nil {
		return fmt.Errorf("report: nil impact")
	}
	v := impactView{Impact: im, Title: im.Title, LogList: strings.Join(im.Logs, ", ")}
	if v.Title == "" {
		v.Title = "writ policy impact"
	}
	ids := idSet{}
	for _, f := range []struct {
		name, id string
		f        *Flips
	}{{"allow → deny", "allow-to-deny", &im.AllowToDeny}, {"deny → allow", "deny-to-allow", &im.DenyToAllow}} {
		fv := flipsView{Name: f.name, ID: f.id, Flips: f.f}
		if len(f.f.ByCode) > 0 {
			var bars []barItem
			for _, g := range f.f.ByCode {
				bars = append(bars, barItem{Label: g.Name, Value: g.Count})
			}
			fv.Chart = buildBarChart(bars)
		}
		for _, g := range []struct {
			by     string
			groups []FlipGroup
		}{{"code", f.f.ByCode}, {"caller", f.f.ByCaller}, {"target", f.f.ByTarget}} {
			t := groupTable{By: g.by, Head: strings.ToUpper(g.by[:1]) + g.by[1:]}
			for _, gr := range g.groups {
				t.Rows = append(t.Rows, groupRow{FlipGroup: gr, ID: ids.make(f.id + "-" + g.by + "-" + gr.Name), Examples: examples(gr.Examples)})
			}
			fv.Tables = append(fv.Tables, t)
		}
		v.Ways = append(v.Ways, fv)
	}
	return impactTemplate.Execute(w, &v)
}

type impactView struct {
	*Impact
	Title   string
	LogList string
	Ways    []flipsView
}

type flipsView struct {
	Name, ID string
	*Flips
	Chart  *barChart
	Tables []groupTable
}

type groupTable struct {
	By   string
	Head string
	Rows []groupRow
}

type groupRow struct {
	FlipGroup
	ID, Examples string
}
