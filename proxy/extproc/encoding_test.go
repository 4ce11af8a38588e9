package extproc_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	modev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/proxy/extproc/extproctest"
	"github.com/writ-authz/writ/task"
)

// gzipAgent answers every A2A 1.0 JSON-RPC call gzip-coded, as an agent
// behind a compression middleware answers a client that accepts gzip: a
// task for a send, or a listing.
func gzipAgent(t *testing.T) *fakeAgent {
	return newFakeAgent(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		plain := `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-gz","contextId":"c-gz","status":{"state":"TASK_STATE_COMPLETED"}}}}`
		if bytes.Contains(body, []byte(`"ListTasks"`)) {
			plain = `{"jsonrpc":"2.0","id":1,"result":{"tasks":[],"totalSize":0,"pageSize":0}}`
		}
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = io.WriteString(zw, plain)
		_ = zw.Close()
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Encoding", "gzip")
		h.Set("ETag", `"gz-1"`)
		h.Set("Content-Length", strconv.Itoa(b.Len()))
		_, _ = w.Write(b.Bytes())
	})
}

// TestSecurityRefusalOfCodedAnswer — Threat: behind ext_proc, writ replaces
// an agent's answer it cannot read (here gzip-coded) with its protocol-shaped
// refusal, but the agent's Content-Encoding: gzip (and its Content-Length,
// ETag) stay on it, so the caller cannot read the refusal and a cache keys it
// to the agent's entity. Defence: every answer writ substitutes in the
// response phase — a refusal, a withheld listing — carries writ's own
// headers only: the agent's representation headers are removed and
// Content-Length set to writ's body, wherever Envoy still holds the headers
// (BUFFERED, the headers phase).
func TestSecurityRefusalOfCodedAnswer(t *testing.T) {
	addAgent := func(up string) func(*config.Config) {
		return func(c *config.Config) {
			c.Agents = append(c.Agents, config.Agent{Name: "gzip-agent", Route: "/gz", Upstream: up, Protocol: "a2a",
				JSONRPCPath: "/", Owner: "group-compliance", Tenants: []string{"wholesale", "retail"},
				MaxDataClassification: task.Restricted, SecuritySchemes: []string{"oauth2"}})
		}
	}
	buffered := func(e *extproctest.Envoy) {
		e.SetModes, e.RequestBodyMode, e.ResponseBodyMode = true, modev3.ProcessingMode_BUFFERED, modev3.ProcessingMode_BUFFERED
	}
	for _, c := range []struct {
		name   string
		door   door
		method string
		want   string // in the readable body
	}{
		{"send, deployment (override to BUFFERED)", deployment(), "SendMessage", `"error"`},
		{"send, BUFFERED", extprocDoor("buffered", buffered), "SendMessage", `"error"`},
		{"list, response headers skipped", extprocDoor("blind", func(e *extproctest.Envoy) {
			buffered(e)
			e.SkipResponseHeaders = true
		}), "ListTasks", `"error"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, c.door, addAgent(gzipAgent(t).srv.URL))
			raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": c.method, "params": sendParams10})
			if c.method == "ListTasks" {
				raw = []byte(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`)
			}
			req, _ := http.NewRequest("POST", w.url+"/gz/", bytes.NewReader(raw))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("A2A-Version", "1.0")
			req.Header.Set("Accept-Encoding", "gzip")
			req.Header.Set("Authorization", "Bearer "+w.token(investigator))
			// The client decodes nothing itself: what it reads is what came.
			client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, h := range []string{"Content-Encoding", "Etag"} {
				if v := resp.Header.Get(h); v != "" {
					t.Errorf("%s: %s (the agent's) on writ's answer", h, v)
				}
			}
			if cl := resp.Header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(body)) {
				t.Errorf("Content-Length %s on a %d-byte answer", cl, len(body))
			}
			if !strings.Contains(string(body), c.want) || !strings.Contains(string(body), "jsonrpc") {
				t.Errorf("%d: the caller cannot read writ's answer: %q", resp.StatusCode, body)
			}
			if c.method == "SendMessage" && resp.StatusCode != http.StatusBadGateway {
				t.Errorf("status %d, want 502 (the agent's answer is not readable)", resp.StatusCode)
			}
		})
	}
}
