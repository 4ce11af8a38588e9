package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// Options configure request parsing. The zero value is usable.
type Options struct {
	Limits wire.Limits
	// JSONRPCPath is where the agent serves JSON-RPC (default "/"). A POST there is
	// parsed as JSON-RPC; every other path as HTTP+JSON.
	JSONRPCPath string
}

type opSpec struct {
	op      task.Operation
	version string
}

// rpcMethods maps every JSON-RPC method of both versions to its operation.
var rpcMethods = map[string]opSpec{
	"message/send":                        {task.OpSend, V03},
	"message/stream":                      {task.OpStream, V03},
	"tasks/get":                           {task.OpGet, V03},
	"tasks/cancel":                        {task.OpCancel, V03},
	"tasks/resubscribe":                   {task.OpSubscribe, V03},
	"tasks/pushNotificationConfig/set":    {task.OpPushSet, V03},
	"tasks/pushNotificationConfig/get":    {task.OpPushGet, V03},
	"tasks/pushNotificationConfig/list":   {task.OpPushList, V03},
	"tasks/pushNotificationConfig/delete": {task.OpPushDelete, V03},
	"agent/getAuthenticatedExtendedCard":  {task.OpExtendedCard, V03},
	"SendMessage":                         {task.OpSend, V10},
	"SendStreamingMessage":                {task.OpStream, V10},
	"GetTask":                             {task.OpGet, V10},
	"ListTasks":                           {task.OpList, V10},
	"CancelTask":                          {task.OpCancel, V10},
	"SubscribeToTask":                     {task.OpSubscribe, V10},
	"CreateTaskPushNotificationConfig":    {task.OpPushSet, V10},
	"GetTaskPushNotificationConfig":       {task.OpPushGet, V10},
	"ListTaskPushNotificationConfigs":     {task.OpPushList, V10},
	"DeleteTaskPushNotificationConfig":    {task.OpPushDelete, V10},
	"GetExtendedAgentCard":                {task.OpExtendedCard, V10},
}

// paramsCase refuses params whose keys differ from a field name only in case:
// encoding/json would accept them, the SDKs behind writ would not, and writ must
// see the request exactly as the agent will.
var paramsCase = wire.FieldCaseOf(wireParams{})

// Parse turns one inbound request into the internal request. On failure it returns
// the fault together with whatever of the request it could read (protocol, JSON-RPC
// id), which RenderFault needs to answer in the right shape.
func Parse(in wire.Inbound, opt Options) (task.Request, *task.Fault) {
	lim := opt.Limits.WithDefaults()
	rpcPath := opt.JSONRPCPath
	if rpcPath == "" {
		rpcPath = "/"
	}
	req := task.Request{Protocol: task.Protocol{Name: ProtocolName}}
	version, vf := requestedVersion(in)
	req.Protocol.Version = version
	req.Extensions = extensions(in)

	if path := in.Path; path == "/.well-known/agent-card.json" || path == "/.well-known/agent.json" {
		req.Operation = task.OpCard
		req.Protocol.Binding = task.BindingREST
		req.Protocol.Method = "GET " + path
		if in.Method != http.MethodGet && in.Method != http.MethodHead {
			return req, task.NewFault(task.KindUnknownOperation, in.Method+" is not allowed on "+path)
		}
		return req, vf
	}
	if in.Method == http.MethodPost && (in.Path == rpcPath || (in.Path == "" && rpcPath == "/")) {
		req.Protocol.Binding = task.BindingJSONRPC
		if vf != nil {
			peekID(&req, in.Body)
			return req, vf
		}
		return parseRPC(in, req, lim)
	}
	req.Protocol.Binding = task.BindingREST
	if vf != nil {
		return req, vf
	}
	return parseREST(in, req, lim)
}

// checkBody applies the size, content type and JSON checks shared by both bindings.
func checkBody(in wire.Inbound, lim wire.Limits) *task.Fault {
	if f := checkHead(in, lim); f != nil {
		return f
	}
	return wire.FaultOf(wire.CheckJSON(in.Body, lim.MaxJSONDepth))
}

// checkHead applies the size and content type checks.
func checkHead(in wire.Inbound, lim wire.Limits) *task.Fault {
	if int64(len(in.Body)) > lim.MaxBodyBytes {
		return task.NewFault(task.KindTooLarge, fmt.Sprintf("request body exceeds %d bytes", lim.MaxBodyBytes))
	}
	if ct := in.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !(mt == "application/json" || strings.HasSuffix(mt, "+json")) {
			return task.NewFault(task.KindContentType, fmt.Sprintf("content type %q is not JSON", ct))
		}
	}
	return nil
}

