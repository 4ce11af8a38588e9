package authz

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/task"
)

// TestResidualReads: a residual reads what the rules left for its operation
// and task id read, not what the whole policy reads. A send that names no
// task reads nothing of the caller's subject nor of a task's owner (only a
// follow-up's ownership check does); a send that names one reads both.
func TestResidualReads(t *testing.T) {
	p := loadShipped(t)
	ctx := context.Background()
	in := BuildInput(facts(investigator, sanctions))
	for _, c := range []struct {
		op          string
		named       bool
		reads, none []string
	}{
		{"send", false, []string{"caller.agent_id", "caller.scopes", "caller.tenant", "push", "task.data_classification"},
			[]string{"caller.user_id", "task.owner", "task.id", "operation", "caller.claims", "task.context_id"}},
		{"send", true, []string{"caller.agent_id", "caller.user_id", "task.id", "task.owner"}, []string{"operation", "caller.claims"}},
		// On egress a get and a card fetch are hops too (common.rego's
		// delegating): their residuals read the direction and the chain.
		{"get", true, []string{"caller.user_id", "task.owner", "direction", "caller.delegation_chain"}, []string{"operation"}},
		{"card", false, []string{"caller.tenant", "direction"}, []string{"caller.user_id", "task.owner"}},
	} {
		tp := p.forTarget(ctx, &in.Target, c.op, c.named, nil)
		prog := tp.prog.Load()
		if prog == nil || prog.view.reads.all {
			t.Fatalf("%s (names a task: %v): no residual, or one that reads everything", c.op, c.named)
		}
		got := joined(prog.view.reads.paths)
		for _, want := range c.reads {
			if !slices.Contains(got, want) {
				t.Errorf("%s (names a task: %v) reads %v, not %s", c.op, c.named, got, want)
			}
		}
		for _, never := range c.none {
			if slices.Contains(got, never) {
				t.Errorf("%s (names a task: %v) reads %s: %v", c.op, c.named, never, got)
			}
		}
		for _, path := range prog.view.keyPaths {
			if path[0] == "target" {
				t.Errorf("%s: the key encodes %v, which the residual's name already fixes", c.op, path)
			}
		}
	}
	// The whole policy's reads are the union: unchanged by the residuals.
	if !slices.Contains(joined(p.view.reads.paths), "caller.user_id") {
		t.Error("the whole policy no longer reads the subject")
	}
}

// TestDistinctSubjectsHit: sends that name no task from callers that differ
// only in their subject (each check a different user) share one decision;
// sends that name a task do not, and under ownership mode user a second
// user of the same agent never gets the first user's allow.
//
// Threat: a decision cached for one user answers a request of another where
// the rule depends on the user (a follow-up of a task another user owns).
// Defence: the key of a decision is the residual that made it, named by its
// target, operation and whether the request names a task, and the values at
// every path that residual reads; only the residual of a request that names
// no task leaves the subject out, because none of its rules read it.
func TestDistinctSubjectsHit(t *testing.T) {
	ctx := context.Background()
	e, _ := NewEngine(loadShipped(t), Options{})
	subject := func(i int) identity.Caller {
		c := investigator
		c.UserID = fmt.Sprintf("u-%d", i)
		c.Claims = map[string]any{"sub": c.UserID, "tenant": "wholesale", "scope": "delegate"}
		c.ClaimsDigest = identity.DigestClaims(c.Claims)
		return c
	}
	for i := range 20 {
		d, err := e.Decide(ctx, BuildInput(facts(subject(i), sanctions)))
		if err != nil || !d.Allow || d.CacheHit != (i > 0) {
			t.Fatalf("send from subject %d: allow=%v hit=%v (%v)", i, d.Allow, d.CacheHit, err)
		}
	}
	reply := func(i int) *Input {
		f := facts(subject(i), sanctions)
		f.Request.TaskID = "t-1"
		f.Record = &task.Task{State: task.Running, Owner: task.Owner{AgentID: "payments-investigator", Tenant: "wholesale", UserID: "u-0"}}
		return BuildInput(f)
	}
	e.Decide(ctx, reply(0))
	if d, _ := e.Decide(ctx, reply(1)); d.CacheHit {
		t.Fatalf("a reply from another subject hit the cache: %+v", d)
	}

	dir := copyPolicies(t)
	setData(t, dir, `"ownership": "agent"`, `"ownership": "user"`)
	p, err := LoadPolicy(ctx, []string{dir}, LoadOptions{SkipTests: true})
	if err != nil {
		t.Fatal(err)
	}
	e, _ = NewEngine(p, Options{})
	if d, _ := e.Decide(ctx, reply(0)); !d.Allow {
		t.Fatalf("the owner's reply: %+v", d)
	}
	d, _ := e.Decide(ctx, reply(1))
	if d.Allow || d.CacheHit || !slices.Equal(codes(d), []string{"NOT_TASK_OWNER"}) {
		t.Fatalf("another user's reply to the owner's task: %+v", d)
	}
}

