package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// Options configure request parsing. The zero value is usable.
type Options struct {
	Limits wire.Limits
}

// bodyKind says which request body a route takes.
type bodyKind int

const (
	noBody     bodyKind = iota // the body, if any, is not read (only its size is checked)
	createBody                 // RunCreateRequest
	resumeBody                 // RunResumeRequest
)

// route is one matched ACP operation.
type route struct {
	op       task.Operation
	template string // the path template, for task.Protocol.Method
	id       string // the path parameter, if any
	body     bodyKind
}

// match maps a method and the path segments to an ACP operation.
//
// GET /runs/{run_id}/events is OpGet: it reads a run's past events (the same
// information as GET /runs/{run_id}, as a history), and writes nothing, so it
// needs exactly the checks of a get: the caller must own the run.
func match(method string, segs []string) (route, bool) {
	get, post := method == http.MethodGet || method == http.MethodHead, method == http.MethodPost
	for _, s := range segs {
		if s == "" {
			return route{}, false
		}
	}
	switch len(segs) {
	case 1:
		switch {
		case segs[0] == "agents" && get:
			return route{op: task.OpDiscover, template: "/agents"}, true
		case segs[0] == "runs" && post:
			return route{op: task.OpSend, template: "/runs", body: createBody}, true
		}
	case 2:
		switch {
		case segs[0] == "agents" && get:
			return route{op: task.OpCard, template: "/agents/{name}", id: segs[1]}, true
		case segs[0] == "runs" && get:
			return route{op: task.OpGet, template: "/runs/{run_id}", id: segs[1]}, true
		case segs[0] == "runs" && post:
			return route{op: task.OpSend, template: "/runs/{run_id}", id: segs[1], body: resumeBody}, true
		case (segs[0] == "sessions" || segs[0] == "session") && get:
			return route{op: task.OpList, template: "/" + segs[0] + "/{session_id}", id: segs[1]}, true
		}
	case 3:
		switch {
		case segs[0] == "runs" && segs[2] == "cancel" && post:
			return route{op: task.OpCancel, template: "/runs/{run_id}/cancel", id: segs[1]}, true
		case segs[0] == "runs" && segs[2] == "events" && get:
			return route{op: task.OpGet, template: "/runs/{run_id}/events", id: segs[1]}, true
		}
	}
	return route{}, false
}

// Parse turns one inbound ACP request into the internal request. On failure it
// returns the fault together with whatever of the request it could read (the
// protocol, the operation once the route matched), which RenderFault uses.
func Parse(in wire.Inbound, opt Options) (task.Request, *task.Fault) {
	lim := opt.Limits.WithDefaults()
	req := task.Request{Protocol: task.Protocol{Name: ProtocolName, Version: Version,
		Binding: task.BindingREST, Method: in.Method + " " + in.Path}}
	if int64(len(in.Body)) > lim.MaxBodyBytes {
		return req, task.NewFault(task.KindTooLarge, fmt.Sprintf("request body exceeds %d bytes", lim.MaxBodyBytes))
	}
	rt, ok := match(in.Method, strings.Split(strings.Trim(in.Path, "/"), "/"))
	if !ok {
		return req, task.NewFault(task.KindUnknownOperation, fmt.Sprintf("%s %s is not an ACP operation", in.Method, in.Path))
	}
	req.Operation = rt.op
	req.Protocol.Method = in.Method + " " + rt.template
	var metas []map[string]any
	switch rt.op {
	case task.OpDiscover:
		if f := pageParams(in); f != nil {
			return req, f
		}
	case task.OpCard:
		if f := checkAgentName(rt.id, "agent name"); f != nil {
			return req, f
		}
		req.Agent = rt.id
	case task.OpGet, task.OpCancel:
		req.TaskID = rt.id
	case task.OpList:
		req.ContextID = rt.id
	}
	if rt.body != noBody {
		guard := createCase
		if rt.body == resumeBody {
			guard = resumeCase
		}
		body, f := checkBody(in, lim, rt.template, guard)
		if f != nil {
			return req, f
		}
		if rt.body == createBody {
			metas, f = parseCreate(&req, body)
		} else {
			req.TaskID = rt.id
			metas, f = parseResume(&req, body)
		}
		if f != nil {
			return req, f
		}
	}
	level, err := wire.Declared(in.Header, metas...)
	if err != nil {
		return req, invalid("%s", err.Error())
	}
	req.Classification = level
	return req, nil
}

// The field-case guards of the two request bodies (see shapes.go).
var (
	createCase = wire.FieldCaseOf(wireRunCreate{})
	resumeCase = wire.FieldCaseOf(wireRunResume{})
)

// checkBody applies the content type, bounded JSON and field-case checks and
// returns the body as an object.
func checkBody(in wire.Inbound, lim wire.Limits, template string, guard *wire.FieldCase) (obj, *task.Fault) {
	body := bytes.TrimSpace(in.Body)
	if len(body) == 0 || string(body) == "null" {
		return nil, invalid("%s needs a JSON body", template)
	}
	if ct := in.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !isJSONType(mt) {
			return nil, task.NewFault(task.KindContentType, fmt.Sprintf("content type %q is not JSON", ct))
		}
	}
	if f := wire.FaultOf(wire.CheckJSON(body, lim.MaxJSONDepth)); f != nil {
		return nil, f
	}
	if body[0] != '{' {
		return nil, task.NewFault(task.KindNotARequest, "the request body must be a JSON object")
	}
	if err := guard.Check(body); err != nil {
		return nil, invalid("body: %s", err.Error())
	}
	var o obj
	if err := json.Unmarshal(body, &o); err != nil {
		return nil, task.NewFault(task.KindNotARequest, err.Error())
	}
	return o, nil
}

