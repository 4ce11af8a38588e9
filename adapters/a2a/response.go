package a2a

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

func dialectOf(req *task.Request) dialect {
	switch {
	case req.Protocol.Version == V10:
		return v10
	case req.Protocol.Binding == task.BindingREST:
		return rest03
	}
	return rpc03
}

// The guards an agent's answer passes before writ reads it, as paramsCase
// and envelopeKeys guard a request: the JSON-RPC response object's members,
// the fields of the results writ reads (a task, a message, a stream event, a
// listing) and of an error object.
var (
	answerKeys  = []string{"jsonrpc", "id", "result", "error"}
	resultCase  = wire.FieldCaseOf(wireResult{})
	rpcErrCase  = wire.FieldCaseOf(rpcError{})
	answerDepth = 4 * wire.DefaultMaxJSONDepth
)

// strictAnswer refuses an answer that a client behind writ could read
// otherwise than writ: a duplicate key (JSON.parse and encoding/json keep the
// last, other readers the first), a key that differs from a member or field
// name only in case or is its proto name (a2a-go's encoding/json takes
// "Result" or "Tasks" for the field, the JS SDK does not), text that is not
// UTF-8, nesting deeper than answerDepth (four times a request's: an answer
// wraps the caller's message in a task, in a result). typed checks the
// fields of a result writ reads for the lifecycle; a card or push config is
// re-rendered or not read, so only its envelope counts.
func strictAnswer(body []byte, rpc, typed bool) error {
	if err := wire.CheckJSON(body, answerDepth); err != nil {
		return err
	}
	result := body
	if rpc {
		env, err := wire.ValidEnvelope(body, answerKeys...)
		if err != nil {
			return err
		}
		if e := env["error"]; len(e) > 0 {
			if err := rpcErrCase.Check(e); err != nil {
				return err
			}
		}
		result = env["result"]
	}
	if typed && len(result) > 0 {
		return resultCase.Check(result)
	}
	return nil
}

// readsStrictly reports whether a whole answer to req is read with
// strictAnswer: a JSON-RPC answer always, an HTTP+JSON one when it succeeded,
// and at every status the answers writ filters or rewrites (a listing, the
// extended card), which reach the caller as writ read them.
func readsStrictly(req *task.Request, status int) bool {
	switch {
	case req.Protocol.Binding == task.BindingJSONRPC, status < 300:
		return true
	}
	return req.Operation == task.OpList || req.Operation == task.OpExtendedCard
}

// ParseResponse turns an upstream's whole (non-streaming) answer to req into
// events. An error answer becomes one EventError. A body that is not what the
// protocol allows, or that strictAnswer refuses, is an error (the caller
// treats the upstream as invalid).
func ParseResponse(req *task.Request, status int, body []byte) ([]task.Event, error) {
	d := dialectOf(req)
	body = bytes.TrimSpace(body)
	if len(body) > 0 && readsStrictly(req, status) {
		if err := strictAnswer(body, req.Protocol.Binding == task.BindingJSONRPC, !silent(req.Operation)); err != nil {
			return nil, fmt.Errorf("upstream answer: %w", err)
		}
	}
	if silent(req.Operation) {
		// Push-config and card answers say nothing about the lifecycle; only an
		// error in them matters (a2a-go answers a push delete with an empty body).
		if len(body) == 0 {
			return nil, nil
		}
		events, err := ParseResponseError(req, status, body)
		return events, err
	}
	if req.Protocol.Binding == task.BindingJSONRPC {
		return parseRPCResult(body, req, d)
	}
	if status >= 300 {
		return []task.Event{{Kind: task.EventError, TaskID: req.TaskID, Err: restFault(body, status)}}, nil
	}
	if len(body) == 0 {
		return nil, nil
	}
	return resultEvents(body, req, d)
}

// silent reports operations whose successful answers carry no lifecycle events.
func silent(op task.Operation) bool {
	switch op {
	case task.OpPushSet, task.OpPushGet, task.OpPushList, task.OpPushDelete,
		task.OpCard, task.OpExtendedCard, task.OpDiscover:
		return true
	}
	return false
}

