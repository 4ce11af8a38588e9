package a2a

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/writ-authz/writ/task"
)

// TestTaskFromCapturedAnswers reads the task a real server returned (0.3 from
// a2a-go, 1.0 from the JS SDK) into the kernel's task, as the reference model's
// a2a_to_internal does.
func TestTaskFromCapturedAnswers(t *testing.T) {
	for _, c := range []struct {
		file, version string
		wrapped       bool
	}{
		{"v0.3/jsonrpc/send.response.http", V03, false},
		{"v1.0/jsonrpc/send.response.http", V10, true},
	} {
		_, body := readResponse(t, filepath.Join(fixtures, c.file))
		var env struct {
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			t.Fatal(err)
		}
		raw := env.Result
		if c.wrapped {
			var w struct {
				Task json.RawMessage `json:"task"`
			}
			if err := json.Unmarshal(raw, &w); err != nil {
				t.Fatal(err)
			}
			raw = w.Task
		}
		got, err := ParseTask(raw, c.version)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if got.ID == "" || got.ContextID == "" || got.State != task.Succeeded {
			t.Errorf("%s: %+v", c.file, got)
		}
		if got.InputText != "Screen this beneficiary against sanctions lists." {
			t.Errorf("%s: input %q", c.file, got.InputText)
		}
		if got.OutputText != "No sanctions matches for Acme Trading FZE." {
			t.Errorf("%s: output %q", c.file, got.OutputText)
		}
		if !reflect.DeepEqual(got.Artifacts, []string{"sanctions-screening"}) {
			t.Errorf("%s: artifacts %v", c.file, got.Artifacts)
		}
		if got.Structured["beneficiary"] != "Acme Trading FZE" || got.Structured["matches"] != float64(0) {
			t.Errorf("%s: structured %v", c.file, got.Structured)
		}
	}
}

// TestRenderTaskRoundTrip: internal → A2A (each version) → internal is exact.
func TestRenderTaskRoundTrip(t *testing.T) {
	in := &task.Task{ID: "task-1", ContextID: "ctx-1", State: task.AwaitingInput,
		InputText: "Screen the beneficiary of PMT-771", OutputText: "Acme Trading FZE: 1 possible match",
		Structured: map[string]any{"matches": float64(1), "list": "SDN"},
		Artifacts:  []string{"sanctions-screening", "evidence"}, Chain: []string{"orchestrator", "payments-investigator"}}
	for _, v := range []string{V03, V10} {
		raw, err := RenderTask(in, v)
		if err != nil {
			t.Fatal(err)
		}
		out, err := ParseTask(raw, v)
		if err != nil {
			t.Fatalf("%s: %v\n%s", v, err, raw)
		}
		if !reflect.DeepEqual(in, out) {
			t.Errorf("%s: round trip differs\n in %+v\nout %+v\n%s", v, in, out, raw)
		}
	}
	if _, err := ParseTask([]byte(`{"id":"t","status":{"state":"done"}}`), V03); err == nil {
		t.Error("unknown state accepted")
	}
	if _, err := ParseTask([]byte(`{"status":{"state":"working"}}`), V03); err == nil {
		t.Error("task without id accepted")
	}
}
