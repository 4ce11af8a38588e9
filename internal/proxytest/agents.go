package proxytest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/task"
)

// FakeAgent is a minimal A2A 1.0 JSON-RPC upstream for the edge cases of
// writ's request path (the SDK peers cover the protocol itself). It records
// what reached it: Body holds every request's body, under Mu.
type FakeAgent struct {
	Mu   sync.Mutex
	seen []*http.Request
	Body [][]byte
	// Handle answers; nil answers a completed task. Set it before the first request.
	Handle func(w http.ResponseWriter, r *http.Request, body []byte)
	Srv    *httptest.Server
}

// NewFakeAgent starts a fake agent on 127.0.0.1 that answers with handle
// (nil: a completed task).
func NewFakeAgent(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, body []byte)) *FakeAgent {
	f := &FakeAgent{Handle: handle}
	f.Srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.Mu.Lock()
		f.seen = append(f.seen, r)
		f.Body = append(f.Body, b)
		f.Mu.Unlock()
		if f.Handle != nil {
			f.Handle(w, r, b)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_COMPLETED"}}}}`)
	}))
	t.Cleanup(f.Srv.Close)
	return f
}

// Requests are the requests that reached the agent.
func (f *FakeAgent) Requests() []*http.Request {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return append([]*http.Request(nil), f.seen...)
}

// SanctionsAgent is the config of the sanctions-screening agent at upstream.
func SanctionsAgent(upstream string) config.Agent {
	return config.Agent{Name: "sanctions-screening-agent", Upstream: upstream, Protocol: "a2a",
		Owner: "group-compliance", Tenants: []string{"wholesale", "retail"}, MaxDataClassification: task.Restricted,
		SecuritySchemes: []string{"oauth2"}, Skills: []task.Skill{{ID: "screen", Tags: []string{"sanctions"}}}}
}

// SendParams are the params of a 1.0 SendMessage.
var SendParams = map[string]any{"message": map[string]any{"messageId": "m-1", "role": "ROLE_USER",
	"parts": []any{map[string]any{"text": "Screen Acme Trading FZE"}}}}

// Msg03 is a 0.3 message with text (and a data part), extra fields added.
func Msg03(text string, extra map[string]any) map[string]any {
	m := map[string]any{"kind": "message", "messageId": fmt.Sprintf("m-%d", time.Now().UnixNano()), "role": "user",
		"parts": []any{map[string]any{"kind": "text", "text": text},
			map[string]any{"kind": "data", "data": map[string]any{"beneficiary": "Acme Trading FZE"}}}}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// Result03 reads a 0.3 task result.
func Result03(t *testing.T, a RPCAnswer) (id, state string) {
	t.Helper()
	if a.Error != nil {
		t.Fatalf("error: %s", a.Raw)
	}
	var r struct {
		ID     string `json:"id"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	if err := json.Unmarshal(a.Result, &r); err != nil {
		t.Fatal(err)
	}
	return r.ID, r.Status.State
}

// Receiver records push notifications.
type Receiver struct {
	Mu   sync.Mutex
	Got  []http.Header
	Body []string
	Srv  *httptest.Server
}

// NewReceiver starts a push receiver on 127.0.0.1.
func NewReceiver(t *testing.T) *Receiver {
	r := &Receiver{}
	r.Srv = httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.Mu.Lock()
		r.Got = append(r.Got, req.Header.Clone())
		r.Body = append(r.Body, string(b))
		r.Mu.Unlock()
	}))
	t.Cleanup(r.Srv.Close)
	return r
}

// Wait returns the notifications once n arrived (or fails after a deadline).
func (r *Receiver) Wait(t *testing.T, n int) ([]http.Header, []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r.Mu.Lock()
		if len(r.Body) >= n {
			h, b := append([]http.Header(nil), r.Got...), append([]string(nil), r.Body...)
			r.Mu.Unlock()
			return h, b
		}
		r.Mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("only %d of %d notifications arrived", len(r.Body), n)
	return nil, nil
}

// WaitFor returns the notifications once one containing s arrived.
func (r *Receiver) WaitFor(t *testing.T, s string) ([]http.Header, []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r.Mu.Lock()
		for i, b := range r.Body {
			if strings.Contains(b, s) {
				h, bs := append([]http.Header(nil), r.Got[:i+1]...), append([]string(nil), r.Body[:i+1]...)
				r.Mu.Unlock()
				return h, bs
			}
		}
		r.Mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no notification with %s arrived", s)
	return nil, nil
}

// PushPolicies copies the shipped policies with 127.0.0.1 (this test's receiver)
// on the callback allow-list, over http — trusted only in this test.
func PushPolicies(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(Policies())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(Policies(), e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "data.json" {
			s := strings.Replace(string(raw), `"wholesale": ["agents.bank.ae"]`, `"wholesale": ["agents.bank.ae", "127.0.0.1"]`, 1)
			s = strings.Replace(s, `"allow_http_hosts": []`, `"allow_http_hosts": ["127.0.0.1"]`, 1)
			raw = []byte(s)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), raw, 0o600); err != nil { //nolint:gosec // G703: a test's copy of the checkout's policies into its temp dir
			t.Fatal(err)
		}
	}
	return dir
}
