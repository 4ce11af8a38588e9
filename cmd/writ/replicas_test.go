package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/writ-authz/writ/internal/redistest"
)

// TestReplicasOnRedis: two `writ serve` children (replicas A and B) share
// one real redis-server in front of the same a2a-go agents.
//   - A task created through A is followed up, cancelled and notified
//     through B; another caller is told TaskNotFound by B.
//   - A state change both replicas observe at once produces one notification.
//   - Redis stopped: requests that need the store are answered 503 (and
//     /readyz says why); Redis back: both recover by themselves, the tasks
//     still there and still owner-checked.
//   - A replica killed (kill -9) while it holds a delivery's lease (its
//     receiver down): the other takes it over once the lease runs out, and
//     the notification arrives exactly once.
func TestReplicasOnRedis(t *testing.T) {
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	w := newStWorld(t, 3*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfg := w.config("writ.yaml", "  kind: redis\n  work_lease: 1s\n  redis: {addr: '"+srv.Addr()+"', key_prefix: 'replicas:'}")
	a, b := w.start("replica-a", cfg), w.start("replica-b", cfg)
	push := func(tok string) *a2a.MessageSendConfig {
		return &a2a.MessageSendConfig{PushConfig: &a2a.PushConfig{URL: w.rcv.URL(), Token: tok}}
	}

	// Created through A, followed up through B.
	p := stMessage("Screen the beneficiary of PMT-771")
	p.Config = push("tok-1")
	res, err := w.client(a, "/clarifier", stAlice).SendMessage(ctx, p)
	asked, ok := res.(*a2a.Task)
	if err != nil || !ok || asked.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("send through A: %#v %v", res, err)
	}
	bobB, aliceB := w.client(b, "/clarifier", stBob), w.client(b, "/clarifier", stAlice)
	if _, err := bobB.GetTask(ctx, &a2a.TaskQueryParams{ID: asked.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("another caller through B: %v, want TaskNotFound", err)
	}
	if got, err := aliceB.GetTask(ctx, &a2a.TaskQueryParams{ID: asked.ID}); err != nil || got.Status.State != a2a.TaskStateInputRequired {
		t.Errorf("the owner through B: %v %v", got, err)
	}
	reply := stMessage("UAE and UN lists")
	reply.Message.TaskID, reply.Message.ContextID = asked.ID, asked.ContextID
	if res, err := aliceB.SendMessage(ctx, reply); err != nil {
		t.Errorf("the owner's reply through B: %v", err)
	} else if done, _ := res.(*a2a.Task); done == nil || done.Status.State != a2a.TaskStateCompleted {
		t.Errorf("the owner's reply through B: %#v", res)
	}
	if got := w.rcv.waitFor(string(asked.ID), "completed"); strings.Join(got, ",") != "input-required,completed" {
		t.Errorf("notifications %v, want input-required then completed, once each", got)
	}

	// Cancelled through B.
	slowA := w.client(a, "/slow", stAlice)
	p = stMessage("Screen slowly")
	p.Config = push("tok-2")
	p.Config.Blocking = new(false)
	res, err = slowA.SendMessage(ctx, p)
	toCancel, ok := res.(*a2a.Task)
	if err != nil || !ok {
		t.Fatalf("send through A: %#v %v", res, err)
	}
	if _, err := w.client(b, "/slow", stBob).CancelTask(ctx, &a2a.TaskIDParams{ID: toCancel.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("another caller's cancel through B: %v, want TaskNotFound", err)
	}
	if c, err := w.client(b, "/slow", stAlice).CancelTask(ctx, &a2a.TaskIDParams{ID: toCancel.ID}); err != nil || c.Status.State != a2a.TaskStateCanceled {
		t.Errorf("the owner's cancel through B: %v %v", c, err)
	}
	w.rcv.waitFor(string(toCancel.ID), "canceled")

	// One change, observed by both replicas at once: the slow agent completes
	// a task by itself, and both replicas ask for it as fast as they can.
	p = stMessage("Screen slowly, to the end")
	p.Config = push("tok-3")
	p.Config.Blocking = new(false)
	if res, err = slowA.SendMessage(ctx, p); err != nil {
		t.Fatal(err)
	}
	racing := res.(*a2a.Task)
	var wg sync.WaitGroup
	for _, r := range []*stWrit{a, b} {
		c := w.client(r, "/slow", stAlice)
		wg.Go(func() {
			for ctx.Err() == nil {
				got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: racing.ID})
				if err == nil && got.Status.State == a2a.TaskStateCompleted {
					return
				}
			}
		})
	}
	wg.Wait()
	w.rcv.waitFor(string(racing.ID), "completed")

	// Redis stopped: 503, not ready; back: both recover, records intact.
	srv.Stop()
	for _, r := range []*stWrit{a, b} {
		if code, body := w.rpc(r, "/clarifier", stAlice, "tasks/get", map[string]any{"id": asked.ID}); code != 503 ||
			!strings.Contains(body, "UNAVAILABLE") {
			t.Errorf("%s with Redis down: %d %s", r.name, code, body)
		}
		if code, body := r.readyz(); code != 503 || !strings.Contains(body, "lifecycle store") {
			t.Errorf("%s /readyz with Redis down: %d %s", r.name, code, body)
		}
	}
	// A new send whose task cannot be recorded is refused too: its answer
	// would give the caller a task writ cannot check.
	p = stMessage("Screen while the store is down")
	if code, body := w.rpc(a, "/clarifier", stAlice, "message/send", map[string]any{"message": p.Message}); code != 503 ||
		!strings.Contains(body, "UNAVAILABLE") {
		t.Errorf("a new send with Redis down: %d %s", code, body)
	}
	srv.Restart()
	for _, r := range []*stWrit{a, b} {
		deadline := time.Now().Add(15 * time.Second)
		for code, _ := r.readyz(); code != 200; code, _ = r.readyz() {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not recover when Redis came back", r.name)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if got, err := w.client(r, "/clarifier", stAlice).GetTask(ctx, &a2a.TaskQueryParams{ID: asked.ID}); err != nil || got.Status.State != a2a.TaskStateCompleted {
			t.Errorf("%s after Redis came back: %v %v", r.name, got, err)
		}
		if _, err := w.client(r, "/clarifier", stBob).GetTask(ctx, &a2a.TaskQueryParams{ID: asked.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Errorf("%s, another caller after Redis came back: %v", r.name, err)
		}
	}

	// A killed while it holds a delivery (its receiver down): B takes over.
	w.rcv.down()
	p = stMessage("Screen once more")
	p.Config = push("tok-4")
	res, err = w.client(a, "/clarifier", stAlice).SendMessage(ctx, p)
	orphan, ok := res.(*a2a.Task)
	if err != nil || !ok {
		t.Fatalf("send through A: %#v %v", res, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(a.log.String(), `"push delivery attempt","task_id":"`+string(orphan.ID)) {
		if time.Now().After(deadline) {
			t.Fatal("A never tried to deliver")
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.kill()
	w.rcv.up()
	w.rcv.waitFor(string(orphan.ID), "input-required")
	time.Sleep(1500 * time.Millisecond) // beyond a lease and a claim: a second copy would be here

	// Every notification of the run arrived exactly once.
	for _, id := range []a2a.TaskID{asked.ID, toCancel.ID, racing.ID, orphan.ID} {
		got := w.rcv.of(string(id))
		for _, st := range got {
			if stCount(got, st) != 1 {
				t.Errorf("task %s notified %v: %s more than once", id, got, st)
			}
		}
	}
	if !strings.Contains(b.log.String(), `"push delivery","task_id":"`+string(orphan.ID)) {
		t.Error("B did not deliver the notification A held")
	}
}
