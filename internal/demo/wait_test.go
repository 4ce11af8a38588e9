package demo

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
)

// TestReceiverWait: wait returns once n notifications arrived, with any more
// already there, and what arrived when its context ends first.
func TestReceiverWait(t *testing.T) {
	r, err := startReceiver()
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	post := func(body string) {
		req, _ := http.NewRequest(http.MethodPost, r.url, strings.NewReader(body))
		req.Header.Set("X-A2A-Notification-Token", "tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
	}
	post("one")
	posted := make(chan struct{})
	go func() { defer close(posted); post("two") }()
	got := r.wait(t.Context(), 2)
	<-posted
	if len(got) != 2 || got[0].body != "one" || got[0].token != "tok" {
		t.Fatalf("got %+v", got)
	}
	post("three")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if got := r.wait(ctx, 2); len(got) != 1 || got[0].body != "three" {
		t.Fatalf("after the context ended: %+v", got)
	}
}

// TestTaskStatesWait: a wait ends when the task reaches the state, even if it
// got there before the wait began; another task's changes do not end it.
func TestTaskStatesWait(t *testing.T) {
	s := newTaskStates()
	s.record("a", a2a.TaskStateSubmitted)
	s.record("a", a2a.TaskStateWorking)
	if st, ok := s.wait(t.Context(), "a", a2a.TaskStateWorking); !ok || st != a2a.TaskStateWorking {
		t.Fatalf("already working: %s %v", st, ok)
	}
	done := make(chan a2a.TaskState)
	go func() {
		st, _ := s.wait(t.Context(), "b", a2a.TaskStateWorking)
		done <- st
	}()
	s.record("a", a2a.TaskStateCanceled)
	s.record("b", a2a.TaskStateSubmitted)
	s.record("b", a2a.TaskStateWorking)
	if st := <-done; st != a2a.TaskStateWorking {
		t.Fatalf("b: %s", st)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if st, ok := s.wait(ctx, "b", a2a.TaskStateCompleted); ok || st != a2a.TaskStateWorking {
		t.Fatalf("never completed: %s %v", st, ok)
	}
}
