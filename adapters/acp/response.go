package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// answerDepth bounds the nesting of an agent's answer: four times a
// request's (a run wraps the caller's messages).
var answerDepth = 4 * wire.DefaultMaxJSONDepth

// ParseResponse turns an upstream's whole (non-streaming) answer to req into
// events: a Run becomes one EventTask, the {"events": [...]} of GET
// /runs/{run_id}/events becomes its artifacts and its last status, a non-2xx
// ACP Error becomes one EventError, and agent listings, manifests and sessions say
// nothing about a run's lifecycle (no events). A body that is none of these, a
// run with an unknown status, or a successful answer with a duplicate key or
// text that is not UTF-8 (read differently by different clients; writ reads
// keys exactly, as the Python SDK does) is an error (the caller treats the
// upstream as invalid).
func ParseResponse(req *task.Request, status int, body []byte) ([]task.Event, error) {
	if req == nil {
		req = &task.Request{}
	}
	body = bytes.TrimSpace(body)
	if status < 200 || status >= 300 {
		var e upstreamError
		_ = json.Unmarshal(body, &e)
		return []task.Event{{Kind: task.EventError, TaskID: req.TaskID, Err: faultOf(req, e, status)}}, nil
	}
	if len(body) == 0 {
		return nil, nil
	}
	if body[0] != '{' {
		return nil, fmt.Errorf("upstream answer is not an ACP object")
	}
	if err := wire.CheckJSON(body, answerDepth); err != nil {
		return nil, fmt.Errorf("upstream answer: %w", err)
	}
	var o obj
	if err := json.Unmarshal(body, &o); err != nil {
		return nil, fmt.Errorf("upstream answer is not an ACP object: %w", err)
	}
	if _, ok := o["events"]; ok {
		list, _, f := o.array("events", "response")
		if f != nil {
			return nil, faultErr(f)
		}
		c := converter{req: req, runID: req.TaskID}
		var out []task.Event
		for _, raw := range list {
			ev, err := c.event(raw)
			if err != nil {
				return nil, err
			}
			out = append(out, ev...)
		}
		return current(out), nil
	}
	if _, ok := o["run_id"]; ok {
		t, err := runTask(o)
		if err != nil {
			return nil, err
		}
		return []task.Event{{Kind: task.EventTask, TaskID: t.ID, ContextID: t.ContextID, State: t.State, Task: t}}, nil
	}
	switch req.Operation {
	case task.OpDiscover, task.OpCard, task.OpList:
		return nil, nil
	}
	return nil, fmt.Errorf("upstream answer to %s is not an ACP run", req.Protocol.Method)
}

// current reduces a run's past events (GET /runs/{run_id}/events) to what
// they say now: its artifacts and its last status. The statuses it went
// through are history; replayed, they would move a finished run backwards.
func current(evs []task.Event) []task.Event {
	last := -1
	for i, ev := range evs {
		if ev.State != "" {
			last = i
		}
	}
	out := evs[:0:0]
	for i, ev := range evs {
		if ev.State == "" || i == last {
			out = append(out, ev)
		}
	}
	return out
}

// runEvents maps the run.* event types to their state and whether the stream
// ends there. An ACP stream ends at a terminal status and at awaiting (the
// reference server closes it and the client resumes with POST /runs/{run_id}).
var runEvents = map[string]struct {
	status string
	final  bool
}{
	"run.created":     {"created", false},
	"run.in-progress": {"in-progress", false},
	"run.awaiting":    {"awaiting", true},
	"run.completed":   {"completed", true},
	"run.cancelled":   {"cancelled", true},
	"run.failed":      {"failed", true},
}

// converter turns ACP events into kernel events, remembering the run they belong
// to: message.* events do not name their run.
type converter struct {
	req       *task.Request
	runID     string
	sessionID string
}

