package proxy_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/peers"
	"github.com/writ-authz/writ/internal/proxytest"
)

// TestTenantQueryThroughJSRest: the tenant query parameter, which the JS
// SDK's HTTP+JSON handler hands its request handler for reads (get, cancel,
// list), is decided on like the tenant of the path or body: another tenant's
// is denied, the caller's own goes through as the one tenant decided, places
// that disagree, a repeated or a malformed query are refused, and none of the
// refused requests reaches the agent.
//
// Threat: a caller of tenant wholesale sends GET /tasks?tenant=retail (or
// /tasks/{own}?tenant=retail, cancel alike): the decision saw no tenant, the
// agent acts in tenant retail. A repeated parameter (an array to Express) or
// a bad escape (dropped by Go's parser, decoded by Node's) makes writ and the
// agent read two tenants. Defence: writ reads every place an SDK reads a
// tenant from, refuses disagreement, decides on the one value, and decides
// on the raw query (malformed or repeated parameters are refused).
func TestTenantQueryThroughJSRest(t *testing.T) {
	peers.EnsureNode(t)
	up := peers.StartJSAgent(t, "sanctions", "")
	a := proxytest.SanctionsAgent(up)
	a.PublicURL = "self"
	h := proxytest.New(t, []config.Agent{a}, nil)
	tok := h.Token(proxytest.Investigator) // tenant wholesale
	v10 := map[string]string{"A2A-Version": "1.0"}
	resp, body := h.Do("POST", "/message:send", tok, map[string]any{"message": map[string]any{
		"messageId": "m-t", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "Screen Acme Trading FZE"}}}}, v10)
	var sent struct {
		Task struct {
			ID string `json:"id"`
		} `json:"task"`
	}
	if json.Unmarshal(body, &sent); resp.StatusCode != 200 || sent.Task.ID == "" {
		t.Fatalf("send: %d %s", resp.StatusCode, body)
	}
	own := sent.Task.ID
	seen := func() int { return len(peers.JSAgentRequests(t, up)) }
	for _, c := range []struct {
		name, method, path string
		status             int
		code               string
	}{
		{"get, another tenant", "GET", "/tasks/" + own + "?tenant=retail", 403, "TENANT_NOT_PERMITTED"},
		{"cancel, another tenant", "POST", "/tasks/" + own + ":cancel?tenant=retail", 403, "TENANT_NOT_PERMITTED"},
		{"list, another tenant", "GET", "/tasks?tenant=retail", 403, "TENANT_NOT_PERMITTED"},
		{"path and query disagree", "GET", "/wholesale/tasks/" + own + "?tenant=retail", 400, "INVALID_PARAMS"},
		{"repeated", "GET", "/tasks/" + own + "?tenant=wholesale&tenant=retail", 400, "INVALID_PARAMS"},
		{"malformed", "GET", "/tasks/" + own + "?tenant=retail%", 400, "INVALID_PARAMS"},
		{"two history spellings", "GET", "/tasks/" + own + "?historyLength=1&history_length=5", 400, "INVALID_PARAMS"},
	} {
		before := seen()
		resp, body := h.Do(c.method, c.path, tok, nil, v10)
		if resp.StatusCode != c.status || !strings.Contains(string(body), c.code) {
			t.Errorf("%s: %d %s (want %d %s)", c.name, resp.StatusCode, body, c.status, c.code)
		}
		if after := seen(); after != before {
			var got []string
			for _, o := range peers.JSAgentRequests(t, up)[before:] {
				got = append(got, o.Method+" tenant="+o.Tenant)
			}
			t.Errorf("%s reached the agent: %v", c.name, got)
		}
	}
	// The caller's own tenant, named in the query, is the tenant decided and
	// the tenant the agent is handed.
	before := seen()
	resp, body = h.Do("GET", "/tasks/"+own+"?tenant=wholesale", tok, nil, v10)
	if resp.StatusCode != 200 {
		t.Fatalf("get in the caller's own tenant: %d %s", resp.StatusCode, body)
	}
	if rs := peers.JSAgentRequests(t, up)[before:]; len(rs) != 1 || rs[0].Tenant != "wholesale" || rs[0].Method != "GetTask" {
		t.Errorf("the agent got %+v", rs)
	}
}
