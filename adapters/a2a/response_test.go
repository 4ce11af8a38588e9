package a2a

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-authz/writ/task"
)

// respWant is the lifecycle a captured response must yield.
type respWant struct {
	states []task.State // states of task/status events, in order
	kinds  []task.EventKind
	fault  task.Kind // for error answers
	none   bool      // no events at all
	final  bool      // the last event is final
	names  []string  // artifact names seen
}

var capturedResponses = map[string]respWant{
	"send":                {states: []task.State{task.Succeeded}, names: []string{"sanctions-screening"}},
	"send_file":           {states: []task.State{task.Succeeded}},
	"send_push":           {states: []task.State{task.Succeeded}},
	"send_input_required": {states: []task.State{task.AwaitingInput}},
	"send_reply":          {states: []task.State{task.Succeeded}},
	"get":                 {states: []task.State{task.Succeeded}},
	"cancel":              {states: []task.State{task.Cancelled}},
	"cancel_again":        {states: []task.State{task.Cancelled}},
	"cancel_terminal":     {fault: task.KindTaskNotCancelable},
	"get_unknown":         {fault: task.KindTaskNotFound},
	"push_set":            {none: true},
	"push_get":            {none: true},
	"push_list":           {none: true},
	"push_delete":         {none: true},
	"card_extended":       {none: true},
	"error_parse":         {fault: task.KindMalformed},
	"error_method":        {fault: task.KindUnknownOperation},
	// The JS SDK's REST handler answers bad JSON with reason INVALID_PARAMS.
	"v1.0/rest/error_parse": {fault: task.KindInvalidParams},
	"stream": {kinds: []task.EventKind{task.EventTask, task.EventStatus, task.EventArtifact, task.EventStatus},
		states: []task.State{task.Queued, task.Running, task.Succeeded}, final: true, names: []string{"sanctions-screening"}},
}

// TestCapturedResponses parses every answer the real SDK servers gave into
// lifecycle events.
func TestCapturedResponses(t *testing.T) {
	for combo := range methods {
		files, _ := filepath.Glob(filepath.Join(fixtures, combo, "*.response.http"))
		for _, f := range files {
			name := strings.TrimSuffix(filepath.Base(f), ".response.http")
			t.Run(combo+"/"+name, func(t *testing.T) {
				_, req, _ := readRequest(t, strings.Replace(f, ".response.", ".request.", 1), Options{})
				status, body := readResponse(t, f)
				var events []task.Event
				if req.Operation == task.OpStream || req.Operation == task.OpSubscribe {
					sr := NewStreamReader(&req, bytes.NewReader(body), 0)
					for {
						_, evs, err := sr.Next()
						if errors.Is(err, io.EOF) {
							break
						}
						if err != nil {
							t.Fatalf("stream: %v", err)
						}
						events = append(events, evs...)
					}
				} else {
					var err error
					events, err = ParseResponse(&req, status, body)
					if err != nil {
						t.Fatalf("response: %v", err)
					}
				}
				if name == "list" {
					if len(events) == 0 || events[0].Kind != task.EventTask {
						t.Errorf("list: %+v", events)
					}
					return
				}
				if name == "subscribe" {
					if len(events) == 0 || !events[len(events)-1].State.Terminal() {
						t.Errorf("subscribe does not end terminal: %+v", events)
					}
					return
				}
				w, ok := capturedResponses[combo+"/"+name]
				if !ok {
					w, ok = capturedResponses[name]
				}
				if !ok {
					t.Fatalf("response fixture without expectation")
				}
				checkEvents(t, events, w)
			})
		}
	}
}

