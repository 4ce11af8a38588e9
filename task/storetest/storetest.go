// Package storetest is the contract suite of task.Store: every store writ ships
// (memory, file, Redis) runs it from its own tests, so they all keep one
// contract. It is imported by tests only.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/writ-authz/writ/task"
)

// Factory returns an empty store bounded by l. A store that keeps its own time
// (Redis) may ignore l.Now; it then says so with Suite.RealClock.
type Factory func(t *testing.T, l task.MemoryLimits) task.Store

// Suite describes the store under test.
type Suite struct {
	New Factory
	// RealClock: the store ignores MemoryLimits.Now, so the tests that drive
	// expiry with a fake clock are skipped (one test waits for a short real TTL
	// instead).
	RealClock bool
}

// Clock is a settable clock, safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock at a fixed instant.
func NewClock() *Clock { return &Clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Agent is the agent every record of the suite runs on, unless a test says
// otherwise.
const Agent = "researcher"

// Ref is the ref of task id on Agent.
func Ref(id string) task.Ref { return task.Ref{Agent: Agent, ID: id} }

// Record is a record of task id in state st, owned by agent "planner" of tenant
// "acme".
func Record(id string, st task.State) task.Record {
	return task.Record{
		Task: task.Task{
			ID: id, ContextID: "ctx-" + id, State: st,
			Owner:          task.Owner{AgentID: "planner", Tenant: "acme", UserID: "u1"},
			Chain:          []string{"orchestrator", "planner"},
			Classification: task.Internal,
			Artifacts:      []string{"draft"},
		},
		Agent: Agent, Protocol: "proto", Version: "1.0", // opaque to a store
	}
}

// Owned is a record of task id owned by agent owner of tenant "t".
func Owned(id, owner string, st task.State) task.Record {
	return task.Record{Task: task.Task{ID: id, State: st, Owner: task.Owner{Tenant: "t", AgentID: owner}}, Agent: Agent}
}

// Run runs the whole contract suite.
func (s Suite) Run(t *testing.T) {
	t.Run("CreateGetCopies", s.testCreateGetCopies)
	t.Run("Errors", s.testErrors)
	t.Run("KeyedByAgent", s.testKeyedByAgent)
	t.Run("ApplyLifecycle", s.testApplyLifecycle)
	t.Run("ApplyArtifactsAndContext", s.testApplyArtifactsAndContext)
	t.Run("Push", s.testPush)
	t.Run("Contexts", s.testContexts)
	t.Run("PerOwnerBound", s.testPerOwnerBound)
	t.Run("FairEviction", s.testFairEviction)
	t.Run("TTL", s.testTTL)
	t.Run("Retired", s.testRetired)
	t.Run("ConcurrentApplyNeverBackwards", s.testConcurrentApply)
	t.Run("ConcurrentCreateOneWinner", s.testConcurrentCreate)
}

func mustCreate(t *testing.T, s task.Store, r task.Record) {
	t.Helper()
	if err := s.Create(context.Background(), r); err != nil {
		t.Fatalf("Create(%q): %v", r.Task.ID, err)
	}
}

func mustGet(t *testing.T, s task.Store, ref task.Ref) task.Record {
	t.Helper()
	r, ok, err := s.Get(context.Background(), ref)
	if err != nil || !ok {
		t.Fatalf("Get(%v) = ok %v, err %v; want the record", ref, ok, err)
	}
	return r
}

func held(t *testing.T, s task.Store, ids ...string) []string {
	t.Helper()
	var got []string
	for _, id := range ids {
		_, ok, err := s.Get(context.Background(), Ref(id))
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			got = append(got, id)
		}
	}
	return got
}

