package proxy

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/writ-authz/writ/config"
)

// TestListDoesNotClaimTasks: under lifecycle.unknown_tasks: allow, a follow-up
// may record the task it names as the caller's. A list names no task: the tasks
// its answer reveals must not be recorded as owned by whoever listed them, or a
// caller claims every task writ has not seen yet (and its real owner is then
// refused as NOT_TASK_OWNER).
func TestListDoesNotClaimTasks(t *testing.T) {
	up := newFakeAgent(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{"tasks":[{"id":"t-migrated","contextId":"c-9","status":{"state":"TASK_STATE_WORKING"}}]}}`)
	})
	h := newHarness(t, []config.Agent{sanctionsAgent(up.srv.URL)}, func(c *config.Config) { c.Lifecycle.UnknownTasks = "allow" })
	if _, a := h.rpc("/", h.token(retailBot), "1.0", "ListTasks", map[string]any{}); a.Error != nil {
		t.Fatalf("list: %s", a.raw)
	}
	if rec, ok, _ := h.task("t-migrated"); ok {
		t.Fatalf("a list recorded t-migrated as owned by %+v", rec.Task.Owner)
	}
}
