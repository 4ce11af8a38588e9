package a2a

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/a2apb"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/writ-authz/writ/adapters/a2a/a2apb10"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// A2A over gRPC — the 0.3 service a2a.v1.A2AService (a2a-go's a2apb types)
// and the 1.0 service lf.a2a.v1.A2AService (a2apb10, from the
// specification's proto): a call is read into the same internal request as
// the JSON bindings of its version read (0.3's HTTP+JSON bodies and every
// 1.0 JSON body are the proto-JSON of these very messages), through the
// same validation (fill). What the agent receives is
// writ's own encoding of the message writ read (CanonicalBody), never the
// caller's bytes: see GRPCEdge.

// GRPCProtocolName is A2A over gRPC in writ's protocol table (agents[].protocol).
const GRPCProtocolName = "a2a-grpc"

// The services' full names: 0.3's and 1.0's.
const (
	grpcService03 = "a2a.v1.A2AService"
	grpcService10 = "lf.a2a.v1.A2AService"
)

// grpcService is the service of a version.
func grpcService(version string) string {
	if version == V10 {
		return grpcService10
	}
	return grpcService03
}

// grpcMethodOf is the method a request was read from.
func grpcMethodOf(req *task.Request) (grpcMethod, bool) {
	m, ok := grpcMethods["/"+grpcService(req.Protocol.Version)+"/"+req.Protocol.Method]
	return m, ok
}

// grpcMethod is one method of the service: its operation, its version, and
// its request and response messages.
type grpcMethod struct {
	name    string
	op      task.Operation
	version string
	request func() proto.Message
	answer  func() proto.Message
}

// grpcMethods are the methods writ reads, by full method name.
var grpcMethods = map[string]grpcMethod{}

func init() {
	for _, m := range []grpcMethod{
		{"SendMessage", task.OpSend, V03, func() proto.Message { return &a2apb.SendMessageRequest{} }, func() proto.Message { return &a2apb.SendMessageResponse{} }},
		{"SendStreamingMessage", task.OpStream, V03, func() proto.Message { return &a2apb.SendMessageRequest{} }, func() proto.Message { return &a2apb.StreamResponse{} }},
		{"GetTask", task.OpGet, V03, func() proto.Message { return &a2apb.GetTaskRequest{} }, func() proto.Message { return &a2apb.Task{} }},
		{"ListTasks", task.OpList, V03, func() proto.Message { return &a2apb.ListTasksRequest{} }, func() proto.Message { return &a2apb.ListTasksResponse{} }},
		{"CancelTask", task.OpCancel, V03, func() proto.Message { return &a2apb.CancelTaskRequest{} }, func() proto.Message { return &a2apb.Task{} }},
		{"TaskSubscription", task.OpSubscribe, V03, func() proto.Message { return &a2apb.TaskSubscriptionRequest{} }, func() proto.Message { return &a2apb.StreamResponse{} }},
		{"CreateTaskPushNotificationConfig", task.OpPushSet, V03, func() proto.Message { return &a2apb.CreateTaskPushNotificationConfigRequest{} }, func() proto.Message { return &a2apb.TaskPushNotificationConfig{} }},
		{"GetTaskPushNotificationConfig", task.OpPushGet, V03, func() proto.Message { return &a2apb.GetTaskPushNotificationConfigRequest{} }, func() proto.Message { return &a2apb.TaskPushNotificationConfig{} }},
		{"ListTaskPushNotificationConfig", task.OpPushList, V03, func() proto.Message { return &a2apb.ListTaskPushNotificationConfigRequest{} }, func() proto.Message { return &a2apb.ListTaskPushNotificationConfigResponse{} }},
		{"DeleteTaskPushNotificationConfig", task.OpPushDelete, V03, func() proto.Message { return &a2apb.DeleteTaskPushNotificationConfigRequest{} }, nil},
		// 0.3's GetAgentCard is the card for this caller: a2a-go answers it
		// with the authenticated extended card.
		{"GetAgentCard", task.OpExtendedCard, V03, func() proto.Message { return &a2apb.GetAgentCardRequest{} }, func() proto.Message { return &a2apb.AgentCard{} }},
	} {
		grpcMethods["/"+grpcService03+"/"+m.name] = m
	}
	for _, m := range []grpcMethod{
		{"SendMessage", task.OpSend, V10, func() proto.Message { return &a2apb10.SendMessageRequest{} }, func() proto.Message { return &a2apb10.SendMessageResponse{} }},
		{"SendStreamingMessage", task.OpStream, V10, func() proto.Message { return &a2apb10.SendMessageRequest{} }, func() proto.Message { return &a2apb10.StreamResponse{} }},
		{"GetTask", task.OpGet, V10, func() proto.Message { return &a2apb10.GetTaskRequest{} }, func() proto.Message { return &a2apb10.Task{} }},
		{"ListTasks", task.OpList, V10, func() proto.Message { return &a2apb10.ListTasksRequest{} }, func() proto.Message { return &a2apb10.ListTasksResponse{} }},
		{"CancelTask", task.OpCancel, V10, func() proto.Message { return &a2apb10.CancelTaskRequest{} }, func() proto.Message { return &a2apb10.Task{} }},
		{"SubscribeToTask", task.OpSubscribe, V10, func() proto.Message { return &a2apb10.SubscribeToTaskRequest{} }, func() proto.Message { return &a2apb10.StreamResponse{} }},
		{"CreateTaskPushNotificationConfig", task.OpPushSet, V10, func() proto.Message { return &a2apb10.TaskPushNotificationConfig{} }, func() proto.Message { return &a2apb10.TaskPushNotificationConfig{} }},
		{"GetTaskPushNotificationConfig", task.OpPushGet, V10, func() proto.Message { return &a2apb10.GetTaskPushNotificationConfigRequest{} }, func() proto.Message { return &a2apb10.TaskPushNotificationConfig{} }},
		{"ListTaskPushNotificationConfigs", task.OpPushList, V10, func() proto.Message { return &a2apb10.ListTaskPushNotificationConfigsRequest{} }, func() proto.Message { return &a2apb10.ListTaskPushNotificationConfigsResponse{} }},
		{"DeleteTaskPushNotificationConfig", task.OpPushDelete, V10, func() proto.Message { return &a2apb10.DeleteTaskPushNotificationConfigRequest{} }, nil},
		{"GetExtendedAgentCard", task.OpExtendedCard, V10, func() proto.Message { return &a2apb10.GetExtendedAgentCardRequest{} }, func() proto.Message { return &a2apb10.AgentCard{} }},
	} {
		grpcMethods["/"+grpcService10+"/"+m.name] = m
	}
}