func checkEvents(t *testing.T, events []task.Event, w respWant) {
	t.Helper()
	switch {
	case w.none:
		if len(events) != 0 {
			t.Errorf("events = %+v, want none", events)
		}
		return
	case w.fault != "":
		if len(events) != 1 || events[0].Kind != task.EventError || events[0].Err.Kind != w.fault {
			t.Errorf("events = %+v, want one %s error", events, w.fault)
		}
		return
	}
	var states []task.State
	var kinds []task.EventKind
	var names []string
	for _, e := range events {
		kinds = append(kinds, e.Kind)
		if e.State != "" {
			states = append(states, e.State)
		}
		if e.Kind != task.EventMessage && e.TaskID == "" {
			t.Errorf("event without task id: %+v", e)
		}
		if e.Artifact != nil {
			names = append(names, e.Artifact.Name)
		}
		if e.Task != nil {
			names = append(names, e.Task.Artifacts...)
		}
	}
	if !equal(states, w.states) {
		t.Errorf("states = %v, want %v", states, w.states)
	}
	if w.kinds != nil && !equal(kinds, w.kinds) {
		t.Errorf("kinds = %v, want %v", kinds, w.kinds)
	}
	if w.names != nil && !equal(names, w.names) {
		t.Errorf("artifact names = %v, want %v", names, w.names)
	}
	if w.final && !events[len(events)-1].Final {
		t.Errorf("last event not final: %+v", events[len(events)-1])
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestStreamTolerance: comments, id lines, keep-alives, CRLF framing and errors in
// the middle of a stream.
func TestStreamTolerance(t *testing.T) {
	req := task.Request{Operation: task.OpStream, Protocol: task.Protocol{Name: ProtocolName, Version: V10, Binding: task.BindingJSONRPC}}
	stream := ": keep-alive\n\n" +
		"id: 1\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"statusUpdate\":{\"taskId\":\"t-1\",\"contextId\":\"c-1\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}}\r\n\r\n" +
		": still here\n" +
		"id: 2\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32001,\"message\":\"task vanished\"}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"statusUpdate\":{\"taskId\":\"t-1\",\"contextId\":\"c-1\",\"status\":{\"state\":\"TASK_STATE_INPUT_REQUIRED\"}}}}"
	sr := NewStreamReader(&req, strings.NewReader(stream), 0)
	var blocks int
	var got []task.Event
	var raw bytes.Buffer
	for {
		ev, evs, err := sr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		blocks++
		raw.Write(ev.Raw)
		got = append(got, evs...)
	}
	if blocks != 4 {
		t.Errorf("blocks = %d, want 4 (keep-alive, status, error, status)", blocks)
	}
	if raw.String() != stream {
		t.Errorf("raw bytes not passed through unchanged:\n%q\n%q", raw.String(), stream)
	}
	if len(got) != 3 || got[0].State != task.Running || got[1].Kind != task.EventError ||
		got[1].Err.Kind != task.KindTaskNotFound || got[2].State != task.AwaitingInput || !got[2].Final {
		t.Errorf("events = %+v", got)
	}

	// A malformed line yields an error for that block; the reader goes on.
	bad := "data: {not json\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"statusUpdate\":{\"taskId\":\"t-1\",\"status\":{\"state\":\"TASK_STATE_COMPLETED\"}}}}\n\n"
	sr = NewStreamReader(&req, strings.NewReader(bad), 0)
	if _, _, err := sr.Next(); err == nil {
		t.Error("malformed event accepted")
	}
	if _, evs, err := sr.Next(); err != nil || len(evs) != 1 || evs[0].State != task.Succeeded {
		t.Errorf("after a malformed event: %+v %v", evs, err)
	}

	// REST framing: an `event: error` block carries an error body.
	rest := task.Request{Operation: task.OpStream, Protocol: task.Protocol{Name: ProtocolName, Version: V10, Binding: task.BindingREST}}
	sr = NewStreamReader(&rest, strings.NewReader("event: error\ndata: {\"error\":{\"code\":404,\"status\":\"NOT_FOUND\",\"message\":\"gone\",\"details\":[{\"reason\":\"TASK_NOT_FOUND\",\"domain\":\"a2a-protocol.org\"}]}}\n\n"), 0)
	if _, evs, err := sr.Next(); err != nil || len(evs) != 1 || evs[0].Err == nil || evs[0].Err.Kind != task.KindTaskNotFound {
		t.Errorf("REST error event: %+v %v", evs, err)
	}

	// An event over the size limit is refused, not buffered.
	sr = NewStreamReader(&req, strings.NewReader("data: "+strings.Repeat("x", 2000)+"\n\n"), 1024)
	if _, _, err := sr.Next(); err == nil {
		t.Error("oversized event accepted")
	}
}

// TestUnknownUpstreamState: a state outside the protocol is an invalid answer,
// "unknown" is no lifecycle information.
func TestUnknownUpstreamState(t *testing.T) {
	req := task.Request{Operation: task.OpGet, Protocol: task.Protocol{Name: ProtocolName, Version: V03, Binding: task.BindingJSONRPC}}
	if _, err := ParseResponse(&req, 200, []byte(`{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t","contextId":"c","status":{"state":"exploded"}}}`)); err == nil {
		t.Error("invalid state accepted")
	}
	evs, err := ParseResponse(&req, 200, []byte(`{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t","contextId":"c","status":{"state":"unknown"}}}`))
	if err != nil || len(evs) != 1 || evs[0].State != "" {
		t.Errorf("unknown state: %+v %v", evs, err)
	}
}

// TestStrictAnswers: every answer writ reads for the lifecycle or filters —
// a whole one, or one event of a stream — is refused when a client could read
// it otherwise than writ: a duplicate key, a case variant of a member or
// field, text that is not UTF-8. The same answer without the ambiguity is
// read.
//
// Threat: a hostile agent answers with a task id (or a stream event's task)
// that writ reads one way and the caller's SDK another ("id" and "ID",
// "result" and "Result"), so writ records or filters one task while the
// caller acts on another. Defence: answers pass the guards requests pass
// (wire.CheckJSON, wire.ValidEnvelope, the field-case guard of the result
// types) before writ reads them.
func TestStrictAnswers(t *testing.T) {
	get := task.Request{Operation: task.OpGet, Protocol: task.Protocol{Name: ProtocolName, Version: V10, Binding: task.BindingJSONRPC}}
	restGet := get
	restGet.Protocol.Binding = task.BindingREST
	stream := get
	stream.Operation = task.OpStream
	good := `{"id":"t-1","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}`
	for name, c := range map[string]struct {
		req  *task.Request
		body string
		bad  bool
	}{
		"rpc good":          {&get, `{"jsonrpc":"2.0","id":1,"result":` + good + `}`, false},
		"rpc result twice":  {&get, `{"jsonrpc":"2.0","id":1,"result":` + good + `,"result":` + good + `}`, true},
		"rpc Result":        {&get, `{"jsonrpc":"2.0","id":1,"result":` + good + `,"Result":` + good + `}`, true},
		"rpc ID in task":    {&get, `{"jsonrpc":"2.0","id":1,"result":{"id":"t-1","ID":"t-2","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}`, true},
		"rpc error Code":    {&get, `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"Code":-32600,"message":"x"}}`, true},
		"rpc not UTF-8":     {&get, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"id\":\"t-\xff\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}", true},
		"rest good":         {&restGet, good, false},
		"rest taskId twice": {&restGet, `{"id":"t-1","id":"t-2","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}`, true},
		"rest 404 not JSON": {&restGet, `Cannot GET /tasks/t-1`, false}, // an error read leniently, as before
		"metadata is free":  {&restGet, `{"id":"t-1","contextId":"c","status":{"state":"TASK_STATE_WORKING"},"metadata":{"ID":1,"id":2}}`, false},
	} {
		status := 200
		if name == "rest 404 not JSON" {
			status = 404
		}
		_, err := ParseResponse(c.req, status, []byte(c.body))
		if (err != nil) != c.bad {
			t.Errorf("%s: err %v, want refused %v", name, err, c.bad)
		}
	}
	// One stream event alike.
	for name, c := range map[string]struct {
		data string
		bad  bool
	}{
		"good":          {`{"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"taskId":"t-1","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}}`, false},
		"taskId TaskId": {`{"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"taskId":"t-1","TaskId":"t-2","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}}`, true},
	} {
		r := NewStreamReader(&stream, strings.NewReader("data: "+c.data+"\n\n"), 0)
		_, _, err := r.Next()
		if (err != nil) != c.bad {
			t.Errorf("stream %s: err %v, want refused %v", name, err, c.bad)
		}
	}
}