func stats(t *testing.T, s task.Store) task.StoreStats {
	t.Helper()
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (s Suite) testCreateGetCopies(t *testing.T) {
	ctx := context.Background()
	st := s.New(t, task.MemoryLimits{})
	in := Record("t1", task.Queued)
	in.Task.InputText = "the caller's secret question"
	in.Task.OutputText = "an answer"
	in.Task.Structured = map[string]any{"k": "v"}
	in.Push = []task.PushConfig{{ID: "p", URL: "https://cb.example/x", Token: "tok", AuthScheme: "Bearer", Credentials: "c"}}
	mustCreate(t, st, in)

	// The caller's record is copied in: changing it afterwards changes nothing.
	in.Task.Chain[0] = "mallory"
	in.Task.Artifacts[0] = "forged"
	in.Push[0].URL = "https://evil.example"
	got := mustGet(t, st, Ref("t1"))
	if got.Task.Chain[0] != "orchestrator" || got.Task.Artifacts[0] != "draft" || got.Push[0].URL != "https://cb.example/x" {
		t.Fatalf("the store shares memory with the record passed in: %+v", got)
	}
	// Content is never kept.
	if got.Task.InputText != "" || got.Task.OutputText != "" || got.Task.Structured != nil {
		t.Errorf("content kept: %+v", got.Task)
	}
	want := Record("t1", task.Queued)
	if got.Task.ID != want.Task.ID || got.Task.ContextID != want.Task.ContextID || got.Task.Owner != want.Task.Owner ||
		!slices.Equal(got.Task.Chain, want.Task.Chain) || got.Task.Classification != want.Task.Classification ||
		got.Agent != want.Agent || got.Protocol != want.Protocol || got.Version != want.Version {
		t.Errorf("Get = %+v, want the fields of %+v", got, want)
	}
	if got.Push[0].Token != "tok" || got.Push[0].Credentials != "c" {
		t.Errorf("push secrets not kept: %+v", got.Push[0])
	}
	if got.Created.IsZero() || got.Updated.IsZero() {
		t.Errorf("times not set: %+v", got)
	}
	// A returned record is a copy too.
	got.Task.Chain[0] = "mallory"
	got.Push[0].URL = "changed"
	if again := mustGet(t, st, Ref("t1")); again.Task.Chain[0] != "orchestrator" || again.Push[0].URL != "https://cb.example/x" {
		t.Errorf("Get returned shared memory")
	}
	if _, next, err := st.Apply(ctx, Ref("t1"), task.Event{Kind: task.EventStatus, State: task.Running}); err != nil {
		t.Fatal(err)
	} else {
		next.Task.Artifacts[0] = "changed"
		if again := mustGet(t, st, Ref("t1")); again.Task.Artifacts[0] != "draft" {
			t.Errorf("Apply returned shared memory")
		}
	}
}

func (s Suite) testErrors(t *testing.T) {
	ctx := context.Background()
	st := s.New(t, task.MemoryLimits{})
	mustCreate(t, st, Record("t1", task.Running))
	noAgent := Record("t2", task.Queued)
	noAgent.Agent = ""
	tests := []struct {
		name string
		do   func() error
		want error
	}{
		{"create existing", func() error { return st.Create(ctx, Record("t1", task.Queued)) }, task.ErrExists},
		{"create without id", func() error { return st.Create(ctx, Record("", task.Queued)) }, task.ErrInvalidRecord},
		{"create without agent", func() error { return st.Create(ctx, noAgent) }, task.ErrInvalidRecord},
		{"create with empty state", func() error { return st.Create(ctx, Record("t2", "")) }, task.ErrInvalidRecord},
		{"create with foreign state", func() error { return st.Create(ctx, Record("t2", "working")) }, task.ErrInvalidRecord},
		{"apply unknown", func() error {
			_, _, err := st.Apply(ctx, Ref("nope"), task.Event{Kind: task.EventStatus, State: task.Running})
			return err
		}, task.ErrNotFound},
		{"delete unknown", func() error { return st.Delete(ctx, Ref("nope")) }, task.ErrNotFound},
		{"set push unknown", func() error {
			_, err := st.SetPush(ctx, Ref("nope"), task.PushConfig{URL: "https://x"})
			return err
		}, task.ErrNotFound},
		{"delete push unknown task", func() error { return st.DeletePush(ctx, Ref("nope"), "p") }, task.ErrNotFound},
		{"delete push unknown config", func() error { return st.DeletePush(ctx, Ref("t1"), "p") }, task.ErrPushNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.do(); !errors.Is(err, tt.want) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
		})
	}
	if got := mustGet(t, st, Ref("t1")); got.Task.State != task.Running {
		t.Errorf("ErrExists changed the record: state %q", got.Task.State)
	}
	if _, ok, err := st.Get(ctx, Ref("t2")); ok || err != nil {
		t.Errorf("Get(t2) = %v, %v; want nothing stored", ok, err)
	}
	if n := stats(t, st).Tasks; n != 1 {
		t.Errorf("Tasks = %d, want 1", n)
	}
	if err := st.Delete(ctx, Ref("t1")); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := st.Get(ctx, Ref("t1")); ok {
		t.Error("deleted task still found")
	}
	if err := st.Delete(ctx, Ref("t1")); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("second Delete: %v, want ErrNotFound", err)
	}
	if n := stats(t, st).Tasks; n != 0 {
		t.Errorf("Tasks = %d, want 0", n)
	}
	mustCreate(t, st, Record("t1", task.Queued)) // a deleted id may be created again
}

