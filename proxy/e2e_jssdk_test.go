package proxy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/peers"
	"github.com/writ-authz/writ/task"
)

// jsWorld is writ in front of @a2a-js/sdk 1.3.0 agents (A2A 1.0, JSON-RPC and
// HTTP+JSON), with writ's public URL in the cards it serves.
func jsWorld(t *testing.T) *harness {
	t.Helper()
	peers.EnsureNode(t)
	sanctions := peers.StartJSAgent(t, "sanctions", "")
	clarifier := peers.StartJSAgent(t, "clarifier", "")
	slow := peers.StartJSAgent(t, "slow", "")
	like := func(name, route, up string) config.Agent {
		a := sanctionsAgent(up)
		a.Name, a.Route, a.PublicURL = name, route, "self"
		return a
	}
	return newHarness(t, []config.Agent{like("sanctions-screening-agent", "/", sanctions),
		like("sanctions-clarifier", "/clarifier", clarifier), like("sanctions-slow", "/slow", slow)}, nil)
}

// jsClient runs the real JS SDK client through writ.
func jsClient(t *testing.T, h *harness, route, token, scenario, binding string) []map[string]any {
	t.Helper()
	// A trailing slash: the JS SDK resolves the card path relative to the URL.
	lines, err := peers.RunJSClient(t, "--url", strings.TrimSuffix(h.srv.URL+route, "/")+"/", "--token", token,
		"--scenario", scenario, "--binding", binding)
	if err != nil {
		t.Fatalf("%s %s: %v (%v)", scenario, binding, err, lines)
	}
	return lines
}

func states(lines []map[string]any) []string {
	var out []string
	for _, l := range lines {
		if s, ok := l["state"].(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// TestJSClientAndAgentThroughWrit: the real JS SDK client, pointed at writ,
// completes delegations to real JS SDK agents unchanged, over both bindings.
func TestJSClientAndAgentThroughWrit(t *testing.T) {
	h := jsWorld(t)
	tok := h.token(investigator)
	for _, binding := range []string{"jsonrpc", "rest"} {
		t.Run(binding, func(t *testing.T) {
			lines := jsClient(t, h, "/", tok, "send", binding)
			st := states(lines)
			if len(st) == 0 || st[len(st)-1] != "completed" {
				t.Fatalf("send: %v", lines)
			}
			id, _ := lines[len(lines)-1]["taskId"].(string)
			if rec, ok, _ := h.store.Get(context.Background(), id); !ok || rec.Task.State != task.Succeeded || rec.Version != "1.0" {
				t.Fatalf("record of %s: %+v", id, rec)
			}
			st = states(jsClient(t, h, "/", tok, "stream", binding))
			if strings.Join(st, ",") != "submitted,working,completed" && (len(st) < 2 || st[len(st)-1] != "completed") {
				t.Fatalf("stream states %v", st)
			}
			st = states(jsClient(t, h, "/clarifier", tok, "clarify", binding))
			if len(st) < 2 || !contains(st, "input-required") || st[len(st)-1] != "completed" {
				t.Fatalf("clarify states %v", st)
			}
			lines = jsClient(t, h, "/slow", tok, "cancel", binding)
			var again map[string]any
			for _, l := range lines {
				if l["op"] == "cancel-again" {
					again = l
				}
			}
			errObj, _ := again["error"].(map[string]any)
			if errObj == nil || errObj["code"] != float64(-32002) {
				t.Fatalf("cancel again through writ: %v", lines)
			}
		})
	}
}

// TestJSClientDenied: a denial reaches the JS client as an A2A error it decodes.
func TestJSClientDenied(t *testing.T) {
	h := jsWorld(t)
	outsider := h.token(caller{agent: "corp-bot", tenant: "corporate", class: "internal", scopes: "delegate"})
	// The card itself is hidden from a caller of another tenant (404), so the
	// client stops there.
	lines, _ := peers.RunJSClient(t, "--url", h.srv.URL, "--token", outsider, "--scenario", "send")
	found := false
	for _, l := range lines {
		if e, ok := l["error"].(map[string]any); ok {
			found = true
			if hs, _ := e["httpStatus"].(float64); hs != 404 {
				t.Errorf("outsider: %v", l)
			}
		}
	}
	if !found {
		t.Fatalf("outsider got no error: %v", lines)
	}
	// With the card cached by an allowed caller, raw 1.0 requests show the denial
	// shapes both bindings carry.
	resp, body := h.do("POST", "/message:send", outsider, map[string]any{"message": map[string]any{
		"messageId": "m", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "x"}}}}, map[string]string{"A2A-Version": "1.0"})
	var rest struct {
		Error struct {
			Code    int    `json:"code"`
			Status  string `json:"status"`
			Details []struct {
				Reason string `json:"reason"`
			} `json:"details"`
		} `json:"error"`
	}
	json.Unmarshal(body, &rest)
	if resp.StatusCode != 403 || rest.Error.Status != "PERMISSION_DENIED" || len(rest.Error.Details) < 2 ||
		rest.Error.Details[1].Reason != "TENANT_NOT_PERMITTED" {
		t.Fatalf("REST denial: %d %s", resp.StatusCode, body)
	}
}