// leafSwaps lists the paths (".Caller.Scopes", ".Push") at which donor
// differs from base: every leaf, and a pointer whole where only one of them
// has it.
func leafSwaps(base, donor *Input) [][]string {
	var out [][]string
	var walk func(path []string, b, d reflect.Value)
	walk = func(path []string, b, d reflect.Value) {
		switch b.Kind() {
		case reflect.Pointer:
			if b.IsNil() || d.IsNil() {
				if b.IsNil() != d.IsNil() {
					out = append(out, slices.Clone(path))
				}
				return
			}
			walk(path, b.Elem(), d.Elem())
			return
		case reflect.Struct:
			for i := range b.NumField() {
				if b.Type().Field(i).IsExported() {
					walk(append(path, b.Type().Field(i).Name), b.Field(i), d.Field(i))
				}
			}
			return
		}
		if !reflect.DeepEqual(b.Interface(), d.Interface()) {
			out = append(out, slices.Clone(path))
		}
	}
	walk(nil, reflect.ValueOf(base).Elem(), reflect.ValueOf(donor).Elem())
	return out
}

// withLeaf is base with the value at path taken from donor. Nothing of base
// is modified: a pointer on the way is copied before it is written through.
func withLeaf(base *Input, path []string, donor *Input) *Input {
	m := *base
	dst, src := reflect.ValueOf(&m).Elem(), reflect.ValueOf(donor).Elem()
	for i, name := range path {
		dst, src = dst.FieldByName(name), src.FieldByName(name)
		if dst.Kind() == reflect.Pointer && i < len(path)-1 {
			cp := reflect.New(dst.Type().Elem())
			cp.Elem().Set(dst.Elem())
			dst.Set(cp)
			dst, src = dst.Elem(), src.Elem()
		}
	}
	dst.Set(src)
	if strings.Join(path, ".") == "Caller.Claims" {
		m.Caller.claimsDigest = donor.Caller.claimsDigest // the claims and their digest go together
	}
	return &m
}

// keyViolations takes, for each base input, one leaf at a time from a donor
// input, and returns a line for every mutant whose decision-cache key (as
// Decide computes it: the residual's, or the whole policy's) equals its
// base's while the whole policy, on the whole input, decides it otherwise.
func keyViolations(t *testing.T, p *Policy, bases, donors []*Input) []string {
	t.Helper()
	ctx := context.Background()
	key := func(in *Input) [32]byte {
		tp, prog := p.program(ctx, in, nil)
		return p.keyOn(tp, prog, in)
	}
	var out []string
	for i, base := range bases {
		bk := key(base)
		want, werr := evaluate(ctx, p, base)
		for _, donor := range donors {
			for _, path := range leafSwaps(base, donor) {
				m := withLeaf(base, path, donor)
				if key(m) != bk {
					continue
				}
				if d, err := evaluate(ctx, p, m); !sameDecision(d, err, want, werr) {
					out = append(out, fmt.Sprintf("base %d (%s to %q, task %q): %s from a donor keeps the key, but the decision goes from %v to %v",
						i, base.Operation, base.Target.Name, base.Task.ID, strings.Join(path, "."), codes(want), codes(d)))
				}
			}
		}
	}
	return out
}