// testKeyedByAgent: one task id on two agents is two tasks; an event for one
// never moves the other.
func (s Suite) testKeyedByAgent(t *testing.T) {
	ctx := context.Background()
	st := s.New(t, task.MemoryLimits{})
	a := Record("same", task.Running)
	b := Record("same", task.Queued)
	b.Agent = "other-agent"
	b.Task.Owner = task.Owner{AgentID: "mallory", Tenant: "globex"}
	mustCreate(t, st, a)
	mustCreate(t, st, b)
	if _, _, err := st.Apply(ctx, task.Ref{Agent: "other-agent", ID: "same"}, task.Event{Kind: task.EventStatus, State: task.Failed}); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, st, Ref("same")); got.Task.State != task.Running || got.Task.Owner.AgentID != "planner" {
		t.Errorf("an event for another agent's task moved this one: %+v", got.Task)
	}
	if got := mustGet(t, st, task.Ref{Agent: "other-agent", ID: "same"}); got.Task.State != task.Failed {
		t.Errorf("other agent's task: %+v", got.Task)
	}
	if _, ok, _ := st.Get(ctx, task.Ref{Agent: "third", ID: "same"}); ok {
		t.Error("a third agent sees the id")
	}
}

func (s Suite) testApplyLifecycle(t *testing.T) {
	ctx := context.Background()
	st := s.New(t, task.MemoryLimits{})
	mustCreate(t, st, Record("t1", task.Queued))
	status := func(s task.State) task.Event { return task.Event{Kind: task.EventStatus, TaskID: "t1", State: s} }
	steps := []struct {
		name       string
		ev         task.Event
		prev, want task.State
		err        error
		violations int
	}{
		{"start", status(task.Running), task.Queued, task.Running, nil, 0},
		{"repeat running", status(task.Running), task.Running, task.Running, nil, 0},
		{"ask for input", status(task.AwaitingInput), task.Running, task.AwaitingInput, nil, 0},
		{"input -> queued goes back", status(task.Queued), task.AwaitingInput, task.AwaitingInput, task.ErrIllegalTransition, 1},
		{"resume", status(task.Running), task.AwaitingInput, task.Running, nil, 1},
		{"artifact only", task.Event{Kind: task.EventArtifact, Artifact: &task.ArtifactRef{Name: "a"}}, task.Running, task.Running, nil, 1},
		{"snapshot state", task.Event{Kind: task.EventTask, Task: &task.Task{State: task.Succeeded}}, task.Running, task.Succeeded, nil, 1},
		{"repeat succeeded", status(task.Succeeded), task.Succeeded, task.Succeeded, nil, 1},
		{"succeeded -> running", status(task.Running), task.Succeeded, task.Succeeded, task.ErrTerminal, 2},
		{"succeeded -> failed", status(task.Failed), task.Succeeded, task.Succeeded, task.ErrTerminal, 3},
		{"unknown state", status("completed"), task.Succeeded, task.Succeeded, task.ErrIllegalTransition, 4},
	}
	for _, step := range steps {
		prev, got, err := st.Apply(ctx, Ref("t1"), step.ev)
		if step.err == nil && err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if step.err != nil {
			var te *task.TransitionError
			if !errors.Is(err, step.err) || !errors.As(err, &te) {
				t.Fatalf("%s: error %v, want a *TransitionError matching %v", step.name, err, step.err)
			}
			if te.From != step.want {
				t.Errorf("%s: TransitionError.From = %q, want %q", step.name, te.From, step.want)
			}
		}
		if prev.Task.State != step.prev {
			t.Errorf("%s: prev state %q, want %q", step.name, prev.Task.State, step.prev)
		}
		if got.Task.State != step.want || got.Violations != step.violations {
			t.Errorf("%s: returned state %q, violations %d; want %q, %d", step.name, got.Task.State, got.Violations, step.want, step.violations)
		}
		if stored := mustGet(t, st, Ref("t1")); stored.Task.State != step.want || stored.Violations != step.violations {
			t.Errorf("%s: stored state %q, violations %d", step.name, stored.Task.State, stored.Violations)
		}
	}
	if v := stats(t, st).Violations; v != 4 {
		t.Errorf("Stats.Violations = %d, want 4", v)
	}
}

