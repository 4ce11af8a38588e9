package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/writ-authz/writ/task"
)

// WorkFactory returns an empty work queue bounded by l. A queue that keeps its
// own time (Redis) may ignore l.Now; it then says so with WorkSuite.RealClock.
type WorkFactory func(t *testing.T, l task.WorkLimits) task.WorkQueue

// WorkSuite is the contract suite of task.WorkQueue.
type WorkSuite struct {
	New WorkFactory
	// RealClock: the queue ignores WorkLimits.Now; leases are then short and
	// the tests wait for them in real time.
	RealClock bool
}

// Run runs the whole work-queue suite.
func (s WorkSuite) Run(t *testing.T) {
	t.Run("PutClaimDone", s.testPutClaimDone)
	t.Run("LeaseRunsOut", s.testLeaseRunsOut)
	t.Run("Renew", s.testRenew)
	t.Run("Full", s.testFull)
	t.Run("OldestFirst", s.testOldestFirst)
	t.Run("ConcurrentClaimsExclusive", s.testConcurrentClaims)
}

// queue returns a fresh queue, its lease length and a way to let time pass.
func (s WorkSuite) queue(t *testing.T, l task.WorkLimits) (task.WorkQueue, time.Duration, func(time.Duration)) {
	if s.RealClock {
		return s.New(t, l), time.Second, time.Sleep
	}
	c := NewClock()
	l.Now = c.Now
	return s.New(t, l), 10 * time.Second, c.Advance
}

func item(kind, id string) task.Work {
	return task.Work{Kind: kind, ID: id, Payload: []byte("payload of " + id)}
}

func ids(ws []task.Work) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.ID
	}
	return out
}

func mustPut(t *testing.T, q task.WorkQueue, w task.Work, holder string, ttl time.Duration) {
	t.Helper()
	if err := q.Put(context.Background(), w, holder, ttl); err != nil {
		t.Fatalf("Put(%s/%s): %v", w.Kind, w.ID, err)
	}
}

func mustClaim(t *testing.T, q task.WorkQueue, kind, holder string, n int, ttl time.Duration) []task.Work {
	t.Helper()
	ws, err := q.Claim(context.Background(), kind, holder, n, ttl)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return ws
}

