package proxy_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/task"
)

// recordingSink keeps every event the core emits.
type recordingSink struct {
	mu        sync.Mutex
	decisions []events.Decision
	requests  []events.Request
	tasks     []events.Task
	pushes    []events.Push
}

func (r *recordingSink) Decided(e events.Decision) {
	r.mu.Lock()
	r.decisions = append(r.decisions, e)
	r.mu.Unlock()
}
func (r *recordingSink) Served(e events.Request) {
	r.mu.Lock()
	r.requests = append(r.requests, e)
	r.mu.Unlock()
}
func (r *recordingSink) TaskChanged(e events.Task) {
	r.mu.Lock()
	r.tasks = append(r.tasks, e)
	r.mu.Unlock()
}
func (r *recordingSink) Pushed(e events.Push) {
	r.mu.Lock()
	r.pushes = append(r.pushes, e)
	r.mu.Unlock()
}

// TestEvents: every decision, request and lifecycle event reaches the sinks,
// with the ids that tie them together.
func TestEvents(t *testing.T) {
	n := 0
	up := proxytest.NewFakeAgent(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		n++
		state := "TASK_STATE_WORKING"
		if n > 1 {
			state = "TASK_STATE_COMPLETED"
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-h","contextId":"c-h","status":{"state":%q},"artifacts":[{"artifactId":"a","name":"report","parts":[{"text":"x"}]}]}}}`, state)
	})
	rec := &recordingSink{}
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, nil)
	h.Bus.Subscribe(rec)
	tok := h.Token(proxytest.Investigator)
	h.RPC("/", tok, "1.0", "SendMessage", proxytest.SendParams)
	h.RPC("/", tok, "1.0", "GetTask", map[string]any{"id": "t-h"})
	h.RPC("/", "", "1.0", "SendMessage", proxytest.SendParams)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.decisions) != 3 || !rec.decisions[0].Allow || rec.decisions[2].Allow ||
		rec.decisions[0].Caller.AgentID != "payments-investigator" || rec.decisions[0].Revision == "" || rec.decisions[0].Mode != events.ModeSidecar {
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
	want := []string{events.TaskCreated, events.TaskArtifact, events.TaskStateChanged} // created with its artifact, then completed
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("task events %v, want %v", kinds, want)
	}
	if last := rec.tasks[2]; last.From != task.Running || last.To != task.Succeeded {
		t.Fatalf("state change %+v", last)
	}
	// The admitting decision and the task it created are linked both ways.
	if created := rec.tasks[0]; created.DecisionID == "" || created.DecisionID != rec.decisions[0].ID {
		t.Fatalf("task_created has decision %q, the admitting decision is %q", created.DecisionID, rec.decisions[0].ID)
	}
}

// TestDecisionCarriesChainID: the chain id of a delegation (the token's txn
// claim) reaches the decision event, so every hop's decision log names it.
func TestDecisionCarriesChainID(t *testing.T) {
	up := proxytest.NewFakeAgent(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-c","contextId":"c-c","status":{"state":"TASK_STATE_WORKING"}}}}`)
	})
	rec := &recordingSink{}
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, nil)
	h.Bus.Subscribe(rec)
	claims := h.IDP.Claims(devidp.Caller{Agent: proxytest.Investigator.Agent, User: proxytest.Investigator.User, Tenant: proxytest.Investigator.Tenant,
		Classification: proxytest.Investigator.Class, Scope: proxytest.Investigator.Scopes, Chain: proxytest.Investigator.Chain})
	claims["txn"] = "q3Zr8sXyT1m0cV2bNf7LkA"
	tok, err := h.IDP.Sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	h.RPC("/", tok, "1.0", "SendMessage", proxytest.SendParams)
	h.RPC("/", h.Token(proxytest.Investigator), "1.0", "SendMessage", proxytest.SendParams)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.decisions) != 2 || rec.decisions[0].ChainID != "q3Zr8sXyT1m0cV2bNf7LkA" || rec.decisions[1].ChainID != "" ||
		!rec.decisions[0].Allow || rec.decisions[0].Direction != "" {
		t.Fatalf("decisions %+v", rec.decisions)
	}
}
