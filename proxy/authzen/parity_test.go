package authzen_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/proxy/extauthz"
)

// Parity: a delegation decision asked through AuthZEN (the delegation
// profile) is the decision the sidecar and ext_authz make of the request
// itself, on one core and one policy: allowed by all three, or refused by
// all three with the same status, message and denial codes with their
// neutral reasons, for the allowed request and for each denial code of the
// shipped policy, the foreign task (NOT_TASK_OWNER, answered as not found)
// and the lifecycle law.

// parityCase is one request, asked three ways.
type parityCase struct {
	name string
	// caller speaks for the request (nil: no credentials).
	caller *proxytest.Caller
	// agent, its route, the operation; task (for get and a reply) names a
	// task by the index of the one setup created.
	agent, route, op string
	task             bool
	// classification is declared in the message; callback is a push URL
	// with a token when callbackToken.
	classification, callback string
	callbackToken            bool
	// code is a denial code the refusal must carry ("" for an allowed
	// request, or a refusal without denials); status the refusal's status.
	code   string
	status int
}

var (
	investigator = proxytest.Investigator
	retail       = proxytest.RetailBot
	deep         = proxytest.Caller{Agent: "deep-agent", User: "u-9", Tenant: "wholesale", Scopes: "delegate",
		Chain: []string{"a", "b", "c", "d"}}
	looped = proxytest.Caller{Agent: "loop-agent", User: "u-9", Tenant: "wholesale", Scopes: "delegate",
		Chain: []string{"orchestrator", "sanctions-screening-agent"}}
	unscoped = proxytest.Caller{Agent: "reader", User: "u-3", Tenant: "wholesale"}
	widened  = proxytest.Caller{Agent: "payments-investigator", User: "u-42", Tenant: "wholesale", Scopes: "delegate",
		Chain: []string{"orchestrator"}, ChainScopes: []string{"read"}}
)

const (
	sanctions = "sanctions-screening-agent"
	ledger    = "wholesale-ledger"
	legacy    = "legacy-agent"
)

var parityCases = []parityCase{
	{name: "allowed", caller: &investigator, agent: sanctions, route: "/sanctions", op: "send", classification: "restricted"},
	{name: "UNAUTHENTICATED", agent: sanctions, route: "/sanctions", op: "send", code: "UNAUTHENTICATED", status: 401},
	{name: "DEPTH_EXCEEDED", caller: &deep, agent: sanctions, route: "/sanctions", op: "send", code: "DEPTH_EXCEEDED", status: 403},
	{name: "CYCLE_DETECTED", caller: &looped, agent: sanctions, route: "/sanctions", op: "send", code: "CYCLE_DETECTED", status: 403},
	{name: "TENANT_NOT_PERMITTED", caller: &retail, agent: ledger, route: "/ledger", op: "send", code: "TENANT_NOT_PERMITTED", status: 403},
	{name: "CLASSIFICATION_EXCEEDED", caller: &investigator, agent: ledger, route: "/ledger", op: "send", classification: "restricted",
		code: "CLASSIFICATION_EXCEEDED", status: 403},
	{name: "NO_ACCEPTABLE_AUTH", caller: &investigator, agent: legacy, route: "/legacy", op: "send", code: "NO_ACCEPTABLE_AUTH", status: 403},
	{name: "CALLBACK_NOT_ALLOWED", caller: &investigator, agent: sanctions, route: "/sanctions", op: "send",
		callback: "https://evil.example/cb", callbackToken: true, code: "CALLBACK_NOT_ALLOWED", status: 403},
	{name: "CALLBACK_UNAUTHENTICATED", caller: &investigator, agent: sanctions, route: "/sanctions", op: "send",
		callback: "https://agents.bank.ae/cb", code: "CALLBACK_UNAUTHENTICATED", status: 403},
	{name: "SCOPE_MISSING", caller: &unscoped, agent: sanctions, route: "/sanctions", op: "send", code: "SCOPE_MISSING", status: 403},
	{name: "AUTHORITY_WIDENED", caller: &widened, agent: sanctions, route: "/sanctions", op: "send", code: "AUTHORITY_WIDENED", status: 403},
	{name: "NOT_TASK_OWNER (a foreign task is not found)", caller: &retail, agent: sanctions, route: "/sanctions", op: "get", task: true,
		status: 404},
	{name: "the task's owner reads it", caller: &investigator, agent: sanctions, route: "/sanctions", op: "get", task: true},
	{name: "a reply to a completed task (the lifecycle law)", caller: &investigator, agent: sanctions, route: "/sanctions", op: "send",
		task: true, status: 400},
}

