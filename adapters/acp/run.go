package acp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"strings"

	"github.com/writ-authz/writ/task"
)

// toState maps ACP RunStatus to the kernel's states. "cancelling" is running: the
// cancel was requested but the run has not stopped, and it may still complete or
// fail before it does; the kernel has no "cancel requested" state and must not
// treat the run as finished yet.
var toState = map[string]task.State{
	"created":     task.Queued,
	"in-progress": task.Running,
	"awaiting":    task.AwaitingInput,
	"cancelling":  task.Running,
	"cancelled":   task.Cancelled,
	"completed":   task.Succeeded,
	"failed":      task.Failed,
}

// fromState maps the kernel's states to ACP RunStatus. ACP has one waiting status
// (awaiting) for both input and auth, and no "rejected": a refused run failed.
var fromState = map[task.State]string{
	task.Queued:        "created",
	task.Running:       "in-progress",
	task.AwaitingInput: "awaiting",
	task.AwaitingAuth:  "awaiting",
	task.Succeeded:     "completed",
	task.Cancelled:     "cancelled",
	task.Failed:        "failed",
	task.Rejected:      "failed",
}

// stateOf maps an ACP run status; an unknown or empty status is an error.
func stateOf(status string) (task.State, error) {
	if st, ok := toState[status]; ok {
		return st, nil
	}
	return "", fmt.Errorf("run status %q is not an ACP status (created, in-progress, awaiting, cancelling, cancelled, completed, failed)", status)
}

// statusOf renders a kernel state as an ACP run status.
func statusOf(s task.State) (string, error) {
	if st, ok := fromState[s]; ok {
		return st, nil
	}
	return "", fmt.Errorf("task state %q has no ACP run status", s)
}

// The run envelope writ renders. The spec's Run has no input and no metadata:
// both are writ's own extension, carried the way the reference model (seed
// section 8) does, so that a task survives internal -> ACP -> internal. "input"
// holds the caller's text as one user message; "metadata" holds
// {"delegation_chain": [...], "artifacts": [...]}. The spec's required agent_name
// and created_at are absent: task.Task carries neither.
type renderedRun struct {
	RunID     string         `json:"run_id"`
	SessionID string         `json:"session_id"`
	Status    string         `json:"status"`
	Input     []runMessage   `json:"input"`
	Output    []runMessage   `json:"output"`
	Metadata  *runExtensions `json:"metadata,omitempty"`
}

type runMessage struct {
	Role  string    `json:"role"`
	Parts []runPart `json:"parts"`
}

type runPart struct {
	ContentType string `json:"content_type"`
	Content     string `json:"content"`
}

type runExtensions struct {
	Chain     []string `json:"delegation_chain,omitempty"`
	Artifacts []string `json:"artifacts,omitempty"`
}

// RenderRun renders a kernel task as an ACP run: run_id, session_id, status, the
// input text as a user message, the output text (text/plain) and the structured
// data (an application/json part whose content is the JSON text, as the spec
// types content as a string) as one agent message, and writ's metadata extension
// for the delegation chain and artifact names.
func RenderRun(t *task.Task) ([]byte, error) {
	if t == nil {
		return nil, fmt.Errorf("no task to render")
	}
	status, err := statusOf(t.State)
	if err != nil {
		return nil, err
	}
	r := renderedRun{RunID: t.ID, SessionID: t.ContextID, Status: status, Output: []runMessage{},
		Input: []runMessage{{Role: "user", Parts: []runPart{{ContentType: "text/plain", Content: t.InputText}}}}}
	var parts []runPart
	if t.OutputText != "" {
		parts = append(parts, runPart{ContentType: "text/plain", Content: t.OutputText})
	}
	if len(t.Structured) > 0 {
		raw, err := json.Marshal(t.Structured)
		if err != nil {
			return nil, fmt.Errorf("structured data: %w", err)
		}
		parts = append(parts, runPart{ContentType: "application/json", Content: string(raw)})
	}
	if len(parts) > 0 {
		r.Output = []runMessage{{Role: "agent", Parts: parts}}
	}
	if len(t.Chain) > 0 || len(t.Artifacts) > 0 {
		r.Metadata = &runExtensions{Chain: t.Chain, Artifacts: t.Artifacts}
	}
	return json.Marshal(r)
}

// ParseRun parses an ACP Run (the spec's, or writ's extended envelope) into the
// kernel's task. run_id and a known status are required. The input text joins
// the text parts of the first user message of "input"; the output text joins the
// text parts of every output message; structured data merges every JSON part
// whose content is a JSON object (later keys win). Artifact names come from writ's
// metadata extension, else from the named output parts (ACP's artifacts).
// agent_name, await_request, error and the timestamps have no place in task.Task.
func ParseRun(body []byte) (*task.Task, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil, fmt.Errorf("not an ACP run: a JSON object is required")
	}
	var o obj
	if err := json.Unmarshal(body, &o); err != nil {
		return nil, fmt.Errorf("not an ACP run: %w", err)
	}
	return runTask(o)
}

