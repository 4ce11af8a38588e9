package a2a

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/writ-authz/writ/task"
)

// DelegationKey is the task metadata key under which writ records a task's
// delegation chain in A2A: {"urn:writ:ext:delegation:v1": {"chain": ["a", "b"]}}.
const DelegationKey = "urn:writ:ext:delegation:v1"

var toState = map[string]task.State{
	"submitted": task.Queued, "TASK_STATE_SUBMITTED": task.Queued,
	"working": task.Running, "TASK_STATE_WORKING": task.Running,
	"input-required": task.AwaitingInput, "TASK_STATE_INPUT_REQUIRED": task.AwaitingInput,
	"auth-required": task.AwaitingAuth, "TASK_STATE_AUTH_REQUIRED": task.AwaitingAuth,
	"completed": task.Succeeded, "TASK_STATE_COMPLETED": task.Succeeded,
	"canceled": task.Cancelled, "TASK_STATE_CANCELED": task.Cancelled, "TASK_STATE_CANCELLED": task.Cancelled,
	"failed": task.Failed, "TASK_STATE_FAILED": task.Failed,
	"rejected": task.Rejected, "TASK_STATE_REJECTED": task.Rejected,
}

var fromState03 = map[task.State]string{
	task.Queued: "submitted", task.Running: "working", task.AwaitingInput: "input-required",
	task.AwaitingAuth: "auth-required", task.Succeeded: "completed", task.Cancelled: "canceled",
	task.Failed: "failed", task.Rejected: "rejected",
}

// stateOf maps a wire state to the kernel's. "unknown" (0.3) and
// TASK_STATE_UNSPECIFIED (1.0) carry no lifecycle information and map to "".
func stateOf(s string) (task.State, error) {
	switch s {
	case "unknown", "TASK_STATE_UNSPECIFIED":
		return "", nil
	}
	if st, ok := toState[s]; ok {
		return st, nil
	}
	return "", fmt.Errorf("task state %q is not an A2A state", s)
}

// stateName renders a kernel state in the version's vocabulary.
func stateName(s task.State, version string) string {
	n := fromState03[s]
	if version == V10 {
		return "TASK_STATE_" + strings.ToUpper(strings.ReplaceAll(n, "-", "_"))
	}
	return n
}

// partData returns the object a data part carries, unwrapping the proto-JSON
// DataPart form {"data": {...}} of 0.3 HTTP+JSON.
func partData(p wirePart, d dialect) map[string]any {
	if len(p.Data) == 0 {
		return nil
	}
	var obj map[string]any
	if json.Unmarshal(p.Data, &obj) != nil {
		return nil
	}
	if d == rest03 && p.Kind == nil {
		if inner, ok := obj["data"].(map[string]any); ok && len(obj) == 1 {
			return inner
		}
	}
	return obj
}

func partsOf(ps []wirePart, content []wirePart) []wirePart {
	if len(ps) == 0 {
		return content
	}
	return ps
}

// toTask converts a wire task into the kernel's task. The caller's input is the
// first user message of the history; output and structured data come from the
// artifacts, as the reference model defines them.
func toTask(w *wireTask, d dialect) (*task.Task, error) {
	t := &task.Task{ID: w.ID, ContextID: w.ContextID}
	if w.Status != nil {
		st, err := stateOf(w.Status.State)
		if err != nil {
			return nil, err
		}
		t.State = st
	}
	for _, m := range w.History {
		if r, _ := normRole(m.Role); r == "user" {
			t.InputText = joinText(partsOf(m.Parts, m.Content))
			break
		}
	}
	var out []string
	for _, a := range w.Artifacts {
		if a.Name != "" {
			t.Artifacts = append(t.Artifacts, a.Name)
		}
		for _, p := range a.Parts {
			if p.Text != nil && *p.Text != "" {
				out = append(out, *p.Text)
			}
			if obj := partData(p, d); obj != nil {
				if t.Structured == nil {
					t.Structured = map[string]any{}
				}
				for k, v := range obj {
					t.Structured[k] = v
				}
			}
		}
	}
	t.OutputText = strings.Join(out, " ")
	if dm, ok := w.Metadata[DelegationKey].(map[string]any); ok {
		if chain, ok := dm["chain"].([]any); ok {
			for _, c := range chain {
				if s, ok := c.(string); ok {
					t.Chain = append(t.Chain, s)
				}
			}
		}
	}
	return t, nil
}

