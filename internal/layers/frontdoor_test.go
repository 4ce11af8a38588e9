package layers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/task"
)

// fakeDoor is a front door written outside the core with nothing but the
// core's exported API, as a new door would be: it turns its own input (here
// a method, a path, headers and a body) into an Incoming, admits it, and maps
// the Outcome — writ's own answer as rendered, or a Forward executed by the
// plan. It executes a forward two ways: whole, through Plan.Forward (the
// executor an HTTP door shares with the sidecar), or streaming, sending the
// request itself and feeding the answer through Plan.Reads and Plan.Stream
// (as a door whose platform sends the request does).
type fakeDoor struct {
	core   *proxy.Core
	client *http.Client
}

const fakeMode = "fake_door"

func (d *fakeDoor) serve(ctx context.Context, method, path string, h http.Header, body []byte) (int, http.Header, []byte) {
	inc := proxy.Incoming{Mode: fakeMode, Method: method, Path: path, RawPath: path, Host: "writ.test",
		RemoteAddr: "127.0.0.1:4000", Query: url.Values{}, Header: h, Body: body}
	out := d.core.Admit(ctx, inc)
	rec := httptest.NewRecorder()
	ev := events.Request{Mode: fakeMode, Route: out.Route, Operation: out.Operation}
	switch {
	case out.Kind != proxy.Forward:
		proxy.WriteAnswer(rec, out.Answer, out.DecisionID)
	case out.Plan.Streams:
		d.stream(ctx, out.Plan, h, rec, &ev)
	default:
		out.Plan.Forward(ctx, d.client, inc, rec, &ev)
	}
	ev.Status = rec.Code
	d.core.Served(ev)
	return rec.Code, rec.Header(), rec.Body.Bytes()
}

// stream sends the planned request itself and relays the agent's SSE answer
// through the plan.
func (d *fakeDoor) stream(ctx context.Context, p *proxy.Plan, caller http.Header, w http.ResponseWriter, ev *events.Request) {
	req, err := http.NewRequestWithContext(ctx, p.Method, p.URL.String(), bytes.NewReader(p.Body))
	if err != nil {
		proxy.WriteAnswer(w, p.Fail(task.NewFault(task.KindInternal, "building the request failed")), "")
		return
	}
	req.Header = caller.Clone()
	for _, k := range p.Drop {
		req.Header.Del(k)
	}
	for k, v := range p.Header {
		req.Header[k] = v
	}
	resp, err := d.client.Do(req)
	if err != nil {
		failed, failure := p.FailUpstream(false)
		ev.UpstreamFailure = failure
		proxy.WriteAnswer(w, failed, "")
		return
	}
	defer resp.Body.Close()
	streams, refused := p.Reads(resp.Header)
	if refused != nil || !streams {
		proxy.WriteAnswer(w, p.Fail(task.NewFault(task.KindUpstreamInvalid, "not a stream")), "")
		return
	}
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	ev.UpstreamFailure = p.Stream(ctx, resp.Body, func(b []byte) error { _, err := w.Write(b); return err })
}

// countingSink counts the events of the fake door's mode.
type countingSink struct {
	decided, served int
}

func (s *countingSink) Decided(ev events.Decision) {
	if ev.Mode == fakeMode {
		s.decided++
	}
}
func (s *countingSink) Served(ev events.Request) {
	if ev.Mode == fakeMode {
		s.served++
	}
}
func (s *countingSink) TaskChanged(events.Task) {}
func (s *countingSink) Pushed(events.Push)      {}

