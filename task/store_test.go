package task_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/writ-authz/writ/task"
)

// The tests in this file hold any Store to its contract; they run against the
// memory store, the one implementation in this package.

func newStore(t *testing.T) task.Store {
	t.Helper()
	return task.NewMemoryStore(task.MemoryLimits{})
}

func record(id string, st task.State) task.Record {
	return task.Record{
		Task: task.Task{
			ID: id, ContextID: "ctx-" + id, State: st,
			Owner:          task.Owner{AgentID: "planner", Tenant: "acme", UserID: "u1"},
			Chain:          []string{"orchestrator", "planner"},
			Classification: task.Internal,
			Artifacts:      []string{"draft"},
		},
		Agent: "researcher", Protocol: "a2a", Version: "1.0",
	}
}

func mustCreate(t *testing.T, s task.Store, r task.Record) {
	t.Helper()
	if err := s.Create(context.Background(), r); err != nil {
		t.Fatalf("Create(%q): %v", r.Task.ID, err)
	}
}

func mustGet(t *testing.T, s task.Store, id string) task.Record {
	t.Helper()
	r, ok, err := s.Get(context.Background(), id)
	if err != nil || !ok {
		t.Fatalf("Get(%q) = ok %v, err %v; want the record", id, ok, err)
	}
	return r
}

func TestStoreCreateGetCopies(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	in := record("t1", task.Queued)
	in.Task.InputText = "the caller's secret question"
	in.Task.OutputText = "an answer"
	in.Task.Structured = map[string]any{"k": "v"}
	mustCreate(t, s, in)

	// The caller's record is copied in: changing it afterwards changes nothing.
	in.Task.Chain[0] = "mallory"
	in.Task.Artifacts[0] = "forged"
	in.Task.Owner.AgentID = "mallory"

	got := mustGet(t, s, "t1")
	want := record("t1", task.Queued)
	if !reflect.DeepEqual(got.Task, want.Task) {
		t.Errorf("stored task\n got %+v\nwant %+v", got.Task, want.Task)
	}
	if got.Agent != "researcher" || got.Protocol != "a2a" || got.Version != "1.0" || got.Violations != 0 {
		t.Errorf("stored record %+v", got)
	}
	if got.Created.IsZero() || got.Updated.IsZero() || got.Updated.Before(got.Created) {
		t.Errorf("Created %v, Updated %v: want both set, Updated not before Created", got.Created, got.Updated)
	}

	// Content is never kept.
	if got.Task.InputText != "" || got.Task.OutputText != "" || got.Task.Structured != nil {
		t.Errorf("store kept task content: %q %q %v", got.Task.InputText, got.Task.OutputText, got.Task.Structured)
	}

	// A returned record is a copy: changing its slices changes nothing.
	got.Task.Chain[0] = "mallory"
	got.Task.Artifacts[0] = "forged"
	got.Task.Artifacts = append(got.Task.Artifacts, "extra")
	got.Task.State = task.Succeeded
	if again := mustGet(t, s, "t1"); !reflect.DeepEqual(again.Task, want.Task) {
		t.Errorf("mutating a returned record changed the store: %+v", again.Task)
	}

	// So is the record Apply returns.
	applied, err := s.Apply(ctx, "t1", task.Event{Kind: task.EventArtifact, Artifact: &task.ArtifactRef{Name: "report"}})
	if err != nil {
		t.Fatal(err)
	}
	applied.Task.Artifacts[0] = "forged"
	applied.Task.Chain[1] = "forged"
	again := mustGet(t, s, "t1")
	if !reflect.DeepEqual(again.Task.Artifacts, []string{"draft", "report"}) ||
		!reflect.DeepEqual(again.Task.Chain, []string{"orchestrator", "planner"}) {
		t.Errorf("mutating Apply's record changed the store: %+v", again.Task)
	}
}

func TestStoreErrors(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	mustCreate(t, s, record("t1", task.Running))

	tests := []struct {
		name string
		do   func() error
		want error
	}{
		{"create existing", func() error { return s.Create(ctx, record("t1", task.Queued)) }, task.ErrExists},
		{"create without id", func() error { return s.Create(ctx, record("", task.Queued)) }, task.ErrInvalidRecord},
		{"create with empty state", func() error { return s.Create(ctx, record("t2", "")) }, task.ErrInvalidRecord},
		{"create with foreign state", func() error { return s.Create(ctx, record("t2", "working")) }, task.ErrInvalidRecord},
		{"apply unknown", func() error {
			_, err := s.Apply(ctx, "nope", task.Event{Kind: task.EventStatus, State: task.Running})
			return err
		}, task.ErrNotFound},
		{"delete unknown", func() error { return s.Delete(ctx, "nope") }, task.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.do(); !errors.Is(err, tt.want) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
		})
	}

	// The existing record was left as is, and nothing invalid was stored.
	if got := mustGet(t, s, "t1"); got.Task.State != task.Running {
		t.Errorf("ErrExists changed the record: state %q", got.Task.State)
	}
	if _, ok, err := s.Get(ctx, "t2"); ok || err != nil {
		t.Errorf("Get(t2) = %v, %v; want nothing stored", ok, err)
	}
	if _, ok, err := s.Get(ctx, "nope"); ok || err != nil {
		t.Errorf("Get(unknown) = %v, %v; want false, nil", ok, err)
	}
	if n := s.Len(); n != 1 {
		t.Errorf("Len = %d, want 1", n)
	}

	// Delete forgets; a second delete and a later apply find nothing.
	if err := s.Delete(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Get(ctx, "t1"); ok {
		t.Error("deleted task still found")
	}
	if err := s.Delete(ctx, "t1"); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("second Delete: %v, want ErrNotFound", err)
	}
	if _, err := s.Apply(ctx, "t1", task.Event{Kind: task.EventStatus, State: task.Running}); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("Apply after Delete: %v, want ErrNotFound", err)
	}
	if n := s.Len(); n != 0 {
		t.Errorf("Len = %d, want 0", n)
	}
	// A deleted id may be created again.
	mustCreate(t, s, record("t1", task.Queued))
}

