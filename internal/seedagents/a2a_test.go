package seedagents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func startAgent(t *testing.T, start func(...Option) (*Agent, error), opts ...Option) *Agent {
	t.Helper()
	a, err := start(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// headerInterceptor adds a header to every client call.
type headerInterceptor struct{ name, value string }

func (h headerInterceptor) Before(ctx context.Context, req *a2aclient.Request) (context.Context, error) {
	if h.name != "" {
		req.Meta[h.name] = []string{h.value}
	}
	return ctx, nil
}

func (headerInterceptor) After(context.Context, *a2aclient.Response) error { return nil }

// newClient resolves a's card and builds an a2a-go client from it; the client
// sends Writ-Caller: caller when caller is not empty.
func newClient(t *testing.T, ctx context.Context, a *Agent, caller string) *a2aclient.Client {
	t.Helper()
	card, err := agentcard.DefaultResolver.Resolve(ctx, a.URL)
	if err != nil {
		t.Fatalf("resolve card: %v", err)
	}
	var hi headerInterceptor
	if caller != "" {
		hi = headerInterceptor{CallerHeader, caller}
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithInterceptors(hi))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

func userMsg(parts ...a2a.Part) *a2a.Message { return a2a.NewMessage(a2a.MessageRoleUser, parts...) }

func screenMsg(who string) *a2a.Message {
	parts := []a2a.Part{a2a.TextPart{Text: "Screen the beneficiary of PMT-771"}}
	if who != "" {
		parts = append(parts, a2a.DataPart{Data: map[string]any{"beneficiary": who}})
	}
	return userMsg(parts...)
}

// asTask(t)(c.SendMessage(...)) fails the test unless the send returned a task.
func asTask(t *testing.T) func(a2a.SendMessageResult, error) *a2a.Task {
	return func(r a2a.SendMessageResult, err error) *a2a.Task {
		t.Helper()
		if err != nil {
			t.Fatalf("send: %v", err)
		}
		task, ok := r.(*a2a.Task)
		if !ok {
			t.Fatalf("send returned %T, want a task", r)
		}
		return task
	}
}

func text(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	var b []string
	for _, p := range m.Parts {
		if tp, ok := p.(a2a.TextPart); ok {
			b = append(b, tp.Text)
		}
	}
	return strings.Join(b, " ")
}

// rawRPC posts one JSON-RPC call and returns the error code (0 for a result).
func rawRPC(t *testing.T, ctx context.Context, a *Agent, method string, params any) int {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.URL+"/", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s: decode: %v", method, err)
	}
	if out.Error == nil {
		return 0
	}
	return out.Error.Code
}

func checkArtifact(t *testing.T, arts []*a2a.Artifact, who string) {
	t.Helper()
	if len(arts) != 1 {
		t.Fatalf("%d artifacts, want 1", len(arts))
	}
	art := arts[0]
	if art.Name != ArtifactName || len(art.Parts) != 2 {
		t.Fatalf("artifact %q with %d parts", art.Name, len(art.Parts))
	}
	if tp, ok := art.Parts[0].(a2a.TextPart); !ok || tp.Text != who+": 1 possible match (score 0.83) against SDN list" {
		t.Fatalf("text part %#v", art.Parts[0])
	}
	dp, ok := art.Parts[1].(a2a.DataPart)
	if !ok {
		t.Fatalf("second part %T, want data", art.Parts[1])
	}
	want := map[string]any{"matches": 1.0, "top_score": 0.83, "list": "SDN", "recommendation": "manual_review"}
	for k, v := range want {
		if fmt.Sprint(dp.Data[k]) != fmt.Sprint(v) {
			t.Fatalf("data[%s] = %v, want %v (%v)", k, dp.Data[k], v, dp.Data)
		}
	}
}

func TestSanctionsSend(t *testing.T) {
	ctx := testCtx(t)
	a := startAgent(t, StartSanctions)
	c := newClient(t, ctx, a, "forged-caller")
	for _, tc := range []struct{ in, want string }{{"Globex Ltd", "Globex Ltd"}, {"", DefaultBeneficiary}} {
		task := asTask(t)(c.SendMessage(ctx, &a2a.MessageSendParams{Message: screenMsg(tc.in)}))
		if task.Status.State != a2a.TaskStateCompleted || text(task.Status.Message) != ScreeningDone {
			t.Fatalf("state %s %q", task.Status.State, text(task.Status.Message))
		}
		checkArtifact(t, task.Artifacts, tc.want)
	}

	var sends []Observed
	cards := 0
	for _, o := range a.Requests() {
		switch o.Method {
		case "message/send":
			sends = append(sends, o)
		case "GET /.well-known/agent-card.json":
			cards++
		}
	}
	if cards != 1 || len(sends) != 2 {
		t.Fatalf("saw %d card fetches and %d sends: %+v", cards, len(sends), a.Requests())
	}
	for _, o := range sends {
		if o.Caller != "forged-caller" || o.Header.Get(CallerHeader) != "forged-caller" {
			t.Fatalf("caller %q", o.Caller)
		}
		if o.TaskID == "" || !strings.Contains(o.Body, `"message/send"`) {
			t.Fatalf("observed %+v", o)
		}
	}
}

func TestSanctionsStream(t *testing.T) {
	ctx := testCtx(t)
	a := startAgent(t, StartSanctions)
	c := newClient(t, ctx, a, "")
	var got []string
	var id a2a.TaskID
	for ev, err := range c.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: screenMsg("Globex Ltd")}) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		switch e := ev.(type) {
		case *a2a.Task:
			id = e.ID
			got = append(got, "task:"+string(e.Status.State))
		case *a2a.TaskStatusUpdateEvent:
			got = append(got, fmt.Sprintf("status:%s:%v", e.Status.State, e.Final))
		case *a2a.TaskArtifactUpdateEvent:
			got = append(got, "artifact:"+e.Artifact.Name)
		default:
			got = append(got, fmt.Sprintf("%T", ev))
		}
	}
	want := "task:submitted status:working:false artifact:sanctions-screening status:completed:true"
	if strings.Join(got, " ") != want {
		t.Fatalf("events\n got %v\nwant %v", got, want)
	}
	task, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("state %s", task.Status.State)
	}
	checkArtifact(t, task.Artifacts, "Globex Ltd")
}

