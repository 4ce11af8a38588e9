package proxy

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/proxy/writheader"
	"github.com/writ-authz/writ/task"
)

// TestFollowSpecKeepsNoCredentials: what is kept of a followed task names
// the agent, the task, the protocol, the caller as Writ-Caller tells it and
// the decision, with the protocol's own headers only: never the caller's
// Authorization, cookies or anything else it sent. Rebuilt, it asks the agent
// with the same Writ-Caller document.
func TestFollowSpecKeepsNoCredentials(t *testing.T) {
	h := http.Header{}
	h.Set("Authorization", "Bearer eyJ-secret")
	h.Set("Cookie", "session=secret")
	h.Set("X-Api-Key", "secret")
	h.Set("A2A-Version", "1.0")
	h.Set("X-A2A-Extensions", "https://ext.example/v1")
	caller := identity.Caller{Authenticated: true, Method: "jwt", Issuer: "https://idp", AgentID: "alice-agent",
		UserID: "u1", Tenant: "wholesale", Chain: []string{"orchestrator"}, Scopes: []string{"delegate"},
		Claims: map[string]any{"secret_claim": "secret"}}
	a := &config.Agent{Name: "slow", Route: "/slow"}
	edges, err := adapters.NewRoute("a2a", "/")
	if err != nil {
		t.Fatal(err)
	}
	rt := &route{agent: a, edges: edges}
	x := &exchange{rt: rt, edge: edges.For("/"), inc: Incoming{Header: h}, in: wire.Inbound{Path: "/"},
		req:    task.Request{Operation: task.OpSend, Protocol: task.Protocol{Name: "a2a", Version: "1.0", Binding: task.BindingJSONRPC}, Tenant: "t"},
		caller: caller, dec: authz.Decision{ID: "dec-1"},
		input: &authz.Input{Task: authz.InputTask{Classification: "restricted"}}}
	raw, err := json.Marshal((&Plan{x: x}).FollowSpec("task-1"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "secret") {
		t.Fatalf("a credential is kept: %s", raw)
	}
	var s FollowSpec
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	if s.Agent != "slow" || s.TaskID != "task-1" || s.DecisionID != "dec-1" || s.Tenant != "t" || s.Classification != "restricted" ||
		s.Protocol.Version != "1.0" || len(s.Header) != 2 || s.Header.Get("A2A-Version") != "1.0" {
		t.Fatalf("spec %+v", s)
	}
	c := &Core{byName: map[string]*route{a.Name: rt}}
	yp, err := c.Resume(s)
	if err != nil {
		t.Fatal(err)
	}
	y := yp.x
	if writheader.CallerValue(y.caller) != writheader.CallerValue(caller) || y.dec.ID != "dec-1" || y.inc.Header.Get("Authorization") != "" ||
		y.inc.Header.Get("X-A2A-Extensions") != "https://ext.example/v1" || y.req.Protocol != s.Protocol {
		t.Fatalf("rebuilt exchange %+v", y)
	}
	if _, err := c.Resume(FollowSpec{V: 1, Agent: "gone"}); err == nil {
		t.Fatal("an agent no longer configured was resumed")
	}
}
