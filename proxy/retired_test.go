package proxy_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/task"
)

// rememberingAgent is an A2A 1.0 agent that keeps its tasks: a send starts
// (or continues) a working task, in the context the message names, else a new
// one; a get answers the task, finished, with its result, as a real agent
// would for whoever asks.
func rememberingAgent(t *testing.T) *proxytest.FakeAgent {
	var n atomic.Int32
	return proxytest.NewFakeAgent(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var req struct {
			Method string `json:"method"`
			Params struct {
				ID      string `json:"id"`
				Message struct {
					ContextID string `json:"contextId"`
					TaskID    string `json:"taskId"`
				} `json:"message"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &req)
		w.Header().Set("Content-Type", "application/json")
		id, ctxID, state := req.Params.ID, "", "TASK_STATE_COMPLETED"
		if req.Method != "GetTask" {
			state = "TASK_STATE_WORKING"
			id, ctxID = req.Params.Message.TaskID, req.Params.Message.ContextID
			if id == "" {
				id = fmt.Sprintf("t-%d", n.Add(1))
			}
		}
		if ctxID == "" {
			ctxID = "c-" + strings.TrimPrefix(id, "t-")
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":%q,"contextId":%q,"status":{"state":%q},`+
			`"artifacts":[{"artifactId":"a","name":"screening","parts":[{"text":"result of %s: match on the OFAC list"}]}]}}}`, id, ctxID, state, id)
	})
}

var (
	floodA = proxytest.Caller{Agent: "retail-bot", User: "u-7", Tenant: "retail", Class: "internal", Scopes: "delegate"}
	floodB = proxytest.Caller{Agent: "retail-bot-2", User: "u-8", Tenant: "retail", Class: "internal", Scopes: "delegate"}
)

// TestSecurityRetiredTaskRollover — Threat: with lifecycle.unknown_tasks:
// allow and a small store, a flood of sends from two identities evicts the
// victim's record and then rolls its tombstone over (tombstones are
// bounded); the victim's task id is unknown again, so the attacker follows
// it up, the policy lets the unknown task through, and the attacker reads
// the victim's result and becomes the task's owner. Defence: every id a
// store records enters its retired-id set, which never forgets; a follow-up
// on an id writ held once and no longer holds is answered not found, and the
// claim itself (ClaimTask) is refused in the same step as it would record.
func TestSecurityRetiredTaskRollover(t *testing.T) {
	up := rememberingAgent(t)
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, func(c *config.Config) {
		c.Lifecycle.UnknownTasks = "allow"
	})
	h.Store = task.NewMemoryStore(task.MemoryLimits{MaxTasks: 3, MaxPerOwner: 100, MaxTombstones: 8})
	h.Core.SetStore(h.Store)
	if _, a := h.RPC("/", h.Token(proxytest.Investigator), "1.0", "SendMessage", proxytest.SendParams); a.Error != nil {
		t.Fatal(string(a.Raw))
	}
	tokA, tokB := h.Token(floodA), h.Token(floodB)
	for i := range 40 {
		tok := tokA
		if i%2 == 1 {
			tok = tokB
		}
		if _, a := h.RPC("/", tok, "1.0", "SendMessage", proxytest.SendParams); a.Error != nil {
			t.Fatal(string(a.Raw))
		}
	}
	victim := task.Ref{Agent: "sanctions-screening-agent", ID: "t-1"}
	if _, ok, _ := h.Store.Get(t.Context(), victim); ok {
		t.Fatal("the flood did not evict t-1; the test proves nothing")
	}
	if _, ok, _ := h.Store.Tombstone(t.Context(), victim); ok {
		t.Fatal("t-1's tombstone is still there; the test proves nothing")
	}
	before := len(up.Requests())
	status, a := h.RPC("/", tokA, "1.0", "GetTask", map[string]any{"id": "t-1"})
	if a.Error == nil || a.Error.Code != -32001 || strings.Contains(string(a.Raw), "OFAC") {
		t.Fatalf("the attacker's follow-up of the victim's task: %d %s", status, a.Raw)
	}
	if len(up.Requests()) != before {
		t.Error("the follow-up reached the agent")
	}
	if rec, ok, _ := h.Store.Get(t.Context(), victim); ok {
		t.Errorf("the attacker now owns t-1: %+v", rec.Task.Owner)
	}
	// Answered exactly like another caller's task, but for the id (t-41 is
	// the flood's last, floodB's).
	_, foreign := h.RPC("/", tokA, "1.0", "GetTask", map[string]any{"id": "t-41"})
	if strings.ReplaceAll(string(a.Raw), "t-1", "ID") != strings.ReplaceAll(string(foreign.Raw), "t-41", "ID") {
		t.Errorf("retired %s / foreign %s", a.Raw, foreign.Raw)
	}
	// The claim is checked where it is recorded, too: a retired id is not
	// claimed even when the lookup was passed.
	err := h.Store.ClaimTask(t.Context(), task.Record{Agent: victim.Agent,
		Task: task.Task{ID: victim.ID, State: task.Running, Owner: task.Owner{AgentID: floodA.Agent, Tenant: floodA.Tenant}}})
	if !errors.Is(err, task.ErrRetired) {
		t.Errorf("ClaimTask(t-1) = %v, want ErrRetired", err)
	}
}

