package a2a

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

const fixtures = "../../testdata/a2a"

// readRequest loads a request fixture and parses it.
func readRequest(t *testing.T, path string, opt Options) ([]byte, task.Request, *task.Fault) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	in, err := wire.ReadMessage(raw, 0)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	req, f := Parse(in, opt)
	return raw, req, f
}

// readResponse loads a response fixture: status and body.
func readResponse(t *testing.T, path string) (int, []byte) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// The method each operation has in each version and binding.
var methods = map[string]map[task.Operation]string{
	"v0.3/jsonrpc": {
		task.OpSend: "message/send", task.OpStream: "message/stream", task.OpGet: "tasks/get",
		task.OpCancel: "tasks/cancel", task.OpSubscribe: "tasks/resubscribe",
		task.OpPushSet: "tasks/pushNotificationConfig/set", task.OpPushGet: "tasks/pushNotificationConfig/get",
		task.OpPushList: "tasks/pushNotificationConfig/list", task.OpPushDelete: "tasks/pushNotificationConfig/delete",
		task.OpExtendedCard: "agent/getAuthenticatedExtendedCard",
	},
	"v1.0/jsonrpc": {
		task.OpSend: "SendMessage", task.OpStream: "SendStreamingMessage", task.OpGet: "GetTask",
		task.OpList: "ListTasks", task.OpCancel: "CancelTask", task.OpSubscribe: "SubscribeToTask",
		task.OpPushSet: "CreateTaskPushNotificationConfig", task.OpPushGet: "GetTaskPushNotificationConfig",
		task.OpPushList: "ListTaskPushNotificationConfigs", task.OpPushDelete: "DeleteTaskPushNotificationConfig",
		task.OpExtendedCard: "GetExtendedAgentCard",
	},
	"v0.3/rest": {
		task.OpSend: "POST /v1/message:send", task.OpStream: "POST /v1/message:stream", task.OpGet: "GET /v1/tasks/{id}",
		task.OpCancel: "POST /v1/tasks/{id}:cancel", task.OpSubscribe: "GET /v1/tasks/{id}:subscribe",
		task.OpPushSet: "POST /v1/tasks/{id}/pushNotificationConfigs", task.OpPushGet: "GET /v1/tasks/{id}/pushNotificationConfigs/{configId}",
		task.OpPushList: "GET /v1/tasks/{id}/pushNotificationConfigs", task.OpPushDelete: "DELETE /v1/tasks/{id}/pushNotificationConfigs/{configId}",
		task.OpExtendedCard: "GET /v1/card",
	},
	"v1.0/rest": {
		task.OpSend: "POST /message:send", task.OpStream: "POST /message:stream", task.OpGet: "GET /tasks/{id}",
		task.OpList: "GET /tasks", task.OpCancel: "POST /tasks/{id}:cancel", task.OpSubscribe: "POST /tasks/{id}:subscribe",
		task.OpPushSet: "POST /tasks/{id}/pushNotificationConfigs", task.OpPushGet: "GET /tasks/{id}/pushNotificationConfigs/{configId}",
		task.OpPushList: "GET /tasks/{id}/pushNotificationConfigs", task.OpPushDelete: "DELETE /tasks/{id}/pushNotificationConfigs/{configId}",
		task.OpExtendedCard: "GET /extendedAgentCard",
	},
}

// want is what a captured request must parse into. Ids are generated anew by each
// capture, so a want says which ids must be present; the test checks that each one
// is really in the wire bytes.
type want struct {
	op         task.Operation
	taskID     bool
	contextID  bool
	configID   string
	parts      task.PartCounts
	fileURI    string
	mediaType  string
	class      task.Level
	push       bool
	fault      task.Kind
	extensions bool
}

var captured = map[string]want{
	"send":                {op: task.OpSend, parts: task.PartCounts{Text: 1, Data: 1}, class: task.Restricted, extensions: true},
	"send_file":           {op: task.OpSend, parts: task.PartCounts{Text: 1, File: 1}, fileURI: "https://files.bank.ae/kyc/passport.pdf", mediaType: "application/pdf"},
	"send_push":           {op: task.OpSend, parts: task.PartCounts{Text: 1, Data: 1}, class: task.Restricted, push: true},
	"send_input_required": {op: task.OpSend, parts: task.PartCounts{Text: 1, Data: 1}},
	"send_reply":          {op: task.OpSend, taskID: true, contextID: true, parts: task.PartCounts{Text: 1}},
	"stream":              {op: task.OpStream, parts: task.PartCounts{Text: 1, Data: 1}, class: task.Restricted, extensions: true},
	"get":                 {op: task.OpGet, taskID: true},
	"get_unknown":         {op: task.OpGet, taskID: true},
	"list":                {op: task.OpList, contextID: true},
	"cancel":              {op: task.OpCancel, taskID: true},
	"cancel_again":        {op: task.OpCancel, taskID: true},
	"cancel_terminal":     {op: task.OpCancel, taskID: true},
	"subscribe":           {op: task.OpSubscribe, taskID: true},
	"push_set":            {op: task.OpPushSet, taskID: true, push: true},
	"push_get":            {op: task.OpPushGet, taskID: true, configID: "cfg-1"},
	"push_list":           {op: task.OpPushList, taskID: true},
	"push_delete":         {op: task.OpPushDelete, taskID: true, configID: "cfg-1"},
	"card_extended":       {op: task.OpExtendedCard},
	"error_parse":         {fault: task.KindMalformed},
	"error_method":        {fault: task.KindUnknownOperation},
}

