package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/writ-authz/writ/task"
)

// testRetired: an id the store once held never becomes unknown again. A
// task whose record was evicted and whose tombstone rolled over, a task that
// expired, a context that expired or was evicted: each is ErrRetired to
// Tombstone or Context, and ClaimTask or ClaimContext refuse it, whoever
// asks. An evicted task whose tombstone is still there goes back to its owner
// only. A fresh id is claimed as Create would.
func (s Suite) testRetired(t *testing.T) {
	ctx := context.Background()
	clock := NewClock()
	l := task.MemoryLimits{MaxTasks: 2, MaxPerOwner: 100, MaxContexts: 2, MaxTombstones: 1, TTL: time.Hour, Now: clock.Now}
	st := s.New(t, l)
	victim, attacker := task.Owner{Tenant: "t", AgentID: "victim"}, task.Owner{Tenant: "t", AgentID: "attacker"}
	claim := func(id string, o task.Owner) error {
		return st.ClaimTask(ctx, task.Record{Task: task.Task{ID: id, State: task.Running, Owner: o}, Agent: Agent})
	}
	isRetired := func(err error) bool { return errors.Is(err, task.ErrRetired) }

	// A fresh id is claimed, once.
	if err := claim("fresh", attacker); err != nil {
		t.Fatalf("ClaimTask(fresh) = %v", err)
	}
	if err := claim("fresh", attacker); !errors.Is(err, task.ErrExists) {
		t.Fatalf("ClaimTask(fresh) again = %v, want ErrExists", err)
	}
	mustCreate(t, st, Owned("v1", "victim", task.Succeeded))
	// The flood: v1 (finished) is evicted first, then every attacker task;
	// one tombstone is kept, so v1's is gone after the second eviction.
	mustCreate(t, st, Owned("a1", "attacker", task.Running))
	if o, ok, err := st.Tombstone(ctx, Ref("v1")); !ok || err != nil || !task.SameOwner(o, victim) {
		t.Fatalf("Tombstone(v1) = %+v %v %v, want the victim", o, ok, err)
	}
	if err := claim("v1", attacker); !isRetired(err) {
		t.Fatalf("ClaimTask(v1) by another owner while its tombstone stands = %v, want ErrRetired", err)
	}
	for i := 2; i < 6; i++ {
		mustCreate(t, st, Owned(fmt.Sprintf("a%d", i), "attacker", task.Running))
	}
	if _, ok, _ := st.Get(ctx, Ref("v1")); ok {
		t.Fatal("v1 is still held; the test proves nothing")
	}
	if _, ok, err := st.Tombstone(ctx, Ref("v1")); ok || !isRetired(err) {
		t.Fatalf("Tombstone(v1) after its tombstone rolled over = %v %v, want ErrRetired", ok, err)
	}
	for _, o := range []task.Owner{attacker, victim} {
		if err := claim("v1", o); !isRetired(err) {
			t.Errorf("ClaimTask(v1) by %s = %v, want ErrRetired", o.AgentID, err)
		}
	}
	if _, ok, _ := st.Get(ctx, Ref("v1")); ok {
		t.Fatal("a refused claim recorded the task")
	}
	// The last evicted task's tombstone still stands: its owner takes it back.
	if err := claim("a3", attacker); err != nil {
		t.Errorf("ClaimTask(a3) by its owner, tombstone standing = %v", err)
	}
	// Create (a new task an answer revealed) is not a claim: the agent chose
	// the id.
	if err := st.Create(ctx, Owned("v1", "victim", task.Running)); err != nil {
		t.Errorf("Create(v1) = %v", err)
	}
	if _, ok, err := st.Tombstone(ctx, Ref("never")); ok || err != nil {
		t.Errorf("Tombstone(never) = %v %v, want nothing", ok, err)
	}

	// Contexts: a context evicted (MaxContexts 2) is retired.
	cref := func(id string) task.Ref { return task.Ref{Agent: Agent, ID: id} }
	for _, id := range []string{"c1", "c2", "c3"} {
		if _, err := st.ClaimContext(ctx, cref(id), victim); err != nil {
			t.Fatalf("ClaimContext(%s) = %v", id, err)
		}
	}
	if _, ok, err := st.Context(ctx, cref("c1")); ok || !isRetired(err) {
		t.Fatalf("Context(c1) after its eviction = %v %v, want ErrRetired", ok, err)
	}
	for _, o := range []task.Owner{attacker, victim} {
		if on, err := st.ClaimContext(ctx, cref("c1"), o); !isRetired(err) {
			t.Errorf("ClaimContext(c1) by %s = %+v %v, want ErrRetired", o.AgentID, on, err)
		}
	}
	if on, err := st.ClaimContext(ctx, cref("c3"), attacker); err != nil || !task.SameOwner(on, victim) {
		t.Errorf("ClaimContext(c3) by another owner = %+v %v, want the victim on record", on, err)
	}
	if _, ok, err := st.Context(ctx, cref("c-never")); ok || err != nil {
		t.Errorf("Context(c-never) = %v %v, want nothing", ok, err)
	}
	// The set counts what it holds.
	if got := stats(t, st); got.Retired < 10 || got.RetiredCapacity <= 0 {
		t.Errorf("Retired = %d, RetiredCapacity = %d; want at least the 10 ids recorded", got.Retired, got.RetiredCapacity)
	}
	if s.RealClock {
		return // expiry: testTTL waits for a real one
	}
	clock.Advance(2 * time.Hour)
	if _, ok, err := st.Tombstone(ctx, Ref("a3")); ok || !isRetired(err) {
		t.Errorf("Tombstone(a3) after it expired = %v %v, want ErrRetired", ok, err)
	}
	if err := claim("a3", attacker); !isRetired(err) {
		t.Errorf("ClaimTask(a3) after it expired = %v, want ErrRetired", err)
	}
	if _, ok, err := st.Context(ctx, cref("c3")); ok || !isRetired(err) {
		t.Errorf("Context(c3) after it expired = %v %v, want ErrRetired", ok, err)
	}
	if _, err := st.ClaimContext(ctx, cref("c3"), victim); !isRetired(err) {
		t.Errorf("ClaimContext(c3) after it expired = %v, want ErrRetired", err)
	}
}