func TestCard(t *testing.T) {
	ctx := testCtx(t)
	a := startAgent(t, StartSanctions)
	card, err := agentcard.DefaultResolver.Resolve(ctx, a.URL)
	if err != nil {
		t.Fatal(err)
	}
	if card.Name != "sanctions-screening-agent" || card.URL != a.URL+"/" || card.Description != sanctionsDesc ||
		!card.Capabilities.Streaming || card.Capabilities.PushNotifications || card.ProtocolVersion != "0.3.0" {
		t.Fatalf("card %+v", card)
	}
	if len(card.Skills) != 1 || card.Skills[0].ID != "screen" ||
		strings.Join(card.Skills[0].Tags, ",") != "sanctions,compliance,screening" {
		t.Fatalf("skills %+v", card.Skills)
	}

	b := startAgent(t, StartClarifier, WithName("other"), WithCardURL("http://127.0.0.1:9/writ/"), WithPushNotifications(true))
	card, err = agentcard.DefaultResolver.Resolve(ctx, b.URL)
	if err != nil {
		t.Fatal(err)
	}
	if card.Name != "other" || b.Name != "other" || card.URL != "http://127.0.0.1:9/writ/" || !card.Capabilities.PushNotifications {
		t.Fatalf("card %+v", card)
	}
}

func TestPushNotifications(t *testing.T) {
	ctx := testCtx(t)
	off := startAgent(t, StartSanctions)
	if code := rawRPC(t, ctx, off, "tasks/pushNotificationConfig/set", map[string]any{
		"taskId": "t1", "pushNotificationConfig": map[string]any{"url": "http://127.0.0.1:9/cb"},
	}); code != -32003 {
		t.Fatalf("push set with push off: code %d, want -32003", code)
	}

	type push struct {
		token string
		state a2a.TaskState
	}
	got := make(chan push, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var task a2a.Task
		_ = json.NewDecoder(r.Body).Decode(&task)
		got <- push{r.Header.Get("X-A2A-Notification-Token"), task.Status.State}
	}))
	defer hook.Close()

	on := startAgent(t, StartSanctions, WithPushNotifications(true))
	c := newClient(t, ctx, on, "")
	asTask(t)(c.SendMessage(ctx, &a2a.MessageSendParams{
		Message: screenMsg(""),
		Config:  &a2a.MessageSendConfig{PushConfig: &a2a.PushConfig{URL: hook.URL + "/cb", Token: "s3cret"}},
	}))
	for {
		select {
		case p := <-got:
			if p.token != "s3cret" {
				t.Fatalf("token %q", p.token)
			}
			if p.state == a2a.TaskStateCompleted {
				return
			}
		case <-ctx.Done():
			t.Fatal("no push with the completed task")
		}
	}
}

