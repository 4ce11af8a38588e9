package proxy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/proxy/writheader"
	"github.com/writ-authz/writ/task"
)

// TestForgedCallerHeader: a caller-supplied Writ-Caller is stripped; the upstream
// sees writ's own, built from the verified token.
//
// Threat: a caller forges writ's Writ-Caller header to speak as another
// agent. Defence: writ strips it and sets its own from the verified
// credential.
func TestForgedCallerHeader(t *testing.T) {
	up := proxytest.NewFakeAgent(t, nil)
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, nil)
	status, a := h.RPCWith("/", h.Token(proxytest.Investigator), "1.0", "SendMessage", proxytest.SendParams, map[string]string{"Writ-Caller": `{"agent_id":"root","tenant":"wholesale","chain":[]}`})
	if status != 200 || a.Error != nil {
		t.Fatalf("%d %s", status, a.Raw)
	}
	reqs := up.Requests()
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
	slow := proxytest.NewFakeAgent(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(slow.Srv.URL), func() config.Agent {
		a := proxytest.SanctionsAgent(downURL)
		a.Name, a.Route = "down-agent", "/down"
		return a
	}()}, nil)
	tok := h.Token(proxytest.Investigator)
	status, a := h.RPC("/down/", tok, "1.0", "SendMessage", proxytest.SendParams)
	if status != 502 || a.Error == nil || a.Error.Code != -32603 || !contains(a.Reasons(), "UPSTREAM_UNAVAILABLE") {
		t.Errorf("down: %d %s", status, a.Raw)
	}
	status, a = h.RPC("/", tok, "1.0", "SendMessage", proxytest.SendParams)
	if status != 504 || a.Error == nil || !contains(a.Reasons(), "UPSTREAM_TIMEOUT") {
		t.Errorf("slow: %d %s", status, a.Raw)
	}
}

// TestMalformedStreamLine: a bad line reaches the client as a protocol error
// event; the store is not changed by it, and the stream goes on.
func TestMalformedStreamLine(t *testing.T) {
	up := proxytest.NewFakeAgent(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		fmt.Fprint(w, `data: {"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-9","contextId":"c-9","status":{"state":"TASK_STATE_WORKING"}}}}`+"\n\n")
		fl.Flush()
		fmt.Fprint(w, "data: {this is not json\n\n")
		fl.Flush()
		fmt.Fprint(w, `data: {"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"taskId":"t-9","contextId":"c-9","status":{"state":"TASK_STATE_COMPLETED"}}}}`+"\n\n")
	})
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, nil)
	resp, body := h.Do("POST", "/", h.Token(proxytest.Investigator), map[string]any{"jsonrpc": "2.0", "id": 1,
		"method": "SendStreamingMessage", "params": proxytest.SendParams}, map[string]string{"A2A-Version": "1.0"})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	events := strings.Split(strings.TrimSpace(string(body)), "\n\n")
	if len(events) != 3 || !strings.Contains(events[1], `"code":-32006`) || strings.Contains(string(body), "this is not json") {
		t.Fatalf("stream = %q", body)
	}
	rec, ok, _ := h.Task("t-9")
	if !ok || rec.Task.State != task.Succeeded || rec.Task.Owner.AgentID != "payments-investigator" {
		t.Fatalf("record = %+v %v", rec, ok)
	}
}

// TestStreamPassesEventByEvent: each event reaches the client before the upstream
// sends the next (no buffering of the whole stream).
func TestStreamPassesEventByEvent(t *testing.T) {
	next := make(chan struct{})
	up := proxytest.NewFakeAgent(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
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
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, nil)
	raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": proxytest.SendParams})
	req, _ := http.NewRequest("POST", h.Srv.URL+"/", strings.NewReader(string(raw)))
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Authorization", "Bearer "+h.Token(proxytest.Investigator))
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
	up := proxytest.NewFakeAgent(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-6","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}}`+"\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(cancelled)
	})
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, nil)
	raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": proxytest.SendParams})
	req, _ := http.NewRequest("POST", h.Srv.URL+"/", strings.NewReader(string(raw)))
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Authorization", "Bearer "+h.Token(proxytest.Investigator))
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
	up := proxytest.NewFakeAgent(t, nil)
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, func(c *config.Config) {
		c.Limits.MaxBodyBytes = 4096
	})
	tok := h.Token(proxytest.Investigator)
	big := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": map[string]any{"message": map[string]any{
		"messageId": "m", "role": "ROLE_USER", "parts": []any{map[string]any{"text": strings.Repeat("x", 8000)}}}}}
	resp, body := h.Do("POST", "/", tok, big, map[string]string{"A2A-Version": "1.0"})
	if resp.StatusCode != 413 || !strings.Contains(string(body), "PAYLOAD_TOO_LARGE") {
		t.Errorf("oversized: %d %s", resp.StatusCode, body)
	}
	deep := strings.Repeat(`{"a":`, 50) + "1" + strings.Repeat("}", 50)
	resp, body = h.Do("POST", "/", tok, `{"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}],"metadata":`+deep+`}}}`,
		map[string]string{"A2A-Version": "1.0"})
	if !strings.Contains(string(body), "JSON_TOO_DEEP") || !strings.Contains(string(body), `"id":2`) {
		t.Errorf("depth bomb: %d %s", resp.StatusCode, body)
	}
	status, a := h.RPC("/", tok, "9.9", "SendMessage", proxytest.SendParams)
	if a.Error == nil || a.Error.Code != -32009 {
		t.Errorf("forged version: %d %s", status, a.Raw)
	}
	status, a = h.RPC("/", tok, "1.0", "message/send", proxytest.SendParams)
	if a.Error == nil || a.Error.Code != -32009 {
		t.Errorf("version/method mismatch: %d %s", status, a.Raw)
	}
	// Both Content-Length and Transfer-Encoding: refused by the server, never
	// forwarded (writ re-frames every forwarded body anyway).
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.Srv.URL, "http://"))
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
	if n := len(up.Requests()); n != 0 {
		t.Fatalf("%d bad requests reached the agent", n)
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