// TestFakeFrontDoor: a door built on the core's exported API alone admits a
// request, forwards it through the plan's executor to a real agent on
// 127.0.0.1 (the a2a-go 0.3 seed agent), and the agent's answers, whole and
// streamed, are observed into the lifecycle: the tasks are recorded as the
// caller's, another tenant's caller is answered that they do not exist, and
// the door's requests are decided and reported under its own mode.
func TestFakeFrontDoor(t *testing.T) {
	agent, err := seedagents.StartSanctions()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Close() })
	idp, err := devidp.New(t.TempDir(), "https://idp.test", "writ")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(fmt.Appendf(nil, `policies: [../../policies]
identity:
  jwt: [{issuer: "https://idp.test", audiences: [writ], jwks_file: %s}]
agents:
  - {name: sanctions-screening-agent, route: /, upstream: '%s', protocol: a2a, owner: group-compliance,
     tenants: [wholesale, retail], max_data_classification: restricted, security_schemes: [oauth2]}
`, idp.JWKSFile, agent.URL))
	if err != nil {
		t.Fatal(err)
	}
	ident, err := identity.New(cfg.Identity)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ident.Close)
	pol, err := authz.LoadPolicy(t.Context(), cfg.Policies, authz.LoadOptions{SkipTests: true})
	if err != nil {
		t.Fatal(err)
	}
	engine, err := authz.NewEngine(pol, authz.Options{})
	if err != nil {
		t.Fatal(err)
	}
	store := task.NewMemoryStore(task.MemoryLimits{MaxTasks: 100, MaxPerOwner: 100, TTL: time.Hour})
	sink := &countingSink{}
	core, err := proxy.New(cfg, proxy.Deps{Identity: ident, Engine: engine, Store: store, Events: sink,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(core.Close)
	door := &fakeDoor{core: core, client: proxy.NewClient(proxy.NewTransport(cfg.Limits.UpstreamTimeout))}

	token := func(agent, tenant string) http.Header {
		tok, err := idp.Token(devidp.Caller{Agent: agent, User: "u-1", Tenant: tenant, Classification: "restricted",
			Scope: "delegate", Chain: []string{"orchestrator"}})
		if err != nil {
			t.Fatal(err)
		}
		return http.Header{"Authorization": {"Bearer " + tok}, "Content-Type": {"application/json"}}
	}
	rpc := func(method string, params map[string]any) []byte {
		raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
		return raw
	}
	message := map[string]any{"message": map[string]any{"kind": "message", "messageId": "m-1", "role": "user",
		"parts": []any{map[string]any{"kind": "text", "text": "Screen Acme Trading FZE"}}}}
	owner := task.Owner{AgentID: "payments-investigator", Tenant: "wholesale", UserID: "u-1"}

	status, h, body := door.serve(t.Context(), http.MethodPost, "/", token(owner.AgentID, owner.Tenant), rpc("message/send", message))
	var sent struct {
		Result struct {
			ID     string                 `json:"id"`
			Status struct{ State string } `json:"status"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &sent); err != nil || status != http.StatusOK || sent.Result.ID == "" || h.Get("Writ-Decision-Id") == "" {
		t.Fatalf("send through the fake door: %d %v %s", status, h, body)
	}
	rec, ok, err := store.Get(t.Context(), task.Ref{Agent: "sanctions-screening-agent", ID: sent.Result.ID})
	if err != nil || !ok || !task.SameOwner(rec.Task.Owner, owner) || string(rec.Task.State) == "" {
		t.Fatalf("the answer was not observed into the lifecycle: %+v %v %v", rec, ok, err)
	}

	status, _, body = door.serve(t.Context(), http.MethodPost, "/", token(owner.AgentID, owner.Tenant), rpc("message/stream", message))
	streamed := regexp.MustCompile(`"taskId":"([^"]+)"`).FindSubmatch(body)
	if status != http.StatusOK || !strings.Contains(string(body), "data:") || streamed == nil {
		t.Fatalf("stream through the fake door: %d %s", status, body)
	}
	rec, ok, err = store.Get(t.Context(), task.Ref{Agent: "sanctions-screening-agent", ID: string(streamed[1])})
	if err != nil || !ok || !task.SameOwner(rec.Task.Owner, owner) || store.Len() != 2 {
		t.Fatalf("the stream was not observed into the lifecycle: %+v %v %v, %d tasks", rec, ok, err, store.Len())
	}

	status, _, body = door.serve(t.Context(), http.MethodPost, "/", token("retail-bot", "retail"), rpc("tasks/get", map[string]any{"id": sent.Result.ID}))
	if status != http.StatusOK || !strings.Contains(string(body), "-32001") {
		t.Fatalf("another tenant's caller asked for the task: %d %s", status, body)
	}
	if sink.decided != 3 || sink.served != 3 {
		t.Fatalf("%d decisions, %d served events under the fake door's mode; want 3 each", sink.decided, sink.served)
	}
}
