package demo

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"

	a2aadapter "github.com/writ-authz/writ/adapters/a2a"
)

// msgText joins the text parts of m.
func msgText(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	var bits []string
	for _, p := range m.Parts {
		switch t := p.(type) {
		case a2a.TextPart:
			bits = append(bits, t.Text)
		case *a2a.TextPart:
			bits = append(bits, t.Text)
		}
	}
	return strings.Join(bits, " ")
}

// partText shows one part as "kind: content".
func partText(p a2a.Part) string {
	switch t := p.(type) {
	case a2a.TextPart:
		return "text: " + t.Text
	case *a2a.TextPart:
		return "text: " + t.Text
	case a2a.DataPart:
		raw, _ := json.Marshal(t.Data)
		return "data: " + string(raw)
	case *a2a.DataPart:
		raw, _ := json.Marshal(t.Data)
		return "data: " + string(raw)
	}
	return fmt.Sprintf("%T", p)
}

// status is a task's state and status message, as the checks compare them.
func status(t *a2a.Task) string {
	return string(t.Status.State) + quoted(msgText(t.Status.Message))
}

// answer describes what a call got, for a check that wanted something else.
func answer(res any, f *rpcFault, err error) string {
	switch {
	case f != nil:
		return fmt.Sprintf("JSON-RPC error %d %v in HTTP %d", f.Code, f.Reasons(), f.Status)
	case err != nil:
		return err.Error()
	}
	return fmt.Sprintf("%T", res)
}

// faultName is the A2A name of a JSON-RPC error code.
func faultName(code int) string {
	switch code {
	case a2aadapter.CodeTaskNotFound:
		return "TaskNotFound"
	case a2aadapter.CodeTaskNotCancelable:
		return "TaskNotCancelable"
	case a2aadapter.CodeUnsupportedOperation:
		return "UnsupportedOperation"
	case a2aadapter.CodeDenied:
		return "PermissionDenied"
	}
	return "error"
}

func quoted(s string) string {
	if s == "" {
		return ""
	}
	return fmt.Sprintf(" %q", s)
}

// short abbreviates a task id for the screen: its tail (the head of a UUIDv7 is a
// timestamp, the same for every task of the demo).
func short(id string) string {
	if len(id) > 12 {
		return "…" + id[len(id)-8:]
	}
	return id
}

// shortIDs abbreviates id wherever it appears in s.
func shortIDs(s string, id a2a.TaskID) string {
	return strings.ReplaceAll(s, string(id), short(string(id)))
}
