package acp

import (
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

func proto(method string) task.Protocol {
	return task.Protocol{Name: ProtocolName, Version: Version, Binding: task.BindingREST, Method: method}
}

// TestParseFixtures checks every request fixture: the full request for good ones,
// the fault kind for bad ones.
func TestParseFixtures(t *testing.T) {
	good := map[string]task.Request{
		"agents_list": {Operation: task.OpDiscover, Protocol: proto("GET /agents")},
		"agent_get":   {Operation: task.OpCard, Protocol: proto("GET /agents/{name}"), Agent: "sanctions-screening"},
		"run_sync": {Operation: task.OpSend, Protocol: proto("POST /runs"), Agent: "sanctions-screening", ContextID: sessionID,
			Message: &task.MessageSummary{Role: "user", Parts: task.PartCounts{Text: 1, Data: 1, File: 1},
				FileURIs:   []string{"https://files.bank.example/pmt-771/invoice.pdf"},
				MediaTypes: []string{"text/plain", "application/json", "application/pdf"}},
			Classification: task.Confidential},
		"run_async": {Operation: task.OpSend, Protocol: proto("POST /runs"), Agent: "sanctions-screening", ReturnImmediately: true,
			Message: &task.MessageSummary{Role: "user", Parts: task.PartCounts{Text: 2, File: 1},
				MediaTypes: []string{"text/markdown", "text/plain", "image/png"}}},
		"run_stream": {Operation: task.OpStream, Protocol: proto("POST /runs"), Agent: "sanctions-screening", ContextID: sessionID,
			Message:        &task.MessageSummary{Role: "user", Parts: task.PartCounts{Text: 1}, MediaTypes: []string{"text/plain"}},
			Classification: task.Internal},
		"run_get": {Operation: task.OpGet, Protocol: proto("GET /runs/{run_id}"), TaskID: runID},
		"run_resume": {Operation: task.OpSend, Protocol: proto("POST /runs/{run_id}"), TaskID: runID,
			Message:        &task.MessageSummary{Role: "user", Parts: task.PartCounts{Text: 1}, MediaTypes: []string{"text/plain"}},
			Classification: task.Internal},
		"run_cancel":    {Operation: task.OpCancel, Protocol: proto("POST /runs/{run_id}/cancel"), TaskID: runID},
		"run_events":    {Operation: task.OpGet, Protocol: proto("GET /runs/{run_id}/events"), TaskID: runID},
		"session_get":   {Operation: task.OpList, Protocol: proto("GET /session/{session_id}"), ContextID: sessionID},
		"run_not_found": {Operation: task.OpGet, Protocol: proto("GET /runs/{run_id}"), TaskID: missingID},
	}
	bad := map[string]task.Kind{
		"bad_json":               task.KindMalformed,
		"not_object":             task.KindNotARequest,
		"unknown_route":          task.KindUnknownOperation,
		"missing_agent_name":     task.KindInvalidParams,
		"bad_mode":               task.KindInvalidParams,
		"bad_role":               task.KindInvalidParams,
		"unknown_classification": task.KindInvalidParams,
		// Keys a case-insensitive (encoding/json) agent would read as a field
		// writ reads under its exact name, and a duplicate (the SDK keeps the last).
		"field_case_agent_name":       task.KindInvalidParams,
		"field_fold_session_id":       task.KindInvalidParams,
		"field_case_part_content_url": task.KindInvalidParams,
		"field_fold_resume_run_id":    task.KindInvalidParams,
		"duplicate_agent_name":        task.KindInvalidParams,
	}
	for _, name := range fixtureNames(t, ".request.http") {
		t.Run(name, func(t *testing.T) {
			got, f := Parse(readRequest(t, name), Options{})
			if want, ok := good[name]; ok {
				if f != nil {
					t.Fatalf("fault %v", f)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("got  %+v\nwant %+v", got, want)
				}
				if got.Message != nil && !reflect.DeepEqual(*got.Message, *want.Message) {
					t.Fatalf("message got %+v, want %+v", *got.Message, *want.Message)
				}
				return
			}
			kind, ok := bad[name]
			if !ok {
				t.Fatalf("fixture %s has no expectation in this table", name)
			}
			if f == nil || f.Kind != kind {
				t.Fatalf("fault %v, want kind %s", f, kind)
			}
			if got.Protocol.Name != ProtocolName || got.Protocol.Binding != task.BindingREST {
				t.Fatalf("protocol not kept on failure: %+v", got.Protocol)
			}
		})
	}
}

func inbound(method, target, body string, header ...string) wire.Inbound {
	u, _ := url.Parse(target)
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Add(header[i], header[i+1])
	}
	return wire.Inbound{Method: method, Path: u.Path, Query: u.Query(), Header: h, Body: []byte(body)}
}