// TestSecurityRetiredContextRollover — Threat: contexts (and ACP sessions)
// are bounded like tasks; two identities fill the store's contexts until the
// victim's (the oldest of owners holding as many) is evicted, and then send
// into the victim's context: the agent continues the victim's conversation
// with the attacker, and writ records the attacker as the context's owner,
// locking the victim out. Defence: an evicted or expired context is retired,
// never claimable again: a request naming it is answered not found, unless
// it continues a task the caller owns in that context.
func TestSecurityRetiredContextRollover(t *testing.T) {
	up := rememberingAgent(t)
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, nil)
	h.Store = task.NewMemoryStore(task.MemoryLimits{MaxTasks: 100, MaxContexts: 2, MaxPerOwner: 100})
	h.Core.SetStore(h.Store)
	inv := h.Token(proxytest.Investigator)
	if _, a := h.RPC("/", inv, "1.0", "SendMessage", proxytest.SendParams); a.Error != nil {
		t.Fatal(string(a.Raw))
	}
	tokA, tokB := h.Token(floodA), h.Token(floodB)
	for _, tok := range []string{tokA, tokB} {
		if _, a := h.RPC("/", tok, "1.0", "SendMessage", proxytest.SendParams); a.Error != nil {
			t.Fatal(string(a.Raw))
		}
	}
	c1 := task.Ref{Agent: "sanctions-screening-agent", ID: "c-1"}
	if _, ok, _ := h.Store.Context(t.Context(), c1); ok {
		t.Fatal("the flood did not evict c-1; the test proves nothing")
	}
	into := func(taskID string) map[string]any {
		m := map[string]any{"messageId": "m-2", "role": "ROLE_USER", "contextId": "c-1",
			"parts": []any{map[string]any{"text": "and the beneficial owners?"}}}
		if taskID != "" {
			m["taskId"] = taskID
		}
		return map[string]any{"message": m}
	}
	before := len(up.Requests())
	status, a := h.RPC("/", tokA, "1.0", "SendMessage", into(""))
	if a.Error == nil || a.Error.Code != -32001 {
		t.Fatalf("the attacker's message into the victim's context: %d %s", status, a.Raw)
	}
	if len(up.Requests()) != before {
		t.Error("the message reached the agent")
	}
	if o, ok, _ := h.Store.Context(t.Context(), c1); ok {
		t.Errorf("the context now belongs to %+v", o)
	}
	// The victim's own task in that context still vouches for the victim.
	if _, a := h.RPC("/", inv, "1.0", "SendMessage", into("t-1")); a.Error != nil {
		t.Errorf("the victim continuing its task in its context: %s", a.Raw)
	}
}
