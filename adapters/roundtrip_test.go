package adapters_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/writ-authz/writ/adapters/a2a"
	"github.com/writ-authz/writ/adapters/acp"
	"github.com/writ-authz/writ/task"
)

// sanctionsTask is the streamed delegation of the seed's section 3 as an A2A 0.3
// task: a user message, an artifact with a text part and a data part, completed.
const sanctionsTask = `{
 "kind": "task", "id": "task-1", "contextId": "ctx-1",
 "status": {"state": "completed"},
 "history": [{"kind": "message", "messageId": "m-1", "role": "user",
              "parts": [{"kind": "text", "text": "Screen the beneficiary of PMT-771"}]}],
 "artifacts": [{"artifactId": "art-1", "name": "sanctions-screening",
   "parts": [{"kind": "text", "text": "Acme Trading FZE: 1 possible match (score 0.83) against SDN list"},
             {"kind": "data", "data": {"matches": 1, "top_score": 0.83, "list": "SDN", "recommendation": "manual_review"}}]}],
 "metadata": {"urn:writ:ext:delegation:v1": {"chain": ["orchestrator"]}}
}`

// TestProtocolAgnosticRoundTrip reproduces section 7 of the seed: A2A → internal →
// ACP run → internal is exact, and so is the reverse direction ACP → internal →
// A2A (both versions) → internal. The kernel never learns either vocabulary.
func TestProtocolAgnosticRoundTrip(t *testing.T) {
	internal, err := a2a.ParseTask([]byte(sanctionsTask), a2a.V03)
	if err != nil {
		t.Fatal(err)
	}
	want := &task.Task{ID: "task-1", ContextID: "ctx-1", State: task.Succeeded,
		InputText:  "Screen the beneficiary of PMT-771",
		OutputText: "Acme Trading FZE: 1 possible match (score 0.83) against SDN list",
		Structured: map[string]any{"matches": float64(1), "top_score": 0.83, "list": "SDN", "recommendation": "manual_review"},
		Artifacts:  []string{"sanctions-screening"}, Chain: []string{"orchestrator"}}
	if !reflect.DeepEqual(internal, want) {
		t.Fatalf("A2A → internal:\n got %+v\nwant %+v", internal, want)
	}
	run, err := acp.RenderRun(internal)
	if err != nil {
		t.Fatal(err)
	}
	var envelope map[string]any
	if err := json.Unmarshal(run, &envelope); err != nil {
		t.Fatal(err)
	}
	if envelope["run_id"] != "task-1" || envelope["status"] != "completed" || envelope["session_id"] != "ctx-1" {
		t.Errorf("ACP envelope: %s", run)
	}
	back, err := acp.ParseRun(run)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, internal) {
		t.Fatalf("internal → ACP → internal:\n got %+v\nwant %+v\n%s", back, internal, run)
	}

	// The reverse: an ACP run awaiting input → internal → A2A (each version) → internal.
	awaiting := *internal
	awaiting.State = task.AwaitingInput
	acpRun, err := acp.RenderRun(&awaiting)
	if err != nil {
		t.Fatal(err)
	}
	fromACP, err := acp.ParseRun(acpRun)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{a2a.V03, a2a.V10} {
		wire, err := a2a.RenderTask(fromACP, v)
		if err != nil {
			t.Fatal(err)
		}
		again, err := a2a.ParseTask(wire, v)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(again, fromACP) {
			t.Errorf("ACP → internal → A2A %s → internal:\n got %+v\nwant %+v\n%s", v, again, fromACP, wire)
		}
	}
	// The state maps of the reference model.
	if awaiting.State != task.AwaitingInput || fromACP.State != task.AwaitingInput {
		t.Errorf("input-required maps to %s via ACP awaiting", fromACP.State)
	}
}