// TestCapturedRequests parses every request the real SDKs sent, for every version
// and binding, into the expected internal request.
func TestCapturedRequests(t *testing.T) {
	seen := 0
	for combo, ops := range methods {
		version, binding, _ := strings.Cut(combo, "/")
		files, _ := filepath.Glob(filepath.Join(fixtures, combo, "*.request.http"))
		if len(files) < 15 {
			t.Fatalf("%s: only %d fixtures; run make capture", combo, len(files))
		}
		for _, f := range files {
			name := strings.TrimSuffix(filepath.Base(f), ".request.http")
			w, ok := captured[name]
			if !ok {
				t.Errorf("%s/%s: fixture without expectation", combo, name)
				continue
			}
			seen++
			t.Run(combo+"/"+name, func(t *testing.T) {
				raw, req, f := readRequest(t, f, Options{})
				if req.Protocol.Name != "a2a" || "v"+req.Protocol.Version != version || string(req.Protocol.Binding) != binding {
					t.Errorf("protocol = %+v, want %s %s", req.Protocol, version, binding)
				}
				if w.fault != "" {
					if f == nil || f.Kind != w.fault {
						t.Fatalf("fault = %v, want %s", f, w.fault)
					}
					return
				}
				if f != nil {
					t.Fatalf("unexpected fault: %v", f)
				}
				if req.Operation != w.op {
					t.Errorf("operation = %q, want %q", req.Operation, w.op)
				}
				if req.Protocol.Method != ops[w.op] {
					t.Errorf("method = %q, want %q", req.Protocol.Method, ops[w.op])
				}
				checkID(t, raw, "task id", req.TaskID, w.taskID)
				checkID(t, raw, "context id", req.ContextID, w.contextID)
				if req.PushConfigID != w.configID {
					t.Errorf("push config id = %q, want %q", req.PushConfigID, w.configID)
				}
				if w.op == task.OpSend || w.op == task.OpStream {
					if req.Message == nil {
						t.Fatal("no message summary")
					}
					if req.Message.Parts != w.parts || req.Message.Role != "user" || req.Message.ID == "" {
						t.Errorf("message = %+v, want parts %+v from a user", req.Message, w.parts)
					}
					if w.fileURI != "" && (len(req.Message.FileURIs) != 1 || req.Message.FileURIs[0] != w.fileURI) {
						t.Errorf("file uris = %v, want [%s]", req.Message.FileURIs, w.fileURI)
					}
					if w.mediaType != "" && (len(req.Message.MediaTypes) != 1 || req.Message.MediaTypes[0] != w.mediaType) {
						t.Errorf("media types = %v, want [%s]", req.Message.MediaTypes, w.mediaType)
					}
				}
				if req.Classification != w.class {
					t.Errorf("classification = %q, want %q", req.Classification, w.class)
				}
				if (req.Push != nil) != w.push {
					t.Fatalf("push = %+v, want present=%v", req.Push, w.push)
				}
				if w.push {
					p := req.Push
					if p.URL != "https://agents.bank.ae/cb" || p.Token != "s3cret" || p.AuthScheme != "Bearer" || p.Credentials == "" {
						t.Errorf("push = %+v", p)
					}
				}
				if w.extensions && len(req.Extensions) == 0 {
					t.Errorf("extensions header not read")
				}
				if binding == "jsonrpc" && len(req.Correlation) == 0 {
					t.Errorf("JSON-RPC id not kept")
				}
			})
		}
	}
	if seen < 70 {
		t.Errorf("only %d captured requests checked", seen)
	}
}

func checkID(t *testing.T, raw []byte, what, got string, wanted bool) {
	t.Helper()
	switch {
	case wanted && got == "":
		t.Errorf("%s missing", what)
	case !wanted && got != "":
		t.Errorf("%s = %q, want none", what, got)
	case wanted && !bytes.Contains(raw, []byte(got)):
		t.Errorf("%s %q does not appear in the request", what, got)
	}
}

func TestCardRequests(t *testing.T) {
	for _, v := range []string{"v0.3", "v1.0"} {
		_, req, f := readRequest(t, filepath.Join(fixtures, v, "card.request.http"), Options{})
		if f != nil || req.Operation != task.OpCard {
			t.Errorf("%s card request: %+v, %v", v, req, f)
		}
	}
}

// TestSecretsNeverRendered: a push token and credentials never appear in the JSON
// form of a request (what inspect prints and logs carry).
func TestSecretsNeverRendered(t *testing.T) {
	_, req, f := readRequest(t, filepath.Join(fixtures, "v1.0/jsonrpc/send_push.request.http"), Options{})
	if f != nil {
		t.Fatal(f)
	}
	out, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte("s3cret")) || bytes.Contains(out, []byte(req.Push.Credentials)) {
		t.Fatalf("secret rendered: %s", out)
	}
	if !bytes.Contains(out, []byte(`"has_token":true`)) {
		t.Fatalf("has_token missing: %s", out)
	}
}

// TestSpecOnlyRequests: operations no SDK here implements, written from the spec.
func TestSpecOnlyRequests(t *testing.T) {
	_, req, f := readRequest(t, filepath.Join(fixtures, "spec/v0.3-rest-list.request.http"), Options{})
	if f != nil || req.Operation != task.OpList || req.Protocol.Version != V03 || req.Protocol.Binding != task.BindingREST ||
		req.Protocol.Method != "GET /v1/tasks" || req.ContextID != "ctx-pmt-771" {
		t.Fatalf("%+v %v", req, f)
	}
}
