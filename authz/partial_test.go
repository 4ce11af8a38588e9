package authz

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/task"
)

// checkPartial compares, for every input, the decision of the target's residual
// on the input the policy reads with the decision of the whole policy on the
// whole input: the same allow, the same denials (codes and reasons), in order.
func checkPartial(t *testing.T, p *Policy, inputs []*Input) {
	t.Helper()
	ctx := context.Background()
	residuals := map[string]bool{}
	for i, in := range inputs {
		want, werr := evaluate(ctx, p, in)
		tp := p.forTarget(ctx, &in.Target, in.Operation, in.Task.ID != "", nil)
		if tp == nil {
			// The matrix asks for more residuals than a policy keeps: start
			// over with none.
			p.targets.mu.Lock()
			p.targets.m = map[string]*targetProgram{}
			p.targets.mu.Unlock()
			if tp = p.forTarget(ctx, &in.Target, in.Operation, in.Task.ID != "", nil); tp == nil {
				t.Fatal("no residual slot")
			}
		}
		prog := tp.prog.Load()
		if prog == nil {
			t.Fatalf("input %d: no residual for target %q", i, in.Target.Name)
		}
		residuals[in.Target.Name] = true
		got, gerr := p.decision(ctx, prog, prog.view.value(p.Revision, in, prog.tv))
		if !sameDecision(got, gerr, want, werr) {
			t.Fatalf("input %d (%s to %q by %q):\n residual %+v %v\n    whole %+v %v", i, in.Operation,
				in.Target.Name, in.Caller.AgentID, got, gerr, want, werr)
		}
	}
	if len(residuals) < 2 {
		t.Fatalf("only %d targets had a residual", len(residuals))
	}
}

// TestPartialMatchesFull: per-target partial evaluation decides exactly as the
// whole policy, on the shipped policy and data and on a variant of the data.
func TestPartialMatchesFull(t *testing.T) {
	t.Parallel() // seconds of OPA evaluation; independent of the other tests
	skipUnderRace(t)
	n := 1000
	if testing.Short() || raceEnabled {
		n = 200
	}
	inputs := matrix(n)
	t.Run("shipped", func(t *testing.T) { checkPartial(t, loadShipped(t), inputs) })
	t.Run("tuned data", func(t *testing.T) {
		dir := copyPolicies(t)
		setData(t, dir, `"ownership": "agent"`, `"ownership": "user"`)
		setData(t, dir, `"allow_http_hosts": []`, `"allow_http_hosts": ["agents.bank.ae"]`)
		setData(t, dir, `"max_delegation_depth": 4`, `"max_delegation_depth": 2`)
		p, err := LoadPolicy(context.Background(), []string{dir}, LoadOptions{SkipTests: true})
		if err != nil {
			t.Fatal(err)
		}
		checkPartial(t, p, inputs)
	})
}

// TestSeedAdmissionPartial: the seed's admission table (TestSeedAdmission)
// decided on the residuals equals the whole policy, reasons included.
func TestSeedAdmissionPartial(t *testing.T) {
	deep := investigator
	deep.Chain = []string{"a", "b", "c", "d"}
	cyclic := investigator
	cyclic.Chain = []string{"sanctions-screening-agent"}
	var inputs []*Input
	for _, c := range []struct {
		caller identity.Caller
		target *Target
	}{{investigator, sanctions}, {investigator, kyc}, {investigator, marketing}, {deep, sanctions},
		{cyclic, sanctions}, {identity.Anonymous(), sanctions}} {
		inputs = append(inputs, BuildInput(facts(c.caller, c.target)))
	}
	checkPartial(t, loadShipped(t), inputs)
}