// ParseResponseError returns the error event of an answer, or none when the answer
// is not an error.
func ParseResponseError(req *task.Request, status int, body []byte) ([]task.Event, error) {
	if req.Protocol.Binding == task.BindingJSONRPC {
		var env struct {
			Error *rpcError `json:"error"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			return nil, fmt.Errorf("upstream answer is not a JSON-RPC response: %w", err)
		}
		if env.Error != nil {
			return rpcErrorEvent(req, env.Error), nil
		}
		return nil, nil
	}
	if status >= 300 {
		return []task.Event{{Kind: task.EventError, TaskID: req.TaskID, Err: restFault(body, status)}}, nil
	}
	return nil, nil
}

// rpcErrorEvent is the error event of an upstream JSON-RPC error object.
func rpcErrorEvent(req *task.Request, e *rpcError) []task.Event {
	return []task.Event{{Kind: task.EventError, TaskID: req.TaskID, Err: upstreamFault(e.Code, e.Message)}}
}

// parseRPCResult parses one JSON-RPC response envelope.
func parseRPCResult(body []byte, req *task.Request, d dialect) ([]task.Event, error) {
	var env struct {
		JSONRPC string          `json:"jsonrpc"`
		Result  json.RawMessage `json:"result"`
		Error   *rpcError       `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("upstream answer is not a JSON-RPC response: %w", err)
	}
	if env.JSONRPC != "2.0" {
		return nil, fmt.Errorf("upstream answer is not a JSON-RPC 2.0 response")
	}
	if env.Error != nil {
		return rpcErrorEvent(req, env.Error), nil
	}
	if len(env.Result) == 0 {
		return nil, fmt.Errorf("upstream JSON-RPC response has neither result nor error")
	}
	return resultEvents(env.Result, req, d)
}

// kindOfCode maps an upstream A2A error code back to a fault kind.
func kindOfCode(code int) task.Kind {
	for k, s := range shapes {
		if s.code == code && s.domain == A2ADomain {
			return k
		}
	}
	switch code {
	case CodeParseError:
		return task.KindMalformed
	case CodeInvalidRequest:
		return task.KindNotARequest
	case CodeMethodNotFound:
		return task.KindUnknownOperation
	}
	return task.KindInternal
}

func upstreamFault(code int, message string) *task.Fault {
	return &task.Fault{Kind: kindOfCode(code), Message: message, Code: code}
}

// restFault reads an HTTP+JSON error body of either version.
func restFault(body []byte, status int) *task.Fault {
	var e struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Error   json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	if len(e.Error) > 0 && e.Error[0] == '{' {
		var inner struct {
			Message string        `json:"message"`
			Details []ErrorDetail `json:"details"`
		}
		_ = json.Unmarshal(e.Error, &inner)
		f := &task.Fault{Kind: kindOfStatus(status), Message: inner.Message, Code: status}
		for _, d := range inner.Details {
			for k, s := range shapes {
				if s.reason == d.Reason && s.domain == d.Domain {
					f.Kind = k
				}
			}
		}
		return f
	}
	if e.Code < 0 {
		return upstreamFault(e.Code, e.Message)
	}
	msg := e.Message
	if msg == "" {
		msg = fmt.Sprintf("upstream answered HTTP %d", status)
	}
	return &task.Fault{Kind: kindOfStatus(status), Message: msg, Code: status}
}

func kindOfStatus(status int) task.Kind {
	switch status {
	case 400:
		return task.KindInvalidParams
	case 401:
		return task.KindUnauthenticated
	case 403:
		return task.KindDenied
	case 404:
		return task.KindTaskNotFound
	case 413:
		return task.KindTooLarge
	case 415:
		return task.KindContentType
	case 502, 503:
		return task.KindUpstreamUnavailable
	case 504:
		return task.KindUpstreamTimeout
	}
	return task.KindInternal
}

// resultEvents converts one result object (a task, a message, a stream event, a
// wrapper of either version, or a task list) into events.
func resultEvents(raw []byte, req *task.Request, d dialect) ([]task.Event, error) {
	var r wireResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("upstream result is not an A2A object: %w", err)
	}
	switch {
	case r.Task != nil:
		return taskEvents(r.Task, d)
	case r.Message != nil:
		return messageEvent(r.Message), nil
	case r.Msg != nil:
		return messageEvent(r.Msg), nil
	case r.StatusUpdate != nil:
		return statusEvent(r.StatusUpdate, d, req.Protocol.Version == V10)
	case r.ArtifactUpdate != nil:
		return artifactEvent(r.ArtifactUpdate)
	case r.Tasks != nil:
		var out []task.Event
		for i := range r.Tasks {
			ev, err := taskEvents(&r.Tasks[i], d)
			if err != nil {
				return nil, err
			}
			out = append(out, ev...)
		}
		return out, nil
	}
	switch r.Kind {
	case "task":
		return taskEvents(flatTask(&r), d)
	case "message":
		return messageEvent(&r), nil
	case "status-update":
		return statusEvent(&r, d, false)
	case "artifact-update":
		return artifactEvent(&r)
	case "":
		// A bare Task (get/cancel answers) has id and status but no kind in 1.0.
		if r.ID != "" && r.Status != nil {
			return taskEvents(flatTask(&r), d)
		}
		// Push-config answers and empty objects say nothing about the lifecycle.
		if req.Operation.FollowUp() && req.Operation != task.OpGet && req.Operation != task.OpCancel {
			return nil, nil
		}
	}
	return nil, fmt.Errorf("upstream result is not a task, message or stream event (kind %q)", r.Kind)
}

