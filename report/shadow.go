package report

import (
	"slices"
	"strings"

	"github.com/writ-authz/writ/decisionlog"
)

// ShadowExamples bounds the example decisions kept per shadow row.
const ShadowExamples = 3

// Shadow is what the log says of a shadow policy set (policies_shadow:):
// its shadow_disagreement lines, by direction and code. The decisions the
// shadow agreed with leave no line; the rate is of the log's decisions.
type Shadow struct {
	// Disagreements counts the shadow_disagreement lines; AllowToDeny,
	// DenyToAllow and Recoded split them by direction (the shadow would
	// have denied, allowed, or denied for other codes).
	Disagreements, AllowToDeny, DenyToAllow, Recoded int
	// Rows are the disagreements by direction and code, busiest first.
	Rows []ShadowRow
	// Revisions are the shadow revisions seen, in order of first appearance.
	Revisions []string
}

// ShadowRow is the disagreements of one direction and code.
type ShadowRow struct {
	Direction, Code string
	Count           int
	Routes          []string
	// Examples are the first live decision ids, with where each line is.
	Examples []Example
}

// add counts one shadow_disagreement line.
func (s *Shadow) add(ln *decisionlog.Line, where string) {
	s.Disagreements++
	switch ln.Direction {
	case "allow_to_deny":
		s.AllowToDeny++
	case "deny_to_allow":
		s.DenyToAllow++
	default:
		s.Recoded++
	}
	if ln.Shadow != nil && ln.Shadow.Revision != "" && !slices.Contains(s.Revisions, ln.Shadow.Revision) {
		s.Revisions = append(s.Revisions, ln.Shadow.Revision)
	}
	dir := ln.Direction
	if dir == "" {
		dir = "(none)"
	}
	i := slices.IndexFunc(s.Rows, func(r ShadowRow) bool { return r.Direction == dir && r.Code == ln.Code })
	if i < 0 {
		s.Rows = append(s.Rows, ShadowRow{Direction: dir, Code: ln.Code})
		i = len(s.Rows) - 1
	}
	r := &s.Rows[i]
	r.Count++
	if ln.Route != "" && !slices.Contains(r.Routes, ln.Route) {
		r.Routes = append(r.Routes, ln.Route)
	}
	if len(r.Examples) < ShadowExamples {
		r.Examples = append(r.Examples, Example{DecisionID: ln.DecisionID, Where: where})
	}
}

// sort orders the rows busiest first, then by direction and code.
func (s *Shadow) sort() {
	slices.SortStableFunc(s.Rows, func(a, b ShadowRow) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		if c := strings.Compare(a.Direction, b.Direction); c != 0 {
			return c
		}
		return strings.Compare(a.Code, b.Code)
	})
}

// shadowView is the page's shadow section.
type shadowView struct {
	*Shadow
	Revisions string
	Rows      []shadowRowView
}

type shadowRowView struct {
	ShadowRow
	Label, Routes, Examples string
}

// directionLabels say what each direction means for the shadow.
var directionLabels = map[string]string{
	"allow_to_deny": "live allowed, shadow would deny",
	"deny_to_allow": "live denied, shadow would allow",
	"codes":         "both deny, for other codes",
}

func buildShadow(s *Shadow) *shadowView {
	if s == nil || s.Disagreements == 0 {
		return nil
	}
	v := &shadowView{Shadow: s, Revisions: strings.Join(s.Revisions, ", ")}
	for _, r := range s.Rows {
		label := directionLabels[r.Direction]
		if label == "" {
			label = r.Direction
		}
		v.Rows = append(v.Rows, shadowRowView{ShadowRow: r, Label: label, Routes: strings.Join(r.Routes, ", "), Examples: examples(r.Examples)})
	}
	return v
}