// peekID recovers the JSON-RPC id of a request that fails before full parsing, so
// the error can echo it. Only the exact "id" member counts, as JSON.parse reads
// it; an id that is not a valid JSON-RPC id is not echoed.
func peekID(req *task.Request, body []byte) {
	var env map[string]json.RawMessage
	if json.Unmarshal(body, &env) == nil && validID(env["id"]) {
		req.Correlation = env["id"]
	}
}

// isString reports whether raw is a JSON string whose value is want.
func isString(raw json.RawMessage, want string) bool {
	var s string
	return json.Unmarshal(raw, &s) == nil && s == want
}

func validID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	switch id[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'n':
		return true
	}
	return false
}

// envelopeKeys are the members of a JSON-RPC request object.
var envelopeKeys = []string{"jsonrpc", "method", "params", "id"}

// parseRPC reads a JSON-RPC request. The request object is read the way both
// kinds of server behind writ read it, or refused: a2a-go decodes it with
// encoding/json into a struct (keys matched case-insensitively under Unicode
// folding, the last match kept), the JS SDK with JSON.parse (exact keys, the
// last duplicate kept). A request object with a duplicate key, or with a key
// that folds onto jsonrpc, method, params or id without being it, would be
// decided by writ as one request and run by the agent as another: it is
// refused as an invalid request (-32600), never rewritten (see wire.Envelope;
// CheckJSON has already found the body well-formed, so it is read with
// wire.ValidEnvelope).
func parseRPC(in wire.Inbound, req task.Request, lim wire.Limits) (task.Request, *task.Fault) {
	if f := checkHead(in, lim); f != nil {
		peekID(&req, in.Body)
		return req, f
	}
	// A duplicate key below the request object is an invalid-params error, but
	// only once the request object itself is known to be unambiguous.
	jsonErr := wire.CheckJSON(in.Body, lim.MaxJSONDepth)
	if jsonErr != nil && !errors.Is(jsonErr, wire.ErrDuplicateKey) {
		f := wire.FaultOf(jsonErr)
		if f.Kind != task.KindMalformed {
			peekID(&req, in.Body)
		}
		return req, f
	}
	body := bytes.TrimSpace(in.Body)
	if len(body) == 0 {
		return req, task.NewFault(task.KindMalformed, "empty body: a JSON-RPC request object is required")
	}
	if body[0] == '[' {
		return req, task.NewFault(task.KindNotARequest, "batch requests are not supported")
	}
	if body[0] != '{' {
		return req, task.NewFault(task.KindNotARequest, "a JSON-RPC request must be a JSON object")
	}
	// An ambiguous request object has no trustworthy id either: the error
	// carries id null.
	env, err := wire.ValidEnvelope(body, envelopeKeys...)
	if err != nil {
		return req, wire.FaultOf(err)
	}
	if jsonErr != nil {
		if validID(env["id"]) {
			req.Correlation = env["id"]
		}
		return req, wire.FaultOf(jsonErr)
	}
	if id, ok := env["id"]; ok {
		if !validID(id) {
			return req, task.NewFault(task.KindNotARequest, "id must be a string, a number or null")
		}
		req.Correlation = id
	}
	if v, ok := env["jsonrpc"]; !ok || !isString(v, "2.0") {
		return req, task.NewFault(task.KindNotARequest, `"jsonrpc" must be "2.0"`)
	}
	var method string
	if err := json.Unmarshal(env["method"], &method); err != nil || method == "" {
		return req, task.NewFault(task.KindNotARequest, `"method" must be a non-empty string`)
	}
	req.Protocol.Method = method
	spec, ok := rpcMethods[method]
	if !ok {
		return req, task.NewFault(task.KindUnknownOperation, fmt.Sprintf("method %q is not an A2A method", method))
	}
	req.Operation = spec.op
	if spec.version != req.Protocol.Version {
		return req, mismatch(req.Protocol.Version, spec.version, fmt.Sprintf("method %q", method))
	}
	var p wireParams
	if raw, ok := env["params"]; ok && string(raw) != "null" {
		if raw[0] != '{' {
			return req, invalid("params must be an object")
		}
		if err := paramsCase.Check(raw); err != nil {
			return req, invalid("params: %s", err.Error())
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return req, invalid("params: %s", wire.TypeError(err))
		}
	}
	if f := resolveTenant(&p, in, ""); f != nil {
		return req, f
	}
	d := rpc03
	if req.Protocol.Version == V10 {
		d = v10
	}
	if f := fill(&req, &p, d, in); f != nil {
		return req, f
	}
	return req, nil
}