// refusal is what a caller learns of a refusal, door-independent.
type refusal struct {
	allowed bool
	status  int
	message string
	denials []string // "CODE: neutral reason"
}

func (r refusal) String() string {
	return fmt.Sprintf("allowed=%v status=%d message=%q denials=%v", r.allowed, r.status, r.message, r.denials)
}

// decisionID is the decision id in a refusal's message (each door's own).
var decisionID = regexp.MustCompile(`\(decision [0-9a-f]+\)`)

// TestParityWithSidecarAndExtAuthz: Threat: a delegation the sidecar and
// Envoy refuse is allowed when the same caller asks through the AuthZEN
// door (or a refusal there tells more than theirs: the policy's reasons, a
// foreign task's existence). Defence: each case is asked through the
// sidecar, the HTTP ext_authz server and the delegation profile, on one
// core and one policy, and the three answers are one: allowed, or refused
// with the same status, neutral message and denial codes with their
// neutral reasons — for the allowed send, each denial code of the shipped
// policy, a foreign task (not found, no decision id) and the lifecycle law.
func TestParityWithSidecarAndExtAuthz(t *testing.T) {
	w := newWorld(t, nil)
	ext, err := extauthz.New(w.h.Core, nil, w.h.Cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	envoy := httptest.NewServer(ext.HTTPServer().Handler)
	t.Cleanup(envoy.Close)
	// The task the task cases name: the investigator's, created through the
	// sidecar (the agent completes it at once).
	created := w.viaSidecar(parityCase{caller: &investigator, route: "/sanctions", op: "send"}, "")
	taskID := created.taskID
	if !created.allowed || taskID == "" {
		t.Fatalf("setup: %v", created)
	}
	seen := map[string]bool{}
	for _, c := range parityCases {
		t.Run(c.name, func(t *testing.T) {
			w.t = t
			id := ""
			if c.task {
				id = taskID
			}
			side := w.viaSidecar(c, id).refusal
			env := w.viaExtAuthz(envoy.URL, c, id)
			pdp := w.viaAuthZEN(c, id)
			if side.String() != env.String() || side.String() != pdp.String() {
				t.Errorf("the doors disagree:\n sidecar  %s\n ext_authz %s\n authzen  %s", side, env, pdp)
			}
			switch {
			case c.status == 0 && !side.allowed:
				t.Errorf("refused: %s", side)
			case c.status != 0 && (side.allowed || side.status != c.status):
				t.Errorf("%s, want status %d", side, c.status)
			case c.code != "" && !slices.ContainsFunc(side.denials, func(d string) bool { return strings.HasPrefix(d, c.code+":") }):
				t.Errorf("%s, want %s among the denials", side, c.code)
			}
			for _, d := range side.denials {
				seen[strings.SplitN(d, ":", 2)[0]] = true
			}
		})
	}
	w.t = t
	for _, code := range []string{"UNAUTHENTICATED", "DEPTH_EXCEEDED", "CYCLE_DETECTED", "TENANT_NOT_PERMITTED", "CLASSIFICATION_EXCEEDED",
		"NO_ACCEPTABLE_AUTH", "CALLBACK_NOT_ALLOWED", "CALLBACK_UNAUTHENTICATED", "SCOPE_MISSING", "AUTHORITY_WIDENED"} {
		if !seen[code] {
			t.Errorf("no case was refused with %s", code)
		}
	}
}

// sent is a sidecar answer: the refusal, and the task an allowed send made.
type sent struct {
	refusal
	taskID string
}

// a2aRequest is c as an A2A 1.0 HTTP+JSON request below the agent's route.
func a2aRequest(c parityCase, taskID string) (method, path string, body []byte) {
	if c.op == "get" {
		return http.MethodGet, c.route + "/tasks/" + taskID, nil
	}
	msg := map[string]any{"messageId": "m-parity", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "screen Acme"}}}
	if c.classification != "" {
		msg["metadata"] = map[string]any{"urn:writ:ext:classification:v1": map[string]any{"level": c.classification}}
	}
	if taskID != "" {
		msg["taskId"] = taskID
	}
	req := map[string]any{"message": msg}
	if c.callback != "" {
		cb := map[string]any{"url": c.callback}
		if c.callbackToken {
			cb["token"] = "s3cret"
		}
		req["configuration"] = map[string]any{"taskPushNotificationConfig": cb}
	}
	body, _ = json.Marshal(req)
	return http.MethodPost, c.route + "/message:send", body
}

