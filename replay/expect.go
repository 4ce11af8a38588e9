package replay

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The directions of a flip, as an expectation names them.
const (
	AllowToDeny = "allow_to_deny"
	DenyToAllow = "deny_to_allow"
	AnyFlip     = "any"
)

// Expectation is one kind of flip a change is expected to make (writ policy
// replay -expect): a direction, and a code, caller and target, each a
// pattern (path.Match: * and ?), empty for any. A flip matches when its
// direction does, one of its codes does (allow→deny: the proposed set's;
// deny→allow: the base's), and its caller and target do.
type Expectation struct {
	Flip   string `yaml:"flip"`
	Code   string `yaml:"code"`
	Caller string `yaml:"caller"`
	Target string `yaml:"target"`
	// Line is where the expectation is in its file.
	Line int `yaml:"-"`
}

// String is the expectation as its file says it.
func (e Expectation) String() string {
	parts := []string{"flip: " + e.Flip}
	for _, kv := range [][2]string{{"code", e.Code}, {"caller", e.Caller}, {"target", e.Target}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+": "+kv[1])
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// ParseExpectations reads an expectations file: a YAML list of
// expectations, as
//
//   - flip: allow_to_deny   # allow_to_deny, deny_to_allow or any
//     code: DEPTH_EXCEEDED  # optional, as caller and target are
//     target: travel-*
//
// An unknown key, direction or a bad pattern is an error naming its line.
func ParseExpectations(raw []byte) ([]Expectation, error) {
	// Decoded strictly (an unknown key is refused), and again as nodes for
	// each expectation's line.
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	var out []Expectation
	if err := dec.Decode(&out); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // an empty file: no flip is expected
		}
		return nil, fmt.Errorf("not a list of expectations: %w", err)
	}
	var nodes []yaml.Node
	if err := yaml.Unmarshal(raw, &nodes); err != nil || len(nodes) != len(out) {
		return nil, fmt.Errorf("not a list of expectations: %w", err)
	}
	for i := range out {
		e, n := &out[i], &nodes[i]
		e.Line = n.Line
		if !slices.Contains([]string{AllowToDeny, DenyToAllow, AnyFlip}, e.Flip) {
			return nil, fmt.Errorf("line %d: flip must be %s, %s or %s, not %q", n.Line, AllowToDeny, DenyToAllow, AnyFlip, e.Flip)
		}
		for _, p := range []string{e.Code, e.Caller, e.Target} {
			if _, err := path.Match(p, ""); err != nil {
				return nil, fmt.Errorf("line %d: pattern %q: %w", n.Line, p, err)
			}
		}
	}
	return out, nil
}

// matches reports whether the flip of direction dir, with codes, caller and
// target, is one e expects.
func (e *Expectation) matches(dir string, codes []string, caller, target string) bool {
	if e.Flip != AnyFlip && e.Flip != dir {
		return false
	}
	if !like(e.Caller, caller) || !like(e.Target, target) {
		return false
	}
	return e.Code == "" || slices.ContainsFunc(codes, func(c string) bool { return like(e.Code, c) })
}

// like reports whether s matches pattern p ("" matches anything).
func like(p, s string) bool {
	if p == "" || p == s {
		return true
	}
	ok, _ := path.Match(p, s) // the pattern was checked at parse
	return ok
}
