package proxy_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/task"
)

// flakyStore is a store whose backend can be taken away: every call fails
// with task.ErrUnavailable while down.
type flakyStore struct {
	task.Store
	down atomic.Bool
}

func (s *flakyStore) err() error {
	if s.down.Load() {
		return fmt.Errorf("backend gone: %w", task.ErrUnavailable)
	}
	return nil
}

func (s *flakyStore) Get(ctx context.Context, ref task.Ref) (task.Record, bool, error) {
	if err := s.err(); err != nil {
		return task.Record{}, false, err
	}
	return s.Store.Get(ctx, ref)
}

func (s *flakyStore) Create(ctx context.Context, r task.Record) error {
	if err := s.err(); err != nil {
		return err
	}
	return s.Store.Create(ctx, r)
}

func (s *flakyStore) Apply(ctx context.Context, ref task.Ref, ev task.Event) (task.Record, task.Record, error) {
	if err := s.err(); err != nil {
		return task.Record{}, task.Record{}, err
	}
	return s.Store.Apply(ctx, ref, ev)
}

func (s *flakyStore) Context(ctx context.Context, ref task.Ref) (task.Owner, bool, error) {
	if err := s.err(); err != nil {
		return task.Owner{}, false, err
	}
	return s.Store.Context(ctx, ref)
}

// TestStoreDownFailsClosed: with the lifecycle store unreachable, a new send
// (whose task writ could not record) and a follow-up (whose owner writ cannot
// check) are answered with a 503-class protocol error, never the agent's
// answer; when the store is back, the same requests go through, with no
// restart.
func TestStoreDownFailsClosed(t *testing.T) {
	up := newFakeAgent(t, nil)
	h := newHarness(t, []config.Agent{sanctionsAgent(up.srv.URL)}, nil)
	fs := &flakyStore{Store: h.store}
	h.px.SetStore(fs)
	tok := h.token(investigator)

	fs.down.Store(true)
	status, a := h.rpc("/", tok, "1.0", "SendMessage", sendParams)
	if status != 503 || a.Error == nil || a.Error.Code != -32603 || !slices.Contains(a.reasons(), "UNAVAILABLE") || a.Result != nil {
		t.Fatalf("send with the store down: %d %s", status, a.raw)
	}
	before := len(up.requests())
	status, a = h.rpc("/", tok, "1.0", "GetTask", map[string]any{"id": "t-1"})
	if status != 503 || a.Error == nil || !slices.Contains(a.reasons(), "UNAVAILABLE") {
		t.Fatalf("follow-up with the store down: %d %s", status, a.raw)
	}
	if len(up.requests()) != before {
		t.Error("a follow-up writ could not check reached the agent")
	}
	if n := h.px.StoreErrors(); n < 2 {
		t.Errorf("store errors counted: %d", n)
	}

	fs.down.Store(false)
	if _, a := h.rpc("/", tok, "1.0", "SendMessage", sendParams); a.Error != nil {
		t.Fatalf("send after the store came back: %s", a.raw)
	}
	if _, a := h.rpc("/", tok, "1.0", "GetTask", map[string]any{"id": "t-1"}); a.Error != nil {
		t.Fatalf("follow-up after the store came back: %s", a.raw)
	}
}
