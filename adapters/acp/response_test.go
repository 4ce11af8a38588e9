package acp

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/writ-authz/writ/task"
)

var screening = map[string]any{"matches": float64(1), "top_score": 0.83, "list": "SDN", "recommendation": "manual_review"}

const screeningText = "Acme Trading FZE: 1 possible match (score 0.83) against SDN list"

// fixtureEvents is what the run_stream stream and the run_events list both say.
var fixtureEvents = []task.Event{
	{Kind: task.EventStatus, TaskID: runID, ContextID: sessionID, State: task.Queued},
	{Kind: task.EventStatus, TaskID: runID, ContextID: sessionID, State: task.Running},
	{Kind: task.EventArtifact, TaskID: runID, ContextID: sessionID, Artifact: &task.ArtifactRef{Name: "sanctions-screening"}},
	{Kind: task.EventStatus, TaskID: runID, ContextID: sessionID, State: task.Succeeded, Final: true},
}

func taskEvent(t *task.Task) []task.Event {
	return []task.Event{{Kind: task.EventTask, TaskID: t.ID, ContextID: t.ContextID, State: t.State, Task: t}}
}

// TestParseResponseFixtures parses every response fixture as the answer to its
// request.
func TestParseResponseFixtures(t *testing.T) {
	done := &task.Task{ID: runID, ContextID: sessionID, State: task.Succeeded, OutputText: screeningText,
		Structured: screening, Artifacts: []string{"sanctions-screening"}}
	want := map[string][]task.Event{
		"agents_list": nil,
		"agent_get":   nil,
		"session_get": nil,
		"run_sync":    taskEvent(done),
		"run_get":     taskEvent(done),
		"run_resume":  taskEvent(done),
		"run_async":   taskEvent(&task.Task{ID: runID2, ContextID: "e3a9f0b1-7c2d-4f6e-8a1b-2c3d4e5f6a7b", State: task.Queued}),
		"run_cancel":  taskEvent(&task.Task{ID: runID, ContextID: sessionID, State: task.Running}),
		"run_events":  fixtureEvents[2:], // history: its artifacts and last status
		"run_not_found": {{Kind: task.EventError, TaskID: missingID, Err: &task.Fault{Kind: task.KindTaskNotFound,
			Message: "Run " + missingID + " not found", Code: 404}}},
	}
	for _, name := range fixtureNames(t, ".response.http") {
		if name == "run_stream" || name == "run_unknown_status" {
			continue // TestStreamFixture, TestRunStatuses
		}
		t.Run(name, func(t *testing.T) {
			req, f := Parse(readRequest(t, name), Options{})
			if f != nil {
				t.Fatal(f)
			}
			status, _, body := readResponse(t, name)
			got, err := ParseResponse(&req, status, body)
			if err != nil {
				t.Fatal(err)
			}
			w, ok := want[name]
			if !ok {
				t.Fatalf("fixture %s has no expectation in this table", name)
			}
			if !reflect.DeepEqual(got, w) {
				t.Fatalf("got  %+v\nwant %+v", got, w)
			}
		})
	}
}