// hoppedCaller is the investigator with a chain that records each hop's
// authority, the orchestrator's narrower than the caller's.
func hoppedCaller() identity.Caller {
	c := investigator
	c.Hops = []identity.Hop{{AgentID: "orchestrator", Scopes: []string{"read"}, HasScopes: true, Tenant: "retail", Classification: "internal"},
		{AgentID: "payments-investigator", Scopes: []string{"delegate"}, HasScopes: true, Tenant: "wholesale", Classification: "restricted"}}
	return c
}

// keyDonors are inputs to take members from: a caller of every kind the
// matrix has and one whose chain records its hops' authority, push configs,
// task records, data levels, a named tenant, task ids.
func keyDonors() []*Input {
	hopped := hoppedCaller()
	other, deep, cyclic, self, noTenant, noScope, retail, confidential := investigator, investigator,
		investigator, investigator, investigator, investigator, investigator, investigator
	other.UserID, other.Issuer = "u-7", "https://other.example"
	deep.Chain = []string{"a", "b", "c", "d"}
	cyclic.Chain = []string{"orchestrator", "sanctions-screening-agent"}
	self.AgentID = "sanctions-screening-agent"
	noTenant.Tenant = ""
	noScope.Scopes = nil
	retail.Tenant, retail.UserID = "retail", "u-7"
	confidential.Classification = "confidential"
	mtls := identity.Caller{Authenticated: true, Method: "mtls", AgentID: "spiffe-agent", Tenant: "wholesale", Scopes: []string{"delegate"}}
	static := identity.Caller{Authenticated: true, Method: "static", AgentID: "dev-bot", Tenant: "retail"}
	var out []*Input
	for _, c := range []identity.Caller{identity.Anonymous(), hopped, other, deep, cyclic, self, noTenant, noScope, retail,
		confidential, mtls, static} {
		out = append(out, BuildInput(facts(c, sanctions)))
	}
	for _, push := range []*task.PushConfig{{URL: "https://agents.bank.ae/cb", Token: "t"}, {URL: "https://evil.example/cb", Token: "t"},
		{URL: "http://agents.bank.ae/cb", Token: "t"}, {URL: "https://agents.bank.ae/cb"}} {
		f := facts(investigator, sanctions)
		f.Request.Push = push
		out = append(out, BuildInput(f))
	}
	for _, owner := range []task.Owner{{AgentID: "payments-investigator", Tenant: "wholesale", UserID: "u-42"},
		{AgentID: "kyc-refresh-agent", Tenant: "wholesale", UserID: "u-9"}, {AgentID: "payments-investigator", Tenant: "retail", UserID: "u-9"}} {
		f := facts(investigator, sanctions)
		f.Request.TaskID = "t-2"
		f.Record = &task.Task{State: task.Running, Owner: owner}
		out = append(out, BuildInput(f))
	}
	for _, level := range []task.Level{task.Public, task.Confidential, "secret"} {
		f := facts(investigator, sanctions)
		f.Request.Classification = level
		in := BuildInput(f)
		in.Task.Classification = string(level)
		out = append(out, in)
	}
	// Egress calls, where every operation is a hop: one whose chain is one
	// short of the depth limit, and one whose chain holds the target.
	nearLimit, loop := investigator, investigator
	nearLimit.Chain = []string{"a", "b", "c"}
	loop.Chain = []string{"sanctions-screening-agent"}
	for _, c := range []identity.Caller{investigator, nearLimit, loop} {
		f := facts(c, sanctions)
		f.Direction = DirectionEgress
		out = append(out, BuildInput(f))
	}
	f := facts(investigator, sanctions)
	f.Request.Tenant = "retail"
	return append(out, BuildInput(f))
}

