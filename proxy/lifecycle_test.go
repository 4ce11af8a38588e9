package proxy_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/task"
)

// TestIllegalTransitionKeepsState: an upstream that reports completed → working
// keeps completed in the store, and the violation is counted.
func TestIllegalTransitionKeepsState(t *testing.T) {
	calls := 0
	up := proxytest.NewFakeAgent(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		calls++
		state := "TASK_STATE_COMPLETED"
		if calls > 1 {
			state = "TASK_STATE_WORKING" // a finished task cannot work again
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"id":"t-7","contextId":"c","status":{"state":%q}}}`, state)
	})
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, nil)
	tok := h.Token(proxytest.Investigator)
	h.RPC("/", tok, "1.0", "SendMessage", proxytest.SendParams)
	if _, a := h.RPC("/", tok, "1.0", "GetTask", map[string]any{"id": "t-7"}); a.Error != nil {
		t.Fatalf("get: %s", a.Raw)
	}
	rec, ok, _ := h.Task("t-7")
	if !ok || rec.Task.State != task.Succeeded || rec.Violations != 1 || h.Core.Stats().Violations.Load() != 1 {
		t.Fatalf("record %+v ok=%v violations=%d", rec, ok, h.Core.Stats().Violations.Load())
	}
}

// TestStreamIdleTimeout: a stream silent for longer than the idle timeout is
// closed by writ.
func TestStreamIdleTimeout(t *testing.T) {
	up := proxytest.NewFakeAgent(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-8","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}}`+"\n\n")
		w.(http.Flusher).Flush()
		select { // silent until writ gives up on it
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, func(c *config.Config) { c.Limits.StreamIdleTimeout = 300 * time.Millisecond })
	start := time.Now()
	resp, body := h.Do("POST", "/", h.Token(proxytest.Investigator), map[string]any{"jsonrpc": "2.0", "id": 1,
		"method": "SendStreamingMessage", "params": proxytest.SendParams}, map[string]string{"A2A-Version": "1.0"})
	if resp.StatusCode != 200 || !strings.Contains(string(body), "t-8") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if time.Since(start) > 8*time.Second {
		t.Fatal("the idle stream was not closed by writ")
	}
}

// TestACPDirectoryAndLegacyCard: GET /agents on an ACP route lists manifests of
// what the caller may discover; the old agent.json path serves the card too.
func TestACPDirectoryAndLegacyCard(t *testing.T) {
	w := newSeedWorld(t)
	resp, body := w.Do("GET", "/.well-known/agent.json", w.Token(proxytest.Investigator), nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "sanctions-screening-agent") {
		t.Fatalf("legacy card: %d %s", resp.StatusCode, body)
	}
	resp, body = w.Do("GET", "/agents", w.Token(proxytest.Investigator), nil, nil)
	var list struct {
		Agents []struct {
			Name string `json:"name"`
		} `json:"agents"`
	}
	if err := json.Unmarshal(body, &list); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /agents: %d %s", resp.StatusCode, body)
	}
	var names []string
	for _, a := range list.Agents {
		names = append(names, a.Name)
	}
	if len(names) != 3 || contains(names, "kyc-refresh-agent") || contains(names, "marketing-copy-agent") {
		t.Fatalf("ACP listing for the investigator: %v", names)
	}
}
