package extproc_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/proxy/writheader"
	"github.com/writ-authz/writ/task"
)

// TestAnsweredBy: through the sidecar and through ext_proc, every answer
// writ gives itself (a denial, a 401, bad input, a missing task, a card, a
// hidden card, the directory, the agent unreachable) is marked
// Writ-Answered-By: writ, and the agent's own answer never is — not even
// when the agent sets the header itself — while both carry the decision id.
//
// Threat: a caller (or a log reader) takes the agent's refusal for writ's,
// or the agent passes its error off as writ's.
// Defence: writ marks the answers it makes (Core.Admit, Plan.Fail, the
// doors' own) and removes the mark from the agent's answer wherever it sees
// it (Plan.AgentHeaders).
func TestAnsweredBy(t *testing.T) {
	forger := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Writ-Answered-By", "writ")
		w.Header().Add("writ-answered-by", "writ")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":7,"error":{"code":-32009,"message":"Version '0.3' is not supported"}}`))
	}))
	t.Cleanup(forger.Close)
	withForger := func(c *config.Config) {
		c.Agents = append(c.Agents, config.Agent{Name: "forger", Route: "/forger", Upstream: forger.URL, Protocol: "a2a",
			JSONRPCPath: "/", Owner: "group-compliance", Tenants: []string{"wholesale", "retail"},
			MaxDataClassification: task.Restricted, SecuritySchemes: []string{"oauth2"}})
	}
	send := []byte(`{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-1","role":"user","parts":[{"kind":"text","text":"x"}]}}}`)
	for _, d := range []door{sidecarDoor, deployment()} {
		t.Run(d.name, func(t *testing.T) {
			w := newWorld(t, d, withForger)
			inv := w.token(investigator)
			for _, c := range []struct {
				name, method, path, token string
				body                      []byte
			}{
				{"denied", "POST", "/kyc/", inv, send},
				{"anonymous", "POST", "/", "", send},
				{"malformed", "POST", "/", inv, []byte(`{"jsonrpc":`)},
				{"unknown task", "POST", "/", inv, []byte(`{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"id":"t-none"}}`)},
				{"card", "GET", "/.well-known/agent-card.json", inv, nil},
				{"hidden card", "GET", "/kyc/.well-known/agent-card.json", inv, nil},
				{"directory", "GET", "/.well-known/writ/directory", inv, nil},
				{"agent down", "POST", "/down/", inv, send},
			} {
				r := w.do(c.method, c.path, c.token, c.body, nil)
				if got := r.header.Values(writheader.AnsweredBy); len(got) != 1 || got[0] != writheader.Writ {
					t.Errorf("%s: %d, %s %q: %s", c.name, r.status, writheader.AnsweredBy, got, r.body)
				}
			}
			r := w.do("POST", "/forger/", inv, send, nil)
			if r.header.Get(writheader.AnsweredBy) != "" || len(r.header.Get(writheader.Decision)) != 24 || r.status != 200 {
				t.Errorf("the agent's own answer: %d %v %s", r.status, r.header, r.body)
			}
			if string(r.body) != `{"jsonrpc":"2.0","id":7,"error":{"code":-32009,"message":"Version '0.3' is not supported"}}` {
				t.Errorf("the agent's answer was changed: %s", r.body)
			}
			ok := w.do("POST", "/", inv, send, nil)
			if ok.status != 200 || ok.header.Get(writheader.AnsweredBy) != "" || ok.header.Get(writheader.Decision) == "" {
				t.Errorf("an allowed send: %d %v %s", ok.status, ok.header, ok.body)
			}
		})
	}
}
