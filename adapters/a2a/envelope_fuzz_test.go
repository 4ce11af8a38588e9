package a2a

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// FuzzEnvelopeDifferential: for any JSON-RPC body, writ refuses it or both
// servers behind it would act on what writ decided. The servers are modelled
// in process (TestEnvelopeDifferential checks the real ones):
//
//   - a2a-go v0.3.3: a2asrv's jsonrpc handler decodes the body with
//     json.NewDecoder(body).Decode into {jsonrpc, method, params
//     json.RawMessage, id any} (encoding/json: keys folded, the last match
//     kept, anything after the first value ignored), then params with
//     json.Unmarshal into a2a-go's own params types, which this test uses.
//   - @a2a-js/sdk 1.3.0: express.json (JSON.parse: exact keys, the last
//     duplicate kept), then for 1.0 the ts-proto fromJSON decoders (the JSON
//     name, else the proto name when the JSON name is absent or null, values
//     through String()) and for 0.3 its legacy conversions (exact keys, raw
//     values).
//
// When fuzzing, every 16th generated case seeds the corpus: gathering the
// baseline coverage of all 5,415 takes about 30 s on a 2-core machine before
// the first mutation, and the plain test run (go test without -fuzz) still
// runs every one of them, as TestEnvelopeDifferential does against the SDKs.
func FuzzEnvelopeDifferential(f *testing.F) {
	stride := 1
	if fl := flag.Lookup("test.fuzz"); fl != nil && fl.Value.String() != "" {
		stride = 16
	}
	for i, c := range differentialCases() {
		if c.rpc && i%stride == 0 {
			f.Add(c.body, c.v10)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, v10 bool) {
		h := http.Header{"Content-Type": {"application/json"}}
		if v10 {
			h.Set(VersionHeader, V10)
		}
		req, fault := Parse(wire.Inbound{Method: http.MethodPost, Path: "/", Header: h, Body: body}, Options{})
		if fault != nil {
			return
		}
		want := decided(req)
		if got, ok := a2aGoModel(body); ok && got != want {
			t.Fatalf("writ decided %v, a2a-go would act on %v\nbody: %q", want, got, body)
		}
		if got, ok := jsModel(body, v10); ok && got != want {
			t.Fatalf("writ decided %v, the JS SDK would act on %v\nbody: %q", want, got, body)
		}
	})
}