const userMsg = `[{"role":"user","parts":[{"content_type":"text/plain","content":"hi"}]}]`

// TestParseCases covers what the fixtures do not: every route and each check.
func TestParseCases(t *testing.T) {
	text1 := &task.MessageSummary{Role: "user", Parts: task.PartCounts{Text: 1}, MediaTypes: []string{"text/plain"}}
	tests := []struct {
		name string
		in   wire.Inbound
		want *task.Request // compared when set
		kind task.Kind     // expected fault kind, "" for none
	}{
		{name: "sessions plural", in: inbound("GET", "/sessions/s-1", ""),
			want: &task.Request{Operation: task.OpList, Protocol: proto("GET /sessions/{session_id}"), ContextID: "s-1"}},
		{name: "head agents", in: inbound("HEAD", "/agents/", ""),
			want: &task.Request{Operation: task.OpDiscover, Protocol: proto("HEAD /agents")}},
		{name: "resume stream", in: inbound("POST", "/runs/r1", `{"await_resume":{},"mode":"stream"}`),
			want: &task.Request{Operation: task.OpStream, Protocol: proto("POST /runs/{run_id}"), TaskID: "r1"}},
		{name: "resume async", in: inbound("POST", "/runs/r1", `{"await_resume":{"type":"message","message":{"role":"user","parts":[{"content":"x"}]}},"mode":"async"}`),
			want: &task.Request{Operation: task.OpSend, Protocol: proto("POST /runs/{run_id}"), TaskID: "r1", ReturnImmediately: true, Message: text1}},
		{name: "mode default sync", in: inbound("POST", "/runs", `{"agent_name":"a","input":`+userMsg+`}`),
			want: &task.Request{Operation: task.OpSend, Protocol: proto("POST /runs"), Agent: "a", Message: text1}},
		{name: "agent role with name", in: inbound("POST", "/runs", `{"agent_name":"a","input":[{"role":"agent/data_processor","parts":[{"content_type":"application/json","content":"{}"}]}]}`),
			want: &task.Request{Operation: task.OpSend, Protocol: proto("POST /runs"), Agent: "a",
				Message: &task.MessageSummary{Role: "agent", Parts: task.PartCounts{Data: 1}, MediaTypes: []string{"application/json"}}}},
		{name: "json part by url is a file", in: inbound("POST", "/runs", `{"agent_name":"a","input":[{"role":"user","parts":[{"content_type":"application/json; charset=utf-8","content_url":"https://x.example/d.json"}]}]}`),
			want: &task.Request{Operation: task.OpSend, Protocol: proto("POST /runs"), Agent: "a",
				Message: &task.MessageSummary{Role: "user", Parts: task.PartCounts{File: 1}, FileURIs: []string{"https://x.example/d.json"}, MediaTypes: []string{"application/json"}}}},
		{name: "header classification", in: inbound("GET", "/runs/r1", "", wire.ClassificationHeader, "restricted"),
			want: &task.Request{Operation: task.OpGet, Protocol: proto("GET /runs/{run_id}"), TaskID: "r1", Classification: task.Restricted}},
		{name: "highest level wins", in: inbound("POST", "/runs", `{"agent_name":"a","input":[{"role":"user","parts":[{"content":"x","metadata":{"urn:writ:ext:classification:v1":{"level":"restricted"}}}]}]}`, wire.ClassificationHeader, "internal"),
			want: &task.Request{Operation: task.OpSend, Protocol: proto("POST /runs"), Agent: "a", Message: text1, Classification: task.Restricted}},
		{name: "session object id", in: inbound("POST", "/runs", `{"agent_name":"a","session_id":"s1","session":{"id":"s1","history":[]},"input":`+userMsg+`}`),
			want: &task.Request{Operation: task.OpSend, Protocol: proto("POST /runs"), Agent: "a", ContextID: "s1", Message: text1}},
		{name: "case-folded key is not agent_name", in: inbound("POST", "/runs", `{"AGENT_NAME":"a","input":`+userMsg+`}`), kind: task.KindInvalidParams},
		{name: "session mismatch", in: inbound("POST", "/runs", `{"agent_name":"a","session_id":"s1","session":{"id":"s2"},"input":`+userMsg+`}`), kind: task.KindInvalidParams},
		{name: "empty input", in: inbound("POST", "/runs", `{"agent_name":"a","input":[]}`), kind: task.KindInvalidParams},
		{name: "input not array", in: inbound("POST", "/runs", `{"agent_name":"a","input":{}}`), kind: task.KindInvalidParams},
		{name: "agent_name number", in: inbound("POST", "/runs", `{"agent_name":7,"input":`+userMsg+`}`), kind: task.KindInvalidParams},
		{name: "agent_name bad", in: inbound("POST", "/runs", `{"agent_name":"../x","input":`+userMsg+`}`), kind: task.KindInvalidParams},
		{name: "mode number", in: inbound("POST", "/runs", `{"agent_name":"a","input":`+userMsg+`,"mode":1}`), kind: task.KindInvalidParams},
		{name: "no parts", in: inbound("POST", "/runs", `{"agent_name":"a","input":[{"role":"user","parts":[]}]}`), kind: task.KindInvalidParams},
		{name: "no role", in: inbound("POST", "/runs", `{"agent_name":"a","input":[{"parts":[{"content":"x"}]}]}`), kind: task.KindInvalidParams},
		{name: "content and url", in: inbound("POST", "/runs", `{"agent_name":"a","input":[{"role":"user","parts":[{"content":"x","content_url":"https://x.example/"}]}]}`), kind: task.KindInvalidParams},
		{name: "relative url", in: inbound("POST", "/runs", `{"agent_name":"a","input":[{"role":"user","parts":[{"content_url":"/etc/passwd"}]}]}`), kind: task.KindInvalidParams},
		{name: "object content", in: inbound("POST", "/runs", `{"agent_name":"a","input":[{"role":"user","parts":[{"content_type":"application/json","content":{"a":1}}]}]}`), kind: task.KindInvalidParams},
		{name: "bad encoding", in: inbound("POST", "/runs", `{"agent_name":"a","input":[{"role":"user","parts":[{"content":"x","content_encoding":"gzip"}]}]}`), kind: task.KindInvalidParams},
		{name: "bad content type", in: inbound("POST", "/runs", `{"agent_name":"a","input":[{"role":"user","parts":[{"content_type":"not a type","content":"x"}]}]}`), kind: task.KindInvalidParams},
		{name: "metadata not object", in: inbound("POST", "/runs", `{"agent_name":"a","input":[{"role":"user","parts":[{"content":"x","metadata":[1]}]}]}`), kind: task.KindInvalidParams},
		{name: "classification wrong shape", in: inbound("POST", "/runs", `{"agent_name":"a","input":[{"role":"user","parts":[{"content":"x","metadata":{"urn:writ:ext:classification:v1":"secret"}}]}]}`), kind: task.KindInvalidParams},
		{name: "header level unknown", in: inbound("GET", "/agents", "", wire.ClassificationHeader, "top-secret"), kind: task.KindInvalidParams},
		{name: "resume no await_resume", in: inbound("POST", "/runs/r1", `{"mode":"sync"}`), kind: task.KindInvalidParams},
		{name: "resume no mode", in: inbound("POST", "/runs/r1", `{"await_resume":{}}`), kind: task.KindInvalidParams},
		{name: "resume run_id mismatch", in: inbound("POST", "/runs/r1", `{"run_id":"r2","await_resume":{},"mode":"sync"}`), kind: task.KindInvalidParams},
		{name: "resume bad message", in: inbound("POST", "/runs/r1", `{"await_resume":{"message":{"role":"bot","parts":[{"content":"x"}]}},"mode":"sync"}`), kind: task.KindInvalidParams},
		{name: "empty body", in: inbound("POST", "/runs", ""), kind: task.KindInvalidParams},
		{name: "null body", in: inbound("POST", "/runs", "null"), kind: task.KindInvalidParams},
		{name: "string body", in: inbound("POST", "/runs", `"x"`), kind: task.KindNotARequest},
		{name: "content type", in: inbound("POST", "/runs", `{}`, "Content-Type", "text/plain"), kind: task.KindContentType},
		{name: "bad limit", in: inbound("GET", "/agents?limit=0", ""), kind: task.KindInvalidParams},
		{name: "bad offset", in: inbound("GET", "/agents?offset=-1", ""), kind: task.KindInvalidParams},
		{name: "bad agent path", in: inbound("GET", "/agents/a b", ""), kind: task.KindInvalidParams},
		{name: "delete run", in: inbound("DELETE", "/runs/r1", ""), kind: task.KindUnknownOperation},
		{name: "get runs", in: inbound("GET", "/runs", ""), kind: task.KindUnknownOperation},
		{name: "empty segment", in: inbound("POST", "/runs//cancel", ""), kind: task.KindUnknownOperation},
		{name: "ping is not an operation", in: inbound("GET", "/ping", ""), kind: task.KindUnknownOperation},
		{name: "root", in: inbound("GET", "/", ""), kind: task.KindUnknownOperation},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, f := Parse(tc.in, Options{})
			if tc.kind != "" {
				if f == nil || f.Kind != tc.kind {
					t.Fatalf("fault %v, want kind %s", f, tc.kind)
				}
				return
			}
			if f != nil {
				t.Fatalf("fault %v", f)
			}
			if tc.want != nil && !reflect.DeepEqual(got, *tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, *tc.want)
			}
		})
	}
}

