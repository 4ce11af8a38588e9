package proxy

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/task"
)

type recordingHooks struct {
	mu        sync.Mutex
	decisions []DecisionEvent
	requests  []RequestEvent
	tasks     []TaskEvent
}

func (r *recordingHooks) Decided(e DecisionEvent) {
	r.mu.Lock()
	r.decisions = append(r.decisions, e)
	r.mu.Unlock()
}
func (r *recordingHooks) Served(e RequestEvent) {
	r.mu.Lock()
	r.requests = append(r.requests, e)
	r.mu.Unlock()
}
func (r *recordingHooks) TaskChanged(e TaskEvent) {
	r.mu.Lock()
	r.tasks = append(r.tasks, e)
	r.mu.Unlock()
}

// TestHooks: every decision, request and lifecycle event reaches the hooks, with
// the ids that tie them together.
func TestHooks(t *testing.T) {
	n := 0
	up := newFakeAgent(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		n++
		state := "TASK_STATE_WORKING"
		if n > 1 {
			state = "TASK_STATE_COMPLETED"
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-h","contextId":"c-h","status":{"state":%q},"artifacts":[{"artifactId":"a","name":"report","parts":[{"text":"x"}]}]}}}`, state)
	})
	rec := &recordingHooks{}
	h := newHarness(t, []config.Agent{sanctionsAgent(up.srv.URL)}, nil)
	h.px.hooks = MultiHooks{rec, nopHooks{}}
	tok := h.token(investigator)
	h.rpc("/", tok, "1.0", "SendMessage", sendParams)
	h.rpc("/", tok, "1.0", "GetTask", map[string]any{"id": "t-h"})
	h.rpc("/", "", "1.0", "SendMessage", sendParams)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.decisions) != 3 || !rec.decisions[0].Allow || rec.decisions[2].Allow ||
		rec.decisions[0].Caller.AgentID != "payments-investigator" || rec.decisions[0].Revision == "" || rec.decisions[0].Mode != ModeSidecar {
		t.Fatalf("decisions %+v", rec.decisions)
	}
	if d := rec.decisions[2]; len(d.Denials) == 0 || d.Denials[len(d.Denials)-1].Code == "" {
		t.Fatalf("denied decision %+v", d)
	}
	if len(rec.requests) != 3 || rec.requests[0].Status != 200 || rec.requests[2].Status != 401 ||
		rec.requests[0].Route != "sanctions-screening-agent" || rec.requests[0].Operation != task.OpSend || rec.requests[0].Upstream == 0 {
		t.Fatalf("requests %+v", rec.requests)
	}
	var kinds []string
	for _, e := range rec.tasks {
		kinds = append(kinds, e.Kind)
		if e.TaskID != "t-h" || e.ContextID != "c-h" {
			t.Errorf("task event %+v", e)
		}
	}
	want := []string{TaskCreated, TaskArtifact, TaskStateChanged} // created with its artifact, then completed
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("task events %v, want %v", kinds, want)
	}
	if last := rec.tasks[2]; last.From != task.Running || last.To != task.Succeeded {
		t.Fatalf("state change %+v", last)
	}
}