// a2aGoEnvelope is a2asrv's jsonrpcRequest, field for field.
type a2aGoEnvelope struct {
	JSONRPC string          `json:"jsonrpc"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
	ID      any             `json:"id"`
}

// a2aGoModel is what a2a-go's JSON-RPC handler would call its request handler
// with, or ok=false when it answers an error first.
func a2aGoModel(body []byte) (action, bool) {
	var env a2aGoEnvelope
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&env); err != nil || env.JSONRPC != "2.0" {
		return action{}, false
	}
	decode := func(v any) bool { return json.Unmarshal(env.Params, v) == nil }
	var a action
	switch env.Method {
	case "tasks/get":
		var p a2a.TaskQueryParams
		if !decode(&p) {
			return a, false
		}
		a = action{Op: string(task.OpGet), TaskID: string(p.ID)}
	case "tasks/cancel", "tasks/resubscribe":
		var p a2a.TaskIDParams
		if !decode(&p) {
			return a, false
		}
		a = action{Op: string(task.OpCancel), TaskID: string(p.ID)}
		if env.Method == "tasks/resubscribe" {
			a.Op = string(task.OpSubscribe)
		}
	case "message/send", "message/stream":
		var p a2a.MessageSendParams
		if !decode(&p) {
			return a, false
		}
		a.Op = string(task.OpSend)
		if env.Method == "message/stream" {
			a.Op = string(task.OpStream)
		}
		if p.Message != nil {
			a.TaskID, a.ContextID = string(p.Message.TaskID), p.Message.ContextID
		}
		if p.Config != nil && p.Config.PushConfig != nil {
			a.PushURL = p.Config.PushConfig.URL
		}
	case "tasks/pushNotificationConfig/set":
		var p a2a.TaskPushConfig
		if !decode(&p) {
			return a, false
		}
		a = action{Op: string(task.OpPushSet), TaskID: string(p.TaskID), PushURL: p.Config.URL, ConfigID: p.Config.ID}
	case "tasks/pushNotificationConfig/get":
		var p a2a.GetTaskPushConfigParams
		if !decode(&p) {
			return a, false
		}
		a = action{Op: string(task.OpPushGet), TaskID: string(p.TaskID), ConfigID: p.ConfigID}
	case "tasks/pushNotificationConfig/list":
		var p a2a.ListTaskPushConfigParams
		if !decode(&p) {
			return a, false
		}
		a = action{Op: string(task.OpPushList), TaskID: string(p.TaskID)}
	case "tasks/pushNotificationConfig/delete":
		var p a2a.DeleteTaskPushConfigParams
		if !decode(&p) {
			return a, false
		}
		a = action{Op: string(task.OpPushDelete), TaskID: string(p.TaskID), ConfigID: p.ConfigID}
	case "agent/getAuthenticatedExtendedCard":
		a = action{Op: string(task.OpExtendedCard)}
	default:
		return a, false
	}
	return a.normal(), true
}

// jsObj is a parsed JSON object as JSON.parse builds it: exact keys, the last
// duplicate kept.
type jsObj map[string]any

// jsParse is express.json (strict) and JSON.parse on a UTF-8 body: a leading
// BOM is dropped (body-parser's decoding does), the body must start with an
// object or array and hold one JSON value; ok=false when it would throw.
func jsParse(body []byte) (any, bool) {
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimLeft(body, " \t\n\r")
	if len(trimmed) == 0 || trimmed[0] != '{' && trimmed[0] != '[' {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	v, err := jsValue(dec)
	if err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return v, true
}

func jsValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := jsObj{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := jsValue(dec)
			if err != nil {
				return nil, err
			}
			o[k.(string)] = v // the last duplicate wins
		}
		_, err := dec.Token()
		return o, err
	case json.Delim('['):
		var a []any
		for dec.More() {
			v, err := jsValue(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token()
		return a, err
	}
	return tok, nil
}

// jsNotString marks a value JS would turn into a string writ never reads a
// string from (a number, a boolean, an object): any such value differs from
// writ's decision, which is built from JSON strings only.
const jsNotString = "\x00<not a JSON string>"

// get is obj.key on any JS value: undefined (nil, false) unless v is an object
// holding key.
func get(v any, key string) (any, bool) {
	o, ok := v.(jsObj)
	if !ok {
		return nil, false
	}
	x, ok := o[key]
	return x, ok
}

// isSet is ts-proto's isSet: neither undefined nor null.
func isSet(v any, present bool) bool { return present && v != nil }

// jsString is String(v) where writ could agree: strings as they are,
// everything else marked.
func jsString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return jsNotString
}

// protoField is ts-proto's fromJSON of a string field: the JSON name, else the
// proto name (when there is one), else "".
func protoField(o any, jsonName, protoName string) string {
	if v, ok := get(o, jsonName); isSet(v, ok) {
		return jsString(v)
	}
	if protoName != "" {
		if v, ok := get(o, protoName); isSet(v, ok) {
			return jsString(v)
		}
	}
	return ""
}

// rawField is a 0.3 legacy conversion's raw read, as the witness records it:
// undefined and null as "".
func rawField(o any, key string) string {
	v, ok := get(o, key)
	if !ok || v == nil {
		return ""
	}
	return jsString(v)
}

func truthy(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case string:
		return v != ""
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		return err != nil || f != 0
	}
	return true
}

// paramsValid is the SDK's paramsAreValid: a non-null, non-array object with
// no empty key.
func paramsValid(p any) bool {
	o, ok := p.(jsObj)
	if !ok {
		return false
	}
	_, empty := o[""]
	return !empty
}

// jsModel is what @a2a-js/sdk's JSON-RPC handler would call its request
// handler with (see differential.mjs for how the real one is observed), or
// ok=false when it answers an error first.
func jsModel(body []byte, v10 bool) (action, bool) {
	v, ok := jsParse(body)
	if !ok {
		return action{}, false
	}
	rpc, ok := v.(jsObj)
	if !ok {
		return action{}, false
	}
	if s, ok := rpc["jsonrpc"].(string); !ok || s != "2.0" {
		return action{}, false
	}
	if id, ok := rpc["id"]; ok {
		switch id := id.(type) {
		case nil, string:
		case json.Number:
			if _, err := strconv.ParseInt(string(id), 10, 64); err != nil {
				if f, err := strconv.ParseFloat(string(id), 64); err != nil || f != float64(int64(f)) {
					return action{}, false
				}
			}
		default:
			return action{}, false
		}
	}
	method, ok := rpc["method"].(string)
	if !ok || method == "" {
		return action{}, false
	}
	params := rpc["params"]
	var a action
	if v10 {
		if method != "GetExtendedAgentCard" && !paramsValid(params) {
			return a, false
		}
		switch method {
		case "SendMessage", "SendStreamingMessage":
			a.Op = string(task.OpSend)
			if method == "SendStreamingMessage" {
				a.Op = string(task.OpStream)
			}
			if msg, ok := get(params, "message"); isSet(msg, ok) {
				a.TaskID = protoField(msg, "taskId", "task_id")
				a.ContextID = protoField(msg, "contextId", "context_id")
			}
			if conf, ok := get(params, "configuration"); isSet(conf, ok) {
				push, ok := get(conf, "taskPushNotificationConfig")
				if !isSet(push, ok) {
					push, ok = get(conf, "task_push_notification_config")
				}
				if isSet(push, ok) {
					a.PushURL = protoField(push, "url", "")
				}
			}
		case "GetTask", "CancelTask", "SubscribeToTask":
			a = action{Op: map[string]string{"GetTask": string(task.OpGet), "CancelTask": string(task.OpCancel),
				"SubscribeToTask": string(task.OpSubscribe)}[method], TaskID: protoField(params, "id", "")}
		case "ListTasks":
			a = action{Op: string(task.OpList), ContextID: protoField(params, "contextId", "context_id")}
		case "CreateTaskPushNotificationConfig":
			a = action{Op: string(task.OpPushSet), TaskID: protoField(params, "taskId", "task_id"),
				PushURL: protoField(params, "url", ""), ConfigID: protoField(params, "id", "")}
		case "GetTaskPushNotificationConfig", "DeleteTaskPushNotificationConfig":
			a = action{Op: string(task.OpPushGet), TaskID: protoField(params, "taskId", "task_id"), ConfigID: protoField(params, "id", "")}
			if method == "DeleteTaskPushNotificationConfig" {
				a.Op = string(task.OpPushDelete)
			}
		case "ListTaskPushNotificationConfigs":
			a = action{Op: string(task.OpPushList), TaskID: protoField(params, "taskId", "task_id")}
		case "GetExtendedAgentCard":
			a = action{Op: string(task.OpExtendedCard)}
		default:
			return a, false
		}
		return a.normal(), true
	}
	// 0.3, through the SDK's legacy layer.
	if method != "agent/getAuthenticatedExtendedCard" && !paramsValid(params) {
		return a, false
	}
	switch method {
	case "message/send", "message/stream":
		msg, _ := get(params, "message")
		if _, ok := msg.(jsObj); !ok {
			return a, false // toCoreMessage throws
		}
		if id, _ := get(msg, "messageId"); id == nil || id == "" {
			return a, false
		} else if _, ok := id.(string); !ok {
			return a, false
		}
		if role, _ := get(msg, "role"); role != "user" && role != "agent" {
			return a, false
		}
		if parts, _ := get(msg, "parts"); parts == nil {
			return a, false
		} else if _, ok := parts.([]any); !ok {
			return a, false
		}
		a.Op = string(task.OpSend)
		if method == "message/stream" {
			a.Op = string(task.OpStream)
		}
		a.TaskID, a.ContextID = rawField(msg, "taskId"), rawField(msg, "contextId")
		if conf, _ := get(params, "configuration"); truthy(conf) {
			if push, _ := get(conf, "pushNotificationConfig"); truthy(push) {
				a.PushURL = rawField(push, "url")
			}
		}
	case "tasks/get", "tasks/cancel", "tasks/resubscribe":
		a = action{Op: map[string]string{"tasks/get": string(task.OpGet), "tasks/cancel": string(task.OpCancel),
			"tasks/resubscribe": string(task.OpSubscribe)}[method], TaskID: rawField(params, "id")}
	case "tasks/pushNotificationConfig/set":
		push, _ := get(params, "pushNotificationConfig")
		if push == nil {
			return a, false // .id of undefined throws
		}
		a = action{Op: string(task.OpPushSet), TaskID: rawField(params, "taskId"), PushURL: rawField(push, "url"), ConfigID: rawField(push, "id")}
	case "tasks/pushNotificationConfig/get":
		a = action{Op: string(task.OpPushGet), TaskID: rawField(params, "id"), ConfigID: rawField(params, "pushNotificationConfigId")}
	case "tasks/pushNotificationConfig/delete":
		a = action{Op: string(task.OpPushDelete), TaskID: rawField(params, "id"), ConfigID: rawField(params, "pushNotificationConfigId")}
	case "tasks/pushNotificationConfig/list":
		a = action{Op: string(task.OpPushList), TaskID: rawField(params, "id")}
	case "agent/getAuthenticatedExtendedCard":
		a = action{Op: string(task.OpExtendedCard)}
	default:
		return a, false
	}
	return a.normal(), true
}

// TestEnvelopeModels pins the models on requests whose reading is known (what
// the real servers did with them before writ refused them). That the models
// agree with the real servers on the whole differential corpus is checked by
// TestEnvelopeDifferential.
func TestEnvelopeModels(t *testing.T) {
	mine := action{Op: string(task.OpGet), TaskID: "mine"}
	for _, c := range []struct {
		name       string
		body       string
		v10        bool
		goA, jsA   action
		goOK, jsOK bool
	}{
		{"issue-11", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"mine"},"Method":"tasks/cancel","Params":{"id":"victim"}}`, false,
			action{Op: string(task.OpCancel), TaskID: "victim"}, mine, true, true},
		{"long-s", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"mine"},"paramſ":{"id":"victim"}}`, false,
			action{Op: string(task.OpGet), TaskID: "victim"}, mine, true, true},
		{"duplicate", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"victim"},"params":{"id":"mine"}}`, false,
			mine, mine, true, true},
		{"second-object", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"mine"}}{"x":1}`, false,
			mine, action{}, true, false},
		{"alias", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"taskId":null,"task_id":"victim"}}}`, true,
			action{}, action{Op: string(task.OpSend), TaskID: "victim"}, false, true},
	} {
		goA, goOK := a2aGoModel([]byte(c.body))
		jsA, jsOK := jsModel([]byte(c.body), c.v10)
		if goOK != c.goOK || goOK && goA != c.goA || jsOK != c.jsOK || jsOK && jsA != c.jsA {
			t.Errorf("%s: a2a-go %v %v, JS %v %v; want %v %v, %v %v", c.name, goA, goOK, jsA, jsOK, c.goA, c.goOK, c.jsA, c.jsOK)
		}
	}
}