// TestParseLimits checks the body size and JSON depth limits.
func TestParseLimits(t *testing.T) {
	body := `{"agent_name":"a","input":` + userMsg + `}`
	lim := wire.Limits{MaxBodyBytes: int64(len(body)), MaxJSONDepth: 5}
	if _, f := Parse(inbound("POST", "/runs", body), Options{Limits: lim}); f != nil {
		t.Fatalf("at the limits: %v", f)
	}
	_, f := Parse(inbound("POST", "/runs", body+" "), Options{Limits: lim})
	if f == nil || f.Kind != task.KindTooLarge {
		t.Fatalf("one byte over: %v, want too_large", f)
	}
	if r := RenderFault(&task.Request{}, f); r.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("too_large renders as %d", r.Status)
	}
	deep := `{"agent_name":"a","input":[{"role":"user","parts":[{"content":"x","metadata":{"a":{"b":1}}}]}]}`
	lim.MaxBodyBytes = 0
	_, f = Parse(inbound("POST", "/runs", deep), Options{Limits: lim})
	if f == nil || f.Kind != task.KindTooDeep {
		t.Fatalf("depth 7 over 5: %v, want too_deep", f)
	}
	bomb := `{"agent_name":"a","input":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`
	_, f = Parse(inbound("POST", "/runs", bomb), Options{})
	if f == nil || f.Kind != task.KindTooDeep {
		t.Fatalf("depth bomb: %v, want too_deep", f)
	}
	// The size limit applies to every route, even one that reads no body.
	_, f = Parse(inbound("POST", "/runs/r1/cancel", strings.Repeat("x", 100)), Options{Limits: wire.Limits{MaxBodyBytes: 10}})
	if f == nil || f.Kind != task.KindTooLarge {
		t.Fatalf("cancel with a big body: %v, want too_large", f)
	}
}