// TestPartialDisagreementFallsBack: a residual that disagrees with the whole
// policy on one of a target's first decisions is dropped; the decision, and
// every later one, comes from the whole policy.
func TestPartialDisagreementFallsBack(t *testing.T) {
	ctx := context.Background()
	p := loadShipped(t)
	wrong := loadRego(t, "package writ.authz\n\ndecision := {\"allow\": true, \"denials\": []}\n")
	in := BuildInput(facts(investigator, kyc)) // denied: classification and tenant
	tp := p.forTarget(ctx, &in.Target, in.Operation, false, nil)
	tp.prog.Store(&program{compiler: wrong.compiler, query: wrong.full.query, view: p.view})
	e, _ := NewEngine(p, Options{})
	d, err := e.Decide(ctx, in)
	if err != nil || d.Allow || !slices.Equal(codes(d), []string{"CLASSIFICATION_EXCEEDED", "TENANT_NOT_PERMITTED"}) {
		t.Fatalf("%+v %v", d, err)
	}
	if tp.prog.Load() != nil {
		t.Fatal("the disagreeing residual was kept")
	}
	// What it decided was not cached under the residual's key: the next
	// decision is the whole policy's own.
	if d, _ := e.Decide(ctx, in); d.CacheHit || d.Allow {
		t.Fatalf("after the disagreement: %+v", d)
	}
}

// TestEveryResidualIsVerified: the residuals of one target and operation
// (a request naming a task, and one naming none) each have their first
// decisions checked against the whole policy: those of one do not vouch
// for the other.
func TestEveryResidualIsVerified(t *testing.T) {
	ctx := context.Background()
	p := loadShipped(t)
	e, _ := NewEngine(p, Options{CacheSize: -1})
	for range verifyDecisions + 2 {
		if d, err := e.Decide(ctx, BuildInput(facts(investigator, sanctions))); err != nil || !d.Allow {
			t.Fatalf("%+v %v", d, err)
		}
	}
	f := facts(investigator, sanctions)
	f.Request.TaskID = "t-1"
	f.Record = &task.Task{State: task.Running, Owner: task.Owner{AgentID: "kyc-refresh-agent", Tenant: "wholesale"}}
	in := BuildInput(f)
	tp := p.forTarget(ctx, &in.Target, in.Operation, true, nil)
	wrong := loadRego(t, "package writ.authz\n\ndecision := {\"allow\": true, \"denials\": []}\n")
	tp.prog.Store(&program{compiler: wrong.compiler, query: wrong.full.query, view: p.view})
	if d, _ := e.Decide(ctx, in); d.Allow || !slices.Equal(codes(d), []string{"NOT_TASK_OWNER"}) || tp.prog.Load() != nil {
		t.Fatalf("a reply to another's task, on a wrong residual: %+v (kept: %v)", d, tp.prog.Load() != nil)
	}
}

// TestReloadRebuildsResiduals: a reload builds the residuals of the targets the
// old revision served before it swaps, and they decide by the new data.
func TestReloadRebuildsResiduals(t *testing.T) {
	ctx := context.Background()
	dir := copyPolicies(t)
	p, err := LoadPolicy(ctx, []string{dir}, LoadOptions{SkipTests: true})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := NewEngine(p, Options{})
	for _, tg := range []*Target{sanctions, kyc} {
		e.Decide(ctx, BuildInput(facts(investigator, tg)))
	}
	setData(t, dir, `"max_delegation_depth": 4`, `"max_delegation_depth": 1`)
	if err := NewReloader(e, []string{dir}, LoadOptions{SkipTests: true}, nil).Reload(ctx); err != nil {
		t.Fatal(err)
	}
	np := e.Policy()
	if np == p || np.Revision == p.Revision {
		t.Fatal("no new revision")
	}
	// Read what the reload prepared, without forTarget (which would build a
	// missing residual on demand).
	built := map[string]bool{}
	np.targets.mu.Lock()
	for _, tp := range np.targets.m {
		if tp.op == "send" {
			built[tp.target.Name] = tp.prog.Load() != nil
		}
	}
	np.targets.mu.Unlock()
	if !built["sanctions-screening-agent"] || !built["kyc-refresh-agent"] {
		t.Fatalf("residuals after the reload: %v", built)
	}
	d, _ := e.Decide(ctx, BuildInput(facts(investigator, sanctions)))
	if d.Allow || !slices.Equal(codes(d), []string{"DEPTH_EXCEEDED"}) || d.Revision != np.Revision {
		t.Fatalf("after the reload: %+v", d)
	}
}

func ExamplePolicy_Targets() {
	p, _ := LoadPolicy(context.Background(), []string{shipped}, LoadOptions{SkipTests: true})
	e, _ := NewEngine(p, Options{})
	e.Decide(context.Background(), BuildInput(facts(investigator, sanctions)))
	for _, t := range p.Targets() {
		fmt.Println(t.Name)
	}
	// Output: sanctions-screening-agent
}