// event converts one ACP Event.
//
//   - run.* → EventStatus with the state of the event type (the run's own status
//     must agree with it); Final for awaiting, completed, cancelled and failed.
//   - message.part with a named part → EventArtifact (a named part is ACP's
//     artifact, as the reference SDK's Artifact type is); other message.created,
//     message.part and message.completed events carry content, not lifecycle,
//     and yield no event. generic yields none either.
//   - error → EventError.
//
// An unknown type is an error.
func (c *converter) event(raw json.RawMessage) ([]task.Event, error) {
	o, f := object(raw, "event")
	if f != nil {
		return nil, faultErr(f)
	}
	typ, _, f := o.str("type", "event")
	if f != nil {
		return nil, faultErr(f)
	}
	if re, ok := runEvents[typ]; ok {
		run, ok, f := o.member("run", "event")
		if f != nil {
			return nil, faultErr(f)
		}
		if !ok {
			return nil, fmt.Errorf("%s event has no run", typ)
		}
		id, _, f := run.str("run_id", "event.run")
		if f != nil {
			return nil, faultErr(f)
		}
		if id == "" {
			return nil, fmt.Errorf("%s event: run.run_id is missing", typ)
		}
		status, has, f := run.str("status", "event.run")
		if f != nil {
			return nil, faultErr(f)
		}
		if has && status != re.status {
			if _, err := stateOf(status); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("%s event carries a run with status %q", typ, status)
		}
		sid, _, f := run.str("session_id", "event.run")
		if f != nil {
			return nil, faultErr(f)
		}
		c.runID, c.sessionID = id, sid
		return []task.Event{{Kind: task.EventStatus, TaskID: id, ContextID: sid, State: toState[re.status], Final: re.final}}, nil
	}
	switch typ {
	case "message.created", "message.completed", "generic":
		return nil, nil
	case "message.part":
		part, ok, f := o.member("part", "event")
		if f != nil {
			return nil, faultErr(f)
		}
		if !ok {
			return nil, fmt.Errorf("message.part event has no part")
		}
		name, _, f := part.str("name", "event.part")
		if f != nil {
			return nil, faultErr(f)
		}
		if name == "" {
			return nil, nil
		}
		return []task.Event{{Kind: task.EventArtifact, TaskID: c.runID, ContextID: c.sessionID,
			Artifact: &task.ArtifactRef{Name: name}}}, nil
	case "error":
		var e struct {
			Error *upstreamError `json:"error"`
		}
		if err := json.Unmarshal(raw, &e); err != nil || e.Error == nil {
			return nil, fmt.Errorf("error event has no error object")
		}
		return []task.Event{{Kind: task.EventError, TaskID: c.runID, ContextID: c.sessionID, Err: faultOf(c.req, *e.Error, 0)}}, nil
	}
	return nil, fmt.Errorf("event type %q is not an ACP event", typ)
}

// StreamReader reads an upstream ACP SSE stream answering one request, event by
// event.
type StreamReader struct {
	sse *wire.SSEReader
	c   converter
}

// NewStreamReader reads the SSE body of the upstream's answer to req; events may
// be at most maxEventBytes long (0: the wire default).
func NewStreamReader(req *task.Request, body io.Reader, maxEventBytes int) *StreamReader {
	if req == nil {
		req = &task.Request{}
	}
	return &StreamReader{sse: wire.NewSSEReader(body, maxEventBytes), c: converter{req: req, runID: req.TaskID}}
}

// Next returns the next SSE block (Raw holds its exact bytes, to pass on) and the
// events it carries: none for comments and keep-alives, an EventError for an
// error the upstream reported mid-stream. A data line that is not a valid ACP
// event returns the block with an error; the stream may continue after it. io.EOF
// ends the stream.
func (s *StreamReader) Next() (wire.SSEEvent, []task.Event, error) {
	ev, err := s.sse.Next()
	if err != nil {
		return ev, nil, err
	}
	if !ev.HasData {
		return ev, nil, nil
	}
	data := bytes.TrimSpace(ev.Data)
	if err := wire.CheckJSON(data, answerDepth); err != nil {
		return ev, nil, fmt.Errorf("upstream event: %w", err)
	}
	events, err := s.c.event(data)
	return ev, events, err
}

// GetRunRequest renders a request for a run's current state (GET /runs/{id}),
// for following an async run after its request returned; get is the internal
// request it stands for.
func GetRunRequest(req *task.Request, runID string) (method, path string, body []byte, get *task.Request) {
	get = &task.Request{Operation: task.OpGet, TaskID: runID,
		Protocol: task.Protocol{Name: ProtocolName, Version: req.Protocol.Version, Binding: task.BindingREST, Method: "GET /runs/{run_id}"}}
	return "GET", "/runs/" + url.PathEscape(runID), nil, get
}