// keyBases are inputs to mutate: a fixed-seed sample of the matrix.
func keyBases(n int) []*Input {
	all := matrix(n)
	rng := rand.New(rand.NewPCG(28, 2026))
	var out []*Input
	for _, i := range rng.Perm(len(all))[:n/4] {
		out = append(out, all[i])
	}
	// A chain that records its hops' authority, which the matrix has not.
	for _, op := range []task.Operation{task.OpSend, task.OpGet, task.OpCard} {
		for _, id := range []string{"", "t-1"} {
			f := facts(hoppedCaller(), sanctions)
			f.Request.Operation, f.Request.TaskID = op, id
			out = append(out, BuildInput(f))
		}
	}
	return out
}

// TestResidualKeySoundness: for inputs over every dimension the shipped
// policy decides on (and a variant of its data), changing any one member to
// another input's value either changes the decision-cache key or leaves the
// whole policy's decision as it was: the cache never answers one request
// with a decision the whole policy would not make for it.
//
// Threat: a residual's key that leaves out a member its rules read (a
// scope, a hop's tenant, a task's owner) lets the decision made for one
// caller answer another who differs there. Defence: the key encodes the
// value at every path the residual's reachable rules read (analyzeReachable),
// and the residual's name; TestResidualKeyCatchesAnOmission shows this test
// fails for a key that drops any one of those paths.
func TestResidualKeySoundness(t *testing.T) {
	t.Parallel() // seconds of OPA evaluation; independent of the other tests
	skipUnderRace(t)
	n := 400
	if testing.Short() || raceEnabled {
		n = 80
	}
	bases, donors := keyBases(n), keyDonors()
	t.Run("shipped", func(t *testing.T) {
		for _, v := range keyViolations(t, loadShipped(t), bases, donors) {
			t.Error(v)
		}
	})
	t.Run("ownership by user", func(t *testing.T) {
		for _, v := range keyViolations(t, ownershipByUser(t), bases, donors) {
			t.Error(v)
		}
	})
}

// TestResidualKeyCatchesAnOmission: the soundness check above, and the
// engine's decisions through its cache (TestCachedDecisionsMatchWhole),
// fail when the key of the residuals of a send (naming a task or not)
// leaves out any one of the paths it encodes: each of them decides
// something.
func TestResidualKeyCatchesAnOmission(t *testing.T) {
	t.Parallel() // seconds of OPA evaluation; independent of the other tests
	skipUnderRace(t)
	ctx := context.Background()
	p := loadShipped(t)
	donors := keyDonors()
	var sends []*Input
	for _, c := range []identity.Caller{investigator, identity.Anonymous(), hoppedCaller()} {
		for _, push := range []*task.PushConfig{nil, {URL: "https://agents.bank.ae/cb", Token: "t"}} {
			f := facts(c, sanctions)
			f.Request.Push = push
			sends = append(sends, BuildInput(f))
			for _, owner := range []task.Owner{{AgentID: "payments-investigator", Tenant: "wholesale", UserID: "u-42"},
				{AgentID: "kyc-refresh-agent", Tenant: "retail", UserID: "u-9"}} {
				f.Request.TaskID = "t-1"
				f.Record = &task.Task{State: task.Running, Owner: owner}
				sends = append(sends, BuildInput(f))
			}
		}
	}
	stream := keyStream(sends, donors, 9)
	for _, named := range []bool{false, true} {
		tp := p.forTarget(ctx, &BuildInput(facts(investigator, sanctions)).Target, "send", named, nil)
		prog := tp.prog.Load()
		if len(prog.view.keyPaths) == 0 {
			t.Fatal("a residual with nothing to key")
		}
		for i, path := range prog.view.keyPaths {
			if strings.Join(path, ".") == "direction" {
				// A conservative read: a send is delegating whatever the
				// direction (common.rego), but the residual keeps the rule
				// that makes every egress call delegating, so its key holds
				// the direction too. It decides nothing for a send, and
				// costs no sharing: a door has one direction.
				continue
			}
			tampered := *prog.view
			tampered.keyPaths = slices.Delete(slices.Clone(prog.view.keyPaths), i, i+1)
			tprog := *prog
			tprog.view = &tampered
			tp.prog.Store(&tprog)
			if len(keyViolations(t, p, sends, donors)) == 0 {
				t.Errorf("send (names a task: %v): a key without %s passes the soundness check", named, strings.Join(path, "."))
			}
			if bad, _ := engineMismatches(t, p, stream, true); len(bad) == 0 {
				t.Errorf("send (names a task: %v): with a key without %s the engine still decides as the whole policy", named, strings.Join(path, "."))
			}
			tp.prog.Store(prog)
		}
	}
}

