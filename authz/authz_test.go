package authz

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/task"
)

const shipped = "../policies"

// The seed's worked example: the caller and the three agents of section 2.
var (
	investigator = identity.Caller{Authenticated: true, Method: "jwt", Issuer: "https://idp.bank.ae",
		AgentID: "payments-investigator", UserID: "u-42", Tenant: "wholesale", Scopes: []string{"delegate"},
		Chain: []string{"orchestrator"}, Classification: "restricted",
		Claims: map[string]any{"sub": "u-42", "tenant": "wholesale", "scope": "delegate"}}
	sanctions = &Target{Name: "sanctions-screening-agent", Owner: "group-compliance", Tenants: []string{"wholesale", "retail"},
		MaxClassification: task.Restricted, SecuritySchemes: []string{"oauth2"}, PushNotifications: true,
		Skills: []task.Skill{{ID: "screen", Tags: []string{"sanctions", "compliance", "screening"}}}}
	kyc = &Target{Name: "kyc-refresh-agent", Owner: "retail-onboarding", Tenants: []string{"retail"},
		MaxClassification: task.Confidential, SecuritySchemes: []string{"oauth2"},
		Skills: []task.Skill{{ID: "refresh", Tags: []string{"kyc", "compliance"}}}}
	marketing = &Target{Name: "marketing-copy-agent", Owner: "brand", MaxClassification: task.Internal,
		SecuritySchemes: []string{"apikey"}, Skills: []task.Skill{{ID: "copy", Tags: []string{"marketing"}}}}
)

func sendRequest() *task.Request {
	return &task.Request{Operation: task.OpSend,
		Protocol: task.Protocol{Name: "a2a", Version: "1.0", Binding: task.BindingJSONRPC, Method: "SendMessage"},
		Message:  &task.MessageSummary{ID: "m-1", Role: "user", Parts: task.PartCounts{Text: 1, Data: 1}}}
}

func facts(c identity.Caller, t *Target) *Facts {
	return &Facts{Request: sendRequest(), Caller: c, Target: t,
		HTTP: HTTPInfo{Method: "POST", Path: "/", Host: t.Name + ".agents.bank.ae", RemoteAddr: "127.0.0.1:40000"}}
}

// loadShipped loads the shipped policy without running its Rego tests (the
// policies package and the tests that assert on LoadPolicy's test gate run
// them; here they would only run again on every load, seconds each under the
// race detector).
func loadShipped(t testing.TB) *Policy {
	t.Helper()
	p, err := LoadPolicy(context.Background(), []string{shipped}, LoadOptions{SkipTests: true})
	if err != nil {
		t.Fatalf("loading the shipped policy: %v", err)
	}
	return p
}

func codes(d Decision) []string {
	var out []string
	for _, x := range d.Denials {
		out = append(out, x.Code)
	}
	return out
}

