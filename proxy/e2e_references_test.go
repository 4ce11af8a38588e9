package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/peers"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/task"
)

// librarianWorld is writ in front of the JS SDK agent that answers from the
// tasks a message references (agent.mjs --agent librarian): the SDK's
// DefaultRequestHandler loads every referenceTaskIds entry from its task
// store into the request context, and the agent tells what it was given.
func librarianWorld(t *testing.T, mutate func(*config.Config)) *proxytest.Harness {
	t.Helper()
	peers.EnsureNode(t)
	up := peers.StartJSAgent(t, "librarian", "")
	a := proxytest.SanctionsAgent(up)
	a.Name, a.PublicURL = "librarian", "self"
	return proxytest.New(t, []config.Agent{a}, mutate)
}

// refSend sends a 1.0 message with the text and references over binding
// ("jsonrpc" or "rest") and returns the HTTP status, the body, and the text
// of the task's final status message ("" when the answer is an error).
func refSend(h *proxytest.Harness, binding, tok, text string, refs []string) (int, []byte, string, string) {
	h.T.Helper()
	msg := map[string]any{"messageId": fmt.Sprintf("m-%d", refCounter.Add(1)), "role": "ROLE_USER",
		"parts": []any{map[string]any{"text": text}}}
	if refs != nil {
		msg["referenceTaskIds"] = refs
	}
	v10 := map[string]string{"A2A-Version": "1.0"}
	var (
		status int
		body   []byte
		result json.RawMessage
	)
	if binding == "rest" {
		resp, b := h.Do("POST", "/message:send", tok, map[string]any{"message": msg}, v10)
		status, body, result = resp.StatusCode, b, b
	} else {
		resp, b := h.Do("POST", "/", tok, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
			"params": map[string]any{"message": msg}}, v10)
		var env struct {
			Result json.RawMessage `json:"result"`
		}
		_ = json.Unmarshal(b, &env)
		status, body, result = resp.StatusCode, b, env.Result
	}
	var out struct {
		Task struct {
			ID     string `json:"id"`
			Status struct {
				Message struct {
					Parts []struct {
						Text string `json:"text"`
					} `json:"parts"`
				} `json:"message"`
			} `json:"status"`
		} `json:"task"`
	}
	_ = json.Unmarshal(result, &out)
	said := ""
	for _, p := range out.Task.Status.Message.Parts {
		said += p.Text
	}
	return status, body, out.Task.ID, said
}

var refCounter atomic.Int64

// sends counts the SendMessage calls the JS agent has received.
func sends(t *testing.T, h *proxytest.Harness) int {
	t.Helper()
	n := 0
	for _, o := range peers.JSAgentRequests(t, h.Cfg.Agents[0].Upstream) {
		if o.Method == "SendMessage" {
			n++
		}
	}
	return n
}