func faultErr(f *task.Fault) error {
	if f == nil {
		return nil
	}
	return fmt.Errorf("%s", f.Message)
}

// runTask converts a decoded run object.
func runTask(o obj) (*task.Task, error) {
	id, _, f := o.str("run_id", "run")
	if f != nil {
		return nil, faultErr(f)
	}
	if id == "" {
		return nil, fmt.Errorf("not an ACP run: run_id is missing")
	}
	status, _, f := o.str("status", "run")
	if f != nil {
		return nil, faultErr(f)
	}
	st, err := stateOf(status)
	if err != nil {
		return nil, err
	}
	sid, _, f := o.str("session_id", "run")
	if f != nil {
		return nil, faultErr(f)
	}
	t := &task.Task{ID: id, ContextID: sid, State: st}
	input, err := runMessages(o, "input")
	if err != nil {
		return nil, err
	}
	for _, m := range input {
		if m.role == "user" {
			t.InputText = strings.Join(m.texts, " ")
			break
		}
	}
	output, err := runMessages(o, "output")
	if err != nil {
		return nil, err
	}
	var texts, names []string
	for _, m := range output {
		texts = append(texts, m.texts...)
		names = append(names, m.names...)
		for _, d := range m.data {
			if t.Structured == nil {
				t.Structured = map[string]any{}
			}
			for k, v := range d {
				t.Structured[k] = v
			}
		}
	}
	t.OutputText = strings.Join(texts, " ")
	md, f := o.anyMap("metadata", "run")
	if f != nil {
		return nil, faultErr(f)
	}
	t.Chain = stringList(md["delegation_chain"])
	if a, ok := md["artifacts"]; ok {
		t.Artifacts = stringList(a)
	} else {
		t.Artifacts = names
	}
	return t, nil
}

func stringList(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, e := range list {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// readMessage is what a run conversion keeps of one message.
type readMessage struct {
	role  string // user or agent
	texts []string
	data  []map[string]any
	names []string
}

func runMessages(o obj, key string) ([]readMessage, error) {
	list, _, f := o.array(key, "run")
	if f != nil {
		return nil, faultErr(f)
	}
	out := make([]readMessage, 0, len(list))
	for i, raw := range list {
		where := fmt.Sprintf("run.%s[%d]", key, i)
		m, f := object(raw, where)
		if f != nil {
			return nil, faultErr(f)
		}
		role, _, f := m.str("role", where)
		if f != nil {
			return nil, faultErr(f)
		}
		rm := readMessage{}
		rm.role, _, _ = strings.Cut(role, "/")
		parts, _, f := m.array("parts", where)
		if f != nil {
			return nil, faultErr(f)
		}
		for j, praw := range parts {
			if err := readPart(&rm, praw, fmt.Sprintf("%s.parts[%d]", where, j)); err != nil {
				return nil, err
			}
		}
		out = append(out, rm)
	}
	return out, nil
}

// readPart adds one part's text, JSON object or name to rm.
func readPart(rm *readMessage, raw json.RawMessage, where string) error {
	p, f := object(raw, where)
	if f != nil {
		return faultErr(f)
	}
	ct, ok, f := p.str("content_type", where)
	if f != nil {
		return faultErr(f)
	}
	if !ok {
		ct = "text/plain"
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return fmt.Errorf("%s.content_type %q is not a media type", where, ct)
	}
	if name, ok, _ := p.str("name", where); ok && name != "" {
		rm.names = append(rm.names, name)
	}
	content := p["content"]
	if isNull(content) {
		return nil
	}
	content = bytes.TrimSpace(content)
	if isJSONType(mt) && content[0] == '{' {
		// writ's reference model puts the object itself in content.
		var d map[string]any
		if json.Unmarshal(content, &d) == nil {
			rm.data = append(rm.data, d)
		}
		return nil
	}
	var s string
	if content[0] != '"' || json.Unmarshal(content, &s) != nil {
		return fmt.Errorf("%s.content must be a string", where)
	}
	if enc, _, _ := p.str("content_encoding", where); enc == "base64" {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return fmt.Errorf("%s.content is not base64: %w", where, err)
		}
		s = string(b)
	}
	switch {
	case strings.HasPrefix(mt, "text/"):
		if s != "" {
			rm.texts = append(rm.texts, s)
		}
	case isJSONType(mt):
		var d map[string]any
		if json.Unmarshal([]byte(s), &d) == nil && d != nil {
			rm.data = append(rm.data, d)
		}
	}
	return nil
}
