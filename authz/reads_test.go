package authz

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/task"
)

// loadRego loads a one-file policy set.
func loadRego(t *testing.T, rego string) *Policy {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "p.rego"), rego)
	p, err := LoadPolicy(context.Background(), []string{dir}, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func joined(paths [][]string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, strings.Join(p, "."))
	}
	return out
}

// TestReadsShipped: the shipped policy reads the caller's identity, scopes,
// ceiling, chain and the chain's hops, the target's metadata, the operation, the push config, the task's
// id, level and owner, and the tenant the request names; not the context id,
// the claims, the protocol or the rest of the HTTP request. (Through shown(path) and same_as_owner(field), whose parameters name
// the path, resolved at their call sites.)
func TestReadsShipped(t *testing.T) {
	p := loadShipped(t)
	want := []string{"caller.agent_id", "caller.authenticated", "caller.classification", "caller.delegation_chain",
		"caller.hops", "caller.method", "caller.scopes", "caller.tenant", "caller.user_id", "direction", "operation", "push", "request.tenant", "target.max_data_classification",
		"target.name", "target.security_schemes", "target.tenants", "task.data_classification", "task.id", "task.owner"}
	if p.reads.all || p.reads.nondeterministic || !slices.Equal(joined(p.reads.paths), want) {
		t.Fatalf("reads = %+v\nwant %v", p.reads, want)
	}
}

// TestReadsAnalysis: what custom policies read, through each construct the
// analysis follows, and the constructs it gives up on (everything is read).
func TestReadsAnalysis(t *testing.T) {
	head := "package writ.authz\n\ndecision := {\"allow\": allow, \"denials\": []}\n\ndefault allow := false\n\n"
	for name, c := range map[string]struct {
		rego string
		want []string
		all  bool
	}{
		"ref":              {"allow if input.caller.claims.department == \"risk\"", []string{"caller.claims.department"}, false},
		"context id":       {"allow if startswith(input.task.context_id, \"ctx-\")", []string{"task.context_id"}, false},
		"dynamic key":      {"allow if input.caller[x] == \"a\"", []string{"caller"}, false},
		"iteration":        {"allow if { some s in input.caller.scopes; s == \"a\" }", []string{"caller.scopes"}, false},
		"alias":            {"allow if { c := input.caller; c.tenant == \"t\"; c.claims.x == 1 }", []string{"caller.claims.x", "caller.tenant"}, false},
		"alias used whole": {"allow if { c := input.task; count(c) > 1 }", []string{"task"}, false},
		"object.get":       {"allow if object.get(input, [\"caller\", \"claims\", \"dept\"], \"\") == \"risk\"", []string{"caller.claims.dept"}, false},
		"function path": {"f(path) := object.get(input, path, null)\n\nallow if { f([\"task\", \"skill\"]) == \"x\"; f([\"request\", \"host\"]) }",
			[]string{"request.host", "task.skill"}, false},
		"function key":        {"g(k) := input.caller[k]\n\nallow if g(\"tenant\") == g(\"user_id\")", []string{"caller.tenant", "caller.user_id"}, false},
		"function variable":   {"g(k) := input.caller[k]\n\nallow if { some k in [\"a\"]; g(k) }", []string{"caller"}, false},
		"comprehension":       {"allow if count([x | some x in input.task.file_uris; x != \"\"]) > 0", []string{"task.file_uris"}, false},
		"every":               {"allow if every x in input.caller.scopes { x != \"root\" }", []string{"caller.scopes"}, false},
		"not":                 {"allow if not input.push", []string{"push"}, false},
		"whole input":         {"allow if walk(input, [_, _])", nil, true},
		"input in object":     {"allow if json.marshal({\"i\": input}) != \"\"", nil, true},
		"with input":          {"q if input.x\n\nallow if q with input as {\"x\": true}", nil, true},
		"unused function":     {"f(path) := object.get(input, path, null)\n\nallow := true", nil, false},
		"rule head key":       {"by_tenant[t] := true if t := input.caller.tenant\n\nallow if by_tenant.w", []string{"caller.tenant"}, false},
		"bound then compared": {"allow if { t := \"w\"; t = input.caller.tenant }", []string{"caller.tenant"}, false},
		"alias in head":       {"tenant := t if t := input.caller\n\nallow if tenant.x", []string{"caller"}, false},
	} {
		t.Run(name, func(t *testing.T) {
			p := loadRego(t, head+c.rego+"\n")
			if p.reads.all != c.all || !slices.Equal(joined(p.reads.paths), c.want) {
				t.Fatalf("reads all=%v paths=%v, want all=%v %v", p.reads.all, joined(p.reads.paths), c.all, c.want)
			}
		})
	}
	for _, rego := range []string{"allow if time.now_ns() > 0\n",
		"allow if { [ok, _, _] := io.jwt.decode_verify(input.caller.claims.raw, {\"cert\": \"x\"}); ok }\n"} {
		if p := loadRego(t, head+rego); !p.reads.nondeterministic {
			t.Errorf("%s is not seen as depending on the time of the evaluation", rego)
		}
	}
}