// fill validates the params of req.Operation and copies them into req.
func fill(req *task.Request, p *wireParams, d dialect, in wire.Inbound) *task.Fault {
	req.Tenant = p.Tenant // as resolveTenant decided it
	req.Metadata = p.Metadata
	metas := []map[string]any{p.Metadata}
	switch req.Operation {
	case task.OpSend, task.OpStream:
		if p.Message == nil {
			return invalid("params.message is required")
		}
		sum, mm, f := summarize(p.Message, d)
		if f != nil {
			return f
		}
		req.Message = sum
		metas = append(metas, mm...)
		req.TaskID, req.ContextID = p.Message.TaskID, p.Message.ContextID
		if f := fillConfig(req, p.Configuration, d); f != nil {
			return f
		}
	case task.OpGet, task.OpCancel, task.OpSubscribe:
		if p.ID == "" {
			return invalid("params.id (the task id) is required")
		}
		req.TaskID = p.ID
		req.HistoryLength = p.HistoryLength
	case task.OpList:
		req.ContextID = p.ContextID
		req.HistoryLength = p.HistoryLength
	case task.OpPushSet:
		if d == v10 {
			if p.TaskID == "" {
				return invalid("params.taskId is required")
			}
			req.TaskID = p.TaskID
			pc, f := pushConfig(&wirePush{ID: p.ID, URL: p.URL, Token: p.Token, Authentication: p.Authentication}, d, "params")
			if f != nil {
				return f
			}
			req.Push = pc
			break
		}
		if p.TaskID == "" {
			return invalid("params.taskId is required")
		}
		if p.PushNotificationConfig == nil {
			return invalid("params.pushNotificationConfig is required")
		}
		req.TaskID = p.TaskID
		pc, f := pushConfig(p.PushNotificationConfig, d, "params.pushNotificationConfig")
		if f != nil {
			return f
		}
		req.Push = pc
	case task.OpPushGet, task.OpPushList, task.OpPushDelete:
		if d == v10 {
			if p.TaskID == "" {
				return invalid("params.taskId is required")
			}
			req.TaskID, req.PushConfigID = p.TaskID, p.ID
		} else {
			if p.ID == "" {
				return invalid("params.id (the task id) is required")
			}
			req.TaskID, req.PushConfigID = p.ID, p.PushNotificationConfigID
		}
		if req.Operation == task.OpPushDelete && req.PushConfigID == "" {
			if d == v10 {
				return invalid("params.id (the config id) is required")
			}
			return invalid("params.pushNotificationConfigId is required")
		}
		if req.Operation == task.OpPushGet && req.PushConfigID == "" && d == v10 {
			return invalid("params.id (the config id) is required")
		}
		if req.Operation == task.OpPushList {
			req.PushConfigID = ""
		}
	}
	level, err := wire.Declared(in.Header, metas...)
	if err != nil {
		return invalid("%s", err.Error())
	}
	req.Classification = level
	return nil
}

func fillConfig(req *task.Request, c *wireConfig, d dialect) *task.Fault {
	if c == nil {
		return nil
	}
	req.AcceptedOutputModes = c.AcceptedOutputModes
	req.HistoryLength = c.HistoryLength
	var push *wirePush
	switch d {
	case v10:
		if c.PushNotificationConfig != nil || c.PushNotification != nil {
			return invalid("configuration.pushNotificationConfig is the A2A 0.3 name; 1.0 uses taskPushNotificationConfig")
		}
		if c.Blocking != nil {
			return invalid("configuration.blocking is A2A 0.3; 1.0 uses returnImmediately")
		}
		push = c.TaskPushNotificationConfig
		req.ReturnImmediately = c.ReturnImmediately != nil && *c.ReturnImmediately
	default:
		if c.TaskPushNotificationConfig != nil {
			return invalid("configuration.taskPushNotificationConfig is the A2A 1.0 name; 0.3 uses pushNotificationConfig")
		}
		if c.ReturnImmediately != nil {
			return invalid("configuration.returnImmediately is A2A 1.0; 0.3 uses blocking")
		}
		push = c.PushNotificationConfig
		if push == nil && d == rest03 {
			push = c.PushNotification
		}
		req.ReturnImmediately = c.Blocking != nil && !*c.Blocking
	}
	if push != nil {
		pc, f := pushConfig(push, d, "configuration.push config")
		if f != nil {
			return f
		}
		req.Push = pc
	}
	return nil
}
