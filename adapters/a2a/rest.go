package a2a

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// route is one matched HTTP+JSON operation.
type route struct {
	op       task.Operation
	template string // the path template, for task.Protocol.Method
	taskID   string
	configID string
	needBody bool
}

// matchREST matches the path segments (after "/v1" or a tenant prefix) against the
// operations of the HTTP+JSON binding. card is the extended-card segment of the
// version ("card" in 0.3, "extendedAgentCard" in 1.0).
func matchREST(method string, segs []string, card string) (route, bool) {
	get, post, del := method == http.MethodGet || method == http.MethodHead, method == http.MethodPost, method == http.MethodDelete
	switch len(segs) {
	case 1:
		switch {
		case segs[0] == "message:send" && post:
			return route{op: task.OpSend, template: "/message:send", needBody: true}, true
		case segs[0] == "message:stream" && post:
			return route{op: task.OpStream, template: "/message:stream", needBody: true}, true
		case segs[0] == "tasks" && get:
			return route{op: task.OpList, template: "/tasks"}, true
		case segs[0] == card && get:
			return route{op: task.OpExtendedCard, template: "/" + card}, true
		}
	case 2:
		if segs[0] != "tasks" || segs[1] == "" {
			return route{}, false
		}
		id, verb, hasVerb := strings.Cut(segs[1], ":")
		if id == "" {
			return route{}, false
		}
		switch {
		case !hasVerb && get:
			return route{op: task.OpGet, template: "/tasks/{id}", taskID: id}, true
		case verb == "cancel" && post:
			return route{op: task.OpCancel, template: "/tasks/{id}:cancel", taskID: id}, true
		case verb == "subscribe" && (get || post):
			return route{op: task.OpSubscribe, template: "/tasks/{id}:subscribe", taskID: id}, true
		}
	case 3:
		if segs[0] != "tasks" || segs[1] == "" || segs[2] != "pushNotificationConfigs" {
			return route{}, false
		}
		switch {
		case post:
			return route{op: task.OpPushSet, template: "/tasks/{id}/pushNotificationConfigs", taskID: segs[1], needBody: true}, true
		case get:
			return route{op: task.OpPushList, template: "/tasks/{id}/pushNotificationConfigs", taskID: segs[1]}, true
		}
	case 4:
		if segs[0] != "tasks" || segs[1] == "" || segs[2] != "pushNotificationConfigs" || segs[3] == "" {
			return route{}, false
		}
		switch {
		case get:
			return route{op: task.OpPushGet, template: "/tasks/{id}/pushNotificationConfigs/{configId}", taskID: segs[1], configID: segs[3]}, true
		case del:
			return route{op: task.OpPushDelete, template: "/tasks/{id}/pushNotificationConfigs/{configId}", taskID: segs[1], configID: segs[3]}, true
		}
	}
	return route{}, false
}

func parseREST(in wire.Inbound, req task.Request, lim wire.Limits) (task.Request, *task.Fault) {
	segs := strings.Split(strings.Trim(in.Path, "/"), "/")
	var (
		rt     route
		ok     bool
		style  = V10
		tenant string
	)
	if len(segs) > 0 && segs[0] == "v1" {
		style = V03
		rt, ok = matchREST(in.Method, segs[1:], "card")
		rt.template = "/v1" + rt.template
	} else {
		rt, ok = matchREST(in.Method, segs, "extendedAgentCard")
		if !ok && len(segs) > 1 && segs[0] != "" {
			if rt, ok = matchREST(in.Method, segs[1:], "extendedAgentCard"); ok {
				tenant = segs[0]
				rt.template = "/{tenant}" + rt.template
			}
		}
	}
	req.Protocol.Method = in.Method + " " + in.Path
	if !ok {
		return req, task.NewFault(task.KindUnknownOperation, fmt.Sprintf("%s %s is not an A2A operation", in.Method, in.Path))
	}
	req.Operation = rt.op
	req.Protocol.Method = in.Method + " " + rt.template
	if style != req.Protocol.Version {
		return req, mismatch(req.Protocol.Version, style, "path "+in.Path)
	}
	var p wireParams
	body := bytes.TrimSpace(in.Body)
	if len(body) > 0 && string(body) != "null" {
		if f := checkBody(in, lim); f != nil {
			return req, f
		}
		if body[0] != '{' {
			return req, task.NewFault(task.KindNotARequest, "the request body must be a JSON object")
		}
		if err := paramsCase.Check(body); err != nil {
			return req, invalid("body: %s", err.Error())
		}
		if err := json.Unmarshal(body, &p); err != nil {
			return req, invalid("body: %s", wire.TypeError(err))
		}
	} else if rt.needBody {
		return req, invalid("%s needs a JSON body", rt.template)
	}
	if f := resolveTenant(&p, in, tenant); f != nil {
		return req, f
	}
	d := rest03
	if style == V10 {
		d = v10
	}
	if f := placePathIDs(&p, rt, d); f != nil {
		return req, f
	}
	if f := queryParams(&p, in, rt.op); f != nil {
		return req, f
	}
	if f := fill(&req, &p, d, in); f != nil {
		return req, f
	}
	return req, nil
}

