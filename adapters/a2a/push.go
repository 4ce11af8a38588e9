package a2a

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// pushKeys are the configuration fields that carry a push config in a send, in
// every version and dialect.
var pushKeys = []string{"pushNotificationConfig", "pushNotification", "taskPushNotificationConfig"}

// StripPush returns the body of a send or stream without its push config, so
// the agent never receives a caller's callback URL (writ keeps and delivers
// push notifications itself). Every other byte of meaning is kept.
func StripPush(req *task.Request, body []byte) ([]byte, error) {
	if req.Push == nil || (req.Operation != task.OpSend && req.Operation != task.OpStream) {
		return body, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, fmt.Errorf("stripping the push config: %w", err)
	}
	params := top
	if req.Protocol.Binding == task.BindingJSONRPC {
		params = nil // a fresh map: decoding into top would merge into it
		if err := json.Unmarshal(top["params"], &params); err != nil {
			return nil, fmt.Errorf("stripping the push config: %w", err)
		}
	}
	var conf map[string]json.RawMessage
	if err := json.Unmarshal(params["configuration"], &conf); err != nil {
		return nil, fmt.Errorf("stripping the push config: %w", err)
	}
	for _, k := range pushKeys {
		delete(conf, k)
	}
	raw, err := json.Marshal(conf)
	if err != nil {
		return nil, err
	}
	params["configuration"] = raw
	if req.Protocol.Binding != task.BindingJSONRPC {
		return json.Marshal(params)
	}
	if top["params"], err = json.Marshal(params); err != nil {
		return nil, err
	}
	return json.Marshal(top)
}

type pushAuth03 struct {
	Schemes     []string `json:"schemes"`
	Credentials string   `json:"credentials,omitempty"`
}

type push03 struct {
	ID             string      `json:"id,omitempty"`
	URL            string      `json:"url"`
	Token          string      `json:"token,omitempty"`
	Authentication *pushAuth03 `json:"authentication,omitempty"`
}

type taskPush03 struct {
	TaskID string `json:"taskId,omitempty"`
	Name   string `json:"name,omitempty"` // proto-JSON (HTTP+JSON) form
	Config push03 `json:"pushNotificationConfig"`
}

type pushAuth10 struct {
	Scheme      string `json:"scheme"`
	Credentials string `json:"credentials,omitempty"`
}

type push10 struct {
	Tenant         string      `json:"tenant,omitempty"`
	ID             string      `json:"id"`
	TaskID         string      `json:"taskId"`
	URL            string      `json:"url"`
	Token          string      `json:"token,omitempty"`
	Authentication *pushAuth10 `json:"authentication,omitempty"`
}

// pushView renders one stored config as the request's version shows it.
func pushView(req *task.Request, p task.PushConfig) any {
	if req.Protocol.Version == V10 {
		v := push10{Tenant: req.Tenant, ID: p.ID, TaskID: req.TaskID, URL: p.URL, Token: p.Token}
		if p.AuthScheme != "" {
			v.Authentication = &pushAuth10{Scheme: p.AuthScheme, Credentials: p.Credentials}
		}
		return v
	}
	c := push03{ID: p.ID, URL: p.URL, Token: p.Token}
	if p.AuthScheme != "" {
		c.Authentication = &pushAuth03{Schemes: []string{p.AuthScheme}, Credentials: p.Credentials}
	}
	if req.Protocol.Binding == task.BindingREST {
		return taskPush03{Name: "tasks/" + req.TaskID + "/pushNotificationConfigs/" + p.ID, Config: c}
	}
	return taskPush03{TaskID: req.TaskID, Config: c}
}

// RenderPushResult answers a push-config operation that writ served itself:
// set and get return the config, list the task's configs, delete nothing — each
// in the shape and status the request's version and binding use.
func RenderPushResult(req *task.Request, configs []task.PushConfig) wire.Rendered {
	var result any
	status := http.StatusOK
	switch req.Operation {
	case task.OpPushSet, task.OpPushGet:
		if len(configs) > 0 {
			result = pushView(req, configs[0])
		}
		if req.Operation == task.OpPushSet && req.Protocol.Binding == task.BindingREST {
			status = http.StatusCreated
		}
	case task.OpPushList:
		views := make([]any, 0, len(configs))
		for _, c := range configs {
			views = append(views, pushView(req, c))
		}
		if req.Protocol.Version == V03 && req.Protocol.Binding == task.BindingJSONRPC {
			result = views // 0.3 JSON-RPC answers a bare list
		} else {
			result = map[string]any{"configs": views}
		}
	case task.OpPushDelete:
		if req.Protocol.Binding == task.BindingREST {
			return wire.Rendered{Status: http.StatusNoContent}
		}
	}
	ct := "application/json"
	if req.Protocol.Binding == task.BindingJSONRPC {
		id := req.Correlation
		if len(id) == 0 {
			id = json.RawMessage("null")
		}
		body, _ := json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  any             `json:"result"`
		}{"2.0", id, result})
		return wire.Rendered{Status: status, ContentType: ct, Body: body}
	}
	if req.Protocol.Version == V10 {
		ct = "application/a2a+json"
	}
	body, _ := json.Marshal(result)
	return wire.Rendered{Status: status, ContentType: ct, Body: body}
}

