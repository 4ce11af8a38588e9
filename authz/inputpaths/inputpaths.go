// Package inputpaths is the member paths of writ's policy input (writ/v1),
// for a package that must name the input's members without linking the
// decision engine: config validates decision_log.mask against it. The paths
// are generated from the input's one declaration (authz/input.go) by go
// generate ./authz, and authz's TestFieldsGenerated fails when they are
// stale. It imports nothing of writ.
package inputpaths

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agnivade/levenshtein"
)

// Prefix starts every path as a configuration names it: "input.caller.user_id".
const Prefix = "input."

// Paths are every member path of the input, without Prefix, in declaration
// order ("version", "caller", "caller.agent_id", ...): a list's members are
// its elements' ("caller.hops.agent_id").
func Paths() []string { return slices.Clone(paths) }

// Check reports whether path names a member of the input: Prefix and a
// member path, or a path below a free-form object ("input.caller.claims.email").
// The error says what it names instead, with the nearest member it may
// have meant.
func Check(path string) error {
	rest, ok := strings.CutPrefix(path, Prefix)
	if !ok {
		if path == "input" {
			return fmt.Errorf("%q is the whole input, not a member of it", path)
		}
		if known(path) {
			return fmt.Errorf("%q does not start with %s (did you mean %s%s?)", path, Prefix, Prefix, path)
		}
		return fmt.Errorf("%q does not start with %s (a path into the policy input, as in %scaller.user_id)", path, Prefix, Prefix)
	}
	if known(rest) {
		return nil
	}
	return fmt.Errorf("%q names no member of the policy input%s", path, suggest(rest))
}

// CheckMask reports whether path may be masked out of the decision log's
// record of the input (decision_log.mask): Check, and not the version, by
// which a replay reads the input.
func CheckMask(path string) error {
	if err := Check(path); err != nil {
		return err
	}
	if path == Prefix+"version" {
		return fmt.Errorf("%q cannot be masked: a replay reads the input by its version", path)
	}
	return nil
}

// known reports whether p (without Prefix) is a member or lies below a
// free-form object.
func known(p string) bool {
	if slices.Contains(paths, p) {
		return true
	}
	for _, o := range objects {
		if strings.HasPrefix(p, o+".") && len(p) > len(o)+1 {
			return !slices.Contains(strings.Split(p[len(o)+1:], "."), "")
		}
	}
	return false
}

// suggest is the hint after an unknown path: a member of the same parent it
// is a misspelling of; else, when the parent holds a free-form object, the
// member of that object it may name (caller.sub: caller.claims.sub); else
// the parent's members.
func suggest(p string) string {
	parent, last := "", p
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		parent, last = p[:i], p[i+1:]
	}
	if parent != "" && !slices.Contains(paths, parent) {
		// The parent is unknown too: the nearest path of all.
		best, bestD := "", 0
		for _, q := range paths {
			if d := levenshtein.ComputeDistance(p, q); best == "" || d < bestD {
				best, bestD = q, d
			}
		}
		if bestD <= max(2, len(p)/3) {
			return fmt.Sprintf(" (did you mean %s%s?)", Prefix, best)
		}
		return ""
	}
	children := childrenOf(parent)
	best, bestD := "", 0
	for _, c := range children {
		d := levenshtein.ComputeDistance(last, c)
		near := d <= max(1, len(last)/3) || len(last) >= 4 && strings.HasPrefix(c, last)
		if near && (best == "" || d < bestD) {
			best, bestD = c, d
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %s%s?)", Prefix, join(parent, best))
	}
	for _, o := range objects {
		if i := strings.LastIndexByte(o, '.'); i >= 0 && o[:i] == parent || i < 0 && parent == "" {
			return fmt.Sprintf(" (did you mean %s%s.%s? %s%s is a free-form object)", Prefix, o, last, Prefix, o)
		}
	}
	where := "the input"
	if parent != "" {
		where = Prefix + parent
	}
	return fmt.Sprintf(" (%s has %s)", where, strings.Join(children, ", "))
}

// childrenOf are the member names directly below parent ("": the sections).
func childrenOf(parent string) []string {
	var out []string
	for _, q := range paths {
		rest, ok := q, parent == ""
		if parent != "" {
			rest, ok = strings.CutPrefix(q, parent+".")
		}
		if ok && !strings.Contains(rest, ".") {
			out = append(out, rest)
		}
	}
	return out
}

func join(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}
