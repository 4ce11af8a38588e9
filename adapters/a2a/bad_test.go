package a2a

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// TestBadRequests: every malformed, invalid or contradictory request yields a
// protocol-shaped error with the right code, and the JSON-RPC id when it was
// readable.
func TestBadRequests(t *testing.T) {
	cases := []struct {
		name   string
		kind   task.Kind
		code   int
		id     string // echoed JSON-RPC id ("" for none, "null" when unreadable)
		status int
	}{
		{"malformed_json", task.KindMalformed, -32700, "null", 200},
		{"not_a_request_array", task.KindNotARequest, -32600, "null", 200},
		{"not_a_request_scalar", task.KindNotARequest, -32600, "null", 200},
		{"not_a_request_version", task.KindNotARequest, -32600, "4", 200},
		{"not_a_request_id_object", task.KindNotARequest, -32600, "null", 200},
		{"not_a_request_no_method", task.KindNotARequest, -32600, "5", 200},
		{"unknown_method", task.KindUnknownOperation, -32601, `"u-9"`, 200},
		{"wrong_param_types", task.KindInvalidParams, -32602, "7", 200},
		{"wrong_param_types_id", task.KindInvalidParams, -32602, "7", 200},
		{"params_not_object", task.KindInvalidParams, -32602, "7", 200},
		{"missing_message", task.KindInvalidParams, -32602, "7", 200},
		{"missing_message_id", task.KindInvalidParams, -32602, "7", 200},
		{"missing_parts", task.KindInvalidParams, -32602, "7", 200},
		{"missing_task_id", task.KindInvalidParams, -32602, "7", 200},
		{"bad_role", task.KindInvalidParams, -32602, "7", 200},
		{"two_kinds_v10", task.KindInvalidParams, -32602, "7", 200},
		{"two_kinds_v03", task.KindInvalidParams, -32602, "7", 200},
		{"kind_mismatch_v03", task.KindInvalidParams, -32602, "7", 200},
		{"unknown_classification", task.KindInvalidParams, -32602, "7", 200},
		{"unknown_classification_header", task.KindInvalidParams, -32602, "7", 200},
		{"classification_wrong_shape", task.KindInvalidParams, -32602, "7", 200},
		{"push_bad_url", task.KindInvalidParams, -32602, "7", 200},
		{"push_03_name_in_v10", task.KindInvalidParams, -32602, "7", 200},
		{"v10_body_with_v03_method", task.KindVersionNotSupported, -32009, "7", 200},
		{"v10_method_without_version", task.KindVersionNotSupported, -32009, "7", 200},
		{"unsupported_version", task.KindVersionNotSupported, -32009, "7", 200},
		{"content_type", task.KindContentType, -32005, "7", 200},
		{"depth_bomb", task.KindTooDeep, -32600, "7", 200},
		{"field_case_differential", task.KindInvalidParams, -32602, "7", 200},
		{"rest_v10_body_on_v03_path", task.KindVersionNotSupported, -32009, "", 400},
		{"rest_v10_path_without_version", task.KindVersionNotSupported, -32009, "", 400},
		{"rest_unknown_path", task.KindUnknownOperation, -32601, "", 404},
		{"rest_missing_body", task.KindInvalidParams, -32602, "", 400},
		{"rest_wrong_method", task.KindUnknownOperation, -32601, "", 404},
		{"rest_tenant_mismatch", task.KindInvalidParams, -32602, "", 400},
		{"rest_tenant_dotdot", task.KindInvalidParams, -32602, "", 400},
		{"tenant_not_plain", task.KindInvalidParams, -32602, "7", 200},
		{"rest_task_mismatch", task.KindInvalidParams, -32602, "", 400},
		// An ambiguous request object (a key twice, or a key that folds onto
		// jsonrpc/method/params/id): a2a-go and the JS SDK would run different
		// requests. Invalid request, and no id is trusted.
		{"envelope_case_method_params", task.KindNotARequest, -32600, "null", 200},
		{"envelope_fold_params_long_s", task.KindNotARequest, -32600, "null", 200},
		{"envelope_fold_jsonrpc_long_s", task.KindNotARequest, -32600, "null", 200},
		{"envelope_case_id", task.KindNotARequest, -32600, "null", 200},
		{"envelope_escaped_case_method", task.KindNotARequest, -32600, "null", 200},
		{"envelope_duplicate_method", task.KindNotARequest, -32600, "null", 200},
		{"envelope_duplicate_escaped_method", task.KindNotARequest, -32600, "null", 200},
		{"envelope_duplicate_params_v10", task.KindNotARequest, -32600, "null", 200},
		{"envelope_second_object", task.KindMalformed, -32700, "null", 200},
		{"envelope_bom", task.KindMalformed, -32700, "null", 200},
		// Below the request object: invalid params, id echoed.
		{"params_duplicate_key", task.KindInvalidParams, -32602, "7", 200},
		{"params_fold_task_id_long_s", task.KindInvalidParams, -32602, "7", 200},
		{"params_proto_alias_task_id", task.KindInvalidParams, -32602, "7", 200},
		{"params_proto_alias_push_config", task.KindInvalidParams, -32602, "7", 200},
		{"rest_proto_alias_task_id", task.KindInvalidParams, -32602, "", 400},
		{"rest_fold_message", task.KindInvalidParams, -32602, "", 400},
		{"rest_duplicate_key", task.KindInvalidParams, -32602, "", 400},
		{"rest_v03_push_name_mismatch", task.KindInvalidParams, -32602, "", 400},
	}
	files, _ := filepath.Glob(filepath.Join(fixtures, "bad", "*.request.http"))
	if len(files) != len(cases) {
		t.Errorf("%d bad fixtures, %d cases: every fixture needs a case", len(files), len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, req, f := readRequest(t, filepath.Join(fixtures, "bad", c.name+".request.http"), Options{})
			if f == nil {
				t.Fatalf("parsed without fault: %+v", req)
			}
			if f.Kind != c.kind {
				t.Fatalf("kind = %s (%s), want %s", f.Kind, f.Message, c.kind)
			}
			if f.Message == "" {
				t.Error("fault without a message")
			}
			r := RenderFault(&req, f)
			if r.Status != c.status {
				t.Errorf("HTTP status = %d, want %d", r.Status, c.status)
			}
			checkRendered(t, &req, r, c.code, c.id)
		})
	}
}