// TestRunStatuses maps every ACP status, and refuses unknown ones.
func TestRunStatuses(t *testing.T) {
	table := []struct {
		status string
		state  task.State
		ok     bool
	}{
		{"created", task.Queued, true},
		{"in-progress", task.Running, true},
		{"awaiting", task.AwaitingInput, true},
		{"cancelling", task.Running, true},
		{"cancelled", task.Cancelled, true},
		{"completed", task.Succeeded, true},
		{"failed", task.Failed, true},
		{"paused", "", false},
		{"", "", false},
		{"COMPLETED", "", false},
	}
	req := &task.Request{Operation: task.OpGet, TaskID: "r"}
	for _, tc := range table {
		body := `{"run_id":"r","agent_name":"a","status":"` + tc.status + `","output":[]}`
		ev, err := ParseResponse(req, 200, []byte(body))
		if !tc.ok {
			if err == nil {
				t.Errorf("status %q: no error, events %+v", tc.status, ev)
			}
			continue
		}
		if err != nil || len(ev) != 1 || ev[0].State != tc.state || ev[0].Task.State != tc.state {
			t.Errorf("status %q: %+v, %v; want %s", tc.status, ev, err, tc.state)
		}
	}
	_, _, body := readResponse(t, "run_unknown_status")
	if _, err := ParseResponse(req, 200, body); err == nil || !strings.Contains(err.Error(), "paused") {
		t.Fatalf("run_unknown_status: %v", err)
	}
	if _, err := ParseRun(body); err == nil {
		t.Fatal("ParseRun accepted status paused")
	}
	if _, err := ParseResponse(req, 200, []byte(`{"run_id":"r"}`)); err == nil {
		t.Fatal("a run without status was accepted")
	}
}

func TestParseResponseOther(t *testing.T) {
	get := &task.Request{Operation: task.OpGet, TaskID: "r", Protocol: proto("GET /runs/{run_id}")}
	for _, body := range []string{`[]`, `{"id":"x"}`, `{"run_id":7,"status":"created"}`, `{"events":{}}`, `{"events":[{"type":"bogus"}]}`, `{`} {
		if ev, err := ParseResponse(get, 200, []byte(body)); err == nil {
			t.Errorf("%s: no error, %+v", body, ev)
		}
	}
	if ev, err := ParseResponse(get, 204, nil); err != nil || ev != nil {
		t.Errorf("empty answer: %+v, %v", ev, err)
	}
	// A non-JSON error page still becomes an EventError.
	ev, err := ParseResponse(get, 502, []byte("<html>bad gateway</html>"))
	if err != nil || len(ev) != 1 || ev[0].Err.Kind != task.KindUpstreamUnavailable || ev[0].Err.Code != 502 {
		t.Fatalf("502 page: %+v, %v", ev, err)
	}
	// The reference server's 403 on cancelling a finished run.
	cancel := &task.Request{Operation: task.OpCancel, TaskID: "r"}
	ev, _ = ParseResponse(cancel, 403, []byte(`{"code":"server_error","message":"Run in terminal status completed can't be cancelled"}`))
	if ev[0].Err.Kind != task.KindTaskNotCancelable {
		t.Fatalf("403 cancel: %+v", ev[0].Err)
	}
	card := &task.Request{Operation: task.OpCard, Agent: "x"}
	ev, _ = ParseResponse(card, 404, []byte(`{"code":"not_found","message":"Agent x not found"}`))
	if ev[0].Err.Kind != task.KindUnknownOperation {
		t.Fatalf("404 agent: %+v", ev[0].Err)
	}
}

func TestStreamFixture(t *testing.T) {
	req, f := Parse(readRequest(t, "run_stream"), Options{})
	if f != nil {
		t.Fatal(f)
	}
	status, ct, body := readResponse(t, "run_stream")
	if status != 200 || ct != "text/event-stream" {
		t.Fatalf("status %d, content type %q", status, ct)
	}
	var got []task.Event
	var raw bytes.Buffer
	sr := NewStreamReader(&req, bytes.NewReader(body), 0)
	for {
		ev, events, err := sr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		raw.Write(ev.Raw)
		got = append(got, events...)
	}
	if !reflect.DeepEqual(got, fixtureEvents) {
		t.Fatalf("got  %+v\nwant %+v", got, fixtureEvents)
	}
	if !bytes.Equal(raw.Bytes(), body) {
		t.Fatal("Raw blocks do not reassemble the stream")
	}
}