func joinText(ps []wirePart) string {
	var bits []string
	for _, p := range ps {
		if p.Text != nil && *p.Text != "" {
			bits = append(bits, *p.Text)
		}
	}
	return strings.Join(bits, " ")
}

// ParseTask parses one A2A Task object of the given version ("0.3" JSON-RPC shape
// or "1.0") into the kernel's task.
func ParseTask(body []byte, version string) (*task.Task, error) {
	var w wireTask
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("not an A2A task: %w", err)
	}
	if w.ID == "" {
		return nil, fmt.Errorf("not an A2A task: id is missing")
	}
	d := rpc03
	if version == V10 {
		d = v10
	}
	return toTask(&w, d)
}

// RenderTask renders a kernel task as an A2A Task of the given version: the input
// as a user message in the history, the output text and structured data as the
// parts of the first artifact, further artifact names as empty artifacts, and the
// delegation chain in the task metadata.
func RenderTask(t *task.Task, version string) ([]byte, error) {
	text := func(s string) wirePart {
		p := wirePart{Text: &s}
		if version != V10 {
			k := "text"
			p.Kind = &k
		}
		return p
	}
	w := renderedTask{ID: t.ID, ContextID: t.ContextID, Status: renderedStatus{State: stateName(t.State, version)}}
	if version != V10 {
		w.Kind = "task"
	}
	if t.InputText != "" {
		role := "user"
		if version == V10 {
			role = "ROLE_USER"
		}
		m := renderedMessage{MessageID: t.ID + "-input", Role: role, Parts: []wirePart{text(t.InputText)}, TaskID: t.ID, ContextID: t.ContextID}
		if version != V10 {
			m.Kind = "message"
		}
		w.History = []renderedMessage{m}
	}
	var parts []wirePart
	if t.OutputText != "" {
		parts = append(parts, text(t.OutputText))
	}
	if len(t.Structured) > 0 {
		raw, err := json.Marshal(t.Structured)
		if err != nil {
			return nil, fmt.Errorf("structured data: %w", err)
		}
		p := wirePart{Data: raw}
		if version != V10 {
			k := "data"
			p.Kind = &k
		}
		parts = append(parts, p)
	}
	names := t.Artifacts
	if len(names) == 0 && len(parts) > 0 {
		names = []string{""}
	}
	for i, n := range names {
		a := renderedArtifact{ArtifactID: fmt.Sprintf("%s-artifact-%d", t.ID, i+1), Name: n, Parts: []wirePart{}}
		if i == 0 {
			a.Parts = parts
		}
		w.Artifacts = append(w.Artifacts, a)
	}
	if len(t.Chain) > 0 {
		w.Metadata = map[string]any{DelegationKey: map[string]any{"chain": t.Chain}}
	}
	return json.Marshal(w)
}

// The rendered* types fix the field set and order of what writ writes.
type renderedTask struct {
	Kind      string             `json:"kind,omitempty"`
	ID        string             `json:"id"`
	ContextID string             `json:"contextId"`
	Status    renderedStatus     `json:"status"`
	Artifacts []renderedArtifact `json:"artifacts,omitempty"`
	History   []renderedMessage  `json:"history,omitempty"`
	Metadata  map[string]any     `json:"metadata,omitempty"`
}

type renderedStatus struct {
	State string `json:"state"`
}

type renderedArtifact struct {
	ArtifactID string     `json:"artifactId"`
	Name       string     `json:"name,omitempty"`
	Parts      []wirePart `json:"parts"`
}

type renderedMessage struct {
	Kind      string     `json:"kind,omitempty"`
	MessageID string     `json:"messageId"`
	Role      string     `json:"role"`
	Parts     []wirePart `json:"parts"`
	TaskID    string     `json:"taskId,omitempty"`
	ContextID string     `json:"contextId,omitempty"`
}