func TestStoreApplyLifecycle(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	mustCreate(t, s, record("t1", task.Queued))

	status := func(st task.State) task.Event { return task.Event{Kind: task.EventStatus, TaskID: "t1", State: st} }
	steps := []struct {
		name       string
		ev         task.Event
		want       task.State
		err        error // nil, ErrIllegalTransition or ErrTerminal
		violations int
	}{
		{"start", status(task.Running), task.Running, nil, 0},
		{"repeat running", status(task.Running), task.Running, nil, 0},
		{"ask for input", status(task.AwaitingInput), task.AwaitingInput, nil, 0},
		{"input -> queued goes back", status(task.Queued), task.AwaitingInput, task.ErrIllegalTransition, 1},
		{"resume", status(task.Running), task.Running, nil, 1},
		{"artifact only", task.Event{Kind: task.EventArtifact, Artifact: &task.ArtifactRef{Name: "a"}}, task.Running, nil, 1},
		{"snapshot state", task.Event{Kind: task.EventTask, Task: &task.Task{State: task.Succeeded}}, task.Succeeded, nil, 1},
		{"repeat succeeded", status(task.Succeeded), task.Succeeded, nil, 1},
		{"succeeded -> running", status(task.Running), task.Succeeded, task.ErrTerminal, 2},
		{"succeeded -> failed", status(task.Failed), task.Succeeded, task.ErrTerminal, 3},
		{"unknown state", status("completed"), task.Succeeded, task.ErrIllegalTransition, 4},
	}
	for _, st := range steps {
		got, err := s.Apply(ctx, "t1", st.ev)
		if st.err == nil && err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if st.err != nil {
			var te *task.TransitionError
			if !errors.Is(err, st.err) || !errors.As(err, &te) {
				t.Fatalf("%s: error %v, want a *TransitionError matching %v", st.name, err, st.err)
			}
			if te.From != st.want {
				t.Errorf("%s: TransitionError.From = %q, want %q", st.name, te.From, st.want)
			}
		}
		if got.Task.State != st.want || got.Violations != st.violations {
			t.Errorf("%s: returned state %q, violations %d; want %q, %d", st.name, got.Task.State, got.Violations, st.want, st.violations)
		}
		if stored := mustGet(t, s, "t1"); stored.Task.State != st.want || stored.Violations != st.violations {
			t.Errorf("%s: stored state %q, violations %d; want %q, %d", st.name, stored.Task.State, stored.Violations, st.want, st.violations)
		}
	}
}

func TestStoreApplyArtifactsAndContext(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	r := record("t1", task.Running)
	r.Task.ContextID = ""
	r.Task.Artifacts = []string{"a", "a", "", "b"}
	mustCreate(t, s, r)
	if got := mustGet(t, s, "t1").Task.Artifacts; !reflect.DeepEqual(got, []string{"a", "b"}) {
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
		{"snapshot adds its new names in order", task.Event{Kind: task.EventTask, Task: &task.Task{
			ContextID: "ctx-3", Artifacts: []string{"b", "e", "d", "e"}}}, []string{"a", "b", "c", "id-9", "e", "d"}, "ctx-1"},
	}
	for _, st := range steps {
		got, err := s.Apply(ctx, "t1", st.ev)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if !reflect.DeepEqual(got.Task.Artifacts, st.artifacts) {
			t.Errorf("%s: artifacts %q, want %q", st.name, got.Task.Artifacts, st.artifacts)
		}
		if got.Task.ContextID != st.contextID {
			t.Errorf("%s: context %q, want %q", st.name, got.Task.ContextID, st.contextID)
		}
		if got.Task.State != task.Running {
			t.Errorf("%s: an event without a state moved the task to %q", st.name, got.Task.State)
		}
	}

	// A snapshot cannot change what Create fixed.
	got, err := s.Apply(ctx, "t1", task.Event{Kind: task.EventTask, Task: &task.Task{
		State: task.Running, Owner: task.Owner{AgentID: "mallory"}, Chain: []string{"x"},
		Classification: task.Public, OutputText: "content",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Task.Owner.AgentID != "planner" || len(got.Task.Chain) != 2 || got.Task.Classification != task.Internal || got.Task.OutputText != "" {
		t.Errorf("a snapshot changed fixed fields: %+v", got.Task)
	}
	// A snapshot context fills an empty context id.
	mustCreate(t, s, task.Record{Task: task.Task{ID: "t2", State: task.Queued}})
	if got, _ := s.Apply(ctx, "t2", task.Event{Kind: task.EventTask, Task: &task.Task{ContextID: "ctx-9"}}); got.Task.ContextID != "ctx-9" {
		t.Errorf("snapshot context id not filled in: %q", got.Task.ContextID)
	}
}
