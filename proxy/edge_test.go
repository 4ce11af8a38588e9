package proxy_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/proxy/writheader"
	"github.com/writ-authz/writ/task"
)

// fakeAgent is a minimal A2A 1.0 JSON-RPC upstream for the sidecar's edge cases
// (the SDK peers cover the protocol itself in e2e_test.go). It records what
// reached it.
type fakeAgent struct {
	mu   sync.Mutex
	seen []*http.Request
	body [][]byte
	// handle answers; nil answers a completed task.
	handle func(w http.ResponseWriter, r *http.Request, body []byte)
	srv    *httptest.Server
}

func newFakeAgent(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, body []byte)) *fakeAgent {
	f := &fakeAgent{handle: handle}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.seen = append(f.seen, r)
		f.body = append(f.body, b)
		f.mu.Unlock()
		if f.handle != nil {
			f.handle(w, r, b)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_COMPLETED"}}}}`)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAgent) requests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.seen...)
}

func sanctionsAgent(upstream string) config.Agent {
	return config.Agent{Name: "sanctions-screening-agent", Upstream: upstream, Protocol: "a2a",
		Owner: "group-compliance", Tenants: []string{"wholesale", "retail"}, MaxDataClassification: task.Restricted,
		SecuritySchemes: []string{"oauth2"}, Skills: []task.Skill{{ID: "screen", Tags: []string{"sanctions"}}}}
}

var sendParams = map[string]any{"message": map[string]any{"messageId": "m-1", "role": "ROLE_USER",
	"parts": []any{map[string]any{"text": "Screen Acme Trading FZE"}}}}

// TestForgedCallerHeader: a caller-supplied Writ-Caller is stripped; the upstream
// sees writ's own, built from the verified token.
//
// Threat: a caller forges writ's Writ-Caller header to speak as another
// agent. Defence: writ strips it and sets its own from the verified
// credential.
func TestForgedCallerHeader(t *testing.T) {
	up := newFakeAgent(t, nil)
	h := newHarness(t, []config.Agent{sanctionsAgent(up.srv.URL)}, nil)
	status, a := h.rpcWith("/", h.token(investigator), "1.0", "SendMessage", sendParams,
		map[string]string{"Writ-Caller": `{"agent_id":"root","tenant":"wholesale","chain":[]}`})
	if status != 200 || a.Error != nil {
		t.Fatalf("%d %s", status, a.raw)
	}
	reqs := up.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests reached the agent", len(reqs))
	}
	got := reqs[0].Header.Values(writheader.Caller)
	if len(got) != 1 || !strings.Contains(got[0], `"agent_id":"payments-investigator"`) || strings.Contains(got[0], "root") ||
		!strings.Contains(got[0], `"chain":["orchestrator"]`) {
		t.Fatalf("Writ-Caller upstream = %v", got)
	}
	if reqs[0].Header.Get("X-Forwarded-For") == "" || reqs[0].Header.Get("X-Forwarded-Host") == "" || reqs[0].Header.Get(writheader.Decision) == "" {
		t.Errorf("forwarding headers missing: %v", reqs[0].Header)
	}
}

// TestUpstreamFailures: down is 502, too slow is 504, both protocol-shaped.
func TestUpstreamFailures(t *testing.T) {
	slow := newFakeAgent(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	h := newHarness(t, []config.Agent{sanctionsAgent(slow.srv.URL), func() config.Agent {
		a := sanctionsAgent(downURL)
		a.Name, a.Route = "down-agent", "/down"
		return a
	}()}, nil)
	tok := h.token(investigator)
	status, a := h.rpc("/down/", tok, "1.0", "SendMessage", sendParams)
	if status != 502 || a.Error == nil || a.Error.Code != -32603 || !contains(a.reasons(), "UPSTREAM_UNAVAILABLE") {
		t.Errorf("down: %d %s", status, a.raw)
	}
	status, a = h.rpc("/", tok, "1.0", "SendMessage", sendParams)
	if status != 504 || a.Error == nil || !contains(a.reasons(), "UPSTREAM_TIMEOUT") {
		t.Errorf("slow: %d %s", status, a.raw)
	}
}

// TestMalformedStreamLine: a bad line reaches the client as a protocol error
// event; the store is not changed by it, and the stream goes on.
func TestMalformedStreamLine(t *testing.T) {
	up := newFakeAgent(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		fmt.Fprint(w, `data: {"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-9","contextId":"c-9","status":{"state":"TASK_STATE_WORKING"}}}}`+"\n\n")
		fl.Flush()
		fmt.Fprint(w, "data: {this is not json\n\n")
		fl.Flush()
		fmt.Fprint(w, `data: {"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"taskId":"t-9","contextId":"c-9","status":{"state":"TASK_STATE_COMPLETED"}}}}`+"\n\n")
	})
	h := newHarness(t, []config.Agent{sanctionsAgent(up.srv.URL)}, nil)
	resp, body := h.do("POST", "/", h.token(investigator), map[string]any{"jsonrpc": "2.0", "id": 1,
		"method": "SendStreamingMessage", "params": sendParams}, map[string]string{"A2A-Version": "1.0"})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	events := strings.Split(strings.TrimSpace(string(body)), "\n\n")
	if len(events) != 3 || !strings.Contains(events[1], `"code":-32006`) || strings.Contains(string(body), "this is not json") {
		t.Fatalf("stream = %q", body)
	}
	rec, ok, _ := h.task("t-9")
	if !ok || rec.Task.State != task.Succeeded || rec.Task.Owner.AgentID != "payments-investigator" {
		t.Fatalf("record = %+v %v", rec, ok)
	}
}

