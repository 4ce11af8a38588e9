package proxy_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/task"
)

// TestACPAgent drives writ in front of an ACP agent: runs in each mode, a denial
// in ACP's error shape, ownership, and the lifecycle law.
func TestACPAgent(t *testing.T) {
	up, err := seedagents.StartACP(seedagents.WithDelay(50 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	h := proxytest.New(t, []config.Agent{{Name: "kyc-refresh-agent", Route: "/acp", Upstream: up.URL, Protocol: "acp",
		Owner: "retail-onboarding", Tenants: []string{"retail"}, MaxDataClassification: task.Confidential,
		SecuritySchemes: []string{"oauth2"}, Skills: []task.Skill{{ID: "refresh", Tags: []string{"kyc"}}}}}, nil)
	retail, inv := h.Token(proxytest.RetailBot), h.Token(proxytest.Investigator)
	run := func(mode string) map[string]any {
		return map[string]any{"agent_name": "kyc-refresh-agent", "mode": mode,
			"input": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"content_type": "text/plain", "content": "Refresh KYC for customer 1042"}}}}}
	}
	type runAnswer struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
		Code   string `json:"code"`
		Data   struct {
			Denials []task.Denial `json:"denials"`
		} `json:"data"`
	}
	decode := func(body []byte) runAnswer {
		var a runAnswer
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatalf("not JSON: %s", body)
		}
		return a
	}

	resp, body := h.Do("POST", "/acp/runs", retail, run("sync"), nil)
	a := decode(body)
	if resp.StatusCode != 200 || a.Status != "completed" {
		t.Fatalf("sync run: %d %s", resp.StatusCode, body)
	}
	rec, ok, _ := h.Task(a.RunID)
	if !ok || rec.Task.State != task.Succeeded || rec.Task.Owner.AgentID != "retail-bot" || rec.Protocol != "acp" {
		t.Fatalf("record %+v", rec)
	}
	done := a.RunID

	// Its past events, read back: the run stays completed, and the statuses
	// it went through are history, not transitions (no protocol violation).
	resp, body = h.Do("GET", "/acp/runs/"+done+"/events", retail, nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "run.created") {
		t.Fatalf("run events: %d %s", resp.StatusCode, body)
	}
	if rec, _, _ := h.Task(done); rec.Task.State != task.Succeeded || h.Core.Stats().Violations.Load() != 0 {
		t.Fatalf("after reading its events: %s, %d violations", rec.Task.State, h.Core.Stats().Violations.Load())
	}

	// The investigator (wholesale, restricted data) is denied, in ACP's shape.
	resp, body = h.Do("POST", "/acp/runs", inv, run("sync"), nil)
	a = decode(body)
	codes := []string{}
	for _, d := range a.Data.Denials {
		codes = append(codes, d.Code)
	}
	if resp.StatusCode != 403 || a.Code == "" || !sameSet(codes, []string{"TENANT_NOT_PERMITTED", "CLASSIFICATION_EXCEEDED"}) {
		t.Fatalf("denied run: %d %s", resp.StatusCode, body)
	}

	// A streamed run passes through and ends completed in the store.
	resp, body = h.Do("POST", "/acp/runs", retail, run("stream"), nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "run.completed") {
		t.Fatalf("stream: %d %s", resp.StatusCode, body)
	}
	var streamed string
	for _, line := range strings.Split(string(body), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var ev struct {
				Run struct {
					RunID string `json:"run_id"`
				} `json:"run"`
			}
			json.Unmarshal([]byte(data), &ev)
			if ev.Run.RunID != "" {
				streamed = ev.Run.RunID
			}
		}
	}
	if rec, ok, _ := h.Task(streamed); !ok || rec.Task.State != task.Succeeded {
		t.Fatalf("streamed run record %+v", rec)
	}

	// An async run: the owner reads it; another caller gets not_found, exactly as
	// for a run that does not exist.
	resp, body = h.Do("POST", "/acp/runs", retail, run("async"), nil)
	async := decode(body).RunID
	if resp.StatusCode >= 300 || async == "" {
		t.Fatalf("async: %d %s", resp.StatusCode, body)
	}
	if resp, body = h.Do("GET", "/acp/runs/"+async, retail, nil, nil); resp.StatusCode != 200 {
		t.Fatalf("owner get: %d %s", resp.StatusCode, body)
	}
	other := h.Token(proxytest.Caller{Agent: "other-bot", Tenant: "retail", Class: "internal", Scopes: "delegate"})
	resp1, body1 := h.Do("GET", "/acp/runs/"+async, other, nil, nil)
	resp2, body2 := h.Do("GET", "/acp/runs/no-such-run", other, nil, nil)
	if resp1.StatusCode != 404 || resp2.StatusCode != 404 || decode(body1).Code != "not_found" ||
		strings.Replace(string(body1), async, "ID", 1) != strings.Replace(string(body2), "no-such-run", "ID", 1) {
		t.Fatalf("foreign get %d %s / missing %d %s", resp1.StatusCode, body1, resp2.StatusCode, body2)
	}

	// The manifest: forwarded to a caller who may see the agent, 404 to others.
	if resp, body = h.Do("GET", "/acp/agents/kyc-refresh-agent", retail, nil, nil); resp.StatusCode != 200 || !strings.Contains(string(body), "kyc-refresh-agent") {
		t.Errorf("manifest for retail: %d %s", resp.StatusCode, body)
	}
	if resp, _ = h.Do("GET", "/acp/agents/kyc-refresh-agent", inv, nil, nil); resp.StatusCode != 404 {
		t.Errorf("manifest for the investigator: %d", resp.StatusCode)
	}

	// Lifecycle law: cancel and resume of a finished run are answered by writ.
	before := len(up.Requests())
	resp, body = h.Do("POST", "/acp/runs/"+done+"/cancel", retail, nil, nil)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "task_not_cancelable") {
		t.Errorf("cancel of a finished run: %d %s", resp.StatusCode, body)
	}
	resp, body = h.Do("POST", "/acp/runs/"+done, retail, map[string]any{"await_resume": map[string]any{}, "mode": "sync"}, nil)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "task_terminal") {
		t.Errorf("resume of a finished run: %d %s", resp.StatusCode, body)
	}
	if len(up.Requests()) != before {
		t.Error("a refused follow-up reached the agent")
	}
}