func flatTask(r *wireResult) *wireTask {
	return &wireTask{ID: r.ID, ContextID: r.ContextID, Status: r.Status, Artifacts: r.Artifacts,
		History: r.History, Metadata: r.Metadata}
}

func taskEvents(w *wireTask, d dialect) ([]task.Event, error) {
	if w.ID == "" {
		return nil, fmt.Errorf("upstream task has no id")
	}
	t, err := toTask(w, d)
	if err != nil {
		return nil, err
	}
	return []task.Event{{Kind: task.EventTask, TaskID: t.ID, ContextID: t.ContextID, State: t.State, Task: t}}, nil
}

func messageEvent(r *wireResult) []task.Event {
	return []task.Event{{Kind: task.EventMessage, TaskID: r.TaskID, ContextID: r.ContextID}}
}

// statusEvent: 1.0 has no "final"; its streams end at a terminal or interrupted
// state, which is what Final reports there.
func statusEvent(r *wireResult, d dialect, v1 bool) ([]task.Event, error) {
	if r.TaskID == "" || r.Status == nil {
		return nil, fmt.Errorf("status update needs taskId and status")
	}
	st, err := stateOf(r.Status.State)
	if err != nil {
		return nil, err
	}
	final := r.Final
	if v1 || d == v10 {
		final = st.Terminal() || st.Interrupted()
	}
	return []task.Event{{Kind: task.EventStatus, TaskID: r.TaskID, ContextID: r.ContextID, State: st, Final: final}}, nil
}

func artifactEvent(r *wireResult) ([]task.Event, error) {
	if r.TaskID == "" || r.Artifact == nil {
		return nil, fmt.Errorf("artifact update needs taskId and artifact")
	}
	return []task.Event{{Kind: task.EventArtifact, TaskID: r.TaskID, ContextID: r.ContextID,
		Artifact: &task.ArtifactRef{ID: r.Artifact.ArtifactID, Name: r.Artifact.Name, Append: r.Append, LastChunk: r.LastChunk}}}, nil
}

// StreamReader reads an upstream SSE stream answering one request, event by event.
type StreamReader struct {
	req *task.Request
	d   dialect
	sse *wire.SSEReader
}

// NewStreamReader reads the SSE body of the upstream's answer to req; events may
// be at most maxEventBytes long (0: the wire default).
func NewStreamReader(req *task.Request, body io.Reader, maxEventBytes int) *StreamReader {
	return &StreamReader{req: req, d: dialectOf(req), sse: wire.NewSSEReader(body, maxEventBytes)}
}

// Next returns the next SSE block (Raw holds its exact bytes, to pass on) and the
// events it carries: none for comments and keep-alives, an EventError for an
// error the upstream reported mid-stream. A data line that is not a valid event
// returns the block with an error; the stream may continue after it. io.EOF ends
// the stream.
func (s *StreamReader) Next() (wire.SSEEvent, []task.Event, error) {
	ev, err := s.sse.Next()
	if err != nil {
		return ev, nil, err
	}
	if !ev.HasData {
		return ev, nil, nil
	}
	data := bytes.TrimSpace(ev.Data)
	if err := strictAnswer(data, s.req.Protocol.Binding == task.BindingJSONRPC, true); err != nil {
		return ev, nil, fmt.Errorf("upstream event: %w", err)
	}
	if s.req.Protocol.Binding == task.BindingJSONRPC {
		events, err := parseRPCResult(data, s.req, s.d)
		return ev, events, err
	}
	if ev.Event == "error" {
		return ev, []task.Event{{Kind: task.EventError, TaskID: s.req.TaskID, Err: restFault(data, 500)}}, nil
	}
	var probe struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &probe) == nil && len(probe.Error) > 0 {
		return ev, []task.Event{{Kind: task.EventError, TaskID: s.req.TaskID, Err: restFault(data, 500)}}, nil
	}
	events, err := resultEvents(data, s.req, s.d)
	return ev, events, err
}