// TestSessionReferencesRefused: a run whose session descriptor names content
// by URL (history, state) is refused; one naming the session by id alone, or
// with an empty history, is read.
//
// Threat: a caller puts another session's message URLs in session.history
// (or its state URL in session.state); the reference ACP server loads them
// into the run, so the agent answers from another tenant's conversation while
// writ checked only session.id. Defence: writ cannot say whose a resource is,
// so a descriptor that names any is refused as invalid input.
func TestSessionReferencesRefused(t *testing.T) {
	for name, body := range map[string]string{
		"history":            `{"agent_name":"a","session":{"id":"s1","history":["http://agent/resources/r-victim"]},"input":` + userMsg + `}`,
		"state":              `{"agent_name":"a","session":{"id":"s1","state":"http://agent/resources/r-victim"},"input":` + userMsg + `}`,
		"history not a list": `{"agent_name":"a","session":{"id":"s1","history":"x"},"input":` + userMsg + `}`,
	} {
		if _, f := Parse(inbound("POST", "/runs", body), Options{}); f == nil || f.Kind != task.KindInvalidParams {
			t.Errorf("%s: %v", name, f)
		}
	}
	for name, body := range map[string]string{
		"id only":       `{"agent_name":"a","session":{"id":"s1"},"input":` + userMsg + `}`,
		"empty history": `{"agent_name":"a","session":{"id":"s1","history":[],"state":null},"input":` + userMsg + `}`,
	} {
		if req, f := Parse(inbound("POST", "/runs", body), Options{}); f != nil || req.ContextID != "s1" {
			t.Errorf("%s: %v %+v", name, f, req)
		}
	}
}