// TestKeyFollowsReads: the decision-cache key of the shipped policy ignores the
// context id, the claims, the message and the HTTP request; a custom policy
// that reads input.caller.claims.department or input.task.context_id is keyed
// on them, and decides by them through the cache.
func TestKeyFollowsReads(t *testing.T) {
	ctx := context.Background()
	newToken := func(c identity.Caller, jti string) identity.Caller {
		claims := map[string]any{}
		for k, v := range c.Claims {
			claims[k] = v
		}
		claims["jti"] = jti
		c.Claims, c.ClaimsDigest = claims, identity.DigestClaims(claims)
		return c
	}
	base := facts(investigator, sanctions)
	other := facts(newToken(investigator, "2"), sanctions)
	other.Request.ContextID, other.Request.Message.ID = "c-2", "m-2"
	other.HTTP.RemoteAddr = "10.1.1.1:5000"
	other.Request.Protocol.Version = "0.3"

	e, _ := NewEngine(loadShipped(t), Options{})
	first, _ := e.Decide(ctx, BuildInput(base))
	second, _ := e.Decide(ctx, BuildInput(other))
	if first.CacheHit || !second.CacheHit || !second.Allow {
		t.Fatalf("shipped policy: first %+v second %+v", first, second)
	}
	scopes := facts(investigator, sanctions)
	scopes.Caller.Scopes = []string{"read"}
	if d, _ := e.Decide(ctx, BuildInput(scopes)); d.CacheHit || d.Allow {
		t.Fatalf("a read field did not change the key: %+v", d)
	}

	// A compliance policy that reads one claim and the context id.
	custom := loadRego(t, `package writ.authz

decision := {"allow": count(denials) == 0, "denials": [d | some d in denials]}

denials contains {"code": "DEPARTMENT", "reason": "risk only"} if input.caller.claims.department != "risk"

denials contains {"code": "CONTEXT", "reason": "context c-9 is closed"} if input.task.context_id == "c-9"
`)
	e, _ = NewEngine(custom, Options{})
	withDept := func(dept, jti, ctxID string) *Input {
		c := investigator
		c.Claims = map[string]any{"department": dept, "jti": jti}
		c.ClaimsDigest = identity.DigestClaims(c.Claims)
		f := facts(c, sanctions)
		f.Request.ContextID = ctxID
		return BuildInput(f)
	}
	steps := []struct {
		in         *Input
		allow, hit bool
	}{
		{withDept("risk", "1", "c-1"), true, false},
		{withDept("risk", "2", "c-1"), true, true},    // another claim: same key
		{withDept("sales", "2", "c-1"), false, false}, // the claim read: another key
		{withDept("risk", "1", "c-9"), false, false},  // the context id read: another key
		{withDept("risk", "3", "c-9"), false, true},
	}
	for i, s := range steps {
		d, err := e.Decide(ctx, s.in)
		if err != nil || d.Allow != s.allow || d.CacheHit != s.hit {
			t.Errorf("step %d: allow=%v hit=%v (%v), want allow=%v hit=%v", i, d.Allow, d.CacheHit, err, s.allow, s.hit)
		}
	}

	// A policy that may read anything is keyed on everything.
	all := loadRego(t, "package writ.authz\n\ndecision := {\"allow\": count(json.marshal(input)) > 0}\n")
	if all.key(BuildInput(base)) != Key(all.Revision, BuildInput(base)) {
		t.Error("a policy reading the whole input is not keyed on the whole input")
	}
	// A nondeterministic policy is never cached.
	e, _ = NewEngine(loadRego(t, "package writ.authz\n\ndecision := {\"allow\": time.now_ns() > 0}\n"), Options{})
	e.Decide(ctx, BuildInput(base))
	if d, _ := e.Decide(ctx, BuildInput(base)); d.CacheHit || !d.Allow {
		t.Errorf("nondeterministic policy: %+v", d)
	}
}

