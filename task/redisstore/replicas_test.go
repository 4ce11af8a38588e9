package redisstore_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-authz/writ/internal/redistest"
	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/redisstore"
	"github.com/writ-authz/writ/task/storetest"
)

// replicas is a task.Store that sends each call to the next of its stores in
// turn: two instances on one Redis must behave as one store.
type replicas struct {
	stores []task.Store
	n      atomic.Uint64
}

func (r *replicas) next() task.Store { return r.stores[r.n.Add(1)%uint64(len(r.stores))] }

func (r *replicas) Get(ctx context.Context, ref task.Ref) (task.Record, bool, error) {
	return r.next().Get(ctx, ref)
}
func (r *replicas) Create(ctx context.Context, rec task.Record) error {
	return r.next().Create(ctx, rec)
}
func (r *replicas) ClaimTask(ctx context.Context, rec task.Record) error {
	return r.next().ClaimTask(ctx, rec)
}
func (r *replicas) Apply(ctx context.Context, ref task.Ref, ev task.Event) (task.Record, task.Record, error) {
	return r.next().Apply(ctx, ref, ev)
}
func (r *replicas) Delete(ctx context.Context, ref task.Ref) error { return r.next().Delete(ctx, ref) }
func (r *replicas) SetPush(ctx context.Context, ref task.Ref, p task.PushConfig) (task.PushConfig, error) {
	return r.next().SetPush(ctx, ref, p)
}
func (r *replicas) DeletePush(ctx context.Context, ref task.Ref, cid string) error {
	return r.next().DeletePush(ctx, ref, cid)
}
func (r *replicas) ClaimContext(ctx context.Context, ref task.Ref, o task.Owner) (task.Owner, error) {
	return r.next().ClaimContext(ctx, ref, o)
}
func (r *replicas) Context(ctx context.Context, ref task.Ref) (task.Owner, bool, error) {
	return r.next().Context(ctx, ref)
}
func (r *replicas) Tombstone(ctx context.Context, ref task.Ref) (task.Owner, bool, error) {
	return r.next().Tombstone(ctx, ref)
}
func (r *replicas) Stats(ctx context.Context) (task.StoreStats, error) { return r.next().Stats(ctx) }

// TestContractTwoInstances runs the whole contract suite against two store
// instances on one Redis, alternating between them call by call: one state,
// and the concurrent-Apply checker sees no task move backwards and no change
// seen twice across them.
func TestContractTwoInstances(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Suite{RealClock: true, New: func(t *testing.T, l task.MemoryLimits) task.Store {
		a := newStore(t, srv, l, redisstore.Options{})
		b := newStore(t, srv, l, redisstore.Options{KeyPrefix: a.KeyPrefix()})
		return &replicas{stores: []task.Store{a, b}}
	}}.Run(t)
}

