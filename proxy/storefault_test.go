package proxy_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
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
	up := proxytest.NewFakeAgent(t, nil)
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, nil)
	fs := &flakyStore{Store: h.Store}
	h.Core.SetStore(fs)
	tok := h.Token(proxytest.Investigator)

	fs.down.Store(true)
	status, a := h.RPC("/", tok, "1.0", "SendMessage", proxytest.SendParams)
	if status != 503 || a.Error == nil || a.Error.Code != -32603 || !slices.Contains(a.Reasons(), "UNAVAILABLE") || a.Result != nil {
		t.Fatalf("send with the store down: %d %s", status, a.Raw)
	}
	before := len(up.Requests())
	status, a = h.RPC("/", tok, "1.0", "GetTask", map[string]any{"id": "t-1"})
	if status != 503 || a.Error == nil || !slices.Contains(a.Reasons(), "UNAVAILABLE") {
		t.Fatalf("follow-up with the store down: %d %s", status, a.Raw)
	}
	if len(up.Requests()) != before {
		t.Error("a follow-up writ could not check reached the agent")
	}
	if n := h.Core.StoreErrors(); n < 2 {
		t.Errorf("store errors counted: %d", n)
	}

	fs.down.Store(false)
	if _, a := h.RPC("/", tok, "1.0", "SendMessage", proxytest.SendParams); a.Error != nil {
		t.Fatalf("send after the store came back: %s", a.Raw)
	}
	if _, a := h.RPC("/", tok, "1.0", "GetTask", map[string]any{"id": "t-1"}); a.Error != nil {
		t.Fatalf("follow-up after the store came back: %s", a.Raw)
	}
}