// pageParams checks the limit and offset query parameters of GET /agents.
func pageParams(in wire.Inbound) *task.Fault {
	if in.Query == nil {
		return nil
	}
	if v := in.Query.Get("limit"); v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 1 || n > 1000 {
			return invalid("query limit=%q must be an integer from 1 to 1000", v)
		}
	}
	if v := in.Query.Get("offset"); v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 0 {
			return invalid("query offset=%q must be a non-negative integer", v)
		}
	}
	return nil
}

// applyMode sets the operation for a run mode: sync waits for the run, async
// returns at once (ReturnImmediately), stream answers with SSE.
func applyMode(req *task.Request, mode string) *task.Fault {
	switch mode {
	case "sync":
		req.Operation = task.OpSend
	case "async":
		req.Operation = task.OpSend
		req.ReturnImmediately = true
	case "stream":
		req.Operation = task.OpStream
	default:
		return invalid("mode %q is not a run mode (sync, async, stream)", mode)
	}
	return nil
}

// parseCreate reads a RunCreateRequest: {agent_name, session_id?, session?,
// input: [Message], mode?}. mode defaults to sync, as in the reference SDK.
func parseCreate(req *task.Request, b obj) ([]map[string]any, *task.Fault) {
	agent, _, f := b.str("agent_name", "body")
	if f != nil {
		return nil, f
	}
	if f := checkAgentName(agent, "agent_name"); f != nil {
		return nil, f
	}
	req.Agent = agent
	sid, _, f := b.str("session_id", "body")
	if f != nil {
		return nil, f
	}
	sess, ok, f := b.member("session", "body")
	if f != nil {
		return nil, f
	}
	if ok {
		id, _, f := sess.str("id", "session")
		if f != nil {
			return nil, f
		}
		if sid != "" && id != "" && id != sid {
			return nil, invalid("session.id %q does not match session_id %q", id, sid)
		}
		if f := sessionReferences(sess); f != nil {
			return nil, f
		}
		if sid == "" {
			sid = id
		}
	}
	req.ContextID = sid
	input, _, f := b.array("input", "body")
	if f != nil {
		return nil, f
	}
	if len(input) == 0 {
		return nil, invalid("input must hold at least one message")
	}
	var sm summary
	for i, m := range input {
		if f := sm.addMessage(m, fmt.Sprintf("input[%d]", i)); f != nil {
			return nil, f
		}
	}
	req.Message = &sm.s
	mode, ok, f := b.str("mode", "body")
	if f != nil {
		return nil, f
	}
	if !ok {
		mode = "sync"
	}
	return sm.metas, applyMode(req, mode)
}

// sessionReferences refuses a session descriptor that names the session's
// content by URL (history, state): the reference server loads every one of
// them into the run (a URL of its own resource store by id, any other by
// fetching it), so they reference other sessions' messages as A2A's
// referenceTaskIds reference other tasks. writ records runs and sessions, not
// resources, and cannot say whose a resource is: such a descriptor is
// refused (fail closed). A run names its session by id, which writ checks,
// and the agent keeps that session's history itself.
func sessionReferences(sess obj) *task.Fault {
	history, _, f := sess.array("history", "session")
	if f != nil {
		return f
	}
	state, _, f := sess.str("state", "session")
	if f != nil {
		return f
	}
	if len(history) > 0 || state != "" {
		return invalid("session.history and session.state name resources by URL, whose owner writ cannot check; name the session by session_id (the agent keeps its history)")
	}
	return nil
}

// parseResume reads a RunResumeRequest: {run_id?, await_resume, mode}. Both
// await_resume and mode are required by the spec and the reference SDK. An
// await_resume that carries a message ({"type":"message","message":{...}}, the
// SDK's MessageAwaitResume) is summarized like run input.
func parseResume(req *task.Request, b obj) ([]map[string]any, *task.Fault) {
	rid, ok, f := b.str("run_id", "body")
	if f != nil {
		return nil, f
	}
	if ok && rid != req.TaskID {
		return nil, invalid("run_id %q in the body does not match run %q in the path", rid, req.TaskID)
	}
	ar, ok, f := b.member("await_resume", "body")
	if f != nil {
		return nil, f
	}
	if !ok {
		return nil, invalid("await_resume is required")
	}
	var sm summary
	if raw, has := ar["message"]; has && !isNull(raw) {
		if f := sm.addMessage(raw, "await_resume.message"); f != nil {
			return nil, f
		}
		req.Message = &sm.s
	}
	mode, ok, f := b.str("mode", "body")
	if f != nil {
		return nil, f
	}
	if !ok {
		return nil, invalid("mode is required (sync, async, stream)")
	}
	return sm.metas, applyMode(req, mode)
}