// grpcDecisionMetadata are the metadata a call's decision depends on, which
// must each come once: gRPC metadata may repeat a key, and one reader takes
// the first value, another the last, a third joins them. The credential is
// among them: the caller writ identified must be the one the agent sees.
var grpcDecisionMetadata = []string{VersionHeader, ExtensionsHeader, LegacyExtensionsHeader, "Content-Type",
	wire.ClassificationHeader, "Authorization"}

// parseGRPC reads one call (see wire's gRPC contract).
func parseGRPC(in wire.Inbound, lim wire.Limits) (task.Request, *task.Fault) {
	lim = lim.WithDefaults()
	req := task.Request{Protocol: task.Protocol{Name: GRPCProtocolName, Binding: task.BindingGRPC, Version: V03,
		Method: strings.TrimPrefix(in.Path, "/")}}
	m, ok := grpcMethods[in.Path]
	if !ok {
		return req, task.NewFault(task.KindUnknownOperation, fmt.Sprintf("%s is not a method of %s or %s", in.Path, grpcService03, grpcService10))
	}
	req.Operation, req.Protocol.Method, req.Protocol.Version = m.op, m.name, m.version
	if in.Method != http.MethodPost {
		return req, task.NewFault(task.KindNotARequest, "a gRPC call is a POST")
	}
	if f := grpcMetadata(in); f != nil {
		return req, f
	}
	// The service names the version; a2a-version, when sent, must agree.
	version, vf := requestedVersion(in)
	if vf != nil {
		return req, vf
	}
	if in.Header.Get(VersionHeader) != "" && version != m.version {
		return req, mismatch(version, m.version, "method "+m.name+" of "+grpcService(m.version))
	}
	req.Extensions = extensions(in)
	if int64(len(in.Body)) > lim.MaxBodyBytes {
		return req, task.NewFault(task.KindTooLarge, fmt.Sprintf("request message exceeds %d bytes", lim.MaxBodyBytes))
	}
	msg, f := readMessage(m.request(), in.Body, "the request")
	if f != nil {
		return req, f
	}
	if m.version == V10 {
		// Every 1.0 request message's proto-JSON is its JSON-RPC params.
		p, f := protoParams(msg, lim)
		if f == nil {
			f = resolveTenant(p, in, "")
		}
		if f == nil {
			f = fill(&req, p, v10, in)
		}
		return req, f
	}
	p, f := grpcParams(msg, lim)
	if f != nil {
		return req, f
	}
	if f := fill(&req, p, rest03, in); f != nil {
		return req, f
	}
	return req, nil
}