// keyStream is bases with derived inputs mixed in at random (fixed seed):
// for each base, every leaf a donor differs at, taken one at a time, and
// the base from several other subjects.
func keyStream(bases, donors []*Input, seed uint64) []*Input {
	var out []*Input
	for _, base := range bases {
		out = append(out, base)
		for _, donor := range donors {
			for _, path := range leafSwaps(base, donor) {
				out = append(out, withLeaf(base, path, donor))
			}
		}
		for i := range 3 {
			m := *base
			m.Caller.UserID = fmt.Sprintf("u-%d", 100+i)
			out = append(out, &m)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 28))
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// engineMismatches decides each input of stream, twice over, through an
// engine with a decision cache and returns a line for each decision that
// differs from the whole policy's on the whole input, and how many of the
// decisions were cache hits; it stops at the first mismatch when first.
func engineMismatches(t *testing.T, p *Policy, stream []*Input, first bool) (out []string, hits int) {
	t.Helper()
	ctx := context.Background()
	e, err := NewEngine(p, Options{CacheSize: len(stream) + 1})
	if err != nil {
		t.Fatal(err)
	}
	for pass := range 2 {
		for i, in := range stream {
			got, gerr := e.Decide(ctx, in)
			if got.CacheHit {
				hits++
			}
			want, werr := evaluate(ctx, p, in)
			if !sameDecision(got, gerr, want, werr) {
				out = append(out, fmt.Sprintf("pass %d, input %d (%s to %q by %q/%q, task %q): cached=%v decided %v, whole %v",
					pass, i, in.Operation, in.Target.Name, in.Caller.AgentID, in.Caller.UserID, in.Task.ID, got.CacheHit, codes(got), codes(want)))
				if first {
					return out, hits
				}
			}
		}
	}
	return out, hits
}

// TestCachedDecisionsMatchWhole: every decision Decide returns, from the
// cache or not, over a shuffled stream of inputs (the matrix's targets and
// operations, callers of other subjects, tenants and chains, task ids and
// owners, push configs, data levels), is the decision of the whole policy
// on the whole input; and the stream does hit, across subjects too.
//
// Threat: a decision cached under a key that leaves out something the rule
// for this target and operation reads answers a request it was not made
// for (another tenant's, another owner's). Defence: keyOn encodes the
// residual's name and every path it reaches; this test goes through the
// engine as a request does, cache included, and compares each answer with
// a fresh evaluation of the whole policy.
func TestCachedDecisionsMatchWhole(t *testing.T) {
	t.Parallel() // seconds of OPA evaluation; independent of the other tests
	skipUnderRace(t)
	n := 160
	if testing.Short() || raceEnabled {
		n = 40
	}
	stream := keyStream(keyBases(n), keyDonors(), 7)
	for name, p := range map[string]*Policy{"shipped": loadShipped(t), "ownership by user": ownershipByUser(t)} {
		bad, hits := engineMismatches(t, p, stream, false)
		for _, line := range bad {
			t.Errorf("%s: %s", name, line)
		}
		if hits <= len(stream) {
			t.Errorf("%s: %d hits in %d decisions: the second pass alone should hit %d", name, hits, 2*len(stream), len(stream))
		}
	}
}

// ownershipByUser is the shipped policy with its data's ownership mode
// "user": a task is its user's, not its agent's.
func ownershipByUser(t *testing.T) *Policy {
	t.Helper()
	dir := copyPolicies(t)
	setData(t, dir, `"ownership": "agent"`, `"ownership": "user"`)
	p, err := LoadPolicy(context.Background(), []string{dir}, LoadOptions{SkipTests: true})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOpaqueReadsKeyOnEverything: a custom policy that reads the input in a
// way the analysis cannot follow (walk over it, the whole input or task
// marshalled) keys its residual's decisions on the whole input; one that
// picks a member at evaluation time (input[k], input.caller[k],
// input.task[k]) on what partial evaluation leaves of that pick, which
// covers the member: a decision for one subject or context never answers
// another, on a send that names a task or not.
//
// Threat: a policy written against writ/v1 with walk, json.marshal(input) or
// input[k] decides on the subject while the analysis sees no read of it, so
// its decisions would hit across subjects. Defence: such a use reads
// everything (reads.all) in the residual's own analysis too, and keyOn then
// encodes every member of the input; a dynamic pick reads at least the
// member it picks from.
func TestOpaqueReadsKeyOnEverything(t *testing.T) {
	ctx := context.Background()
	head := "package writ.authz\n\ndecision := {\"allow\": allow, \"denials\": []}\n\ndefault allow := false\n\n"
	subject := func(f *Facts, v string) {
		f.Caller.UserID, f.Caller.Claims = v, map[string]any{"sub": v}
		f.Caller.ClaimsDigest = identity.DigestClaims(f.Caller.Claims)
	}
	contextID := func(f *Facts, v string) { f.Request.ContextID = v }
	for name, c := range map[string]struct {
		rego string
		set  func(*Facts, string)
		// all: the residual reads everything; else it reads path.
		all  bool
		path string
	}{
		"walk":           {"allow if { walk(input, [path, v]); path[count(path) - 1] == \"user_id\"; v == \"u-42\" }", subject, true, ""},
		"marshalled":     {"allow if contains(json.marshal(input), \"\\\"u-42\\\"\")", subject, true, ""},
		"dynamic top":    {"allow if { some k; input[k].user_id == \"u-42\" }", subject, false, "caller.user_id"},
		"dynamic member": {"allow if { some k; input.caller[k] == \"u-42\" }", subject, false, "caller"},
		"dynamic task":   {"allow if { some k; input.task[k] == \"u-42\" }", contextID, false, "task.context_id"},
		"task whole":     {"allow if contains(json.marshal(input.task), \"\\\"u-42\\\"\")", contextID, false, "task"},
	} {
		t.Run(name, func(t *testing.T) {
			p := loadRego(t, head+c.rego+"\n")
			for _, taskID := range []string{"", "t-1"} {
				e, _ := NewEngine(p, Options{})
				as := func(v string) *Input {
					f := facts(investigator, sanctions)
					c.set(f, v)
					f.Request.TaskID = taskID
					return BuildInput(f)
				}
				in := as("u-42")
				tp, prog := p.program(ctx, in, nil)
				if tp == nil || prog == nil || prog.view == nil {
					t.Fatal("no residual for the send")
				}
				reads := prog.view.reads
				if c.all && !reads.all {
					t.Fatalf("task %q: the residual does not read everything: %v", taskID, joined(reads.paths))
				}
				if !c.all && !reads.all && !slices.ContainsFunc(reads.paths, func(p []string) bool {
					return strings.HasPrefix(c.path+".", strings.Join(p, ".")+".")
				}) {
					t.Fatalf("task %q: the residual does not read %s: %v", taskID, c.path, joined(reads.paths))
				}
				if c.all {
					other := as("u-42")
					other.Request.Path = "/elsewhere" // read by nothing but the opaque use
					if p.keyOn(tp, prog, other) == p.keyOn(tp, prog, in) {
						t.Fatal("a residual that reads everything is not keyed on every member")
					}
				}
				for i, v := range []string{"u-42", "u-7", "u-42", "u-8"} {
					d, err := e.Decide(ctx, as(v))
					want, werr := evaluate(ctx, p, as(v))
					if !sameDecision(d, err, want, werr) || d.Allow != (v == "u-42") || d.CacheHit != (i == 2) {
						t.Fatalf("task %q, %s: allow=%v hit=%v, whole policy %v", taskID, v, d.Allow, d.CacheHit, want.Allow)
					}
				}
			}
		})
	}
}
