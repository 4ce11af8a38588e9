package decisionlog

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/task"
)

// TestOPALifecycleEvents: every kind of lifecycle line, shipped as an OPA
// event, says in its input exactly what the local line says (less its
// time, type, decision and place in the chain, which are the event's
// timestamp, path and custom), under the id it is given.
func TestOPALifecycleEvents(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 123, time.UTC)
	tasks := []events.Task{
		{Kind: events.TaskCreated, Route: "screening", TaskID: "t-1", ContextID: "c-1", DecisionID: "d-1", To: task.Running},
		{Kind: events.TaskStateChanged, Route: "screening", TaskID: "t-1", ContextID: "c-1", From: task.Running, To: task.Succeeded},
		{Kind: events.TaskArtifact, Route: "screening", TaskID: "t-1", ContextID: "c-1", Artifact: "report"},
		{Kind: events.TaskViolation, Route: "screening", TaskID: "t-1", From: task.Succeeded, To: task.Running},
		{Kind: events.TaskEvicted, Route: "screening", TaskID: "t-1", From: task.Running, Reason: "ttl"},
		{Kind: events.TaskUpstreamError, Route: "screening", TaskID: "t-1", DecisionID: "d-2",
			Upstream: &events.UpstreamError{Code: -32603, Kind: "internal", Message: "backend down"}},
	}
	pushes := []events.Push{
		{TaskID: "t-1", ContextID: "c-1", Host: "hooks.bank.ae", Attempt: 1, Status: 503, Reason: "status_503"},
		{TaskID: "t-1", ContextID: "c-1", Host: "hooks.bank.ae", Attempt: 2, Status: 200, Final: true, Delivered: true},
		{TaskID: "t-1", ContextID: "c-1", Host: "hooks.bank.ae", Attempt: 5, Final: true, Reason: "timeout"},
	}
	type pair struct{ line, event []byte }
	var pairs []pair
	for i := range tasks {
		tasks[i].Time = at
		pairs = append(pairs, pair{appendTask(nil, &tasks[i], &seal{seq: 7}), OPATaskEvent(&tasks[i], "ev-1")})
	}
	for i := range pushes {
		pushes[i].Time = at
		pairs = append(pairs, pair{appendPush(nil, &pushes[i], &seal{seq: 7}), OPAPushEvent(&pushes[i], "ev-1")})
	}
	for _, p := range pairs {
		var line map[string]any
		var ev struct {
			DecisionID string            `json:"decision_id"`
			Timestamp  string            `json:"timestamp"`
			Path       string            `json:"path"`
			Input      map[string]any    `json:"input"`
			Labels     map[string]string `json:"labels"`
			Custom     map[string]any    `json:"custom"`
		}
		if err := json.Unmarshal(p.line, &line); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(p.event, &ev); err != nil {
			t.Fatalf("%s: %v", p.event, err)
		}
		typ := line["type"].(string)
		if ev.DecisionID != "ev-1" || ev.Path != OPALifecyclePath+typ || ev.Timestamp != line["time"] || ev.Labels["app"] != "writ" {
			t.Errorf("%s: event %s", typ, p.event)
		}
		cause, _ := line["decision_id"].(string)
		if got, _ := ev.Custom["caused_by_decision_id"].(string); got != cause {
			t.Errorf("%s: custom %v, the line's decision %q", typ, ev.Custom, cause)
		}
		for _, k := range []string{"time", "type", "decision_id", "seq", "prev"} {
			delete(line, k)
		}
		if !reflect.DeepEqual(line, ev.Input) {
			t.Errorf("%s: input %v, the local line says %v", typ, ev.Input, line)
		}
	}
}