// TestSeedAdmission reproduces section 2 of the seed ("delegation admission")
// through the real OPA engine and the shipped policy.
func TestSeedAdmission(t *testing.T) {
	e, err := NewEngine(loadShipped(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	deep := investigator
	deep.Chain = []string{"a", "b", "c", "d"}
	cyclic := investigator
	cyclic.Chain = []string{"sanctions-screening-agent"}
	for _, c := range []struct {
		name   string
		caller identity.Caller
		target *Target
		want   []string
	}{
		{"sanctions", investigator, sanctions, nil},
		{"kyc", investigator, kyc, []string{"CLASSIFICATION_EXCEEDED", "TENANT_NOT_PERMITTED"}},
		{"marketing", investigator, marketing, []string{"CLASSIFICATION_EXCEEDED", "NO_ACCEPTABLE_AUTH"}},
		{"depth 4", deep, sanctions, []string{"DEPTH_EXCEEDED"}},
		{"cycle", cyclic, sanctions, []string{"CYCLE_DETECTED"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := e.Decide(context.Background(), BuildInput(facts(c.caller, c.target)))
			if err != nil {
				t.Fatal(err)
			}
			if d.Allow != (c.want == nil) || !slices.Equal(codes(d), c.want) {
				t.Fatalf("allow=%v codes=%v, want %v (%+v)", d.Allow, codes(d), c.want, d.Denials)
			}
			for _, x := range d.Denials {
				if x.Reason == "" {
					t.Errorf("%s without a reason", x.Code)
				}
			}
			if d.Revision == "" || d.ID == "" {
				t.Errorf("decision without revision or id: %+v", d)
			}
		})
	}
	// An anonymous caller is denied.
	d, _ := e.Decide(context.Background(), BuildInput(facts(identity.Anonymous(), sanctions)))
	if d.Allow || !slices.Contains(codes(d), "UNAUTHENTICATED") {
		t.Errorf("anonymous: %+v", d)
	}
}

// TestValueMatchesJSON: the hand-written conversion equals OPA's conversion of the
// struct's JSON form, for inputs with and without the optional parts.
func TestValueMatchesJSON(t *testing.T) {
	full := facts(investigator, sanctions)
	full.Request.Push = &task.PushConfig{URL: "https://Agents.Bank.ae:8443/cb?x=1", Token: "s3cret", AuthScheme: "Bearer"}
	full.Request.TaskID, full.Request.ContextID = "t-1", "c-1"
	full.Request.Message.FileURIs = []string{"https://files.bank.ae/a.pdf"}
	full.Record = &task.Task{ID: "t-1", ContextID: "c-1", State: task.Running,
		Owner: task.Owner{AgentID: "payments-investigator", Tenant: "wholesale", UserID: "u-42"}}
	full.Caller.Claims = map[string]any{"nested": map[string]any{"a": []any{1.5, "x", true, nil}}, "n": 3.0}
	for name, f := range map[string]*Facts{
		"full":      full,
		"minimal":   {Request: &task.Request{Operation: task.OpGet}, Caller: identity.Anonymous()},
		"no target": {Request: sendRequest(), Caller: investigator},
	} {
		in := BuildInput(f)
		raw, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		var generic any
		if err := json.Unmarshal(raw, &generic); err != nil {
			t.Fatal(err)
		}
		want, err := ast.InterfaceToValue(generic)
		if err != nil {
			t.Fatal(err)
		}
		if got := in.Value(); got.Compare(want) != 0 {
			t.Errorf("%s:\n got %v\nwant %v", name, got, want)
		}
	}
	in := BuildInput(full)
	if in.Push.Host != "agents.bank.ae" || in.Push.Port != 8443 || in.Push.Scheme != "https" || !in.Push.HasToken {
		t.Errorf("push = %+v", in.Push)
	}
	if in.Task.Classification != "restricted" || in.Request.SourceAddress != "127.0.0.1" || in.Task.Owner == nil {
		t.Errorf("input = %+v", in)
	}
}

// TestClassificationSources: the task's level is the highest of the request's
// declaration and the token's claim; with neither, the configured default.
func TestClassificationSources(t *testing.T) {
	f := facts(identity.Caller{Authenticated: true}, sanctions)
	if got := BuildInput(f).Task.Classification; got != "internal" {
		t.Errorf("default = %s", got)
	}
	f.DefaultClassification = task.Public
	if got := BuildInput(f).Task.Classification; got != "public" {
		t.Errorf("configured default = %s", got)
	}
	f.Request.Classification = task.Confidential
	if got := BuildInput(f).Task.Classification; got != "confidential" {
		t.Errorf("declared = %s", got)
	}
	f.Caller.Classification = "restricted"
	if got := BuildInput(f).Task.Classification; got != "restricted" {
		t.Errorf("token above declared = %s", got)
	}
	f.Request.Classification, f.Caller.Classification = task.Restricted, "public"
	if got := BuildInput(f).Task.Classification; got != "restricted" {
		t.Errorf("declared above token = %s", got)
	}
}

// TestKeyCoversEveryField mutates every leaf of the input, one at a time, and
// checks that the cache key changes: no field a policy could read is left out.
func TestKeyCoversEveryField(t *testing.T) {
	f := facts(investigator, sanctions)
	f.Request.Push = &task.PushConfig{URL: "https://agents.bank.ae/cb", Token: "t", AuthScheme: "Bearer"}
	f.Record = &task.Task{State: task.Running, Owner: task.Owner{AgentID: "a", Tenant: "b", UserID: "c"}}
	base := BuildInput(f)
	baseKey := Key("rev", base)
	if Key("rev2", base) == baseKey {
		t.Error("revision not in the key")
	}
	n := 0
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				return
			}
			walk(path, v.Elem())
			return
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				if v.Type().Field(i).IsExported() {
					walk(path+"."+v.Type().Field(i).Name, v.Field(i))
				}
			}
			return
		}
		check := func(mutate func()) {
			in := BuildInput(f) // a fresh copy to mutate
			target := reflect.ValueOf(in).Elem()
			for _, name := range strings.Split(strings.TrimPrefix(path, "."), ".") {
				if target.Kind() == reflect.Pointer {
					target = target.Elem()
				}
				target = target.FieldByName(name)
			}
			v = target
			mutate()
			n++
			if Key("rev", in) == baseKey {
				t.Errorf("changing %s does not change the key", path)
			}
		}
		switch v.Kind() {
		case reflect.String:
			check(func() { v.SetString(v.String() + "x") })
		case reflect.Bool:
			check(func() { v.SetBool(!v.Bool()) })
		case reflect.Int:
			check(func() { v.SetInt(v.Int() + 1) })
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.String {
				check(func() { v.Set(reflect.Append(v, reflect.ValueOf("x"))) })
			} else {
				count, fields := v.Len(), v.Type().Elem().NumField()
				check(func() { v.Set(reflect.Append(v, reflect.New(v.Type().Elem()).Elem())) })
				for i := 0; i < count; i++ {
					for j := 0; j < fields; j++ {
						check(func() {
							fv := v.Index(i).Field(j)
							switch fv.Kind() {
							case reflect.String:
								fv.SetString(fv.String() + "x")
							case reflect.Slice:
								fv.Set(reflect.Append(fv, reflect.ValueOf("x")))
							}
						})
					}
				}
			}
		case reflect.Map:
			// A copy with one more key: the caller's claims are shared and read-only.
			check(func() {
				m := reflect.MakeMap(v.Type())
				for _, k := range v.MapKeys() {
					m.SetMapIndex(k, v.MapIndex(k))
				}
				m.SetMapIndex(reflect.ValueOf("extra"), reflect.ValueOf(any("x")))
				v.Set(m)
			})
		default:
			t.Errorf("%s: kind %s not covered by this test", path, v.Kind())
		}
	}
	walk("", reflect.ValueOf(base))
	if n < 40 {
		t.Errorf("only %d fields mutated", n)
	}
	// Optional parts present or absent change the key too.
	g := facts(investigator, sanctions)
	if Key("rev", BuildInput(g)) == baseKey {
		t.Error("push/owner presence not in the key")
	}
	// Per-request noise is not in the input: another message id hits the same key.
	h := facts(investigator, sanctions)
	h.Request.Message.ID = "m-2"
	if Key("rev", BuildInput(h)) != Key("rev", BuildInput(facts(investigator, sanctions))) {
		t.Error("message id changes the key")
	}
}

