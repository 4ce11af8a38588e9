package extproc_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/writ-authz/writ/config"
)

// hostileLister answers a task listing as the X-Hostile header of the
// request says: every answer names t-retail, a task writ never recorded for
// the caller, which an answer writ read and filtered would not show.
func hostileLister(t testing.TB) *fakeAgent {
	victim := `{"id":"t-retail","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}`
	answers := map[string][2]string{ // content type, body
		"well-formed":         {"application/json", `{"jsonrpc":"2.0","id":1,"result":{"tasks":[` + victim + `]}}`},
		"sniffed well-formed": {"text/plain; charset=utf-8", `{"jsonrpc":"2.0","id":1,"result":{"tasks":[` + victim + `]}}`},
		"sse":                 {"text/event-stream", "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tasks\":[" + victim + "]}}\n\n"},
		"case variant":        {"application/json", `{"jsonrpc":"2.0","id":1,"result":{"tasks":[],"Tasks":[` + victim + `]}}`},
		"envelope":            {"application/json", `{"jsonrpc":"2.0","id":1,"result":{"tasks":[]},"Result":{"tasks":[` + victim + `]}}`},
		"duplicate":           {"application/json", `{"jsonrpc":"2.0","id":1,"result":{"tasks":[` + victim + `],"tasks":[]}}`},
		"upper case":          {"application/json", `{"jsonrpc":"2.0","id":1,"result":{"tasks":[{"id":"t-x","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}],"TASKS":[` + victim + `]}}`},
		"rest well-formed":    {"application/a2a+json", `{"tasks":[` + victim + `]}`},
		"rest sse":            {"text/event-stream", "data: {\"tasks\":[" + victim + "]}\n\n"},
		"rest case variant":   {"application/a2a+json", `{"tasks":[],"Tasks":[` + victim + `]}`},
		"rest html":           {"text/html", `{"tasks":[` + victim + `]}`},
	}
	return newFakeAgent(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		a, ok := answers[r.Header.Get("X-Hostile")]
		if !ok {
			http.Error(w, "no such case", http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", a[0])
		fmt.Fprint(w, a[1])
	})
}

// TestHostileListAnswers: an agent's answer to a task listing that writ
// would read one way and a client another — sent as an SSE stream, with a
// second case-variant "Tasks" (or "Result") key, a duplicate key, in a
// content type that is not JSON — is refused as an invalid agent answer,
// through the sidecar and ext_proc alike; a well-formed listing is filtered.
//
// Threat: a hostile or broken agent slips another tenant's tasks past the
// own-tasks filter: writ filters the "tasks" it reads, while a Go client
// (encoding/json, case-insensitive, last key wins) reads "Tasks" or
// "Result", a first-key reader reads the first duplicate, and a stream is
// relayed event by event without any filter. Defence: answers writ filters
// are read as strictly as requests (the same duplicate and field-case
// guards), and their content type must be the JSON writ reads.
func TestHostileListAnswers(t *testing.T) {
	for _, d := range []door{sidecarDoor, extprocDoor("ext_proc", nil)} {
		t.Run(d.name, func(t *testing.T) {
			up := hostileLister(t)
			w := newWorld(t, d, func(c *config.Config) {
				a := c.Agents[0]
				a.Name, a.Route, a.Upstream = "sanctions-hostile", "/hostile", up.srv.URL
				c.Agents = append(c.Agents, a)
			})
			inv := w.token(investigator)
			for _, c := range []string{"well-formed", "sniffed well-formed", "sse", "case variant", "envelope", "duplicate", "upper case",
				"rest well-formed", "rest sse", "rest case variant", "rest html"} {
				hdr := map[string]string{"A2A-Version": "1.0", "X-Hostile": c}
				var r reply
				if strings.HasPrefix(c, "rest ") {
					r = w.do("GET", "/hostile/tasks", inv, nil, hdr)
				} else {
					r = w.do("POST", "/hostile/", inv, []byte(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`), hdr)
				}
				if strings.Contains(string(r.body), "t-retail") {
					t.Errorf("%s: another caller's task reached the caller: %d %s", c, r.status, r.body)
					continue
				}
				refused := strings.Contains(string(r.body), "INVALID_AGENT_RESPONSE")
				if strings.HasSuffix(c, "well-formed") {
					if r.status != 200 || refused {
						t.Errorf("%s: %d %s", c, r.status, r.body)
					}
					continue
				}
				if !refused || (strings.HasPrefix(c, "rest ") && r.status != http.StatusBadGateway) {
					t.Errorf("%s: want the agent's answer refused (INVALID_AGENT_RESPONSE), got %d %s", c, r.status, r.body)
				}
			}
		})
	}
}

// TestHostileCodedAnswers: writ reads the agent's answers in the identity
// coding only. The caller's Accept-Encoding never reaches the agent (so it
// cannot ask the agent for a coding writ would not read), and an answer in a
// content coding anyway — a listing or a stream — is refused as an invalid
// agent answer, through the sidecar and ext_proc alike.
//
// Threat: a caller (or a hostile agent) gets an answer writ must read past
// it in a coding writ does not decode: a gzip or br listing passes the
// own-tasks filter unread, a coded stream is relayed unobserved (its tasks
// never recorded, its terminal state never seen). Defence: the forwarded
// request drops Accept-Encoding (Plan.Drop), and Plan.Reads refuses any
// answer with a content coding other than identity.
func TestHostileCodedAnswers(t *testing.T) {
	victim := `{"id":"t-retail","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}`
	list := `{"jsonrpc":"2.0","id":1,"result":{"tasks":[` + victim + `]}}`
	for _, d := range []door{sidecarDoor, extprocDoor("ext_proc", nil)} {
		t.Run(d.name, func(t *testing.T) {
			var mu sync.Mutex
			var asked []string // the Accept-Encoding each request reached the agent with
			up := newFakeAgent(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
				mu.Lock()
				asked = append(asked, r.Header.Get("Accept-Encoding"))
				mu.Unlock()
				// Coded whatever the request asked for: br is a coding no
				// Go client decodes on its own, so it reaches writ as sent.
				w.Header().Set("Content-Encoding", "br")
				if r.Header.Get("X-Hostile") == "stream" {
					w.Header().Set("Content-Type", "text/event-stream")
					fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"task\":"+victim+"}}\n\n")
					return
				}
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, list)
			})
			w := newWorld(t, d, func(c *config.Config) {
				a := c.Agents[0]
				a.Name, a.Route, a.Upstream = "sanctions-hostile", "/hostile", up.srv.URL
				c.Agents = append(c.Agents, a)
			})
			inv := w.token(investigator)
			for _, c := range []struct{ name, method, body string }{
				{"list", "ListTasks", `{}`},
				{"stream", "SendStreamingMessage", `{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"screen"}]}}`},
			} {
				r := w.do("POST", "/hostile/", inv, []byte(`{"jsonrpc":"2.0","id":1,"method":"`+c.method+`","params":`+c.body+`}`),
					map[string]string{"A2A-Version": "1.0", "X-Hostile": c.name, "Accept-Encoding": "br"})
				if strings.Contains(string(r.body), "t-retail") || r.header.Get("Content-Encoding") != "" {
					t.Errorf("%s: the coded answer reached the caller: %d %v %q", c.name, r.status, r.header, r.body)
				}
				if !strings.Contains(string(r.body), "INVALID_AGENT_RESPONSE") {
					t.Errorf("%s: want the agent's answer refused (INVALID_AGENT_RESPONSE), got %d %s", c.name, r.status, r.body)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) != 2 {
				t.Fatalf("the agent was asked %d times, want 2", len(asked))
			}
			for _, a := range asked {
				if strings.Contains(a, "br") {
					t.Errorf("the caller's Accept-Encoding reached the agent: %q", a)
				}
			}
		})
	}
}
