package proxy_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
)

// TestListShowsOwnTasksOnly: an agent that lists every task it has does not
// show one caller another caller's tasks through writ.
//
// Threat: a task listing shows other callers' tasks. Defence: writ filters
// list answers to the caller's own tasks.
func TestListShowsOwnTasksOnly(t *testing.T) {
	n := 0
	up := proxytest.NewFakeAgent(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(string(body), `"ListTasks"`) {
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{"tasks":[`+
				`{"id":"t-inv","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}},`+
				`{"id":"t-retail","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}},`+
				`{"id":"t-never-seen","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}],"totalSize":3,"pageSize":3}}`)
			return
		}
		n++
		id := map[int]string{1: "t-inv", 2: "t-retail"}[n]
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":%q,"contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}}}`, id)
	})
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, nil)
	inv, retail := h.Token(proxytest.Investigator), h.Token(proxytest.RetailBot)
	h.RPC("/", inv, "1.0", "SendMessage", proxytest.SendParams)
	h.RPC("/", retail, "1.0", "SendMessage", proxytest.SendParams)
	ids := func(tok string) ([]string, float64) {
		_, a := h.RPC("/", tok, "1.0", "ListTasks", map[string]any{})
		var r struct {
			Tasks []struct {
				ID string `json:"id"`
			} `json:"tasks"`
			TotalSize float64 `json:"totalSize"`
		}
		if err := json.Unmarshal(a.Result, &r); err != nil {
			t.Fatalf("list: %s", a.Raw)
		}
		var out []string
		for _, t := range r.Tasks {
			out = append(out, t.ID)
		}
		return out, r.TotalSize
	}
	if got, total := ids(inv); strings.Join(got, ",") != "t-inv" || total != 1 {
		t.Errorf("investigator lists %v (total %v)", got, total)
	}
	if got, _ := ids(retail); strings.Join(got, ",") != "t-retail" {
		t.Errorf("retail caller lists %v", got)
	}
}

// TestListDoesNotClaimTasks: under lifecycle.unknown_tasks: allow, a follow-up
// may record the task it names as the caller's. A list names no task: the tasks
// its answer reveals must not be recorded as owned by whoever listed them, or a
// caller claims every task writ has not seen yet (and its real owner is then
// refused as NOT_TASK_OWNER).
func TestListDoesNotClaimTasks(t *testing.T) {
	up := proxytest.NewFakeAgent(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{"tasks":[{"id":"t-migrated","contextId":"c-9","status":{"state":"TASK_STATE_WORKING"}}]}}`)
	})
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, func(c *config.Config) { c.Lifecycle.UnknownTasks = "allow" })
	if _, a := h.RPC("/", h.Token(proxytest.RetailBot), "1.0", "ListTasks", map[string]any{}); a.Error != nil {
		t.Fatalf("list: %s", a.Raw)
	}
	if rec, ok, _ := h.Task("t-migrated"); ok {
		t.Fatalf("a list recorded t-migrated as owned by %+v", rec.Task.Owner)
	}
}

// TestUnreadableListIsRefused: a listing writ cannot read (here a task in a
// state it does not know) is one it cannot filter, so it is refused rather
// than passed on; one with duplicate keys is passed on only as writ read it.
//
// Threat: an agent's listing, or an answer crafted to fail writ's parser
// while an SDK client reads it, reaches the caller unfiltered with other
// callers' tasks. Defence: an answer writ cannot read is replaced by the
// protocol's INVALID_AGENT_RESPONSE error.
func TestUnreadableListIsRefused(t *testing.T) {
	for name, list := range map[string]string{
		"unknown state": `{"jsonrpc":"2.0","id":1,"result":{"tasks":[{"id":"t-retail","contextId":"c","status":{"state":"TASK_STATE_BOGUS"}},` +
			`{"id":"t-retail2","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}]}}`,
		"duplicate key": `{"jsonrpc":"2.0","id":1,"result":{"tasks":[],"tasks":[` +
			`{"id":"t-retail","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			up := proxytest.NewFakeAgent(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, list)
			})
			h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, nil)
			_, a := h.RPC("/", h.Token(proxytest.Investigator), "1.0", "ListTasks", map[string]any{})
			if strings.Contains(string(a.Raw), "t-retail") {
				t.Fatalf("an unreadable listing reached the caller: %s", a.Raw)
			}
			// A listing writ could read (the first of duplicate keys) is
			// re-encoded from what it read; one it could not is refused.
			if name == "unknown state" && (a.Error == nil || !strings.Contains(string(a.Raw), "INVALID_AGENT_RESPONSE")) {
				t.Fatalf("not refused: %s", a.Raw)
			}
		})
	}
}
