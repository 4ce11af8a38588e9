package authz

import (
	"context"
	"fmt"
	"sort"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// Fired is one rule that produced a value during an evaluation: for a denial, the
// file and line of the check that denied.
type Fired struct {
	Rule     string `json:"rule"`
	Location string `json:"location"`
}

// Explain evaluates in with a tracer and lists the rules that produced a value
// (exited successfully), in file order: a readable answer to "why". It bypasses
// the decision cache.
func (p *Policy) Explain(ctx context.Context, in *Input) ([]Fired, error) {
	tracer := topdown.NewBufferTracer()
	if _, err := p.run(ctx, p.full, in.Value(), tracer); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []Fired
	for _, ev := range *tracer {
		if ev.Op != topdown.ExitOp {
			continue
		}
		rule, ok := ev.Node.(*ast.Rule)
		if !ok || rule.Location == nil {
			continue
		}
		loc := fmt.Sprintf("%s:%d", rule.Location.File, rule.Location.Row)
		name := rule.Head.Ref().String()
		if seen[loc] {
			continue
		}
		seen[loc] = true
		out = append(out, Fired{Rule: name, Location: loc})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Location < out[j].Location })
	return out, nil
}