// TestJWTCallerDigest: a verified JWT caller carries a digest that stands for its
// claims (its payload's), and an input built with it gives the policy the same
// value as one built from the claims themselves; the key differs from the
// claims-computed one only as a cache miss would.
func TestJWTCallerDigest(t *testing.T) {
	c := identifyBench(t)
	if c.ClaimsDigest == ([32]byte{}) || c.ClaimsDigest == identity.DigestClaims(c.Claims) {
		t.Fatal("claims digest missing, or not the payload's")
	}
	if again := identifyBench(t); again.ClaimsDigest != c.ClaimsDigest {
		t.Fatal("the same token gave two digests")
	}
	with := BuildInput(facts(c, sanctions))
	without := c
	without.ClaimsDigest = [32]byte{}
	if with.Value().Compare(BuildInput(facts(without, sanctions)).Value()) != 0 {
		t.Fatal("cached claims value differs")
	}
	other := c
	other.Claims = map[string]any{"iss": "x"}
	other.ClaimsDigest = [32]byte{}
	if Key("r", with) == Key("r", BuildInput(facts(other, sanctions))) {
		t.Fatal("other claims share the key")
	}
}

// TestCacheAndReload: a repeated delegation is a cache hit; a reload to a changed
// policy is a miss and decides by the new policy.
func TestCacheAndReload(t *testing.T) {
	dir := copyPolicies(t)
	p, err := LoadPolicy(context.Background(), []string{dir}, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEngine(p, Options{CacheSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	in := BuildInput(facts(investigator, sanctions))
	first, _ := e.Decide(context.Background(), in)
	second, _ := e.Decide(context.Background(), in)
	if first.CacheHit || !second.CacheHit || !second.Allow || first.ID == second.ID {
		t.Fatalf("first %+v second %+v", first, second)
	}
	if h, m := e.CacheStats(); h != 1 || m != 1 {
		t.Errorf("stats %d/%d", h, m)
	}
	// Lower the depth limit to 1: the one-hop chain is now too deep.
	setData(t, dir, `"max_delegation_depth": 4`, `"max_delegation_depth": 1`)
	r := NewReloader(e, []string{dir}, LoadOptions{SkipTests: true}, nil)
	if err := r.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	third, _ := e.Decide(context.Background(), in)
	if third.CacheHit || third.Allow || !slices.Equal(codes(third), []string{"DEPTH_EXCEEDED"}) || third.Revision == first.Revision {
		t.Fatalf("after reload: %+v", third)
	}
}

// TestFailClosed: an undefined or erroring decision denies with POLICY_ERROR,
// unless dry-run lets it pass.
func TestFailClosed(t *testing.T) {
	for name, rego := range map[string]string{
		"undefined":  "package writ.authz\n\ndecision := {\"allow\": true} if input.nothing == 1\n",
		"conflict":   "package writ.authz\n\ndecision := {\"allow\": true} if input.version\n\ndecision := {\"allow\": false} if input.operation\n",
		"not object": "package writ.authz\n\ndecision := true\n",
		"bad shape":  "package writ.authz\n\ndecision := {\"allow\": \"yes\"}\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "p.rego"), rego)
			p, err := LoadPolicy(context.Background(), []string{dir}, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			in := BuildInput(facts(investigator, sanctions))
			e, _ := NewEngine(p, Options{})
			d, err := e.Decide(context.Background(), in)
			if err == nil || d.Allow || !slices.Equal(codes(d), []string{PolicyErrorCode}) {
				t.Fatalf("%+v %v", d, err)
			}
			// A failure is not cached: the next decision evaluates again.
			if d2, _ := e.Decide(context.Background(), in); d2.CacheHit {
				t.Error("a policy error was cached")
			}
			dry, _ := NewEngine(p, Options{DryRun: true})
			d, _ = dry.Decide(context.Background(), in)
			if !d.Allow || !d.DryRun || !slices.Equal(codes(d), []string{PolicyErrorCode}) {
				t.Fatalf("dry-run: %+v", d)
			}
		})
	}
}

// TestBadPolicies: a syntax error is refused at load with its file named; a set
// whose own tests fail is refused; a reload of either keeps the last good policy.
func TestBadPolicies(t *testing.T) {
	dir := copyPolicies(t)
	p, err := LoadPolicy(context.Background(), []string{dir}, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := NewEngine(p, Options{})
	r := NewReloader(e, []string{dir}, LoadOptions{}, nil)

	writeFile(t, filepath.Join(dir, "broken.rego"), "package writ.authz\n\ndenials contains x if {\n")
	if _, err := LoadPolicy(context.Background(), []string{dir}, LoadOptions{}); err == nil || !strings.Contains(err.Error(), "broken.rego") {
		t.Fatalf("syntax error: %v", err)
	}
	if err := r.Reload(context.Background()); err == nil {
		t.Fatal("reload accepted a syntax error")
	}
	if e.Policy().Revision != p.Revision || r.Last().OK || r.Last().Error == "" {
		t.Fatalf("after a failed reload: revision %s, last %+v", e.Policy().Revision, r.Last())
	}
	d, _ := e.Decide(context.Background(), BuildInput(facts(investigator, sanctions)))
	if !d.Allow {
		t.Fatalf("the last good policy stopped serving: %+v", d)
	}
	os.Remove(filepath.Join(dir, "broken.rego"))

	// A change that breaks the policy's own tests: a depth outside its range
	// (1 to 16) fails the range test, whose message says what is wrong.
	setData(t, dir, `"max_delegation_depth": 4`, `"max_delegation_depth": 17`)
	if err := r.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), "policy tests failed") ||
		!strings.Contains(err.Error(), "test_data_is_within_its_documented_range") ||
		!strings.Contains(err.Error(), "data.writ.config.max_delegation_depth is 17; it must be an integer from 1 to 16") {
		t.Fatalf("failing tests: %v", err)
	}
	if e.Policy().Revision != p.Revision {
		t.Fatal("a set failing its tests was swapped in")
	}
	if ok, failed := r.Counts(); ok != 0 || failed != 2 {
		t.Errorf("counts %d/%d", ok, failed)
	}
	if _, err := LoadPolicy(context.Background(), []string{filepath.Join(dir, "missing")}, LoadOptions{}); err == nil {
		t.Error("a missing directory loaded")
	}
}

// TestWatch: editing a policy file reloads it without a signal.
func TestWatch(t *testing.T) {
	dir := copyPolicies(t)
	p, err := LoadPolicy(context.Background(), []string{dir}, LoadOptions{SkipTests: true})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := NewEngine(p, Options{})
	r := NewReloader(e, []string{dir}, LoadOptions{SkipTests: true}, nil)
	r.Debounce = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Watch(ctx) }()
	defer func() { cancel(); <-done }()
	// Wait until the watcher is up (a first edit may race its start), then edit.
	deadline := time.Now().Add(10 * time.Second)
	for e.Policy().Revision == p.Revision && time.Now().Before(deadline) {
		setData(t, dir, `"ownership": "agent"`, `"ownership": "tenant"`)
		time.Sleep(50 * time.Millisecond)
	}
	if e.Policy().Revision == p.Revision {
		t.Fatal("the edit was not picked up")
	}
}