// RenderNotification is the body writ posts to a push callback when a task's
// state changes: 1.0 a StreamResponse status update (application/a2a+json), 0.3
// the Task itself (application/json).
func RenderNotification(t *task.Task, version string) (contentType string, body []byte, err error) {
	if version == V10 {
		body, err = json.Marshal(map[string]any{"statusUpdate": map[string]any{
			"taskId": t.ID, "contextId": t.ContextID,
			"status": map[string]any{"state": stateName(t.State, V10), "timestamp": time.Now().UTC().Format(time.RFC3339Nano)},
		}})
		return "application/a2a+json", body, err
	}
	body, err = RenderTask(t, V03)
	return "application/json", body, err
}

// GetTaskRequest renders a get-task request in the version and binding of req,
// for following a task after its request returned; get is the internal request it
// stands for (to parse the answer with).
func GetTaskRequest(req *task.Request, taskID string) (method, path string, body []byte, get *task.Request) {
	return followRequest(req, taskID, task.OpGet, http.MethodGet, "", "tasks/get", "GetTask")
}

// SubscribeRequest renders a subscribe request in the version and binding of req
// (tasks/resubscribe, SubscribeToTask, POST /tasks/{id}:subscribe), for following
// a task on an agent that streams; sub is the internal request it stands for.
func SubscribeRequest(req *task.Request, taskID string) (method, path string, body []byte, sub *task.Request) {
	return followRequest(req, taskID, task.OpSubscribe, http.MethodPost, ":subscribe", "tasks/resubscribe", "SubscribeToTask")
}

// followRequest renders writ's own request about one task: over REST the verb
// on /tasks/{id}<suffix> (under /v1 in 0.3, under the tenant in 1.0), over
// JSON-RPC the version's method with {"id": taskID}.
func followRequest(req *task.Request, taskID string, op task.Operation, verb, suffix, rpc03, rpc10 string) (string, string, []byte, *task.Request) {
	out := &task.Request{Operation: op, TaskID: taskID, Tenant: req.Tenant,
		Protocol: task.Protocol{Name: ProtocolName, Version: req.Protocol.Version, Binding: req.Protocol.Binding}}
	if req.Protocol.Binding == task.BindingREST {
		template, path := "/tasks/{id}"+suffix, "/tasks/"+url.PathEscape(taskID)+suffix
		if req.Protocol.Version == V03 {
			template, path = "/v1"+template, "/v1"+path
		} else if req.Tenant != "" {
			template, path = "/{tenant}"+template, "/"+url.PathEscape(req.Tenant)+path
		}
		out.Protocol.Method = verb + " " + template
		return verb, path, nil, out
	}
	rpc := rpc03
	if req.Protocol.Version == V10 {
		rpc = rpc10
	}
	out.Protocol.Method, out.Correlation = rpc, json.RawMessage(`"writ-follow"`)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "writ-follow", "method": rpc, "params": map[string]any{"id": taskID}})
	return http.MethodPost, "/", body, out
}

// FilterTaskList removes from a list-tasks answer (JSON-RPC result or HTTP+JSON
// body, {"tasks": [...]}) every task keep refuses; it reports whether it removed
// any. A page that lost tasks reports its own size as totalSize, so the count of
// hidden tasks is not revealed either. Other answers pass unchanged.
func FilterTaskList(req *task.Request, body []byte, keep func(id string) bool) ([]byte, bool, error) {
	if req.Operation != task.OpList {
		return body, false, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return body, false, fmt.Errorf("list answer: %w", err)
	}
	list := top
	if req.Protocol.Binding == task.BindingJSONRPC {
		if len(top["result"]) == 0 {
			return body, false, nil // an error answer
		}
		list = nil
		if err := json.Unmarshal(top["result"], &list); err != nil {
			return body, false, fmt.Errorf("list answer: %w", err)
		}
	}
	var tasks []json.RawMessage
	if raw, ok := list["tasks"]; !ok || json.Unmarshal(raw, &tasks) != nil {
		return body, false, nil //nolint:nilerr // not a listing: passed on unchanged
	}
	kept := make([]json.RawMessage, 0, len(tasks))
	for _, t := range tasks {
		var id struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(t, &id) == nil && keep(id.ID) {
			kept = append(kept, t)
		}
	}
	if len(kept) == len(tasks) {
		return body, false, nil
	}
	var err error
	if list["tasks"], err = json.Marshal(kept); err != nil {
		return body, false, err
	}
	if _, ok := list["totalSize"]; ok {
		list["totalSize"] = json.RawMessage(fmt.Sprint(len(kept)))
	}
	if req.Protocol.Binding != task.BindingJSONRPC {
		out, err := json.Marshal(list)
		return out, true, err
	}
	if top["result"], err = json.Marshal(list); err != nil {
		return body, false, err
	}
	out, err := json.Marshal(top)
	return out, true, err
}
