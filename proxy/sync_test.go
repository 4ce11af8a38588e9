package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/task"
)

// deferringStore is a task.Deferring over a real store that records, in
// order, the writes made through its Deferreds and their Syncs, and can fail
// the Syncs (a commit that did not reach the disk).
type deferringStore struct {
	task.Store
	fail atomic.Bool
	mu   sync.Mutex
	log  []string
}

func (s *deferringStore) note(what string) {
	s.mu.Lock()
	s.log = append(s.log, what)
	s.mu.Unlock()
}

func (s *deferringStore) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

func (s *deferringStore) Defer() task.Deferred { return &deferred{Store: s.Store, s: s} }

type deferred struct {
	task.Store
	s *deferringStore
}

func (d *deferred) Create(ctx context.Context, r task.Record) error {
	d.s.note("create " + r.Task.ID)
	return d.Store.Create(ctx, r)
}

func (d *deferred) Apply(ctx context.Context, ref task.Ref, ev task.Event) (task.Record, task.Record, error) {
	d.s.note("apply " + ref.ID)
	return d.Store.Apply(ctx, ref, ev)
}

func (d *deferred) Sync(context.Context) error {
	d.s.note("sync")
	if d.s.fail.Load() {
		return fmt.Errorf("the commit did not reach the disk: %w", task.ErrUnavailable)
	}
	return nil
}

// TestAnswerWaitsForSync: the writes an answer makes go through a Deferred
// and are synced before the answer is passed on; when the sync fails, the
// answer that would reveal the task is refused (503 UNAVAILABLE, counted),
// and a stream ends with an error event instead of the event that revealed
// it.
//
// Threat: the store applies what an answer reveals (a new task and its
// owner) before that is durable; if the answer reached the caller first, a
// crash would lose the owner of a task the caller holds, and the id would be
// unknown to writ — under lifecycle.unknown_tasks: allow, anyone's to claim.
// Defence: Plan.Answer and Relay.Next call Deferred.Sync after observing
// and before returning the answer; a failed Sync fails the answer closed.
func TestAnswerWaitsForSync(t *testing.T) {
	up := proxytest.NewFakeAgent(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if strings.Contains(string(body), "SendStreamingMessage") {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, `data: {"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-s","contextId":"c-s","status":{"state":"TASK_STATE_WORKING"}}}}`+"\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_COMPLETED"}}}}`)
	})
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, nil)
	ds := &deferringStore{Store: h.Store}
	h.Core.SetStore(ds)
	tok := h.Token(proxytest.Investigator)

	status, a := h.RPC("/", tok, "1.0", "SendMessage", proxytest.SendParams)
	if status != 200 || a.Error != nil {
		t.Fatalf("send: %d %s", status, a.Raw)
	}
	calls := ds.calls()
	if i := slices.Index(calls, "create t-1"); i < 0 || !slices.Contains(calls[i:], "sync") {
		t.Fatalf("the answer's writes were not synced before it was passed on: %v", calls)
	}

	ds.fail.Store(true)
	errs := h.Core.StoreErrors()
	status, a = h.RPC("/", tok, "1.0", "SendMessage", proxytest.SendParams)
	if status != 503 || a.Error == nil || !slices.Contains(a.Reasons(), "UNAVAILABLE") || a.Result != nil ||
		strings.Contains(string(a.Raw), "TASK_STATE_COMPLETED") {
		t.Fatalf("send whose sync failed: %d %s", status, a.Raw)
	}
	if h.Core.StoreErrors() == errs {
		t.Error("the failed sync was not counted as a store error")
	}
	resp, body := h.Do("POST", "/", tok, map[string]any{"jsonrpc": "2.0", "id": 1,
		"method": "SendStreamingMessage", "params": proxytest.SendParams}, map[string]string{"A2A-Version": "1.0"})
	if resp.StatusCode != 200 || strings.Contains(string(body), "TASK_STATE_WORKING") || !strings.Contains(string(body), `"error"`) {
		t.Fatalf("stream whose sync failed: %d %s", resp.StatusCode, body)
	}
}