func TestClarifier(t *testing.T) {
	ctx := testCtx(t)
	a := startAgent(t, StartClarifier)
	c := newClient(t, ctx, a, "")
	task := asTask(t)(c.SendMessage(ctx, &a2a.MessageSendParams{Message: userMsg(a2a.TextPart{Text: "Screen this entity"})}))
	if task.Status.State != a2a.TaskStateInputRequired || text(task.Status.Message) != ClarifyQuestion {
		t.Fatalf("first send: %s %q", task.Status.State, text(task.Status.Message))
	}
	reply := userMsg(a2a.TextPart{Text: "UAE and UN lists"})
	reply.TaskID, reply.ContextID = task.ID, task.ContextID
	done := asTask(t)(c.SendMessage(ctx, &a2a.MessageSendParams{Message: reply}))
	if done.ID != task.ID || done.Status.State != a2a.TaskStateCompleted || text(done.Status.Message) != ClarifyDone {
		t.Fatalf("reply: %s %s %q", done.ID, done.Status.State, text(done.Status.Message))
	}
	got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	users := 0
	for _, m := range got.History {
		if m.Role == a2a.MessageRoleUser {
			users++
		}
	}
	if users != 2 {
		t.Fatalf("history has %d user messages, want 2", users)
	}

	// The same over a stream: submitted, working, input-required (final).
	var states []string
	for ev, err := range c.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: userMsg(a2a.TextPart{Text: "Screen"})}) {
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.(type) {
		case *a2a.Task:
			states = append(states, string(e.Status.State))
		case *a2a.TaskStatusUpdateEvent:
			states = append(states, fmt.Sprintf("%s:%v", e.Status.State, e.Final))
		}
	}
	if strings.Join(states, " ") != "submitted working:false input-required:true" {
		t.Fatalf("stream states %v", states)
	}
}

func TestSlowCancel(t *testing.T) {
	ctx := testCtx(t)
	a := startAgent(t, StartSlow)
	c := newClient(t, ctx, a, "")

	type item struct {
		ev  a2a.Event
		err error
	}
	events := make(chan item, 16)
	go func() {
		defer close(events)
		for ev, err := range c.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: screenMsg("")}) {
			events <- item{ev, err}
		}
	}()
	var id a2a.TaskID
	for id == "" {
		select {
		case it, ok := <-events:
			if !ok || it.err != nil {
				t.Fatalf("stream ended early: %v", it.err)
			}
			if su, ok := it.ev.(*a2a.TaskStatusUpdateEvent); ok && su.Status.State == a2a.TaskStateWorking {
				id = su.TaskID
			}
		case <-ctx.Done():
			t.Fatal("no working event")
		}
	}

	task, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: id})
	if err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if task.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel: state %s", task.Status.State)
	}
	var last *a2a.TaskStatusUpdateEvent
	for it := range events {
		if it.err != nil {
			t.Fatalf("stream: %v", it.err)
		}
		if su, ok := it.ev.(*a2a.TaskStatusUpdateEvent); ok {
			last = su
		}
	}
	if last == nil || last.Status.State != a2a.TaskStateCanceled || !last.Final || text(last.Status.Message) != CancelledText {
		t.Fatalf("stream ended with %+v", last)
	}

	if _, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: id}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
		t.Fatalf("cancel again: %v, want TaskNotCancelable", err)
	}
	if code := rawRPC(t, ctx, a, "tasks/cancel", map[string]any{"id": id}); code != -32002 {
		t.Fatalf("cancel again: code %d, want -32002", code)
	}
	got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: id})
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("get after cancel: %v %v", got, err)
	}
}