func count(t *testing.T, q task.WorkQueue, kind string) int {
	t.Helper()
	n, err := q.Count(context.Background(), kind)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (s WorkSuite) testPutClaimDone(t *testing.T) {
	ctx := context.Background()
	q, lease, _ := s.queue(t, task.WorkLimits{})
	for _, id := range []string{"w0", "w1", "w2"} {
		mustPut(t, q, item(task.WorkPush, id), "producer", 0)
	}
	mustPut(t, q, item(task.WorkFollow, "w0"), "producer", 0) // another kind, same id
	if n := count(t, q, task.WorkPush); n != 3 {
		t.Fatalf("Count = %d, want 3", n)
	}
	before := time.Now()
	got := mustClaim(t, q, task.WorkPush, "a", 2, lease)
	if !slices.Equal(ids(got), []string{"w0", "w1"}) {
		t.Fatalf("Claim(2) = %v, want [w0 w1]", ids(got))
	}
	for _, w := range got {
		if w.Kind != task.WorkPush || w.Holder != "a" || string(w.Payload) != "payload of "+w.ID {
			t.Errorf("claimed %+v", w)
		}
		if !s.RealClock && w.LeaseUntil.IsZero() || s.RealClock && w.LeaseUntil.Before(before) {
			t.Errorf("lease until %v", w.LeaseUntil)
		}
	}
	got[0].Payload[0] = 'X' // a returned payload is a copy
	if got := mustClaim(t, q, task.WorkPush, "b", 5, lease); !slices.Equal(ids(got), []string{"w2"}) {
		t.Fatalf("second holder claimed %v, want [w2]", ids(got))
	}
	if got := mustClaim(t, q, task.WorkPush, "c", 5, lease); len(got) != 0 {
		t.Fatalf("everything is held, yet claimed %v", ids(got))
	}
	if err := q.Done(ctx, task.WorkPush, "w0", "b"); !errors.Is(err, task.ErrNotHolder) {
		t.Errorf("Done by a non-holder: %v, want ErrNotHolder", err)
	}
	if err := q.Done(ctx, task.WorkPush, "w0", "a"); err != nil {
		t.Fatal(err)
	}
	if err := q.Done(ctx, task.WorkPush, "w0", "a"); !errors.Is(err, task.ErrNotHolder) {
		t.Errorf("Done twice: %v, want ErrNotHolder", err)
	}
	if err := q.Done(ctx, task.WorkPush, "nope", "a"); !errors.Is(err, task.ErrNotHolder) {
		t.Errorf("Done of an unknown item: %v, want ErrNotHolder", err)
	}
	if n := count(t, q, task.WorkPush); n != 2 {
		t.Errorf("Count = %d, want 2", n)
	}
	if n := count(t, q, task.WorkFollow); n != 1 {
		t.Errorf("Count(follow) = %d, want 1", n)
	}
	if n := count(t, q, "never-used"); n != 0 {
		t.Errorf("Count(unknown kind) = %d", n)
	}
	// Put replaces the payload of an existing item and leases it to the putter.
	w1 := item(task.WorkPush, "w1")
	w1.Payload = []byte("v2")
	mustPut(t, q, w1, "a", lease)
	if err := q.Done(ctx, task.WorkPush, "w1", "a"); err != nil {
		t.Fatal(err)
	}
	if n := count(t, q, task.WorkPush); n != 1 {
		t.Errorf("Count = %d after replacing and finishing w1, want 1", n)
	}
	if got := mustClaim(t, q, task.WorkFollow, "a", 1, lease); len(got) != 1 || string(got[0].Payload) != "payload of w0" {
		t.Errorf("follow item: %+v", got)
	}
}

func (s WorkSuite) testLeaseRunsOut(t *testing.T) {
	ctx := context.Background()
	q, lease, wait := s.queue(t, task.WorkLimits{})
	// The producer holds what it puts until the lease runs out.
	mustPut(t, q, item(task.WorkPush, "p"), "a", lease)
	if got := mustClaim(t, q, task.WorkPush, "b", 1, lease); len(got) != 0 {
		t.Fatalf("b claimed %v while a holds it", ids(got))
	}
	wait(lease + lease/10)
	got := mustClaim(t, q, task.WorkPush, "b", 1, lease)
	if !slices.Equal(ids(got), []string{"p"}) || got[0].Holder != "b" {
		t.Fatalf("after a's lease ran out, b claimed %+v", got)
	}
	if lost, err := q.Renew(ctx, task.WorkPush, "a", []string{"p"}, lease); err != nil || !slices.Equal(lost, []string{"p"}) {
		t.Errorf("a's Renew = %v %v, want p lost", lost, err)
	}
	if err := q.Done(ctx, task.WorkPush, "p", "a"); !errors.Is(err, task.ErrNotHolder) {
		t.Errorf("a's Done after the takeover: %v", err)
	}
	if err := q.Done(ctx, task.WorkPush, "p", "b"); err != nil {
		t.Errorf("b's Done: %v", err)
	}
}

func (s WorkSuite) testRenew(t *testing.T) {
	ctx := context.Background()
	q, lease, wait := s.queue(t, task.WorkLimits{})
	mustPut(t, q, item(task.WorkFollow, "f1"), "a", lease)
	mustPut(t, q, item(task.WorkFollow, "f2"), "a", lease)
	wait(lease / 2)
	lost, err := q.Renew(ctx, task.WorkFollow, "a", []string{"f1", "f2", "gone"}, lease)
	if err != nil || !slices.Equal(lost, []string{"gone"}) {
		t.Fatalf("Renew = %v %v, want [gone] lost", lost, err)
	}
	wait(lease*2/3 + lease/10) // past the first lease, within the renewed one
	if got := mustClaim(t, q, task.WorkFollow, "b", 5, lease); len(got) != 0 {
		t.Fatalf("b claimed renewed items %v", ids(got))
	}
	if lost, err := q.Renew(ctx, task.WorkFollow, "b", []string{"f1"}, lease); err != nil || !slices.Equal(lost, []string{"f1"}) {
		t.Errorf("b's Renew of a's item = %v %v, want it reported lost", lost, err)
	}
	if lost, err := q.Renew(ctx, task.WorkFollow, "a", nil, lease); err != nil || len(lost) != 0 {
		t.Errorf("empty Renew = %v %v", lost, err)
	}
}

func (s WorkSuite) testFull(t *testing.T) {
	ctx := context.Background()
	q, lease, _ := s.queue(t, task.WorkLimits{MaxItems: 3})
	for i := range 3 {
		mustPut(t, q, item(task.WorkPush, fmt.Sprint("w", i)), "a", lease)
	}
	if err := q.Put(ctx, item(task.WorkPush, "w3"), "a", lease); !errors.Is(err, task.ErrWorkFull) {
		t.Fatalf("Put over the bound: %v, want ErrWorkFull", err)
	}
	mustPut(t, q, item(task.WorkPush, "w1"), "a", lease)   // replacing is not a new item
	mustPut(t, q, item(task.WorkFollow, "f0"), "a", lease) // the bound is per kind
	if err := q.Done(ctx, task.WorkPush, "w0", "a"); err != nil {
		t.Fatal(err)
	}
	mustPut(t, q, item(task.WorkPush, "w3"), "a", lease)
	if n := count(t, q, task.WorkPush); n != 3 {
		t.Errorf("Count = %d, want 3", n)
	}
}

func (s WorkSuite) testOldestFirst(t *testing.T) {
	q, lease, wait := s.queue(t, task.WorkLimits{})
	for i := range 6 {
		mustPut(t, q, item(task.WorkPush, fmt.Sprint("w", i)), "p", 0)
		wait(2 * time.Millisecond)
	}
	var got []string
	for range 3 {
		got = append(got, ids(mustClaim(t, q, task.WorkPush, "a", 2, lease))...)
	}
	if want := []string{"w0", "w1", "w2", "w3", "w4", "w5"}; !slices.Equal(got, want) {
		t.Errorf("claimed in order %v, want %v", got, want)
	}
}

// testConcurrentClaims: many holders claim at once; every item goes to exactly
// one of them.
func (s WorkSuite) testConcurrentClaims(t *testing.T) {
	ctx := context.Background()
	q, lease, _ := s.queue(t, task.WorkLimits{})
	const items, holders = 60, 6
	for i := range items {
		mustPut(t, q, item(task.WorkPush, fmt.Sprintf("w%02d", i)), "p", 0)
	}
	var mu sync.Mutex
	owner := map[string]string{}
	var wg sync.WaitGroup
	for h := range holders {
		holder := fmt.Sprint("h", h)
		wg.Go(func() {
			for {
				ws, err := q.Claim(ctx, task.WorkPush, holder, 4, 10*lease)
				if err != nil {
					t.Error(err)
					return
				}
				if len(ws) == 0 {
					return
				}
				mu.Lock()
				for _, w := range ws {
					if prev, dup := owner[w.ID]; dup {
						t.Errorf("%s claimed by %s and %s", w.ID, prev, holder)
					}
					owner[w.ID] = holder
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(owner) != items {
		t.Fatalf("%d items claimed, want %d", len(owner), items)
	}
	for id, holder := range owner {
		wg.Go(func() {
			if err := q.Done(ctx, task.WorkPush, id, holder); err != nil {
				t.Errorf("Done(%s, %s): %v", id, holder, err)
			}
		})
	}
	wg.Wait()
	if n := count(t, q, task.WorkPush); n != 0 {
		t.Errorf("Count = %d after every Done", n)
	}
}
