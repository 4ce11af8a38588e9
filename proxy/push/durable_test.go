package push

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-authz/writ/task"
)

func queued(t *testing.T, q task.WorkQueue) int {
	t.Helper()
	n, err := q.Count(context.Background(), task.WorkPush)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func waitUntil(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestQueueHoldsUntilOutcome: a notification is in the work queue, leased to
// its Deliverer, from Enqueue until its final outcome, delivered or given up.
func TestQueueHoldsUntilOutcome(t *testing.T) {
	release := make(chan struct{})
	rv := newReceiver(t, func(r *http.Request, _ int) int {
		<-release
		if strings.Contains(r.URL.Path, "gone") {
			return http.StatusGone // not retried: given up
		}
		return 200
	})
	q := task.NewMemoryWorkQueue(task.WorkLimits{})
	d, rs := newTestDeliverer(t, DelivererConfig{Queue: q, Holder: "me", Lease: time.Minute})
	if err := d.Enqueue(note("t1", rv.URL+"/ok", 1)); err != nil {
		t.Fatal(err)
	}
	if err := d.Enqueue(note("t2", rv.URL+"/gone", 1)); err != nil {
		t.Fatal(err)
	}
	if n := queued(t, q); n != 2 {
		t.Fatalf("%d queued while in flight, want 2", n)
	}
	// Leased to this Deliverer: nobody else can claim them.
	if ws, _ := q.Claim(context.Background(), task.WorkPush, "other", 10, time.Minute); len(ws) != 0 {
		t.Fatalf("another holder claimed %d held notifications", len(ws))
	}
	close(release)
	rs.waitFor(t, 2)
	waitUntil(t, "both removed from the queue", func() bool { return queued(t, q) == 0 })
}

// TestResumeInSeqOrder: notifications a stopped Deliverer left (its Close
// abandoned them at the deadline) are claimed by the next one once their
// lease runs out, and delivered once each, in Seq order.
func TestResumeInSeqOrder(t *testing.T) {
	var up atomic.Bool
	rv := newReceiver(t, func(*http.Request, int) int {
		if up.Load() {
			return 200
		}
		return http.StatusServiceUnavailable
	})
	q := task.NewMemoryWorkQueue(task.WorkLimits{})
	lease := 300 * time.Millisecond
	a, _ := newTestDeliverer(t, DelivererConfig{Queue: q, Holder: "a", Lease: lease, MaxAttempts: 1000,
		BaseBackoff: time.Hour, MaxBackoff: time.Hour})
	for _, seq := range []uint64{30, 10, 20} {
		if err := a.Enqueue(note("t1", rv.URL, seq)); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "a first attempt", func() bool { return rv.attempts("t1/30") > 0 })
	// One renewal: the three leases now end together, as the leases a process
	// has held for a while do, so one claim takes them all. (Put within one
	// renewal period of a holder's death, they may run out one by one and be
	// claimed in separate batches: the order then holds within each batch.)
	time.Sleep(lease / 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	a.Close(ctx) // abandoned: they stay in the queue
	if n := queued(t, q); n != 3 {
		t.Fatalf("%d left in the queue after Close, want 3", n)
	}
	up.Store(true)
	start := time.Now()
	b, rs := newTestDeliverer(t, DelivererConfig{Queue: q, Holder: "b", Lease: lease})
	rs.waitFor(t, 3)
	if time.Since(start) < lease/2 {
		t.Error("b claimed a's notifications before their lease ran out")
	}
	if got := strings.Join(rv.bodies(), ","); got != "t1/10,t1/20,t1/30" {
		t.Fatalf("received %s, want t1/10,t1/20,t1/30", got)
	}
	waitUntil(t, "the queue empties", func() bool { return queued(t, q) == 0 })
	if s := b.Stats(); s.Resumed != 3 || s.Delivered != 3 {
		t.Fatalf("b stats %+v", s)
	}
}

// flakyRenew fails Renew and Claim while failing is set: a replica cut off
// from the store, whose leases run out while it still delivers.
type flakyRenew struct {
	task.WorkQueue
	failing atomic.Bool
}

var errCutOff = errors.New("store unreachable")

func (f *flakyRenew) Renew(ctx context.Context, kind, holder string, ids []string, ttl time.Duration) ([]string, error) {
	if f.failing.Load() {
		return nil, errCutOff
	}
	return f.WorkQueue.Renew(ctx, kind, holder, ids, ttl)
}

func (f *flakyRenew) Claim(ctx context.Context, kind, holder string, n int, ttl time.Duration) ([]task.Work, error) {
	if f.failing.Load() {
		return nil, errCutOff
	}
	return f.WorkQueue.Claim(ctx, kind, holder, n, ttl)
}

// TestTakeOver: a Deliverer that cannot renew its lease (its receiver keeps
// failing meanwhile) has the notification taken over by another, which
// delivers it; once the first learns it lost the lease, it stops attempting.
func TestTakeOver(t *testing.T) {
	var aTries atomic.Int64
	failing := newReceiver(t, func(*http.Request, int) int { aTries.Add(1); return 503 })
	ok := newReceiver(t, nil)
	q := task.NewMemoryWorkQueue(task.WorkLimits{})
	fq := &flakyRenew{WorkQueue: q}
	fq.failing.Store(true)
	lease := 300 * time.Millisecond
	// a reaches the receiver through a client that always fails; b through one
	// that works (the same notification, the same URL).
	toOK := func(r *http.Request) (*http.Response, error) {
		r.URL.Host = strings.TrimPrefix(ok.URL, "http://")
		return http.DefaultTransport.RoundTrip(r)
	}
	a, ars := newTestDeliverer(t, DelivererConfig{Queue: fq, Holder: "a", Lease: lease, MaxAttempts: 1000,
		BaseBackoff: 20 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	if err := a.Enqueue(note("t1", failing.URL, 1)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a tries", func() bool { return aTries.Load() > 0 })
	b, brs := newTestDeliverer(t, DelivererConfig{Queue: q, Holder: "b", Lease: lease,
		Client: &http.Client{Transport: roundTripFunc(toOK)}})
	res := brs.waitFor(t, 1)
	if !res[0].Delivered || len(ok.bodies()) != 1 {
		t.Fatalf("b: %+v, received %v", res[0], ok.bodies())
	}
	fq.failing.Store(false) // a reaches the store again and learns it lost the lease
	waitUntil(t, "a hands over", func() bool { return a.Stats().HandedOver == 1 })
	tries := aTries.Load()
	time.Sleep(100 * time.Millisecond)
	if aTries.Load() != tries {
		t.Error("a kept attempting a notification it no longer holds")
	}
	if s := a.Stats(); s.Queued != 0 || s.Delivered != 0 || len(ars.all) != 0 {
		t.Errorf("a reported an outcome for what b delivered: %+v", s)
	}
	if s := b.Stats(); s.Resumed != 1 || s.Delivered != 1 {
		t.Errorf("b stats %+v", s)
	}
	waitUntil(t, "the queue empties", func() bool { return queued(t, q) == 0 })
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