// protoParams reads a request message through its proto-JSON, within the
// JSON bindings' nesting limit (a Struct nests as deep as JSON does).
func protoParams(msg proto.Message, lim wire.Limits) (*wireParams, *task.Fault) {
	raw, err := protojson.Marshal(msg)
	if err != nil {
		return nil, invalid("the request: %s", err.Error())
	}
	if f := wire.FaultOf(wire.CheckJSON(raw, lim.MaxJSONDepth)); f != nil {
		return nil, f
	}
	p := &wireParams{}
	if err := json.Unmarshal(raw, p); err != nil {
		return nil, invalid("the request: %s", wire.TypeError(err))
	}
	return p, nil
}

// grpcMetadata refuses a call whose decision metadata is ambiguous (a key
// sent twice) or that is not a gRPC call of the protobuf codec.
func grpcMetadata(in wire.Inbound) *task.Fault {
	for _, k := range grpcDecisionMetadata {
		if n := len(in.Header.Values(k)); n > 1 {
			return task.NewFault(task.KindNotARequest, fmt.Sprintf("metadata %s is sent %d times; send it once", strings.ToLower(k), n))
		}
	}
	if len(in.Header.Values(ExtensionsHeader)) > 0 && len(in.Header.Values(LegacyExtensionsHeader)) > 0 {
		// Two spellings of one list: writ would decide on both, an agent of
		// either SDK reads one.
		return task.NewFault(task.KindNotARequest, "metadata a2a-extensions and x-a2a-extensions name one list; send one")
	}
	ct := in.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || (mt != wire.GRPCContentType && mt != wire.GRPCContentType+"+proto") {
		return task.NewFault(task.KindContentType, fmt.Sprintf("content type %q is not gRPC with protobuf messages", ct))
	}
	return nil
}

// readMessage decodes a message strictly: bytes that do not decode, or
// that hold a field the message does not define (anywhere in it), are
// refused. An unknown field is one writ cannot decide on: forwarded, the
// agent (of a later revision of the proto) might read meaning into it;
// dropped, the agent would run another request than the caller sent.
func readMessage(msg proto.Message, body []byte, what string) (proto.Message, *task.Fault) {
	if err := proto.Unmarshal(body, msg); err != nil {
		return nil, task.NewFault(task.KindMalformed, fmt.Sprintf("%s is not a valid %s message", what, msg.ProtoReflect().Descriptor().FullName()))
	}
	if path := unknownField(msg.ProtoReflect(), string(msg.ProtoReflect().Descriptor().Name())); path != "" {
		return nil, invalid("%s holds a field %s does not define; refused", what, path)
	}
	return msg, nil
}

// unknownField names the first message (by its path) in m that holds
// unknown fields, "" when none does.
func unknownField(m protoreflect.Message, path string) string {
	if len(m.GetUnknown()) > 0 {
		return path
	}
	var found string
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		sub := path + "." + string(fd.Name())
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len() && found == ""; i++ {
				found = unknownField(l.Get(i).Message(), fmt.Sprintf("%s[%d]", sub, i))
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				found = unknownField(mv.Message(), sub+"["+k.String()+"]")
				return found == ""
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			found = unknownField(v.Message(), sub)
		}
		return found == ""
	})
	return found
}