func (s Suite) testApplyArtifactsAndContext(t *testing.T) {
	ctx := context.Background()
	st := s.New(t, task.MemoryLimits{MaxArtifacts: 6})
	r := Record("t1", task.Running)
	r.Task.ContextID = ""
	r.Task.Artifacts = []string{"a", "a", "", "b"}
	mustCreate(t, st, r)
	if got := mustGet(t, st, Ref("t1")).Task.Artifacts; !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("created artifacts %q, want [a b]", got)
	}
	art := func(id, name string) task.Event {
		return task.Event{Kind: task.EventArtifact, Artifact: &task.ArtifactRef{ID: id, Name: name}}
	}
	steps := []struct {
		name      string
		ev        task.Event
		artifacts []string
		contextID string
	}{
		{"new artifact", art("1", "c"), []string{"a", "b", "c"}, ""},
		{"chunk of the same artifact", art("1", "c"), []string{"a", "b", "c"}, ""},
		{"nameless artifact is named by id", art("id-9", ""), []string{"a", "b", "c", "id-9"}, ""},
		{"anonymous artifact", art("", ""), []string{"a", "b", "c", "id-9"}, ""},
		{"context id filled in", task.Event{Kind: task.EventStatus, ContextID: "ctx-1"}, []string{"a", "b", "c", "id-9"}, "ctx-1"},
		{"context id not replaced", task.Event{Kind: task.EventStatus, ContextID: "ctx-2"}, []string{"a", "b", "c", "id-9"}, "ctx-1"},
		{"snapshot adds its new names in order, up to the bound", task.Event{Kind: task.EventTask, Task: &task.Task{
			ContextID: "ctx-3", Artifacts: []string{"b", "e", "d", "f", "e"}}}, []string{"a", "b", "c", "id-9", "e", "d"}, "ctx-1"},
	}
	for _, step := range steps {
		_, got, err := st.Apply(ctx, Ref("t1"), step.ev)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if !reflect.DeepEqual(got.Task.Artifacts, step.artifacts) || got.Task.ContextID != step.contextID {
			t.Errorf("%s: artifacts %q context %q, want %q %q", step.name, got.Task.Artifacts, got.Task.ContextID, step.artifacts, step.contextID)
		}
		if got.Task.State != task.Running {
			t.Errorf("%s: an event without a state moved the task to %q", step.name, got.Task.State)
		}
	}
	// A snapshot cannot change what Create fixed.
	_, got, err := st.Apply(ctx, Ref("t1"), task.Event{Kind: task.EventTask, Task: &task.Task{
		State: task.Running, Owner: task.Owner{AgentID: "mallory"}, Chain: []string{"x"},
		Classification: task.Public, OutputText: "content",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Task.Owner.AgentID != "planner" || len(got.Task.Chain) != 2 || got.Task.Classification != task.Internal || got.Task.OutputText != "" {
		t.Errorf("a snapshot changed fixed fields: %+v", got.Task)
	}
}

func (s Suite) testPush(t *testing.T) {
	ctx := context.Background()
	st := s.New(t, task.MemoryLimits{MaxPushPerTask: 2, MaxPushPerOwner: 3})
	for _, id := range []string{"t1", "t2"} {
		mustCreate(t, st, Owned(id, "a", task.Running))
	}
	p, err := st.SetPush(ctx, Ref("t1"), task.PushConfig{URL: "https://agents.bank.ae/cb", Token: "s"})
	if err != nil || p.ID == "" {
		t.Fatalf("%+v %v", p, err)
	}
	if _, err := st.SetPush(ctx, Ref("t1"), task.PushConfig{ID: "mine", URL: "https://agents.bank.ae/cb2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetPush(ctx, Ref("t1"), task.PushConfig{ID: "mine", URL: "https://agents.bank.ae/cb3"}); err != nil {
		t.Fatal(err) // replacing an id is not a new config
	}
	if _, err := st.SetPush(ctx, Ref("t1"), task.PushConfig{URL: "https://x"}); !errors.Is(err, task.ErrPushLimit) {
		t.Fatalf("per task: %v", err)
	}
	if _, err := st.SetPush(ctx, Ref("t2"), task.PushConfig{URL: "https://y"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetPush(ctx, Ref("t2"), task.PushConfig{URL: "https://z"}); !errors.Is(err, task.ErrPushLimit) {
		t.Fatalf("per owner: %v", err)
	}
	rec := mustGet(t, st, Ref("t1"))
	if len(rec.Push) != 2 || rec.Push[1].URL != "https://agents.bank.ae/cb3" || rec.Push[0].Token != "s" {
		t.Fatalf("configs %+v", rec.Push)
	}
	if err := st.DeletePush(ctx, Ref("t1"), "mine"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetPush(ctx, Ref("t2"), task.PushConfig{URL: "https://z"}); err != nil {
		t.Fatalf("a deleted config freed the owner's share: %v", err)
	}
	// Deleting a task frees its configs from the owner's share.
	if err := st.Delete(ctx, Ref("t2")); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, st, Owned("t3", "a", task.Running))
	for i := range 2 {
		if _, err := st.SetPush(ctx, Ref("t3"), task.PushConfig{URL: "https://w/" + strconv.Itoa(i)}); err != nil {
			t.Fatalf("after delete: %v", err)
		}
	}
}

func (s Suite) testContexts(t *testing.T) {
	ctx := context.Background()
	st := s.New(t, task.MemoryLimits{})
	alice := task.Owner{AgentID: "alice", Tenant: "acme", UserID: "u1"}
	mallory := task.Owner{AgentID: "mallory", Tenant: "globex"}
	ref := task.Ref{Agent: Agent, ID: "ctx-1"}
	if _, ok, err := st.Context(ctx, ref); ok || err != nil {
		t.Fatalf("unknown context: %v %v", ok, err)
	}
	if got, err := st.ClaimContext(ctx, ref, alice); err != nil || got != alice {
		t.Fatalf("first claim = %+v %v", got, err)
	}
	if got, err := st.ClaimContext(ctx, ref, mallory); err != nil || got != alice {
		t.Fatalf("second claim by another owner = %+v %v, want alice", got, err)
	}
	again := alice
	again.UserID = "u2" // same owner, other user: not another owner
	if got, err := st.ClaimContext(ctx, ref, again); err != nil || !task.SameOwner(got, alice) {
		t.Fatalf("claim by the same owner = %+v %v", got, err)
	}
	if got, ok, err := st.Context(ctx, ref); !ok || err != nil || got != alice {
		t.Fatalf("Context = %+v %v %v", got, ok, err)
	}
	// The same context id on another agent is another context.
	other := task.Ref{Agent: "other-agent", ID: "ctx-1"}
	if got, err := st.ClaimContext(ctx, other, mallory); err != nil || got != mallory {
		t.Fatalf("claim on another agent = %+v %v", got, err)
	}
	if n := stats(t, st).Contexts; n != 2 {
		t.Errorf("Contexts = %d, want 2", n)
	}
}

func (s Suite) testPerOwnerBound(t *testing.T) {
	var mu sync.Mutex
	var evictions []task.Eviction
	st := s.New(t, task.MemoryLimits{MaxTasks: 10, MaxPerOwner: 2, OnEvict: func(e task.Eviction) {
		mu.Lock()
		evictions = append(evictions, e)
		mu.Unlock()
	}})
	ctx := context.Background()
	mustCreate(t, st, Owned("x1", "noisy", task.Queued))
	mustCreate(t, st, Owned("y1", "quiet", task.Queued))
	mustCreate(t, st, Owned("x2", "noisy", task.Queued))
	mustCreate(t, st, Owned("y2", "quiet", task.Queued))
	if _, _, err := st.Apply(ctx, Ref("x1"), task.Event{Kind: task.EventStatus, State: task.Running}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, st, Owned("x3", "noisy", task.Queued)) // x2 is noisy's least recently updated
	if got, want := held(t, st, "x1", "x2", "x3", "y1", "y2"), []string{"x1", "x3", "y1", "y2"}; !slices.Equal(got, want) {
		t.Fatalf("held %v, want %v", got, want)
	}
	// A finished task of the owner goes before its live ones.
	if _, _, err := st.Apply(ctx, Ref("x3"), task.Event{Kind: task.EventStatus, State: task.Rejected}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, st, Owned("x4", "noisy", task.Queued))
	if got, want := held(t, st, "x1", "x3", "x4"), []string{"x1", "x4"}; !slices.Equal(got, want) {
		t.Fatalf("held %v, want %v (the finished x3 evicted first)", got, want)
	}
	for i := range 30 {
		mustCreate(t, st, Owned(fmt.Sprintf("flood%d", i), "noisy", task.Queued))
	}
	if got := held(t, st, "y1", "y2"); len(got) != 2 {
		t.Errorf("quiet's tasks after the flood: %v, want both", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(evictions) != 32 {
		t.Fatalf("%d evictions reported, want 32", len(evictions))
	}
	if e := evictions[0]; e.Ref != Ref("x2") || e.Owner.AgentID != "noisy" || e.Reason != task.EvictedOwnerFull || e.State != task.Queued {
		t.Errorf("first eviction %+v", e)
	}
	if st := stats(t, st); st.Evicted != 32 {
		t.Errorf("Evicted = %d, want 32", st.Evicted)
	}
	// An evicted task leaves a tombstone with its owner.
	if o, ok, err := st.Tombstone(ctx, Ref("x2")); !ok || err != nil || o.AgentID != "noisy" {
		t.Errorf("Tombstone(x2) = %+v %v %v", o, ok, err)
	}
	if _, ok, _ := st.Tombstone(ctx, Ref("y1")); ok {
		t.Error("a live task has a tombstone")
	}
}

// testFairEviction: a full store evicts finished tasks first, then the heaviest
// owner's oldest — never a quiet owner's live task because a noisy one filled
// the store.
func (s Suite) testFairEviction(t *testing.T) {
	st := s.New(t, task.MemoryLimits{MaxTasks: 6, MaxPerOwner: 100})
	ctx := context.Background()
	mustCreate(t, st, Owned("q1", "quiet", task.Running)) // the oldest record of all
	mustCreate(t, st, Owned("d1", "done", task.Succeeded))
	for i := range 4 {
		mustCreate(t, st, Owned(fmt.Sprintf("n%d", i), "noisy", task.Running))
	}
	mustCreate(t, st, Owned("n4", "noisy", task.Running))
	if got := held(t, st, "q1", "d1"); !slices.Equal(got, []string{"q1"}) {
		t.Fatalf("held %v: the finished d1 should have gone first", got)
	}
	mustCreate(t, st, Owned("n5", "noisy", task.Running))
	if got := held(t, st, "q1", "n0", "n1"); !slices.Equal(got, []string{"q1", "n1"}) {
		t.Fatalf("held %v: noisy's oldest (n0) should have gone, never quiet's q1", got)
	}
	if _, _, err := st.Apply(ctx, Ref("q1"), task.Event{Kind: task.EventStatus, State: task.Failed}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, st, Owned("n6", "noisy", task.Running))
	if got := held(t, st, "q1"); len(got) != 0 {
		t.Fatalf("q1 finished, so it goes before noisy's live tasks")
	}
	if n := stats(t, st).Tasks; n != 6 {
		t.Errorf("Tasks = %d, want 6", n)
	}
}

func (s Suite) testTTL(t *testing.T) {
	ctx := context.Background()
	if s.RealClock {
		st := s.New(t, task.MemoryLimits{TTL: time.Second})
		mustCreate(t, st, Owned("a", "x", task.Queued))
		if _, err := st.ClaimContext(ctx, task.Ref{Agent: Agent, ID: "c"}, task.Owner{AgentID: "x"}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, ok, err := st.Get(ctx, Ref("a"))
			_, cok, cerr := st.Context(ctx, task.Ref{Agent: Agent, ID: "c"})
			if errors.Is(cerr, task.ErrRetired) { // gone, and never claimable again
				cerr = nil
			}
			if err != nil || cerr != nil {
				t.Fatal(err, cerr)
			}
			if !ok && !cok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("a task with a 1s TTL was still there after 10s")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	clock := NewClock()
	st := s.New(t, task.MemoryLimits{TTL: 10 * time.Second, MaxPerOwner: 2, Now: clock.Now})
	mustCreate(t, st, Owned("a", "x", task.Queued))
	mustCreate(t, st, Owned("b", "x", task.Queued))
	cref := task.Ref{Agent: Agent, ID: "c"}
	if _, err := st.ClaimContext(ctx, cref, task.Owner{AgentID: "x"}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		advance time.Duration
		apply   string
		want    []string
		ctx     bool
	}{
		{6 * time.Second, "a", []string{"a", "b"}, true}, // a updated at 6, expires at 16
		{3 * time.Second, "", []string{"a", "b"}, true},
		{time.Second, "", []string{"a"}, false}, // t=10: b and the context expired
		{6*time.Second - time.Nanosecond, "", []string{"a"}, false},
		{time.Nanosecond, "", nil, false}, // t=16: a expired
	}
	for i, step := range steps {
		clock.Advance(step.advance)
		if step.apply != "" {
			if _, _, err := st.Apply(ctx, Ref(step.apply), task.Event{Kind: task.EventStatus, State: task.Running}); err != nil {
				t.Fatal(err)
			}
		}
		if got := held(t, st, "a", "b"); !slices.Equal(got, step.want) {
			t.Errorf("step %d: held %v, want %v", i, got, step.want)
		}
		if _, ok, _ := st.Context(ctx, cref); ok != step.ctx {
			t.Errorf("step %d: context held %v, want %v", i, ok, step.ctx)
		}
	}
	if _, _, err := st.Apply(ctx, Ref("a"), task.Event{Kind: task.EventStatus, State: task.Running}); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("Apply to an expired task: %v, want ErrNotFound", err)
	}
	// Expired tasks freed their owner's slots; an expired id may be created anew.
	mustCreate(t, st, Owned("c", "x", task.Queued))
	mustCreate(t, st, Owned("a", "x", task.Queued))
	if s := stats(t, st); s.Evicted != 0 || s.Tasks != 2 || s.Expired != 2 {
		t.Errorf("Stats = %+v, want 0 evictions, 2 tasks, 2 expired", s)
	}
}

// testConcurrentApply drives one task from many goroutines with random legal
// and illegal events; a checker holds that no observer ever saw the state move
// backwards (every prev → next is a legal observation or no move) and that the
// moves each goroutine saw chain into one history.
func (s Suite) testConcurrentApply(t *testing.T) {
	ctx := context.Background()
	st := s.New(t, task.MemoryLimits{})
	const workers, rounds = 8, 60
	for k := range 4 {
		mustCreate(t, st, Owned("c"+strconv.Itoa(k), "x", task.Queued))
	}
	type move struct{ from, to task.State }
	var mu sync.Mutex
	moves := map[string][]move{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				id := "c" + strconv.Itoa((w+i)%4)
				to := task.States[(w*7+i*3)%len(task.States)]
				prev, next, err := st.Apply(ctx, Ref(id), task.Event{Kind: task.EventStatus, State: to})
				var te *task.TransitionError
				if err != nil && !errors.As(err, &te) {
					t.Error(err)
					return
				}
				if err == nil && next.Task.State != to {
					t.Errorf("legal move to %s left the task %s", to, next.Task.State)
				}
				if err != nil && next.Task.State != prev.Task.State {
					t.Errorf("an illegal move changed the state %s -> %s", prev.Task.State, next.Task.State)
				}
				if prev.Task.State != next.Task.State {
					if !task.CanMove(prev.Task.State, next.Task.State) && !observable(prev.Task.State, next.Task.State) {
						t.Errorf("%s moved backwards: %s -> %s", id, prev.Task.State, next.Task.State)
					}
					mu.Lock()
					moves[id] = append(moves[id], move{prev.Task.State, next.Task.State})
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	// The moves of one task form a single chain from queued to its final state:
	// every state is left as often as it is entered, except the first (left
	// once more) and the last (entered once more). Two observers seeing the same
	// change would leave a state twice for one entry.
	for id, ms := range moves {
		final := mustGet(t, st, Ref(id)).Task.State
		balance := map[task.State]int{}
		for _, m := range ms {
			balance[m.from]++
			balance[m.to]--
		}
		for state, b := range balance {
			want := 0
			switch state {
			case task.Queued:
				want = 1
			case final:
				want = -1
			}
			if b != want {
				t.Errorf("%s: state %s left %+d times more than entered, want %+d: %v", id, state, b, want, ms)
			}
		}
	}
}

// observable reports whether an observer may legally see from then to.
func observable(from, to task.State) bool {
	_, err := task.Observe(from, to)
	return err == nil
}

func (s Suite) testConcurrentCreate(t *testing.T) {
	ctx := context.Background()
	st := s.New(t, task.MemoryLimits{})
	var wins sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for w := range 8 {
		wins.Go(func() {
			err := st.Create(ctx, Owned("race", "w"+strconv.Itoa(w), task.Queued))
			switch {
			case err == nil:
				mu.Lock()
				won++
				mu.Unlock()
			case !errors.Is(err, task.ErrExists):
				t.Error(err)
			}
		})
	}
	wins.Wait()
	if won != 1 {
		t.Errorf("%d creates of one task succeeded, want exactly 1", won)
	}
}
