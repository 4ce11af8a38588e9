package a2a

import (
	"encoding/json"
	"testing"

	"github.com/writ-authz/writ/task"
)

// TestUnauthenticatedErrorInfoOnce: the 401 an unauthenticated caller gets
// lists the UNAUTHENTICATED ErrorInfo once, with its neutral reason, in
// every version and binding (the fault's own reason and its one denial are
// the same entry; it was listed twice).
func TestUnauthenticatedErrorInfoOnce(t *testing.T) {
	f := &task.Fault{Kind: task.KindUnauthenticated, Message: "authentication required",
		Denials: []task.Denial{{Code: "UNAUTHENTICATED", Reason: "the caller is not authenticated"}}}
	for _, p := range []task.Protocol{{Version: V10, Binding: task.BindingJSONRPC}, {Version: V10, Binding: task.BindingREST},
		{Version: V03, Binding: task.BindingJSONRPC}, {Version: V03, Binding: task.BindingREST}} {
		r := RenderFault(&task.Request{Protocol: p, Correlation: json.RawMessage("1")}, f)
		var doc struct {
			Error struct {
				Data    json.RawMessage `json:"data"`
				Details []ErrorDetail   `json:"details"`
			} `json:"error"`
			Data json.RawMessage `json:"data"` // 0.3 HTTP+JSON: the error object itself
		}
		if err := json.Unmarshal(r.Body, &doc); err != nil {
			t.Fatalf("%+v: %v: %s", p, err, r.Body)
		}
		list := doc.Error.Details
		data := doc.Error.Data
		if len(data) == 0 {
			data = doc.Data
		}
		if len(data) > 0 {
			if p.Version == V10 {
				if err := json.Unmarshal(data, &list); err != nil {
					t.Fatalf("%+v: %v", p, err)
				}
			} else {
				var legacy legacyData
				if err := json.Unmarshal(data, &legacy); err != nil {
					t.Fatalf("%+v: %v", p, err)
				}
				list = legacy.Details
			}
		}
		n := 0
		for _, d := range list {
			if d.Reason == "UNAUTHENTICATED" {
				n++
				if d.Metadata["reason"] != "the caller is not authenticated" {
					t.Errorf("%+v: the entry lost its neutral reason: %+v", p, d)
				}
			}
		}
		if n != 1 || r.Status != 401 {
			t.Errorf("%+v: status %d, %d UNAUTHENTICATED entries, want one: %s", p, r.Status, n, r.Body)
		}
	}
}