// placePathIDs puts the ids from the path where the JSON-RPC params of the same
// dialect carry them, refusing a body that names a different task.
func placePathIDs(p *wireParams, rt route, d dialect) *task.Fault {
	if rt.taskID == "" {
		return nil
	}
	same := func(field, got string) *task.Fault {
		if got != "" && got != rt.taskID {
			return invalid("%s %q in the body does not match task %q in the path", field, got, rt.taskID)
		}
		return nil
	}
	switch rt.op {
	case task.OpGet, task.OpCancel, task.OpSubscribe:
		if f := same("id", p.ID); f != nil {
			return f
		}
		p.ID = rt.taskID
	case task.OpPushSet:
		if f := same("taskId", p.TaskID); f != nil {
			return f
		}
		if f := pushName(p, rt.taskID); f != nil {
			return f
		}
		p.TaskID = rt.taskID
		if d != v10 && p.PushNotificationConfig == nil && p.URL != "" {
			// A bare PushNotificationConfig posted to the collection.
			p.PushNotificationConfig = &wirePush{ID: p.ID, URL: p.URL, Token: p.Token, Authentication: p.Authentication}
		}
	case task.OpPushGet, task.OpPushList, task.OpPushDelete:
		if d == v10 {
			p.TaskID, p.ID = rt.taskID, rt.configID
		} else {
			p.ID, p.PushNotificationConfigID = rt.taskID, rt.configID
		}
	}
	return nil
}

// pushName checks the resource name of a 0.3 proto-JSON push config
// ("tasks/{id}/pushNotificationConfigs/{configId}"): the JS SDK's 0.3 HTTP+JSON
// handler takes the task from this name, not from the path, so a name must
// name the path's task, and its config id (if any) the body's config id.
func pushName(p *wireParams, taskID string) *task.Fault {
	if p.Name == "" {
		return nil
	}
	configID := p.ID
	if p.PushNotificationConfig != nil {
		configID = p.PushNotificationConfig.ID
	}
	rest, ok := strings.CutPrefix(p.Name, "tasks/"+taskID)
	switch {
	case ok && rest == "":
		return nil
	case ok && rest == "/pushNotificationConfigs/"+configID && configID != "":
		return nil
	}
	return invalid("name %q does not name task %q of the path (and config %q of the body)", p.Name, taskID, configID)
}

// queryParams reads the query parameters of GET operations.
func queryParams(p *wireParams, in wire.Inbound, op task.Operation) *task.Fault {
	if in.Query == nil {
		return nil
	}
	if in.Query.Get("historyLength") != "" && in.Query.Get("history_length") != "" {
		// The JS SDK's 0.3 handler takes historyLength first, its 1.0 handler
		// only historyLength: two spellings are two readings.
		return invalid("query historyLength and history_length name one value; send one")
	}
	for _, name := range []string{"historyLength", "history_length"} {
		if v := in.Query.Get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return invalid("query %s=%q must be a non-negative integer", name, v)
			}
			p.HistoryLength = &n
		}
	}
	if op == task.OpList {
		if v := in.Query.Get("contextId"); v != "" {
			p.ContextID = v
		}
		if v := in.Query.Get("pageSize"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return invalid("query pageSize=%q must be a non-negative integer", v)
			}
			p.PageSize = &n
		}
	}
	return nil
}
