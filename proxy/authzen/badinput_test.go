package authzen_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/metrics"
	"github.com/writ-authz/writ/proxy/authzen"
)

// requestsCounted is writ_requests_total for the AuthZEN door and status.
func requestsCounted(t *testing.T, m *metrics.Metrics, status int) float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range fams {
		if f.GetName() != "writ_requests_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["mode"] == events.ModeAuthZEN && labels["status"] == strconv.Itoa(status) {
				total += s.GetCounter().GetValue()
			}
		}
	}
	return total
}

// TestBadInput: Threat: an enforcement point (or anyone who reaches the
// listener) sends what is not a well-formed AuthZEN request — malformed or
// ambiguous JSON, a request without its subject, an unknown evaluation
// semantic, a batch over the configured limit, a body too deep or too
// large — or asks without credentials or without being a configured
// client, hoping for a decision read from a half-parsed request or for
// probing the policies anonymously. Defence: each is the specification's
// error (400, 401 with WWW-Authenticate, 403) with a message string and
// never a decision, the request id echoed, the refusal logged and counted
// (the door's counters and writ_requests_total{mode="authzen"}); the
// caller is authenticated before a byte of the body is read.
func TestBadInput(t *testing.T) {
	w := newWorld(t, func(c *config.Config) {
		c.AuthZEN.MaxEvaluations = 3
		c.Limits.MaxBodyBytes = 4096
		c.Limits.MaxJSONDepth = 8
	})
	met := metrics.New(config.Metrics{}, metrics.Sources{})
	w.h.Bus.Subscribe(met)
	ok := `{"subject": {"type": "agent", "id": "payments-investigator"}, "action": {"name": "send"},
		"resource": {"type": "agent", "id": "sanctions-screening-agent"}}`
	item := `{"resource": {"type": "agent", "id": "sanctions-screening-agent"}}`
	asJSON := map[string]string{"Authorization": "Bearer " + w.pep, "Content-Type": "application/json"}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{}
		for a, b := range m {
			out[a] = b
		}
		if v == "" {
			delete(out, k)
		} else {
			out[k] = v
		}
		return out
	}
	outsider := w.h.Token(proxytest.Investigator)
	cases := []struct {
		name, method, path, body string
		hdr                      map[string]string
		status                   int
		counter                  func(*authzen.Stats) uint64
	}{
		{"malformed JSON", "POST", "/access/v1/evaluation", `{"subject": {"type": "agent"`, asJSON, 400, badCount},
		{"a duplicate key", "POST", "/access/v1/evaluation", `{"subject": {"type": "agent", "id": "a", "id": "b"}, "action": {"name": "send"}, "resource": {"type": "agent", "id": "x"}}`, asJSON, 400, badCount},
		{"not an object", "POST", "/access/v1/evaluation", `[` + ok + `]`, asJSON, 400, badCount},
		{"missing subject", "POST", "/access/v1/evaluation", `{"action": {"name": "send"}, "resource": {"type": "agent", "id": "x"}}`, asJSON, 400, badCount},
		{"missing subject in a batch without evaluations", "POST", "/access/v1/evaluations", `{"action": {"name": "send"}, "resource": {"type": "agent", "id": "x"}}`, asJSON, 400, badCount},
		{"unknown semantic", "POST", "/access/v1/evaluations", `{"subject": {"type": "agent", "id": "a"}, "action": {"name": "send"}, "options": {"evaluations_semantic": "first_wins"}, "evaluations": [` + item + `]}`, asJSON, 400, badCount},
		{"a semantic that is not a string", "POST", "/access/v1/evaluations", `{"subject": {"type": "agent", "id": "a"}, "action": {"name": "send"}, "options": {"evaluations_semantic": 1}, "evaluations": [` + item + `]}`, asJSON, 400, badCount},
		{"a batch over the limit", "POST", "/access/v1/evaluations", `{"subject": {"type": "agent", "id": "a"}, "action": {"name": "send"}, "evaluations": [` + strings.Repeat(item+",", 3) + item + `]}`, asJSON, 400, badCount},
		{"too deep", "POST", "/access/v1/evaluation", `{"subject": {"type": "agent", "id": "a", "properties": {"a": [[[[[[[[1]]]]]]]]}}, "action": {"name": "send"}, "resource": {"type": "agent", "id": "x"}}`, asJSON, 400, badCount},
		{"too large", "POST", "/access/v1/evaluation", `{"subject": {"type": "agent", "id": "` + strings.Repeat("a", 5000) + `"}}`, asJSON, 400, badCount},
		{"empty body", "POST", "/access/v1/evaluation", ``, asJSON, 400, badCount},
		{"not JSON's content type", "POST", "/access/v1/evaluation", ok, with(asJSON, "Content-Type", "text/plain"), 400, badCount},
		{"a page limit that is not a count", "POST", "/access/v1/search/resource", `{"subject": {"type": "agent", "id": "a"}, "action": {"name": "send"}, "resource": {"type": "agent"}, "page": {"limit": -1}}`, asJSON, 400, badCount},
		{"an unauthenticated caller", "POST", "/access/v1/evaluation", ok, with(asJSON, "Authorization", ""), 401, unauthCount},
		{"a refused token", "POST", "/access/v1/evaluation", ok, with(asJSON, "Authorization", "Bearer not.a.token"), 401, unauthCount},
		{"a caller that is not a client", "POST", "/access/v1/evaluation", ok, with(asJSON, "Authorization", "Bearer "+outsider), 403, forbiddenCount},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w.t = t
			before, counted := c.counter(w.pdp.Stats()), requestsCounted(t, met, c.status)
			rid := "bad-input-" + strconv.Itoa(i)
			var body any
			if c.body != "" {
				body = c.body
			}
			a := w.do(c.method, c.path, body, with(c.hdr, "X-Request-ID", rid))
			if a.status != c.status || a.header.Get("X-Request-ID") != rid {
				t.Fatalf("%d (X-Request-ID %q) %s, want %d", a.status, a.header.Get("X-Request-ID"), a.body, c.status)
			}
			if !strings.HasPrefix(a.header.Get("Content-Type"), "text/plain") || len(strings.TrimSpace(string(a.body))) == 0 ||
				strings.Contains(string(a.body), `"decision"`) {
				t.Errorf("not a message string: %q %s", a.header.Get("Content-Type"), a.body)
			}
			if c.status == 401 && !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without WWW-Authenticate: %v", a.header)
			}
			if c.counter(w.pdp.Stats()) != before+1 {
				t.Errorf("not counted by the door")
			}
			if got := requestsCounted(t, met, c.status); got != counted+1 {
				t.Errorf("writ_requests_total{mode=authzen,status=%d} went from %v to %v", c.status, counted, got)
			}
			if !w.logged(`"request_id":"` + rid + `"`) {
				t.Errorf("not logged")
			}
		})
	}
}

