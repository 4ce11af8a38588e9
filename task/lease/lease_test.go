package lease

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/writ-authz/writ/task"
)

// failing is a work queue whose Renew always fails.
type failing struct{ task.WorkQueue }

func (failing) Renew(context.Context, string, string, []string, time.Duration) ([]string, error) {
	return nil, errors.New("down")
}

func TestRenew(t *testing.T) {
	q := task.NewMemoryWorkQueue(task.WorkLimits{})
	ctx := t.Context()
	if err := q.Put(ctx, task.Work{Kind: "k", ID: "mine"}, "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := q.Put(ctx, task.Work{Kind: "k", ID: "theirs"}, "b", time.Minute); err != nil {
		t.Fatal(err)
	}
	lost, err := Renew(ctx, q, "k", "a", []string{"mine", "theirs"}, time.Minute)
	if err != nil || !slices.Equal(lost, []string{"theirs"}) {
		t.Errorf("renew: lost %v, %v", lost, err)
	}
	if lost, err := Renew(ctx, failing{q}, "k", "a", nil, time.Minute); lost != nil || err != nil {
		t.Errorf("no ids: %v %v", lost, err)
	}
	if _, err := Renew(ctx, failing{q}, "k", "a", []string{"mine"}, time.Minute); err == nil {
		t.Error("a failing queue renewed")
	}
	closed, cancel := context.WithCancel(ctx)
	cancel()
	if lost, err := Renew(closed, failing{q}, "k", "a", []string{"mine"}, time.Minute); lost != nil || err != nil {
		t.Errorf("closing holder: %v %v", lost, err)
	}
}

func TestLoop(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	n := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		Loop(ctx, 0, func() {
			if n++; n == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Loop did not end with its context")
	}
	if n != 3 {
		t.Errorf("%d cycles", n)
	}
}