// TestStreamTolerance: comments, id lines, a mid-stream error, a bad event that
// the stream survives, an inconsistent run event.
func TestStreamTolerance(t *testing.T) {
	stream := ": keep-alive\n\n" +
		"id: 1\ndata: {\"type\":\"run.created\",\"run\":{\"run_id\":\"r9\",\"session_id\":\"s9\",\"status\":\"created\"}}\n\n" +
		"data: {\"type\":\"run.awaiting\",\"run\":{\"run_id\":\"r9\",\"session_id\":\"s9\",\"status\":\"awaiting\",\"await_request\":{\"type\":\"message\"}}}\n\n" +
		"data: {\"type\":\"message.part\",\"part\":{\"content_type\":\"text/plain\",\"content\":\"x\"}}\n\n" +
		"id: 2\ndata: {\"type\":\"error\",\"error\":{\"code\":\"server_error\",\"message\":\"agent crashed\",\"data\":null}}\n\n" +
		"data: {\"type\":\"telepathy\"}\n\n" +
		"data: {\"type\":\"run.failed\",\"run\":{\"run_id\":\"r9\",\"status\":\"completed\"}}\n\n" +
		"data: {\"type\":\"generic\",\"generic\":{\"progress\":0.5}}\n\n" +
		"data: {\"type\":\"run.failed\",\"run\":{\"run_id\":\"r9\",\"session_id\":\"s9\",\"status\":\"failed\"}}"
	type step struct {
		id      string
		comment bool
		events  []task.Event
		err     bool
	}
	want := []step{
		{comment: true},
		{id: "1", events: []task.Event{{Kind: task.EventStatus, TaskID: "r9", ContextID: "s9", State: task.Queued}}},
		{events: []task.Event{{Kind: task.EventStatus, TaskID: "r9", ContextID: "s9", State: task.AwaitingInput, Final: true}}},
		{}, // an unnamed message part: content, not lifecycle
		{id: "2", events: []task.Event{{Kind: task.EventError, TaskID: "r9", ContextID: "s9",
			Err: &task.Fault{Kind: task.KindInternal, Message: "agent crashed"}}}},
		{err: true}, // unknown event type
		{err: true}, // run.failed carrying a completed run
		{},          // generic
		{events: []task.Event{{Kind: task.EventStatus, TaskID: "r9", ContextID: "s9", State: task.Failed, Final: true}}},
	}
	sr := NewStreamReader(&task.Request{Operation: task.OpStream}, strings.NewReader(stream), 0)
	for i, w := range want {
		ev, events, err := sr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("step %d: early EOF", i)
		}
		if (err != nil) != w.err || ev.Comment != w.comment || ev.ID != w.id || !reflect.DeepEqual(events, w.events) {
			t.Fatalf("step %d: comment=%v id=%q events=%+v err=%v; want %+v", i, ev.Comment, ev.ID, events, err, w)
		}
	}
	if _, _, err := sr.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("want EOF, got %v", err)
	}
}

// TestDuplicateKeyAnswers: a run (or a stream event) that names a key twice
// is refused; the same answer once is read.
//
// Threat: an agent answers {"run_id":"mine","run_id":"victim"}; readers that
// keep the first key and readers that keep the last see two runs, and writ
// records one while the caller acts on the other. Defence: answers pass the
// duplicate-key guard requests pass.
func TestDuplicateKeyAnswers(t *testing.T) {
	req := &task.Request{Operation: task.OpGet, TaskID: "r1"}
	run := `{"run_id":"r1","agent_name":"a","status":"completed","output":[]}`
	if _, err := ParseResponse(req, 200, []byte(run)); err != nil {
		t.Fatalf("a run: %v", err)
	}
	if _, err := ParseResponse(req, 200, []byte(`{"run_id":"r1","run_id":"r2","agent_name":"a","status":"completed","output":[]}`)); err == nil {
		t.Error("a run with run_id twice was read")
	}
	ev := `{"type":"run.completed","run":{"run_id":"r1","run_id":"r2","agent_name":"a","status":"completed"}}`
	if _, _, err := NewStreamReader(req, strings.NewReader("data: "+ev+"\n\n"), 0).Next(); err == nil {
		t.Error("an event with run_id twice was read")
	}
}
