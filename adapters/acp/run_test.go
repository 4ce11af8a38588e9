package acp

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/writ-authz/writ/task"
)

// seedTask is the task of the reference model's worked example (seed section 8,
// step 7 "A2A -> INTERNAL -> ACP -> INTERNAL"): the streamed sanctions screening
// after a2a_to_internal. Its structured numbers are float64, as any JSON decoding
// yields them.
func seedTask() *task.Task {
	return &task.Task{
		ID: "task-1", ContextID: "ctx-2", State: task.Succeeded,
		InputText:  "Screen the beneficiary of PMT-771",
		OutputText: screeningText,
		Structured: map[string]any{"matches": float64(1), "top_score": 0.83, "list": "SDN", "recommendation": "manual_review"},
		Chain:      []string{"orchestrator", "payments-investigator"},
		Artifacts:  []string{"sanctions-screening"},
	}
}

// seedEnvelope is the seed's internal_to_acp(internal) in the spec's shapes:
// input as a Message, JSON content as a string.
const seedEnvelope = `{"run_id":"task-1","session_id":"ctx-2","status":"completed",
 "input":[{"role":"user","parts":[{"content_type":"text/plain","content":"Screen the beneficiary of PMT-771"}]}],
 "output":[{"role":"agent","parts":[
   {"content_type":"text/plain","content":"Acme Trading FZE: 1 possible match (score 0.83) against SDN list"},
   {"content_type":"application/json","content":"{\"list\":\"SDN\",\"matches\":1,\"recommendation\":\"manual_review\",\"top_score\":0.83}"}]}],
 "metadata":{"delegation_chain":["orchestrator","payments-investigator"],"artifacts":["sanctions-screening"]}}`

func TestSeedRoundTripInternal(t *testing.T) {
	in := seedTask()
	b, err := RenderRun(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ParseRun(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("internal -> ACP -> internal\n got  %+v\n want %+v\n via %s", out, in, b)
	}
}

func TestSeedRoundTripACP(t *testing.T) {
	tk, err := ParseRun([]byte(seedEnvelope))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tk, seedTask()) {
		t.Fatalf("ACP -> internal: %+v", tk)
	}
	b, err := RenderRun(tk)
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	if err := json.Unmarshal([]byte(seedEnvelope), &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ACP -> internal -> ACP\n got  %s\n want %s", b, seedEnvelope)
	}
}

// TestSeedObjectContent: the seed itself puts the JSON object (not its text) in
// content; ParseRun reads that too.
func TestSeedObjectContent(t *testing.T) {
	body := `{"run_id":"task-1","session_id":"ctx-2","status":"completed",
	 "input":[{"role":"user","parts":[{"content_type":"text/plain","content":"Screen the beneficiary of PMT-771"}]}],
	 "output":[{"role":"agent","parts":[{"content_type":"text/plain","content":"` + screeningText + `"},
	 {"content_type":"application/json","content":{"matches":1,"top_score":0.83,"list":"SDN","recommendation":"manual_review"}}]}],
	 "metadata":{"delegation_chain":["orchestrator","payments-investigator"],"artifacts":["sanctions-screening"]}}`
	tk, err := ParseRun([]byte(body))
	if err != nil || !reflect.DeepEqual(tk, seedTask()) {
		t.Fatalf("%+v, %v", tk, err)
	}
}

// TestRenderRunStates renders every kernel state and reads it back.
func TestRenderRunStates(t *testing.T) {
	want := map[task.State]struct {
		status string
		back   task.State
	}{
		task.Queued: {"created", task.Queued}, task.Running: {"in-progress", task.Running},
		task.AwaitingInput: {"awaiting", task.AwaitingInput}, task.AwaitingAuth: {"awaiting", task.AwaitingInput},
		task.Succeeded: {"completed", task.Succeeded}, task.Cancelled: {"cancelled", task.Cancelled},
		task.Failed: {"failed", task.Failed}, task.Rejected: {"failed", task.Failed},
	}
	for _, s := range task.States {
		w, ok := want[s]
		if !ok {
			t.Fatalf("state %s has no expectation", s)
		}
		b, err := RenderRun(&task.Task{ID: "r", State: s})
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(b, &r)
		tk, err := ParseRun(b)
		if err != nil || r.Status != w.status || tk.State != w.back {
			t.Errorf("%s: %s, %+v, %v", s, b, tk, err)
		}
	}
	for _, bad := range []*task.Task{nil, {ID: "r"}, {ID: "r", State: "paused"}} {
		if b, err := RenderRun(bad); err == nil {
			t.Errorf("RenderRun(%+v) = %s, want an error", bad, b)
		}
	}
}

func TestParseRunErrors(t *testing.T) {
	for _, body := range []string{
		``, `[]`, `{}`, `{"status":"created"}`, `{"run_id":"r"}`, `{"run_id":"r","status":"paused"}`,
		`{"run_id":"r","status":"created","output":{}}`,
		`{"run_id":"r","status":"created","output":[{"role":"agent","parts":[{"content":7}]}]}`,
		`{"run_id":"r","status":"created","output":[{"role":"agent","parts":[{"content":"%%","content_encoding":"base64"}]}]}`,
		`{"run_id":"r","status":"created","metadata":[]}`,
	} {
		if tk, err := ParseRun([]byte(body)); err == nil {
			t.Errorf("%s: %+v, want an error", body, tk)
		}
	}
	// Artifact names come from named output parts when writ's extension is absent.
	tk, err := ParseRun([]byte(`{"run_id":"r","status":"completed","output":[{"role":"agent/x","parts":[
		{"name":"report","content_type":"text/markdown","content":"IyBoaQ==","content_encoding":"base64"},
		{"content_type":"application/json","content":"[1,2]"}]}]}`))
	want := &task.Task{ID: "r", State: task.Succeeded, OutputText: "# hi", Artifacts: []string{"report"}}
	if err != nil || !reflect.DeepEqual(tk, want) {
		t.Fatalf("%+v, %v", tk, err)
	}
}
