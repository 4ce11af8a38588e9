package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/filestore"
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

// syncBuffer is a log sink safe for the goroutines a core logs from.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCallerCancellationIsNoStoreFault: a follow-up whose caller cancelled
// it while the file store was asked about its task is refused (fail
// closed), but is no store fault: not logged as an error, not counted in
// the store errors (it is counted as cancelled). A deadline that passed is
// still a fault (the store may have been too slow for it), and so is a
// store that fails with the caller still there.
//
// Threat: an operator cannot tell a store outage from clients that hang
// up: every cancelled check logs ERROR "lifecycle store unavailable" and
// counts in writ_store_errors_total, so a real outage hides among them and
// alerts on the counter fire on load. Defence: storeFault, the one place a
// store error of a request is classified, counts context.Canceled from the
// request's own context as a cancellation, and nothing else.
func TestCallerCancellationIsNoStoreFault(t *testing.T) {
	up := proxytest.NewFakeAgent(t, nil)
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, nil)
	file, err := filestore.Open(filepath.Join(t.TempDir(), "writ.db"), task.MemoryLimits{}, filestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { file.Close() })
	h.Core.SetStore(file)
	logs := &syncBuffer{}
	h.Core.SetLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	tok := h.Token(proxytest.Investigator)
	get := func(ctx context.Context) proxy.Outcome {
		hdr := http.Header{}
		hdr.Set("Authorization", "Bearer "+tok)
		hdr.Set("A2A-Version", "1.0")
		hdr.Set("Content-Type", "application/json")
		body := []byte(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t-1"}}`)
		return h.Core.Admit(ctx, proxy.Incoming{Method: "POST", Path: "/", Host: "writ.test", RemoteAddr: "127.0.0.1:1",
			Header: hdr, Body: body, Query: url.Values{}})
	}
	stats := h.Core.Stats()

	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	if out := get(cancelled); out.Kind != proxy.Refuse || out.Fault == nil || out.Fault.Kind != task.KindUnavailable {
		t.Fatalf("a cancelled follow-up: %s %+v", out.Kind, out.Fault)
	}
	if n := stats.StoreErrors.Load(); n != 0 {
		t.Errorf("a caller's cancellation counted as %d store errors", n)
	}
	if n := stats.Cancelled.Load(); n != 1 {
		t.Errorf("cancelled: %d, want 1", n)
	}
	if s := logs.String(); strings.Contains(s, "level=ERROR") || !strings.Contains(s, "cancelled") {
		t.Errorf("the log of a cancellation:\n%s", s)
	}

	expired, stop := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer stop()
	if out := get(expired); out.Kind != proxy.Refuse || out.Fault == nil || out.Fault.Kind != task.KindUnavailable {
		t.Fatalf("a follow-up past its deadline: %s %+v", out.Kind, out.Fault)
	}
	if n := stats.StoreErrors.Load(); n != 1 || !strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("a deadline that passed while the store answered: %d store errors, log:\n%s", n, logs.String())
	}
}

// readCounter counts every read of the store a lookup makes (a task, a
// context, a tombstone).
type readCounter struct {
	task.Store
	reads atomic.Int64
}

func (s *readCounter) Get(ctx context.Context, ref task.Ref) (task.Record, bool, error) {
	s.reads.Add(1)
	return s.Store.Get(ctx, ref)
}

func (s *readCounter) Context(ctx context.Context, ref task.Ref) (task.Owner, bool, error) {
	s.reads.Add(1)
	return s.Store.Context(ctx, ref)
}

func (s *readCounter) Tombstone(ctx context.Context, ref task.Ref) (task.Owner, bool, error) {
	s.reads.Add(1)
	return s.Store.Tombstone(ctx, ref)
}

// TestStoreReadsOnlyWhereNeeded: admitting a send that names no task, no
// context and no referenced task reads nothing of the lifecycle store; each
// id a request names is read (a follow-up's task, a context, a reference),
// so that ownership covers every one of them.
func TestStoreReadsOnlyWhereNeeded(t *testing.T) {
	up := proxytest.NewFakeAgent(t, nil)
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, nil)
	cs := &readCounter{Store: h.Store}
	h.Core.SetStore(cs)
	tok := h.Token(proxytest.Investigator)
	admit := func(method string, params map[string]any) proxy.Outcome {
		hdr := http.Header{}
		hdr.Set("Authorization", "Bearer "+tok)
		hdr.Set("A2A-Version", "1.0")
		hdr.Set("Content-Type", "application/json")
		body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
		if err != nil {
			t.Fatal(err)
		}
		return h.Core.Admit(t.Context(), proxy.Incoming{Method: "POST", Path: "/", Host: "writ.test", RemoteAddr: "127.0.0.1:1",
			Header: hdr, Body: body, Query: url.Values{}})
	}
	msg := func(extra map[string]any) map[string]any {
		m := map[string]any{"messageId": "m-1", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "screen"}}}
		for k, v := range extra {
			m[k] = v
		}
		return map[string]any{"message": m}
	}
	for _, c := range []struct {
		name   string
		method string
		params map[string]any
		reads  int64
	}{
		{"a send that names nothing", "SendMessage", msg(nil), 0},
		{"a send into a context", "SendMessage", msg(map[string]any{"contextId": "ctx-1"}), 1},
		{"a reply to a task", "SendMessage", msg(map[string]any{"taskId": "t-1"}), 1},
		{"a send that references a task", "SendMessage", msg(map[string]any{"referenceTaskIds": []string{"t-9"}}), 1},
		{"a get", "GetTask", map[string]any{"id": "t-1"}, 1},
		{"a cancel", "CancelTask", map[string]any{"id": "t-1"}, 1},
	} {
		before := cs.reads.Load()
		out := admit(c.method, c.params)
		if got := cs.reads.Load() - before; got < c.reads || (c.reads == 0 && got != 0) {
			t.Errorf("%s (%s): %d store reads, want %d", c.name, out.Kind, got, c.reads)
		}
	}
}