// checkRendered decodes a rendered error in the shape its binding and version
// prescribe and checks the code and the echoed id.
func checkRendered(t *testing.T, req *task.Request, r wire.Rendered, code int, id string) {
	t.Helper()
	switch {
	case req.Protocol.Binding == task.BindingJSONRPC:
		var env struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   struct {
				Code    int             `json:"code"`
				Message string          `json:"message"`
				Data    json.RawMessage `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(r.Body, &env); err != nil {
			t.Fatalf("rendered JSON-RPC error does not parse: %v: %s", err, r.Body)
		}
		if env.JSONRPC != "2.0" || env.Error.Code != code || string(env.ID) != id || env.Error.Message == "" {
			t.Errorf("rendered %s, want code %d id %s", r.Body, code, id)
		}
		// 1.0: a list of ErrorInfo; 0.3: an object (0.3 clients decode a map)
		// whose details hold the same list.
		var infos []ErrorDetail
		if req.Protocol.Version == V10 {
			_ = json.Unmarshal(env.Error.Data, &infos)
		} else {
			var obj legacyData
			if err := json.Unmarshal(env.Error.Data, &obj); err != nil || obj.Reason == "" {
				t.Errorf("0.3 error.data is not an object with a reason: %s", r.Body)
			}
			infos = obj.Details
		}
		if len(infos) == 0 || infos[0].Type != "type.googleapis.com/google.rpc.ErrorInfo" {
			t.Errorf("error data lacks ErrorInfo: %s", r.Body)
		}
	case req.Protocol.Version == V10:
		var e restError
		if err := json.Unmarshal(r.Body, &e); err != nil {
			t.Fatalf("rendered REST error does not parse: %v", err)
		}
		if e.Error.Code != r.Status || e.Error.Status == "" || len(e.Error.Details) == 0 || CodeOf(kindOfReason(e.Error.Details[0].Reason)) != code {
			t.Errorf("rendered %s, want code %d", r.Body, code)
		}
		if r.ContentType != "application/a2a+json" {
			t.Errorf("content type %q", r.ContentType)
		}
	default:
		var e rpcError
		if err := json.Unmarshal(r.Body, &e); err != nil || e.Code != code {
			t.Errorf("rendered 0.3 REST error %s, want code %d", r.Body, code)
		}
	}
}

func kindOfReason(reason string) task.Kind {
	for k, s := range shapes {
		if s.reason == reason {
			return k
		}
	}
	return ""
}

// TestLimits: the body-size and depth limits are configurable and enforced.
func TestLimits(t *testing.T) {
	path := filepath.Join(fixtures, "v1.0/jsonrpc/send.request.http")
	if _, _, f := readRequest(t, path, Options{}); f != nil {
		t.Fatalf("default limits refuse a normal request: %v", f)
	}
	_, req, f := readRequest(t, path, Options{Limits: wire.Limits{MaxBodyBytes: 100}})
	if f == nil || f.Kind != task.KindTooLarge {
		t.Fatalf("over the size limit: %v", f)
	}
	if r := RenderFault(&req, f); r.Status != 413 {
		t.Errorf("status %d, want 413", r.Status)
	}
	// The send fixture nests 6 levels deep (envelope, params, message, parts, part, data).
	if _, _, f := readRequest(t, path, Options{Limits: wire.Limits{MaxJSONDepth: 6}}); f != nil {
		t.Errorf("depth 6 refused at limit 6: %v", f)
	}
	if _, _, f := readRequest(t, path, Options{Limits: wire.Limits{MaxJSONDepth: 5}}); f == nil || f.Kind != task.KindTooDeep {
		t.Errorf("depth 6 at limit 5: %v", f)
	}
	// The bundled depth bomb passes when the limit is raised: the limit, not the
	// parser, refused it.
	if _, _, f := readRequest(t, filepath.Join(fixtures, "bad/depth_bomb.request.http"), Options{Limits: wire.Limits{MaxJSONDepth: 64}}); f != nil {
		t.Errorf("depth bomb under a raised limit: %v", f)
	}
}

// TestTenantPrefix: A2A 1.0 REST paths may carry a leading tenant.
func TestTenantPrefix(t *testing.T) {
	in := wire.Inbound{Method: "GET", Path: "/wholesale/tasks/t-1", Header: v10Header()}
	req, f := Parse(in, Options{})
	if f != nil || req.Tenant != "wholesale" || req.TaskID != "t-1" || req.Operation != task.OpGet || req.Protocol.Method != "GET /{tenant}/tasks/{id}" {
		t.Fatalf("%+v %v", req, f)
	}
	in.Path = "/wholesale/tasks"
	req, f = Parse(in, Options{})
	if f != nil || req.Tenant != "wholesale" || req.Operation != task.OpList {
		t.Fatalf("%+v %v", req, f)
	}
	in = wire.Inbound{Method: "POST", Path: "/wholesale/message:send", Header: v10Header(),
		Body: []byte(`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}`)}
	req, f = Parse(in, Options{})
	if f != nil || req.Tenant != "wholesale" || req.Operation != task.OpSend {
		t.Fatalf("%+v %v", req, f)
	}
}

// TestDenialRendering: every denial reaches the caller, in every shape.
func TestDenialRendering(t *testing.T) {
	f := &task.Fault{Kind: task.KindDenied, Message: "delegation denied", Denials: []task.Denial{
		{Code: "TENANT_NOT_PERMITTED", Reason: "kyc-refresh-agent does not serve tenant wholesale"},
		{Code: "CLASSIFICATION_EXCEEDED", Reason: "up to confidential; the task carries restricted"},
	}}
	for _, req := range []task.Request{
		{Protocol: task.Protocol{Version: V10, Binding: task.BindingJSONRPC}, Correlation: json.RawMessage(`"abc"`)},
		{Protocol: task.Protocol{Version: V03, Binding: task.BindingJSONRPC}, Correlation: json.RawMessage(`12`)},
		{Protocol: task.Protocol{Version: V10, Binding: task.BindingREST}},
		{Protocol: task.Protocol{Version: V03, Binding: task.BindingREST}},
	} {
		r := RenderFault(&req, f)
		if r.Status != 403 {
			t.Errorf("%+v: status %d, want 403", req.Protocol, r.Status)
		}
		body := string(r.Body)
		for _, d := range f.Denials {
			if !strings.Contains(body, d.Code) || !strings.Contains(body, d.Reason) {
				t.Errorf("%+v: %s missing from %s", req.Protocol, d.Code, body)
			}
		}
		if req.Protocol.Binding == task.BindingJSONRPC && !strings.Contains(body, `"id":`+string(req.Correlation)) {
			t.Errorf("id not echoed: %s", body)
		}
	}
	unauth := RenderFault(&task.Request{Protocol: task.Protocol{Version: V10, Binding: task.BindingREST}},
		&task.Fault{Kind: task.KindUnauthenticated, Message: "no credentials", Denials: []task.Denial{{Code: "UNAUTHENTICATED", Reason: "anonymous"}}})
	if unauth.Status != 401 || !strings.Contains(string(unauth.Body), `"status":"UNAUTHENTICATED"`) {
		t.Errorf("unauthenticated: %d %s", unauth.Status, unauth.Body)
	}
	terminal := RenderFault(&task.Request{Protocol: task.Protocol{Version: V10, Binding: task.BindingJSONRPC}},
		task.NewFault(task.KindTaskTerminal, "task t-1 is completed"))
	if !strings.Contains(string(terminal.Body), `"code":-32004`) || !strings.Contains(string(terminal.Body), `"reason":"TASK_TERMINAL"`) {
		t.Errorf("terminal: %s", terminal.Body)
	}
}

func v10Header() http.Header {
	h := http.Header{}
	h.Set(VersionHeader, V10)
	return h
}