// TestStateHook: the hook hears each state a task enters once, in order, so a
// caller can wait for the slow agent's task to be working without polling.
func TestStateHook(t *testing.T) {
	ctx := testCtx(t)
	type change struct {
		id    a2a.TaskID
		state a2a.TaskState
	}
	changes := make(chan change, 16)
	a := startAgent(t, StartSlow, WithStateHook(func(id a2a.TaskID, st a2a.TaskState) { changes <- change{id, st} }))
	c := newClient(t, ctx, a, "")
	task := asTask(t)(c.SendMessage(ctx, &a2a.MessageSendParams{Message: screenMsg(""),
		Config: &a2a.MessageSendConfig{Blocking: new(false)}}))
	next := func() change {
		t.Helper()
		select {
		case ch := <-changes:
			if ch.id != task.ID {
				t.Fatalf("change of task %s, want %s", ch.id, task.ID)
			}
			return ch
		case <-ctx.Done():
			t.Fatal("no state change")
		}
		return change{}
	}
	for _, want := range []a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking} {
		if got := next(); got.state != want {
			t.Fatalf("state %s, want %s", got.state, want)
		}
	}
	if _, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID}); err != nil {
		t.Fatal(err)
	}
	if got := next(); got.state != a2a.TaskStateCanceled {
		t.Fatalf("state %s after cancel, want canceled", got.state)
	}
	select {
	case ch := <-changes:
		t.Fatalf("a repeated state was reported: %+v", ch)
	default:
	}
}

func TestCancelParkedAndCompleted(t *testing.T) {
	ctx := testCtx(t)
	clar := startAgent(t, StartClarifier)
	c := newClient(t, ctx, clar, "")
	parked := asTask(t)(c.SendMessage(ctx, &a2a.MessageSendParams{Message: userMsg(a2a.TextPart{Text: "Screen"})}))
	task, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: parked.ID})
	if err != nil || task.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel input-required task: %v %v", task, err)
	}

	sanc := startAgent(t, StartSanctions)
	c = newClient(t, ctx, sanc, "")
	done := asTask(t)(c.SendMessage(ctx, &a2a.MessageSendParams{Message: screenMsg("")}))
	if code := rawRPC(t, ctx, sanc, "tasks/cancel", map[string]any{"id": done.ID}); code != -32002 {
		t.Fatalf("cancel completed task: code %d, want -32002", code)
	}
}

func TestSlowCompletesAfterDelay(t *testing.T) {
	ctx := testCtx(t)
	a := startAgent(t, StartSlow, WithDelay(20*time.Millisecond))
	c := newClient(t, ctx, a, "")
	task := asTask(t)(c.SendMessage(ctx, &a2a.MessageSendParams{Message: screenMsg("")}))
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("state %s", task.Status.State)
	}
	checkArtifact(t, task.Artifacts, DefaultBeneficiary)
}

func TestUnknownTask(t *testing.T) {
	ctx := testCtx(t)
	a := startAgent(t, StartSanctions)
	c := newClient(t, ctx, a, "")
	const unknown = "00000000-0000-4000-8000-000000000000"
	if _, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: unknown}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
	for _, m := range []string{"tasks/get", "tasks/cancel"} {
		if code := rawRPC(t, ctx, a, m, map[string]any{"id": unknown}); code != -32001 {
			t.Fatalf("%s unknown: code %d, want -32001", m, code)
		}
	}
	var o Observed
	for _, r := range a.Requests() {
		if r.Method == "tasks/cancel" {
			o = r
		}
	}
	if o.TaskID != unknown {
		t.Fatalf("observed cancel %+v", o)
	}
}

func TestCloseEndsStreams(t *testing.T) {
	ctx := testCtx(t)
	a := startAgent(t, StartSlow)
	c := newClient(t, ctx, a, "")
	ended := make(chan struct{})
	working := make(chan struct{}, 1)
	go func() {
		defer close(ended)
		for ev := range c.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: screenMsg("")}) {
			if su, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && su.Status.State == a2a.TaskStateWorking {
				working <- struct{}{}
			}
		}
	}()
	select {
	case <-working:
	case <-ctx.Done():
		t.Fatal("no working event")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	select {
	case <-ended:
	case <-ctx.Done():
		t.Fatal("stream still open after Close")
	}
}

func TestBounds(t *testing.T) {
	s := newTaskStore(2, nil)
	for _, id := range []a2a.TaskID{"a", "b", "a", "c"} {
		if err := s.Save(t.Context(), &a2a.Task{ID: id, ContextID: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Get(t.Context(), "a"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("oldest task kept: %v", err)
	}
	if _, err := s.Get(t.Context(), "c"); err != nil {
		t.Fatal(err)
	}

	a := &Agent{}
	for i := range maxObserved + 5 {
		a.record(&Observed{Path: fmt.Sprint(i)})
	}
	got := a.Requests()
	if len(got) != maxObserved || got[0].Path != "5" {
		t.Fatalf("%d requests kept, first %q", len(got), got[0].Path)
	}
}