// TestReferencedTasksAcrossTenants: a message that references another
// tenant's task, a task writ never saw, or a mix with the caller's own, is
// answered TaskNotFound before the agent is asked, byte for byte the same for
// the victim's id as for an unknown one; references to the caller's own tasks
// reach the agent, which answers from them. Both A2A 1.0 bindings, in front
// of the real @a2a-js/sdk agent whose DefaultRequestHandler loads referenced
// tasks.
//
// Threat: a caller who knows another tenant's task id names it in
// referenceTaskIds; the agent's SDK loads that task (history, artifacts) into
// the context it answers from, so the answer carries the victim's data while
// GetTask on the same id says not found. Defence: ownership covers every id a
// request names: each referenced task must be one writ recorded for this
// caller, else the request is answered exactly like one naming a missing task.
func TestReferencedTasksAcrossTenants(t *testing.T) {
	h := librarianWorld(t, nil)
	attacker, victim := h.Token(proxytest.Investigator), h.Token(proxytest.RetailBot)
	for _, binding := range []string{"jsonrpc", "rest"} {
		t.Run(binding, func(t *testing.T) {
			st, body, victimTask, _ := refSend(h, binding, victim, "VICTIM-SECRET retail ledger zebra-quill", nil)
			if st != 200 || victimTask == "" {
				t.Fatalf("victim's send: %d %s", st, body)
			}
			st, body, ownTask, _ := refSend(h, binding, attacker, "OWN-NOTE wholesale", nil)
			if st != 200 || ownTask == "" {
				t.Fatalf("attacker's own send: %d %s", st, body)
			}
			// The agent does load references: the caller's own task comes back.
			st, body, _, said := refSend(h, binding, attacker, "what did I say?", []string{ownTask})
			if st != 200 || !strings.Contains(said, ownTask) || !strings.Contains(said, "OWN-NOTE") {
				t.Fatalf("own reference: %d %q %s", st, said, body)
			}

			unknown := "00000000-0000-4000-8000-" + fmt.Sprintf("%012d", refCounter.Add(1))
			before := sends(t, h)
			cases := map[string][]string{
				"victim":          {victimTask},
				"unknown":         {unknown},
				"own and victim":  {ownTask, victimTask},
				"own and unknown": {ownTask, unknown},
			}
			answers := map[string]string{}
			for name, refs := range cases {
				st, body, _, _ := refSend(h, binding, attacker, "summarise the referenced tasks", refs)
				if strings.Contains(string(body), "VICTIM-SECRET") || strings.Contains(string(body), "zebra-quill") {
					t.Fatalf("%s: the victim's task reached the attacker: %d %s", name, st, body)
				}
				if st != 200 && st != 404 || !strings.Contains(string(body), "TASK_NOT_FOUND") {
					t.Errorf("%s: want TaskNotFound, got %d %s", name, st, body)
				}
				answers[name] = strings.ReplaceAll(strings.ReplaceAll(string(body), victimTask, "ID"), unknown, "ID")
			}
			if answers["victim"] != answers["unknown"] || answers["own and victim"] != answers["own and unknown"] ||
				answers["victim"] != answers["own and victim"] {
				t.Errorf("a victim's id is answered unlike an unknown one:\n%v", answers)
			}
			if after := sends(t, h); after != before {
				t.Errorf("refused references reached the agent (%d → %d sends)", before, after)
			}
			// GetTask on the victim's id says not found too: one answer for one id.
			resp, got := h.Do("GET", "/tasks/"+victimTask, attacker, nil, map[string]string{"A2A-Version": "1.0"})
			if resp.StatusCode != 404 || strings.Contains(string(got), "VICTIM") {
				t.Errorf("GetTask of the victim's task: %d %s", resp.StatusCode, got)
			}
		})
	}
}

// TestReferencedTasksMigrationRule: under lifecycle.unknown_tasks: allow, a
// reference to a task writ never saw is still answered TaskNotFound (and the
// victim's task alike), the agent is not asked, and no record of the
// referenced id is made: a reference is never claimed.
//
// Threat: with the migration rule on, an attacker references a task that
// exists on the agent but predates writ (or any id), hoping it is let
// through as a follow-up on an unknown task is, and then claimed as theirs.
// Defence: references are outside the migration rule: a referenced task must
// be a recorded task of the caller's; nothing of a reference is recorded.
func TestReferencedTasksMigrationRule(t *testing.T) {
	h := librarianWorld(t, func(c *config.Config) { c.Lifecycle.UnknownTasks = "allow" })
	attacker, victim := h.Token(proxytest.Investigator), h.Token(proxytest.RetailBot)
	_, body, victimTask, _ := refSend(h, "jsonrpc", victim, "VICTIM-SECRET migrated ledger", nil)
	if victimTask == "" {
		t.Fatalf("victim's send: %s", body)
	}
	// The agent holds a task writ never recorded (as one from before writ).
	if err := h.Store.Delete(context.Background(), task.Ref{Agent: "librarian", ID: victimTask}); err != nil {
		t.Fatal(err)
	}
	before := sends(t, h)
	for _, ref := range []string{victimTask, "never-seen-anywhere"} {
		st, body, _, _ := refSend(h, "jsonrpc", attacker, "summarise", []string{ref})
		if strings.Contains(string(body), "VICTIM-SECRET") || !strings.Contains(string(body), "TASK_NOT_FOUND") {
			t.Fatalf("reference %s under the migration rule: %d %s", ref, st, body)
		}
		if _, ok, _ := h.Task(ref); ok {
			t.Errorf("the referenced task %s was recorded (claimed)", ref)
		}
	}
	if after := sends(t, h); after != before {
		t.Errorf("unknown references reached the agent (%d → %d sends)", before, after)
	}
}