// TestTwoInstancesOneTask: a task created through one instance is followed
// up through the other, and an instance with a stale view still applies the
// event to the current state.
func TestTwoInstancesOneTask(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	a := newStore(t, srv, task.MemoryLimits{}, redisstore.Options{})
	b := newStore(t, srv, task.MemoryLimits{}, redisstore.Options{KeyPrefix: a.KeyPrefix()})
	ref := storetest.Ref("t1")
	if err := a.Create(ctx, storetest.Record("t1", task.Queued)); err != nil {
		t.Fatal(err)
	}
	if err := b.Create(ctx, storetest.Record("t1", task.Queued)); !errors.Is(err, task.ErrExists) {
		t.Fatalf("Create on B: %v, want ErrExists", err)
	}
	if _, next, err := b.Apply(ctx, ref, task.Event{Kind: task.EventStatus, State: task.AwaitingInput}); err != nil || next.Task.State != task.AwaitingInput {
		t.Fatalf("B's Apply: %+v %v", next.Task, err)
	}
	// A last saw queued; the event still applies to awaiting_input.
	prev, next, err := a.Apply(ctx, ref, task.Event{Kind: task.EventStatus, State: task.Queued})
	if !errors.Is(err, task.ErrIllegalTransition) || prev.Task.State != task.AwaitingInput || next.Task.State != task.AwaitingInput {
		t.Fatalf("A's Apply from a stale view: prev %s next %s err %v; want awaiting_input refusing queued", prev.Task.State, next.Task.State, err)
	}
	p, err := b.SetPush(ctx, ref, task.PushConfig{URL: "https://cb.example", Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok, err := a.Get(ctx, ref); err != nil || !ok || len(got.Push) != 1 || got.Push[0] != p || got.Violations != 1 {
		t.Fatalf("A's Get: %+v %v %v", got, ok, err)
	}
	if err := a.DeletePush(ctx, ref, p.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.DeletePush(ctx, ref, p.ID); !errors.Is(err, task.ErrPushNotFound) {
		t.Fatalf("B's DeletePush of a config A deleted: %v", err)
	}
	alice := task.Owner{AgentID: "alice", Tenant: "acme"}
	cref := task.Ref{Agent: storetest.Agent, ID: "ctx"}
	if _, err := a.ClaimContext(ctx, cref, alice); err != nil {
		t.Fatal(err)
	}
	if got, err := b.ClaimContext(ctx, cref, task.Owner{AgentID: "mallory"}); err != nil || got != alice {
		t.Fatalf("B's claim = %+v %v, want alice", got, err)
	}
	if err := b.Delete(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Apply(ctx, ref, task.Event{Kind: task.EventStatus, State: task.Running}); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("A's Apply after B's Delete: %v, want ErrNotFound", err)
	}
	sa, _ := a.Stats(ctx)
	sb, _ := b.Stats(ctx)
	if sa.Tasks != 0 || sa.Contexts != 1 || sa.Violations != 1 || !equalStats(sa, sb) {
		t.Errorf("Stats A %+v B %+v", sa, sb)
	}
}

func equalStats(a, b task.StoreStats) bool {
	if a.Tasks != b.Tasks || a.Contexts != b.Contexts || a.Evicted != b.Evicted || a.Expired != b.Expired || a.Violations != b.Violations {
		return false
	}
	for _, s := range task.States {
		if a.ByState[s] != b.ByState[s] {
			return false
		}
	}
	return true
}

// TestOutage: with Redis stopped every call fails at once with
// ErrUnavailable; when it is back the same store works again.
func TestOutage(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	s := newStore(t, srv, task.MemoryLimits{}, redisstore.Options{})
	if err := s.Create(ctx, storetest.Record("t1", task.Queued)); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	calls := map[string]func() error{
		"Ping":   func() error { return s.Ping(ctx) },
		"Get":    func() error { _, _, err := s.Get(ctx, storetest.Ref("t1")); return err },
		"Create": func() error { return s.Create(ctx, storetest.Record("t2", task.Queued)) },
		"Apply": func() error {
			_, _, err := s.Apply(ctx, storetest.Ref("t1"), task.Event{Kind: task.EventStatus, State: task.Running})
			return err
		},
		"ClaimContext": func() error {
			_, err := s.ClaimContext(ctx, task.Ref{Agent: "a", ID: "c"}, task.Owner{AgentID: "x"})
			return err
		},
		"Stats": func() error { _, err := s.Stats(ctx); return err },
		"Claim": func() error { _, err := s.Claim(ctx, task.WorkPush, "h", 1, time.Second); return err },
	}
	for name, call := range calls {
		start := time.Now()
		err := call()
		if !errors.Is(err, task.ErrUnavailable) {
			t.Errorf("%s with Redis down: %v, want ErrUnavailable", name, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s took %v to fail", name, d)
		}
	}
	srv.Restart()
	deadline := time.Now().Add(5 * time.Second)
	for s.Ping(ctx) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the store did not reconnect within 5s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, next, err := s.Apply(ctx, storetest.Ref("t1"), task.Event{Kind: task.EventStatus, State: task.Running}); err != nil || next.Task.State != task.Running {
		t.Fatalf("Apply after recovery: %+v %v", next.Task, err)
	}
	if err := s.Create(ctx, storetest.Record("t2", task.Queued)); err != nil {
		t.Fatalf("Create after recovery: %v", err)
	}
}

// TestLeaseTakeover: a holder (replica) that stops renewing loses its items to
// another.
func TestLeaseTakeover(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	a := newStore(t, srv, task.MemoryLimits{}, redisstore.Options{})
	b := newStore(t, srv, task.MemoryLimits{}, redisstore.Options{KeyPrefix: a.KeyPrefix()})
	const lease = 300 * time.Millisecond
	for _, id := range []string{"n1", "n2"} {
		if err := a.Put(ctx, task.Work{Kind: task.WorkPush, ID: id, Payload: []byte(id)}, "replica-a", lease); err != nil {
			t.Fatal(err)
		}
	}
	if ws, err := b.Claim(ctx, task.WorkPush, "replica-b", 10, lease); err != nil || len(ws) != 0 {
		t.Fatalf("B claimed %v %v while A holds the items", ws, err)
	}
	time.Sleep(lease + 100*time.Millisecond) // A stops renewing (it died)
	ws, err := b.Claim(ctx, task.WorkPush, "replica-b", 10, time.Minute)
	if err != nil || len(ws) != 2 {
		t.Fatalf("B's claim after A's lease ran out: %v %v", ws, err)
	}
	lost, err := a.Renew(ctx, task.WorkPush, "replica-a", []string{"n1", "n2"}, lease)
	if err != nil || !slices.Equal(lost, []string{"n1", "n2"}) {
		t.Fatalf("A's Renew = %v %v, want both lost", lost, err)
	}
	for _, w := range ws {
		if err := b.Done(ctx, task.WorkPush, w.ID, "replica-b"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAuth: a password-protected server refuses a store without the password
// (ErrUnavailable) and serves an ACL user with one.
func TestAuth(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, "--requirepass", "s3cret", "--user", "writ", "on", ">w-pass", "~writ-acl:*", "+@all")
	bad := newStoreNoPing(t, srv, redisstore.Options{KeyPrefix: "writ-acl:"})
	if err := bad.Ping(ctx); !errors.Is(err, task.ErrUnavailable) {
		t.Fatalf("Ping without credentials: %v", err)
	}
	if err := bad.Create(ctx, storetest.Record("t", task.Queued)); !errors.Is(err, task.ErrUnavailable) {
		t.Fatalf("Create without credentials: %v", err)
	}
	good := newStoreNoPing(t, srv, redisstore.Options{KeyPrefix: "writ-acl:", Username: "writ", Password: "w-pass"})
	if err := good.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if err := good.Create(ctx, storetest.Record("t", task.Queued)); err != nil {
		t.Fatal(err)
	}
	// The ACL user may only touch its own keys.
	other := newStoreNoPing(t, srv, redisstore.Options{KeyPrefix: "other:", Username: "writ", Password: "w-pass"})
	if err := other.Create(ctx, storetest.Record("t", task.Queued)); !errors.Is(err, task.ErrUnavailable) {
		t.Fatalf("Create outside the user's keys: %v", err)
	}
}

func newStoreNoPing(t *testing.T, srv *redistest.Server, o redisstore.Options) *redisstore.Store {
	o.Addr = srv.Addr()
	s, err := redisstore.New(task.MemoryLimits{}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestOptions(t *testing.T) {
	if _, err := redisstore.New(task.MemoryLimits{}, redisstore.Options{TLS: true, CAFile: "/nonexistent/ca.pem"}); err == nil {
		t.Error("a missing CA file was accepted")
	}
	if _, err := redisstore.New(task.MemoryLimits{}, redisstore.Options{CertFile: "/nonexistent/c.pem", KeyFile: "/nonexistent/k.pem"}); err == nil {
		t.Error("a missing client certificate was accepted")
	}
}
