package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
)

// TestCrashConcurrentSends: `writ serve` on the file store takes concurrent
// sends from two callers — half of them with a push config — through the
// a2a-go client, and is killed with SIGKILL at a random moment while they
// are in flight. Restarted on the same file, every task whose answer a
// client received is there: its owner, its state, its context, its push
// config; its owner can read it and the other caller is told TaskNotFound.
// (The file store applies an answer's writes as they come and commits them
// together with the writes of every other request, once, before the answer
// is sent: an answer that reached its caller is never ahead of the disk.)
func TestCrashConcurrentSends(t *testing.T) {
	w := newStWorld(t, 10*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfg := w.config("writ.yaml", "  kind: file\n  path: "+filepath.Join(w.dir, "state", "writ.db"))
	first := w.start("writ", cfg)

	type answered struct {
		caller stCaller
		task   *a2a.Task
		push   bool
	}
	var (
		mu   sync.Mutex
		got  []answered
		wg   sync.WaitGroup
		some = make(chan struct{})
		once sync.Once
	)
	const senders = 16
	for i := range senders {
		c := stAlice
		if i%2 == 1 {
			c = stBob
		}
		cl := w.client(first, "/clarifier", c)
		withPush := i%4 < 2
		wg.Go(func() {
			for n := 0; ; n++ {
				p := stMessage(fmt.Sprintf("Screen counterparty %d-%d", i, n))
				if withPush {
					p.Config = &a2a.MessageSendConfig{PushConfig: &a2a.PushConfig{URL: w.rcv.URL(), Token: fmt.Sprint("tok-", i)}}
				}
				res, err := cl.SendMessage(ctx, p)
				if err != nil {
					return // writ is gone
				}
				tk, ok := res.(*a2a.Task)
				if !ok {
					t.Errorf("sender %d: %#v", i, res)
					return
				}
				mu.Lock()
				got = append(got, answered{caller: c, task: tk, push: withPush})
				if len(got) >= senders {
					once.Do(func() { close(some) })
				}
				mu.Unlock()
			}
		})
	}
	select {
	case <-some:
	case <-ctx.Done():
		t.Fatal("no answers before the deadline")
	}
	time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond) // a random moment, sends in flight
	first.kill()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d answers received before kill -9", len(got))

	second := w.start("writ-restarted", cfg)
	for _, a := range got {
		rec, code := second.record("sanctions-clarifier", string(a.task.ID))
		owner, _ := rec["owner"].(map[string]any)
		pushes, _ := rec["push_configs"].([]any)
		wantPush := 0
		if a.push {
			wantPush = 1
		}
		if code != 200 || owner["agent_id"] != a.caller.agent || owner["tenant"] != a.caller.tenant ||
			rec["state"] != "awaiting_input" || rec["context_id"] != a.task.ContextID || len(pushes) != wantPush {
			t.Errorf("task %s (answered to %s) after kill -9: %d %v", a.task.ID, a.caller.agent, code, rec)
		}
	}
	for _, a := range got[:min(len(got), 6)] {
		other := stBob
		if a.caller == stBob {
			other = stAlice
		}
		if _, err := w.client(second, "/clarifier", other).GetTask(ctx, &a2a.TaskQueryParams{ID: a.task.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Errorf("another caller's get of %s: %v, want TaskNotFound", a.task.ID, err)
		}
		if tk, err := w.client(second, "/clarifier", a.caller).GetTask(ctx, &a2a.TaskQueryParams{ID: a.task.ID}); err != nil || tk.Status.State != a2a.TaskStateInputRequired {
			t.Errorf("the owner's get of %s: %v %v", a.task.ID, tk, err)
		}
	}
}