// TestStreamPassesEventByEvent: each event reaches the client before the upstream
// sends the next (no buffering of the whole stream).
func TestStreamPassesEventByEvent(t *testing.T) {
	next := make(chan struct{})
	up := newFakeAgent(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		fmt.Fprint(w, `data: {"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-5","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}}`+"\n\n")
		fl.Flush()
		select {
		case <-next:
		case <-time.After(5 * time.Second):
			return
		}
		fmt.Fprint(w, `data: {"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"taskId":"t-5","status":{"state":"TASK_STATE_COMPLETED"}}}}`+"\n\n")
	})
	h := newHarness(t, []config.Agent{sanctionsAgent(up.srv.URL)}, nil)
	raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": sendParams})
	req, _ := http.NewRequest("POST", h.srv.URL+"/", strings.NewReader(string(raw)))
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Authorization", "Bearer "+h.token(investigator))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil || !strings.Contains(first, "TASK_STATE_WORKING") {
		t.Fatalf("first event %q %v", first, err)
	}
	close(next) // only now may the upstream send the second event
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "TASK_STATE_COMPLETED") {
		t.Fatalf("rest %q", rest)
	}
}

// TestClientGoneCancelsUpstream: closing the client's connection mid-stream
// cancels the upstream request.
func TestClientGoneCancelsUpstream(t *testing.T) {
	cancelled := make(chan struct{})
	up := newFakeAgent(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-6","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}}`+"\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(cancelled)
	})
	h := newHarness(t, []config.Agent{sanctionsAgent(up.srv.URL)}, nil)
	raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": sendParams})
	req, _ := http.NewRequest("POST", h.srv.URL+"/", strings.NewReader(string(raw)))
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Authorization", "Bearer "+h.token(investigator))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	if !strings.Contains(line, "t-6") {
		t.Fatalf("first event %q", line)
	}
	resp.Body.Close()
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request was not cancelled when the client went away")
	}
}

// TestBadInputNeverReachesUpstream: oversized bodies (413 before reading them
// all), depth bombs, forged versions, smuggling attempts.
//
// Threat: size bombs, depth bombs, forged protocol versions and request
// smuggling (Content-Length with Transfer-Encoding). Defence: refused before
// anything reaches the agent; a smuggling pair closes the connection.
func TestBadInputNeverReachesUpstream(t *testing.T) {
	up := newFakeAgent(t, nil)
	h := newHarness(t, []config.Agent{sanctionsAgent(up.srv.URL)}, func(c *config.Config) {
		c.Limits.MaxBodyBytes = 4096
	})
	tok := h.token(investigator)
	big := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": map[string]any{"message": map[string]any{
		"messageId": "m", "role": "ROLE_USER", "parts": []any{map[string]any{"text": strings.Repeat("x", 8000)}}}}}
	resp, body := h.do("POST", "/", tok, big, map[string]string{"A2A-Version": "1.0"})
	if resp.StatusCode != 413 || !strings.Contains(string(body), "PAYLOAD_TOO_LARGE") {
		t.Errorf("oversized: %d %s", resp.StatusCode, body)
	}
	deep := strings.Repeat(`{"a":`, 50) + "1" + strings.Repeat("}", 50)
	resp, body = h.do("POST", "/", tok, `{"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}],"metadata":`+deep+`}}}`,
		map[string]string{"A2A-Version": "1.0"})
	if !strings.Contains(string(body), "JSON_TOO_DEEP") || !strings.Contains(string(body), `"id":2`) {
		t.Errorf("depth bomb: %d %s", resp.StatusCode, body)
	}
	status, a := h.rpc("/", tok, "9.9", "SendMessage", sendParams)
	if a.Error == nil || a.Error.Code != -32009 {
		t.Errorf("forged version: %d %s", status, a.raw)
	}
	status, a = h.rpc("/", tok, "1.0", "message/send", sendParams)
	if a.Error == nil || a.Error.Code != -32009 {
		t.Errorf("version/method mismatch: %d %s", status, a.raw)
	}
	// Both Content-Length and Transfer-Encoding: refused by the server, never
	// forwarded (writ re-frames every forwarded body anyway).
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nA2A-Version: 1.0\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nPOST /smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	answer, _ := io.ReadAll(conn) // the server closes the connection after one answer
	if !strings.Contains(string(answer), "INVALID_REQUEST") || strings.Count(string(answer), "HTTP/1.1 ") != 1 {
		t.Errorf("smuggling attempt answered %q", answer)
	}
	if n := len(up.requests()); n != 0 {
		t.Fatalf("%d bad requests reached the agent", n)
	}
}

// TestSlowLoris: a client that never finishes its headers is cut off.
//
// Threat: slow-loris clients exhaust connections. Defence: a header read
// timeout.
func TestSlowLoris(t *testing.T) {
	up := newFakeAgent(t, nil)
	h := newHarness(t, []config.Agent{sanctionsAgent(up.srv.URL)}, func(c *config.Config) {
		c.Limits.ReadHeaderTimeout = 200 * time.Millisecond
	})
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "POST / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 512)
	_, err = conn.Read(buf) // the server closes (or answers 408) once the header timeout passes
	if err == nil && !strings.Contains(string(buf), "408") {
		t.Fatalf("slow headers answered %q", buf)
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		t.Fatal("the server kept a slow-loris connection open")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// rpcWith is rpc with extra headers.
func (h *harness) rpcWith(path, token, version, method string, params any, hdr map[string]string) (int, rpcAnswer) {
	h.t.Helper()
	if hdr == nil {
		hdr = map[string]string{}
	}
	if version != "" {
		hdr["A2A-Version"] = version
	}
	resp, body := h.do("POST", path, token, map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, hdr)
	var a rpcAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		h.t.Fatalf("%s: not JSON-RPC: %s", method, body)
	}
	a.raw = body
	return resp.StatusCode, a
}
