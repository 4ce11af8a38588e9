package filestore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/filestore"
	"github.com/writ-authz/writ/task/storetest"
)

// holdFirst holds the store's first commit from now on until release is
// called, and reports when that commit has started.
func holdFirst(s *filestore.Store) (started <-chan struct{}, release func(error)) {
	start, gate := make(chan struct{}), make(chan error, 1)
	var n atomic.Int32
	filestore.BeforeCommit(s, func() error {
		if n.Add(1) != 1 {
			return nil
		}
		close(start)
		return <-gate
	})
	return start, func(err error) { gate <- err }
}

// waitVisible waits until every ref reads back: the writes are applied.
func waitVisible(t *testing.T, s *filestore.Store, refs []task.Ref) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second) // a failure guard, not a measure
	for _, ref := range refs {
		for {
			if _, ok, err := s.Get(context.Background(), ref); err != nil {
				t.Fatal(err)
			} else if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%v was never applied", ref)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// TestGroupCommit: writes that arrive while a commit is under way share the
// next one — plain durable writes and Batch writes alike — counted through
// the commit seam, not by time: with the first commit held until every
// other write is applied, 32 durable Creates and 32 batches (Create,
// ClaimContext, SetPush, Sync) take exactly one commit more. Every call
// returns once its commit is done, and everything is then on disk.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	s := open(t, tempPath(t), task.MemoryLimits{}, filestore.Options{})
	before := filestore.Commits(s)
	started, release := holdFirst(s)
	lead := make(chan error, 1)
	go func() { lead <- s.Create(ctx, storetest.Record("lead", task.Queued)) }()
	<-started
	const n = 32
	var wg, applied sync.WaitGroup
	errs := make(chan error, 2*n)
	var refs []task.Ref
	for i := range n {
		id := fmt.Sprint("durable-", i)
		refs = append(refs, storetest.Ref(id))
		wg.Go(func() { errs <- s.Create(ctx, storetest.Owned(id, "o"+id, task.Queued)) })
		bid := fmt.Sprint("batch-", i)
		refs = append(refs, storetest.Ref(bid))
		applied.Add(1)
		wg.Go(func() {
			b := s.Defer()
			err := batchWrites(ctx, b, bid)
			applied.Done() // every write of b is applied (or refused)
			if err == nil {
				err = b.Sync(ctx)
			}
			errs <- err
		})
	}
	applied.Wait()
	waitVisible(t, s, refs)
	if got := filestore.Commits(s) - before; got != 0 {
		t.Fatalf("%d commits while the first one is held", got)
	}
	release(nil)
	wg.Wait()
	if err := <-lead; err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := filestore.Commits(s) - before; got != 2 {
		t.Fatalf("%d commits for the held one and %d concurrent writers, want 2", got, 2*n)
	}
	for _, ref := range refs {
		if _, ok := onDisk(t, s, ref); !ok {
			t.Fatalf("%v returned but is not on disk", ref)
		}
	}
}

// batchWrites records a new task as the core does for an answer that
// reveals one: the task, its context's owner, its push config.
func batchWrites(ctx context.Context, b task.Deferred, id string) error {
	owner := task.Owner{AgentID: "o" + id}
	r := storetest.Owned(id, owner.AgentID, task.Succeeded)
	r.Task.ContextID = "ctx-" + id
	if err := b.Create(ctx, r); err != nil {
		return err
	}
	if _, err := b.ClaimContext(ctx, task.Ref{Agent: storetest.Agent, ID: r.Task.ContextID}, owner); err != nil {
		return err
	}
	_, err := b.SetPush(ctx, storetest.Ref(id), task.PushConfig{URL: "https://cb.example/" + id})
	return err
}

// TestBatchDefers: a Batch's writes return once applied — while a commit is
// held — and read back at once; they reach the disk with the commit that
// Sync waits for, and not before.
func TestBatchDefers(t *testing.T) {
	ctx := context.Background()
	s := open(t, tempPath(t), task.MemoryLimits{}, filestore.Options{})
	started, release := holdFirst(s)
	b := s.Defer()
	if err := b.Create(ctx, storetest.Record("t1", task.Queued)); err != nil {
		t.Fatal(err)
	}
	<-started // the commit that holds t1 is under way, and held
	if _, _, err := b.Apply(ctx, storetest.Ref("t1"), task.Event{Kind: task.EventStatus, State: task.Succeeded}); err != nil {
		t.Fatal(err)
	}
	if r := mustGet(t, s, storetest.Ref("t1")); r.Task.State != task.Succeeded {
		t.Fatalf("a deferred write is read back at once: %+v", r)
	}
	if _, ok := onDisk(t, s, storetest.Ref("t1")); ok {
		t.Fatal("t1 is on disk while its commit is held")
	}
	synced := make(chan error, 1)
	go func() { synced <- b.Sync(ctx) }()
	release(nil)
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if r, ok := onDisk(t, s, storetest.Ref("t1")); !ok || r.Task.State != task.Succeeded {
		t.Fatalf("after Sync, on disk: %+v %v", r, ok)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatalf("a Sync with nothing to wait for: %v", err)
	}
}

// TestBatchSyncFails: when a commit fails, Sync reports it for every batch
// whose writes it held, and for those written on top of it meanwhile (the
// next overlay was built on the lost one, and goes with it); durable writes
// in either fail as well; the writes are gone; the store carries on.
func TestBatchSyncFails(t *testing.T) {
	ctx := context.Background()
	s := open(t, tempPath(t), task.MemoryLimits{}, filestore.Options{})
	started, release := holdFirst(s)
	first := s.Defer()
	if err := first.Create(ctx, storetest.Record("lost1", task.Succeeded)); err != nil {
		t.Fatal(err)
	}
	<-started
	second := s.Defer()
	if err := second.Create(ctx, storetest.Record("lost2", task.Succeeded)); err != nil {
		t.Fatal(err)
	}
	durable := make(chan error, 1)
	go func() { durable <- s.Create(ctx, storetest.Record("lost3", task.Queued)) }()
	waitVisible(t, s, []task.Ref{storetest.Ref("lost3")})
	release(errors.New("disk on fire"))
	for name, err := range map[string]error{"first": first.Sync(ctx), "second": second.Sync(ctx), "durable": <-durable} {
		if !errors.Is(err, task.ErrUnavailable) {
			t.Errorf("%s: %v, want ErrUnavailable", name, err)
		}
	}
	for _, id := range []string{"lost1", "lost2", "lost3"} {
		if _, ok, err := s.Get(ctx, storetest.Ref(id)); ok || err != nil {
			t.Errorf("%s after the failed commit: %v %v", id, ok, err)
		}
	}
	b := s.Defer()
	if err := b.Create(ctx, storetest.Record("after", task.Succeeded)); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := onDisk(t, s, storetest.Ref("after")); !ok {
		t.Fatal("the store does not carry on after a failed commit")
	}
}

// TestBatchWindowBounds: Open refuses a batch window over MaxBatchWindow;
// negative is none, and every window in range commits what a Batch syncs.
func TestBatchWindowBounds(t *testing.T) {
	if _, err := filestore.Open(tempPath(t), task.MemoryLimits{}, filestore.Options{BatchWindow: filestore.MaxBatchWindow + 1}); err == nil {
		t.Errorf("batch window %v accepted", filestore.MaxBatchWindow+1)
	}
	for _, w := range []time.Duration{-1, 0, filestore.MaxBatchWindow} {
		s := open(t, tempPath(t), task.MemoryLimits{}, filestore.Options{BatchWindow: w})
		for i := range 3 {
			b := s.Defer()
			id := fmt.Sprint("t", i)
			if err := b.Create(context.Background(), storetest.Record(id, task.Queued)); err != nil {
				t.Fatal(err)
			}
			if err := b.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, ok := onDisk(t, s, storetest.Ref(id)); !ok {
				t.Fatalf("window %v: %s synced but not on disk", w, id)
			}
		}
	}
}