// header is the request's headers: the protocol version, the caller's token.
func (w *world) header(c parityCase) http.Header {
	h := http.Header{"A2A-Version": {"1.0"}, "Content-Type": {"application/json"}}
	if c.caller != nil {
		h.Set("Authorization", "Bearer "+w.h.Token(*c.caller))
	}
	return h
}

// viaSidecar sends c to the sidecar.
func (w *world) viaSidecar(c parityCase, taskID string) sent {
	w.t.Helper()
	method, path, body := a2aRequest(c, taskID)
	return w.a2aAnswer(w.h.Srv.URL, method, path, body, w.header(c))
}

// viaExtAuthz asks Envoy's HTTP check about c, as Envoy's per-route config
// names the agent.
func (w *world) viaExtAuthz(base string, c parityCase, taskID string) refusal {
	w.t.Helper()
	method, path, body := a2aRequest(c, taskID)
	h := w.header(c)
	h.Set(extauthz.RouteHeader, c.agent)
	return w.a2aAnswer(base, method, path, body, h).refusal
}

// a2aAnswer sends one A2A request and reads what its caller learns: a 2xx
// goes on (the sidecar's agent answered, or ext_authz let it through); a
// refusal is A2A 1.0's HTTP+JSON error, its details after the first the
// denials.
func (w *world) a2aAnswer(base, method, path string, body []byte, h http.Header) sent {
	w.t.Helper()
	req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header = h
	resp, err := w.client.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode < 300 {
		var ok struct {
			Task struct {
				ID string `json:"id"`
			} `json:"task"`
		}
		_ = json.Unmarshal(raw, &ok)
		return sent{refusal: refusal{allowed: true}, taskID: ok.Task.ID}
	}
	var e struct {
		Error struct {
			Message string `json:"message"`
			Details []struct {
				Reason   string            `json:"reason"`
				Domain   string            `json:"domain"`
				Metadata map[string]string `json:"metadata"`
			} `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		w.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	r := refusal{status: resp.StatusCode, message: decisionID.ReplaceAllString(e.Error.Message, "(decision)")}
	for _, d := range e.Error.Details {
		if reason, ok := d.Metadata["reason"]; ok {
			r.denials = append(r.denials, d.Reason+": "+reason)
		}
	}
	return sent{refusal: r}
}

// viaAuthZEN asks the delegation profile about c: the caller's token in
// the subject, the operation as the action, the agent (or its task) as the
// resource, the declared classification and the callback in the context.
func (w *world) viaAuthZEN(c parityCase, taskID string) refusal {
	w.t.Helper()
	subject := map[string]any{"type": "agent", "id": "anonymous"}
	if c.caller != nil {
		subject = map[string]any{"type": "agent", "id": c.caller.Agent, "properties": map[string]any{"token": w.h.Token(*c.caller)}}
	}
	resource := map[string]any{"type": "agent", "id": c.agent}
	if taskID != "" {
		resource = map[string]any{"type": "task", "id": taskID, "properties": map[string]any{"agent": c.agent}}
	}
	ctx := map[string]any{}
	if c.classification != "" {
		ctx["data_classification"] = c.classification
	}
	if c.callback != "" {
		ctx["callback"] = map[string]any{"url": c.callback, "has_token": c.callbackToken}
	}
	a := w.post("/access/v1/evaluation", map[string]any{"subject": subject, "action": map[string]any{"name": c.op},
		"resource": resource, "context": ctx})
	if a.status != 200 {
		w.t.Fatalf("authzen: %d %s", a.status, a.body)
	}
	var d struct {
		Decision bool `json:"decision"`
		Context  struct {
			DecisionID string `json:"decision_id"`
			Status     int    `json:"status"`
			Message    string `json:"message"`
			Denials    []struct {
				Code, Reason string
			} `json:"denials"`
		} `json:"context"`
	}
	if err := json.Unmarshal(a.body, &d); err != nil {
		w.t.Fatal(err)
	}
	if d.Decision {
		if d.Context.DecisionID == "" {
			w.t.Errorf("an allowed decision without its id: %s", a.body)
		}
		return refusal{allowed: true}
	}
	r := refusal{status: d.Context.Status, message: decisionID.ReplaceAllString(d.Context.Message, "(decision)")}
	for _, dn := range d.Context.Denials {
		r.denials = append(r.denials, dn.Code+": "+dn.Reason)
	}
	if r.status == 404 && d.Context.DecisionID != "" {
		w.t.Errorf("a task answered as not found carries a decision id: %s", a.body)
	}
	return r
}