// grpcParams reads a request message into the params the HTTP+JSON binding
// of 0.3 reads from its body and path.
func grpcParams(msg proto.Message, lim wire.Limits) (*wireParams, *task.Fault) {
	p := &wireParams{}
	switch r := msg.(type) {
	case *a2apb.SendMessageRequest:
		// The 0.3 HTTP+JSON body is this message's proto-JSON.
		return protoParams(r, lim)
	case *a2apb.GetTaskRequest:
		id, f := taskName(r.GetName(), "name")
		if f != nil {
			return nil, f
		}
		p.ID = id
		if n := int(r.GetHistoryLength()); n != 0 {
			if n < 0 {
				return nil, invalid("history_length must not be negative")
			}
			p.HistoryLength = &n
		}
	case *a2apb.CancelTaskRequest:
		id, f := taskName(r.GetName(), "name")
		if f != nil {
			return nil, f
		}
		p.ID = id
	case *a2apb.TaskSubscriptionRequest:
		id, f := taskName(r.GetName(), "name")
		if f != nil {
			return nil, f
		}
		p.ID = id
	case *a2apb.ListTasksRequest:
		p.ContextID = r.GetContextId()
	case *a2apb.CreateTaskPushNotificationConfigRequest:
		id, f := taskName(r.GetParent(), "parent")
		if f != nil {
			return nil, f
		}
		c := r.GetConfig().GetPushNotificationConfig()
		if c == nil {
			return nil, invalid("config.push_notification_config is required")
		}
		if name := r.GetConfig().GetName(); name != "" {
			tid, cid, f := configName(name, "config.name")
			if f != nil {
				return nil, f
			}
			if tid != id || (cid != c.GetId() && c.GetId() != "") {
				return nil, invalid("config.name %q does not name task %q of parent (and config %q)", name, id, c.GetId())
			}
		}
		if cid := r.GetConfigId(); cid != "" && c.GetId() != "" && cid != c.GetId() {
			return nil, invalid("config_id %q does not match the config's id %q", cid, c.GetId())
		}
		wp := &wirePush{ID: c.GetId(), URL: c.GetUrl(), Token: c.GetToken()}
		if wp.ID == "" {
			wp.ID = r.GetConfigId()
		}
		if a := c.GetAuthentication(); a != nil {
			wp.Authentication = &wireAuth{Schemes: a.GetSchemes(), Credentials: a.GetCredentials()}
		}
		p.TaskID, p.PushNotificationConfig = id, wp
	case *a2apb.GetTaskPushNotificationConfigRequest:
		tid, cid, f := configName(r.GetName(), "name")
		if f != nil {
			return nil, f
		}
		p.ID, p.PushNotificationConfigID = tid, cid
	case *a2apb.DeleteTaskPushNotificationConfigRequest:
		tid, cid, f := configName(r.GetName(), "name")
		if f != nil {
			return nil, f
		}
		p.ID, p.PushNotificationConfigID = tid, cid
	case *a2apb.ListTaskPushNotificationConfigRequest:
		id, f := taskName(r.GetParent(), "parent")
		if f != nil {
			return nil, f
		}
		p.ID = id
	case *a2apb.GetAgentCardRequest:
	}
	return p, nil
}

// taskName reads a resource name "tasks/{id}" exactly. a2a-go takes the id
// with an unanchored pattern (the first "tasks/<segment>" anywhere in the
// name): a name of any other shape could name one task to writ and another
// to the agent, so only the one shape both read alike is accepted.
func taskName(name, field string) (string, *task.Fault) {
	id, ok := strings.CutPrefix(name, "tasks/")
	if !ok || id == "" || strings.Contains(id, "/") {
		return "", invalid("%s %q is not a task name (tasks/{id})", field, name)
	}
	return id, nil
}

// configName reads "tasks/{id}/pushNotificationConfigs/{configId}" exactly
// (see taskName); configId may be empty only where the agent reads it so
// (a get of the task's only config).
func configName(name, field string) (taskID, configID string, f *task.Fault) {
	rest, ok := strings.CutPrefix(name, "tasks/")
	id, cid, ok2 := strings.Cut(rest, "/pushNotificationConfigs/")
	if !ok || !ok2 || id == "" || strings.Contains(id, "/") || strings.Contains(cid, "/") ||
		strings.Contains(cid, "pushNotificationConfigs") || strings.Contains(id, "pushNotificationConfigs") {
		return "", "", invalid("%s %q is not a push config name (tasks/{id}/pushNotificationConfigs/{configId})", field, name)
	}
	return id, cid, nil
}

// CanonicalBody is the request message as writ read it, in writ's own
// deterministic encoding: what the agent receives. The caller's bytes may
// encode the same message many ways — a singular field sent twice (proto3
// keeps the last), a varint padded, fields out of order — and a parser of
// the agent's could read a way writ did not; re-encoded, there is one
// reading. (Unknown fields never get here: Parse refused them.)
func CanonicalBody(req *task.Request, body []byte) ([]byte, error) {
	m, ok := grpcMethodOf(req)
	if !ok {
		return nil, fmt.Errorf("no gRPC method %q", req.Protocol.Method)
	}
	msg := m.request()
	if err := proto.Unmarshal(body, msg); err != nil {
		return nil, err
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(msg)
}