// TestKeySoundness mutates every leaf of the input, one at a time: whenever the
// shipped policy's key stays the same, so must the decision (evaluated on the
// whole policy and the whole input); and the key changes for every path the
// policy reads.
func TestKeySoundness(t *testing.T) {
	ctx := context.Background()
	p := loadShipped(t)
	f := facts(investigator, sanctions)
	f.Request.Push = &task.PushConfig{URL: "https://agents.bank.ae/cb", Token: "t", AuthScheme: "Bearer"}
	f.Request.TaskID = "t-1"
	f.Record = &task.Task{State: task.Running, Owner: task.Owner{AgentID: "payments-investigator", Tenant: "wholesale", UserID: "u-42"}}
	base := BuildInput(f)
	baseKey := p.key(base)
	baseDec, err := evaluate(ctx, p, base)
	if err != nil {
		t.Fatal(err)
	}
	changed := map[string]bool{}
	mutateLeaves(t, f, func(path string, in *Input) {
		if p.key(in) != baseKey {
			changed[path] = true
			return
		}
		d, err := evaluate(ctx, p, in)
		if !sameDecision(d, err, baseDec, nil) {
			t.Errorf("changing %s keeps the key but changes the decision: %+v", path, d)
		}
	})
	for _, want := range []string{".Caller.AgentID", ".Caller.Tenant", ".Caller.Scopes", ".Caller.Chain", ".Operation",
		".Target.Name", ".Target.Tenants", ".Task.ID", ".Task.Owner.AgentID", ".Push.URL", ".Push.Host"} {
		if !changed[want] {
			t.Errorf("changing %s does not change the key", want)
		}
	}
	for _, same := range []string{".Task.ContextID", ".Caller.Claims", ".Caller.Issuer", ".Request.SourceAddress", ".Protocol.Version"} {
		if changed[same] {
			t.Errorf("changing %s changes the key, but the policy never reads it", same)
		}
	}
}

// mutateLeaves calls fn with a fresh input per mutation of one leaf of BuildInput(f).
func mutateLeaves(t *testing.T, f *Facts, fn func(path string, in *Input)) {
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(path, v.Elem())
			}
			return
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				if v.Type().Field(i).IsExported() {
					walk(path+"."+v.Type().Field(i).Name, v.Field(i))
				}
			}
			return
		}
		mutate := func(change func(reflect.Value)) {
			in := BuildInput(f)
			target := reflect.ValueOf(in).Elem()
			for _, name := range strings.Split(strings.TrimPrefix(path, "."), ".") {
				if target.Kind() == reflect.Pointer {
					target = target.Elem()
				}
				target = target.FieldByName(name)
			}
			change(target)
			fn(path, in)
		}
		switch v.Kind() {
		case reflect.String:
			mutate(func(x reflect.Value) { x.SetString(x.String() + "x") })
		case reflect.Bool:
			mutate(func(x reflect.Value) { x.SetBool(!x.Bool()) })
		case reflect.Int:
			mutate(func(x reflect.Value) { x.SetInt(x.Int() + 1) })
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.String {
				mutate(func(x reflect.Value) { x.Set(reflect.Append(x, reflect.ValueOf("x"))) })
			} else {
				mutate(func(x reflect.Value) { x.Set(reflect.Append(x, reflect.New(x.Type().Elem()).Elem())) })
			}
		case reflect.Map:
			mutate(func(x reflect.Value) {
				m := reflect.MakeMap(x.Type())
				for _, k := range x.MapKeys() {
					m.SetMapIndex(k, x.MapIndex(k))
				}
				m.SetMapIndex(reflect.ValueOf("extra"), reflect.ValueOf(any("x")))
				x.Set(m)
			})
		default:
			t.Fatalf("%s: kind %s not covered", path, v.Kind())
		}
	}
	walk("", reflect.ValueOf(BuildInput(f)))
}
