package main

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
)

// TestCrashFileStore: `writ serve` on the file store (a child process) in
// front of the a2a-go clarifier and slow agents, driven by the a2a-go client:
// tasks (one left in input-required, one working with a push config whose
// receiver is down, one in an open stream), a push config set through writ.
// Then kill -9, mid-stream. Restarted on the same file: owners, states,
// context ids and push configs are there; follow-ups are still owner-checked
// (another caller is told TaskNotFound, the owner gets through); the
// notifications that were pending arrive once the receiver is back, each
// exactly once; the resumed follower asks the agent as writ (Writ-Caller), with
// none of the caller's credentials.
func TestCrashFileStore(t *testing.T) {
	w := newStWorld(t, 10*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfg := w.config("writ.yaml", "  kind: file\n  path: "+filepath.Join(w.dir, "state", "writ.db")+"\n  work_lease: 1s")
	first := w.start("writ", cfg)

	// A task left waiting for its caller, with a push config set afterwards.
	clar := w.client(first, "/clarifier", stAlice)
	res, err := clar.SendMessage(ctx, stMessage("Screen the beneficiary of PMT-771"))
	if err != nil {
		t.Fatal(err)
	}
	asked, ok := res.(*a2a.Task)
	if !ok || asked.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("clarifier: %#v", res)
	}
	if _, err := clar.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: asked.ID,
		Config: a2a.PushConfig{ID: "cb-1", URL: w.rcv.URL(), Token: "tok-clar"}}); err != nil {
		t.Fatalf("push config set: %v", err)
	}

	// A working task whose receiver is down: its notifications are pending.
	w.rcv.down()
	slow := w.client(first, "/slow", stAlice)
	p := stMessage("Screen slowly")
	p.Config = &a2a.MessageSendConfig{Blocking: new(false), PushConfig: &a2a.PushConfig{URL: w.rcv.URL(), Token: "tok-slow"}}
	if res, err = slow.SendMessage(ctx, p); err != nil {
		t.Fatal(err)
	}
	working, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("slow: %#v", res)
	}
	// Until writ saw it working (through the owner's get; it notifies it).
	deadline := time.Now().Add(10 * time.Second)
	for {
		if got, err := slow.GetTask(ctx, &a2a.TaskQueryParams{ID: working.ID}); err == nil && got.Status.State == a2a.TaskStateWorking {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("writ never saw the slow task running")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A stream, open when writ dies.
	streamed := make(chan a2a.TaskID, 1)
	streamEnded := make(chan struct{})
	go func() {
		defer close(streamEnded)
		for ev, err := range w.client(first, "/slow", stAlice).SendStreamingMessage(ctx, stMessage("Screen in a stream")) {
			if err != nil {
				return
			}
			if task, ok := ev.(*a2a.Task); ok {
				select {
				case streamed <- task.ID:
				default:
				}
			}
		}
	}()
	var streamID a2a.TaskID
	select {
	case streamID = <-streamed:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream revealed no task")
	}
	before := len(w.slow.Requests())
	first.kill() // kill -9, mid-stream
	<-streamEnded

	w.rcv.up()
	second := w.start("writ-restarted", cfg)

	// The records: owners, states, context ids, push configs.
	for _, c := range []struct {
		agent  string
		id     a2a.TaskID
		states []string
		ctxID  string
		push   int
	}{
		{"sanctions-clarifier", asked.ID, []string{"awaiting_input"}, asked.ContextID, 1},
		{"sanctions-slow", working.ID, []string{"running"}, working.ContextID, 1},
		{"sanctions-slow", streamID, []string{"queued", "running"}, "", 0},
	} {
		rec, code := second.record(c.agent, string(c.id))
		owner, _ := rec["owner"].(map[string]any)
		pushes, _ := rec["push_configs"].([]any)
		if code != 200 || owner["agent_id"] != stAlice.agent || owner["tenant"] != stAlice.tenant ||
			!slices.Contains(c.states, rec["state"].(string)) || (c.ctxID != "" && rec["context_id"] != c.ctxID) || len(pushes) != c.push {
			t.Errorf("%s after kill -9: %d %v", c.id, code, rec)
		}
	}

	// The notifications pending at the kill arrive, each exactly once.
	w.rcv.waitFor(string(working.ID), "working")
	time.Sleep(1500 * time.Millisecond) // beyond a lease and a claim: a second copy would be here
	got := w.rcv.of(string(working.ID))
	t.Logf("notifications of the slow task after the restart: %v", got)
	for _, st := range got {
		if stCount(got, st) != 1 {
			t.Errorf("slow task notifications %v: %s more than once", got, st)
		}
	}

	// Follow-ups are owner-checked: another caller is told the task does not
	// exist, the owner gets through.
	bobClar, bobSlow := w.client(second, "/clarifier", stBob), w.client(second, "/slow", stBob)
	if _, err := bobClar.GetTask(ctx, &a2a.TaskQueryParams{ID: asked.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("another caller's get: %v, want TaskNotFound", err)
	}
	if _, err := bobSlow.CancelTask(ctx, &a2a.TaskIDParams{ID: working.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("another caller's cancel: %v, want TaskNotFound", err)
	}
	if _, err := bobClar.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: asked.ID, ConfigID: "cb-1"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("another caller's push config get: %v, want TaskNotFound", err)
	}
	clar2, slow2 := w.client(second, "/clarifier", stAlice), w.client(second, "/slow", stAlice)
	if pc, err := clar2.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: asked.ID, ConfigID: "cb-1"}); err != nil || pc.Config.URL != w.rcv.URL() {
		t.Errorf("the owner's push config after kill -9: %+v %v", pc, err)
	}
	if got, err := clar2.GetTask(ctx, &a2a.TaskQueryParams{ID: asked.ID}); err != nil || got.Status.State != a2a.TaskStateInputRequired {
		t.Errorf("the owner's get: %v %v", got, err)
	}
	reply := stMessage("UAE and UN lists")
	reply.Message.TaskID, reply.Message.ContextID = asked.ID, asked.ContextID
	if res, err := clar2.SendMessage(ctx, reply); err != nil {
		t.Errorf("the owner's reply: %v", err)
	} else if done, ok := res.(*a2a.Task); !ok || done.Status.State != a2a.TaskStateCompleted {
		t.Errorf("the owner's reply: %#v", res)
	}
	if got := w.rcv.waitFor(string(asked.ID), "completed"); stCount(got, "completed") != 1 {
		t.Errorf("clarifier notifications %v", got)
	}
	if c, err := slow2.CancelTask(ctx, &a2a.TaskIDParams{ID: working.ID}); err != nil || c.Status.State != a2a.TaskStateCanceled {
		t.Errorf("the owner's cancel: %v %v", c, err)
	}
	if got := w.rcv.waitFor(string(working.ID), "canceled"); stCount(got, "canceled") != 1 {
		t.Errorf("slow task notifications after the cancel %v", got)
	}

	// The resumed follower asked the agent as writ: Writ-Caller, no credentials.
	resumed := false
	for _, r := range w.slow.Requests()[before:] {
		if (r.Method != "tasks/get" && r.Method != "tasks/resubscribe") || r.TaskID != string(working.ID) {
			continue
		}
		if r.Header.Get("Authorization") != "" {
			t.Errorf("the resumed follower carried a credential: %+v", r)
		} else if strings.Contains(r.Caller, `"agent_id":"payments-investigator"`) {
			resumed = true
		}
	}
	if !resumed {
		t.Errorf("no request of the resumed follower (Writ-Caller only) reached the agent: %+v", w.slow.Requests()[before:])
	}
}