func badCount(s *authzen.Stats) uint64       { return s.BadRequests.Load() }
func unauthCount(s *authzen.Stats) uint64    { return s.Unauthenticated.Load() }
func forbiddenCount(s *authzen.Stats) uint64 { return s.Forbidden.Load() }

// TestInvalidEvaluations: Threat: well-formed AuthZEN that the delegation
// profile cannot ask (an operation writ/v1 does not have, a resource type
// it does not know, a subject whose token speaks for another agent, a task
// without its agent) read leniently, as some default operation or agent,
// would decide another request than the one asked. Defence: each is denied
// with its error in the decision's context (§7.2.1), alone in a batch
// whose other evaluations are decided, and logged and counted.
func TestInvalidEvaluations(t *testing.T) {
	w := newWorld(t, nil)
	tok := w.h.Token(proxytest.Investigator)
	subject := `{"type": "agent", "id": "payments-investigator", "properties": {"token": "` + tok + `"}}`
	agent := `{"type": "agent", "id": "sanctions-screening-agent"}`
	for _, c := range []struct{ name, eval string }{
		{"unknown operation", `"action": {"name": "transfer"}, "resource": ` + agent},
		{"unknown resource type", `"action": {"name": "send"}, "resource": {"type": "bucket", "id": "b"}`},
		{"a follow-up on an agent", `"action": {"name": "cancel"}, "resource": ` + agent},
		{"a task without its agent", `"action": {"name": "get"}, "resource": {"type": "task", "id": "t-1"}`},
		{"an unknown classification", `"action": {"name": "send"}, "resource": ` + agent + `, "context": {"data_classification": "secret"}`},
		{"a tenant that is not a plain name", `"action": {"name": "send"}, "resource": ` + agent + `, "context": {"tenant": "../x"}`},
		{"a callback on a get", `"action": {"name": "list"}, "resource": ` + agent + `, "context": {"callback": {"url": "https://x"}}`},
		{"a subject not of type agent", `"subject": {"type": "user", "id": "u"}, "action": {"name": "send"}, "resource": ` + agent},
		{"a token for another agent", `"subject": {"type": "agent", "id": "someone-else", "properties": {"token": "` + tok + `"}}, "action": {"name": "send"}, "resource": ` + agent},
	} {
		t.Run(c.name, func(t *testing.T) {
			w.t = t
			before := w.pdp.Stats().InvalidItems.Load()
			body := `{"subject": ` + subject + `, "evaluations": [{` + c.eval + `}, {"action": {"name": "send"}, "resource": ` + agent + `}]}`
			a := w.post("/access/v1/evaluations", body)
			m := a.json(t)
			list, _ := m["evaluations"].([]any)
			if a.status != 200 || len(list) != 2 {
				t.Fatalf("%d %s", a.status, a.body)
			}
			bad, good := list[0].(map[string]any), list[1].(map[string]any)
			ctx, _ := bad["context"].(map[string]any)
			e, _ := ctx["error"].(map[string]any)
			if bad["decision"] != false || e["status"] == nil || e["message"] == "" {
				t.Errorf("the invalid evaluation: %v", bad)
			}
			if good["decision"] != true {
				t.Errorf("the valid one beside it: %v", good)
			}
			if w.pdp.Stats().InvalidItems.Load() != before+1 {
				t.Errorf("not counted")
			}
			if !w.logged("an evaluation is invalid") {
				t.Errorf("not logged")
			}
		})
	}
}