// countingStore counts task reads.
type countingStore struct {
	task.Store
	gets atomic.Int64
}

func (s *countingStore) Get(ctx context.Context, ref task.Ref) (task.Record, bool, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, ref)
}

// TestReferencedTasksBoundAndCost: references to another caller's task and to
// unknown ids cost the same store reads (one per distinct id); more than
// limits.max_referenced_tasks are refused as invalid params before any read;
// a store that cannot answer refuses the request (503-class).
//
// Threat: a caller times references to tell another tenant's task ids from
// unknown ones, or sends one message naming thousands of ids so that one
// request costs thousands of store reads. Defence: every distinct reference
// is read once whatever it is, and their number is bounded (a message over
// the bound is refused unread); a store error fails closed.
func TestReferencedTasksBoundAndCost(t *testing.T) {
	up := proxytest.NewFakeAgent(t, nil)
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, func(c *config.Config) { c.Limits.MaxReferencedTasks = 3 })
	cs := &countingStore{Store: h.Store}
	h.Core.SetStore(cs)
	victim := task.Record{Agent: "sanctions-screening-agent", Task: task.Task{ID: "victim-task", State: task.Succeeded,
		Owner: task.Owner{AgentID: proxytest.RetailBot.Agent, Tenant: proxytest.RetailBot.Tenant}}}
	if err := h.Store.Create(context.Background(), victim); err != nil {
		t.Fatal(err)
	}
	tok := h.Token(proxytest.Investigator)
	send := func(refs ...string) proxytest.RPCAnswer {
		t.Helper()
		params := map[string]any{"message": map[string]any{"messageId": "m", "role": "ROLE_USER", "referenceTaskIds": refs,
			"parts": []any{map[string]any{"text": "x"}}}}
		_, a := h.RPC("/", tok, "1.0", "SendMessage", params)
		return a
	}
	cost := func(refs ...string) (int64, proxytest.RPCAnswer) {
		t.Helper()
		n := cs.gets.Load()
		a := send(refs...)
		return cs.gets.Load() - n, a
	}
	before := len(up.Requests())
	foreign, fa := cost("victim-task", "victim-task", "x")
	unknown, ua := cost("nobody-1", "nobody-1", "x")
	if foreign != unknown || foreign != 2 {
		t.Errorf("store reads: foreign %d, unknown %d (want 2 each: one per distinct id)", foreign, unknown)
	}
	if fa.Error == nil || ua.Error == nil || fa.Error.Code != -32001 ||
		strings.Replace(string(fa.Raw), "victim-task", "ID", 1) != strings.Replace(string(ua.Raw), "nobody-1", "ID", 1) {
		t.Errorf("foreign %s / unknown %s", fa.Raw, ua.Raw)
	}
	over, oa := cost("a", "b", "c", "d")
	if over != 0 || oa.Error == nil || oa.Error.Code != -32602 || !strings.Contains(oa.Error.Message, "at most 3") {
		t.Errorf("over the bound: %d reads, %s", over, oa.Raw)
	}
	if len(up.Requests()) != before {
		t.Error("a refused message reached the agent")
	}
	fs := &flakyStore{Store: h.Store}
	h.Core.SetStore(fs)
	fs.down.Store(true)
	if a := send("victim-task"); a.Error == nil || a.Error.Code != -32603 {
		t.Errorf("store down: %s", a.Raw)
	}
}