func copyPolicies(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(shipped)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		if en.IsDir() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(shipped, en.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, en.Name()), string(raw))
	}
	return dir
}

func setData(t *testing.T, dir, from, to string) {
	t.Helper()
	path := filepath.Join(dir, "data.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	if !strings.Contains(s, from) {
		if strings.Contains(s, to) {
			s = strings.Replace(s, to, from, 1) // toggle back, so every write changes the file
		} else {
			t.Fatalf("data.json has no %q", from)
		}
	} else {
		s = strings.Replace(s, from, to, 1)
	}
	writeFile(t, path, s)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWatchReplacedDirectory: a policy directory replaced whole (the old one
// renamed away, a new one renamed into its place) is reloaded, and so are
// later edits inside the new one.
func TestWatchReplacedDirectory(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "policies")
	if err := os.Rename(copyPolicies(t), dir); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPolicy(context.Background(), []string{dir}, LoadOptions{SkipTests: true})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := NewEngine(p, Options{})
	r := NewReloader(e, []string{dir}, LoadOptions{SkipTests: true}, nil)
	r.Debounce = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Watch(ctx) }()
	defer func() { cancel(); <-done }()
	waitRevision := func(what string, old string, change func()) string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for e.Policy().Revision == old && time.Now().Before(deadline) {
			change()
			time.Sleep(50 * time.Millisecond)
		}
		if e.Policy().Revision == old {
			t.Fatalf("%s was not picked up", what)
		}
		return e.Policy().Revision
	}
	// Wait until the watcher is up: an edit in place.
	rev := waitRevision("an edit", p.Revision, func() { setData(t, dir, `"ownership": "agent"`, `"ownership": "tenant"`) })
	// The swap: a copy with a change is renamed into the directory's place.
	n := 0
	rev = waitRevision("the replaced directory", rev, func() {
		n++
		next := copyPolicies(t)
		setData(t, next, `"ownership": "agent"`, `"ownership": "agent_and_user"`)
		if err := os.Rename(dir, filepath.Join(base, fmt.Sprintf("old%d", n))); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(next, dir); err != nil {
			t.Fatal(err)
		}
	})
	// An edit inside the new directory.
	waitRevision("an edit in the new directory", rev, func() { setData(t, dir, `"ownership": "agent_and_user"`, `"ownership": "tenant"`) })
}

// skipUnderRace skips a whole-policy equivalence test (thousands of OPA
// evaluations, one goroutine: nothing for the race detector to find, ten
// times slower under it) in a -race build. make test runs these without
// the race detector, at their full size, in its own step (logic-test: see
// the Makefile); the race build runs every test that has concurrency.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("an evaluation-equivalence test: make test runs it without -race (the logic-test step)")
	}
}
