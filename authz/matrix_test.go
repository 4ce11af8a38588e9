package authz

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/task"
)

// matrix generates inputs over every dimension the shipped policy decides on:
// targets, callers, operations, push configs, lifecycle records, data levels,
// task ids. The full cross product is large; a fixed-seed sample of it, plus
// every operation to every target, keeps the test fast and the same each run.
func matrix(n int) []*Input {
	anyone := &Target{Name: "open-agent", Owner: "x", MaxClassification: task.Confidential,
		SecuritySchemes: []string{"openidconnect"}}
	nameless := &Target{Tenants: []string{"wholesale"}, MaxClassification: task.Restricted, SecuritySchemes: []string{"oauth2"}}
	mtlsOnly := &Target{Name: "mtls-agent", Tenants: []string{"wholesale"}, MaxClassification: task.Restricted,
		SecuritySchemes: []string{"http", "mtls"}}
	noSchemes := &Target{Name: "bare-agent", Tenants: []string{"retail"}, MaxClassification: task.Public}
	targets := []*Target{sanctions, kyc, marketing, anyone, nameless, mtlsOnly, noSchemes, nil}

	mtls := identity.Caller{Authenticated: true, Method: "mtls", AgentID: "spiffe-agent", Tenant: "wholesale",
		Scopes: []string{"delegate"}}
	static := identity.Caller{Authenticated: true, Method: "static", AgentID: "dev-bot", Tenant: "retail"}
	deep, cyclic, self, noTenant, noScope, retail, confidential := investigator, investigator, investigator,
		investigator, investigator, investigator, investigator
	deep.Chain = []string{"a", "b", "c", "d"}
	cyclic.Chain = []string{"orchestrator", "sanctions-screening-agent"}
	self.AgentID = "sanctions-screening-agent"
	noTenant.Tenant = ""
	noScope.Scopes = nil
	retail.Tenant, retail.UserID = "retail", "u-7"
	confidential.Classification = "confidential"
	callers := []identity.Caller{investigator, identity.Anonymous(), mtls, static, deep, cyclic, self, noTenant,
		noScope, retail, confidential}

	ops := []task.Operation{task.OpSend, task.OpStream, task.OpGet, task.OpList, task.OpCancel, task.OpSubscribe,
		task.OpPushSet, task.OpPushGet, task.OpPushList, task.OpPushDelete, task.OpCard, task.OpExtendedCard,
		task.OpDiscover, "frobnicate", ""}
	pushes := []*task.PushConfig{nil,
		{URL: "https://agents.bank.ae/cb", Token: "t", AuthScheme: "Bearer"},
		{URL: "https://evil.example/cb", Token: "t"},
		{URL: "http://agents.bank.ae/cb", Token: "t"},
		{URL: "https://agents.bank.ae/cb"},
		{URL: "not a url"},
	}
	records := []*task.Task{nil,
		{State: task.Running, Owner: task.Owner{AgentID: "payments-investigator", Tenant: "wholesale", UserID: "u-42"}},
		{State: task.Running, Owner: task.Owner{AgentID: "kyc-refresh-agent", Tenant: "wholesale", UserID: "u-42"}},
		{State: task.AwaitingInput, Owner: task.Owner{AgentID: "payments-investigator", Tenant: "retail", UserID: "u-9"}},
		{State: task.Running, Owner: task.Owner{}},
	}
	levels := []task.Level{"", task.Public, task.Internal, task.Restricted}

	build := func(t *Target, c identity.Caller, op task.Operation, push *task.PushConfig, rec *task.Task, level task.Level, taskID string) *Input {
		f := &Facts{Request: sendRequest(), Caller: c, Target: t, Record: rec,
			HTTP: HTTPInfo{Method: "POST", Path: "/", Host: "agent.bank.ae", RemoteAddr: "127.0.0.1:40000"}}
		f.Request.Operation, f.Request.Push, f.Request.Classification, f.Request.TaskID = op, push, level, taskID
		return BuildInput(f)
	}
	var out []*Input
	for _, t := range targets {
		for _, op := range ops {
			out = append(out, build(t, investigator, op, nil, nil, "", ""))
		}
	}
	rng := rand.New(rand.NewPCG(15, 2026))
	pick := func(n int) int { return rng.IntN(n) }
	ids := []string{"", "t-1"}
	for range n {
		in := build(targets[pick(len(targets))], callers[pick(len(callers))], ops[pick(len(ops))],
			pushes[pick(len(pushes))], records[pick(len(records))], levels[pick(len(levels))], ids[pick(len(ids))])
		switch pick(8) { // values BuildInput never makes, which a policy must still judge
		case 0:
			in.Task.Classification = "secret"
		case 1:
			in.Target.MaxClassification = "top"
		}
		out = append(out, in)
	}
	return out
}

// TestPrunedInputDecidesAlike: the whole policy decides the same on the input
// pruned to what it reads as on the whole input, over the matrix.
func TestPrunedInputDecidesAlike(t *testing.T) {
	t.Parallel() // seconds of OPA evaluation; independent of the other tests
	skipUnderRace(t)
	ctx := context.Background()
	p := loadShipped(t)
	n := 1000
	if testing.Short() || raceEnabled {
		n = 200
	}
	for i, in := range matrix(n) {
		want, werr := evaluate(ctx, p, in)
		got, gerr := p.decision(ctx, p.full, p.value(in, nil))
		if !sameDecision(got, gerr, want, werr) {
			t.Fatalf("input %d (%s to %q): pruned %+v %v, whole %+v %v", i, in.Operation, in.Target.Name, got, gerr, want, werr)
		}
	}
}
