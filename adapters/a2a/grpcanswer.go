package a2a

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2apb"
	"github.com/a2aproject/a2a-go/a2apb/pbconv"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/writ-authz/writ/adapters/a2a/a2apb10"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// GRPCEdge is A2A over gRPC in the roles writ's admission core uses: the
// calls of the 0.3 and 1.0 services read as the JSON bindings read their
// proto-JSON,
// faults as gRPC statuses with google.rpc.ErrorInfo details (the same
// reasons and domains as the JSON bindings' ErrorInfo), push configs kept
// and answered by writ, answers and stream events observed. It has no
// card of its own to fetch over HTTP, and follows no task after its call
// (a gRPC agent is asked only through its callers' calls). Safe for
// concurrent use.
type GRPCEdge struct{}

// Name implements adapters.Edge.
func (GRPCEdge) Name() string { return GRPCProtocolName }

// Parse implements adapters.Edge.
func (GRPCEdge) Parse(in wire.Inbound, lim wire.Limits) (task.Request, *task.Fault) {
	return parseGRPC(in, lim)
}

// DecisionHeaders implements adapters.Edge: the metadata Parse reads.
func (GRPCEdge) DecisionHeaders() []string {
	return []string{VersionHeader, ExtensionsHeader, LegacyExtensionsHeader, "Content-Type", wire.ClassificationHeader}
}

// CanonicalBody implements adapters.Canonical.
func (GRPCEdge) CanonicalBody(req *task.Request, body []byte) ([]byte, error) {
	return CanonicalBody(req, body)
}

// gRPC status codes (google.rpc.Code), by name: the adapter reads and
// writes google.rpc.Status messages, never gRPC's transport.
type rpcCode int32

const (
	codeInvalidArgument    rpcCode = 3
	codeDeadlineExceeded   rpcCode = 4
	codeNotFound           rpcCode = 5
	codePermissionDenied   rpcCode = 7
	codeResourceExhausted  rpcCode = 8
	codeFailedPrecondition rpcCode = 9
	codeUnimplemented      rpcCode = 12
	codeInternal           rpcCode = 13
	codeUnavailable        rpcCode = 14
	codeUnauthenticated    rpcCode = 16
)

// rpcCodes are the google.rpc.Code names the JSON bindings' faults use.
var rpcCodes = map[string]rpcCode{"INVALID_ARGUMENT": codeInvalidArgument, "DEADLINE_EXCEEDED": codeDeadlineExceeded,
	"NOT_FOUND": codeNotFound, "PERMISSION_DENIED": codePermissionDenied, "FAILED_PRECONDITION": codeFailedPrecondition,
	"UNIMPLEMENTED": codeUnimplemented, "INTERNAL": codeInternal, "UNAVAILABLE": codeUnavailable,
	"UNAUTHENTICATED": codeUnauthenticated, "RESOURCE_EXHAUSTED": codeResourceExhausted}

// grpcCode is the gRPC status code of a fault kind: the google.rpc.Code the
// HTTP+JSON binding names for it, but an unknown method, which gRPC calls
// UNIMPLEMENTED.
func grpcCode(k task.Kind) rpcCode {
	if k == task.KindUnknownOperation {
		return codeUnimplemented
	}
	if c, ok := rpcCodes[shapeOf(k).restStatus]; ok {
		return c
	}
	return codeInternal
}

// grpcStatus is f as a google.rpc.Status: the kind's code, the message, and
// one ErrorInfo per detail the JSON bindings list (details).
func grpcStatus(f *task.Fault) *spb.Status {
	st := &spb.Status{Code: int32(grpcCode(f.Kind)), Message: f.Message}
	for _, d := range details(f) {
		a, err := anypb.New(&errdetails.ErrorInfo{Reason: d.Reason, Domain: d.Domain, Metadata: d.Metadata})
		if err != nil {
			continue // an ErrorInfo always marshals
		}
		st.Details = append(st.Details, a)
	}
	return st
}

// RenderFault implements adapters.Edge: the fault as the call's status.
func (GRPCEdge) RenderFault(_ *task.Request, f *task.Fault) wire.Rendered {
	body, err := proto.Marshal(grpcStatus(f))
	if err != nil {
		body = nil // a Status of strings always marshals
	}
	return wire.Rendered{Status: wire.HTTPStatus(f.Kind), ContentType: wire.GRPCStatus, Body: body}
}

// RenderStreamFault implements adapters.Answers: the fault as the trailer
// that ends the stream.
func (e GRPCEdge) RenderStreamFault(req *task.Request, f *task.Fault) []byte {
	return wire.AppendGRPCFrame(nil, wire.GRPCTrailer, e.RenderFault(req, f).Body)
}

// ParseResponse implements adapters.Answers: status 200 and the answer's
// message, or the agent's status (see wire's gRPC contract).
func (GRPCEdge) ParseResponse(req *task.Request, status int, body []byte) ([]task.Event, error) {
	if status != http.StatusOK {
		return statusEvents(req, body)
	}
	m, ok := grpcMethodOf(req)
	if !ok {
		return nil, fmt.Errorf("no gRPC method %q", req.Protocol.Method)
	}
	if m.answer == nil {
		if len(body) > 0 {
			if err := proto.Unmarshal(body, &emptypb.Empty{}); err != nil {
				return nil, fmt.Errorf("upstream answer: %w", err)
			}
		}
		return nil, nil
	}
	return answerEvents(req, m.answer(), body)
}

// answerEvents reads one answer message into events, through its
// proto-JSON as the HTTP+JSON binding of 0.3 reads it.
func answerEvents(req *task.Request, msg proto.Message, body []byte) ([]task.Event, error) {
	if err := proto.Unmarshal(body, msg); err != nil {
		return nil, fmt.Errorf("upstream answer is not a %s: %w", msg.ProtoReflect().Descriptor().FullName(), err)
	}
	if silent(req.Operation) {
		return nil, nil
	}
	raw, err := protojson.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("upstream answer: %w", err)
	}
	d := rest03
	if req.Protocol.Version == V10 {
		d = v10
	}
	return resultEvents(raw, req, d)
}

// statusEvents reads the agent's google.rpc.Status into its error event.
func statusEvents(req *task.Request, body []byte) ([]task.Event, error) {
	var st spb.Status
	if err := proto.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("upstream status: %w", err)
	}
	return []task.Event{{Kind: task.EventError, TaskID: req.TaskID, Err: statusFault(&st)}}, nil
}

// statusFault is the fault an agent's status names: by an ErrorInfo reason
// of A2A's (or writ's) where it carries one, else by its code.
func statusFault(st *spb.Status) *task.Fault {
	f := &task.Fault{Kind: kindOfGRPC(rpcCode(st.GetCode())), Message: st.GetMessage(), Code: int(st.GetCode())}
	for _, d := range st.GetDetails() {
		var info errdetails.ErrorInfo
		if d.UnmarshalTo(&info) != nil {
			continue
		}
		for k, s := range shapes {
			if s.reason == info.GetReason() && s.domain == info.GetDomain() {
				f.Kind = k
				return f
			}
		}
	}
	return f
}

// kindOfGRPC is the fault kind of an agent's bare status code.
func kindOfGRPC(c rpcCode) task.Kind {
	switch c {
	case codeNotFound:
		return task.KindTaskNotFound
	case codeInvalidArgument:
		return task.KindInvalidParams
	case codeFailedPrecondition:
		return task.KindTaskNotCancelable
	case codeUnimplemented:
		return task.KindUnsupported
	case codeUnauthenticated:
		return task.KindUnauthenticated
	case codePermissionDenied:
		return task.KindDenied
	case codeUnavailable:
		return task.KindUpstreamUnavailable
	case codeDeadlineExceeded:
		return task.KindUpstreamTimeout
	}
	return task.KindInternal
}

// grpcStream reads a server stream's frames (see wire's gRPC contract).
type grpcStream struct {
	req    *task.Request
	frames *wire.GRPCFrameReader
}

// NewStreamReader implements adapters.Answers.
func (GRPCEdge) NewStreamReader(req *task.Request, body io.Reader, maxEventBytes int) wire.EventReader {
	return &grpcStream{req: req, frames: wire.NewGRPCFrameReader(body, maxEventBytes)}
}

// Next returns the next frame, to pass on as it came, and its events: a
// StreamResponse's, or the error event of the trailer that ends the stream.
func (s *grpcStream) Next() (wire.SSEEvent, []task.Event, error) {
	fr, err := s.frames.Next()
	if err != nil {
		return wire.SSEEvent{}, nil, err
	}
	ev := wire.SSEEvent{Raw: fr.Raw, HasData: true, Data: fr.Payload}
	if fr.Flag == wire.GRPCTrailer {
		evs, err := statusEvents(s.req, fr.Payload)
		return ev, evs, err
	}
	if fr.Flag != wire.GRPCData {
		return ev, nil, fmt.Errorf("upstream frame: flag %#x", fr.Flag)
	}
	var msg proto.Message = &a2apb.StreamResponse{}
	if s.req.Protocol.Version == V10 {
		msg = &a2apb10.StreamResponse{}
	}
	evs, err := answerEvents(s.req, msg, fr.Payload)
	return ev, evs, err
}

// StripPush implements adapters.Push: the send without its push config.
func (GRPCEdge) StripPush(req *task.Request, body []byte) ([]byte, error) {
	if req.Push == nil || (req.Operation != task.OpSend && req.Operation != task.OpStream) {
		return body, nil
	}
	if req.Protocol.Version == V10 {
		var msg a2apb10.SendMessageRequest
		if err := proto.Unmarshal(body, &msg); err != nil {
			return nil, fmt.Errorf("stripping the push config: %w", err)
		}
		if c := msg.GetConfiguration(); c != nil {
			c.TaskPushNotificationConfig = nil
		}
		return proto.MarshalOptions{Deterministic: true}.Marshal(&msg)
	}
	var msg a2apb.SendMessageRequest
	if err := proto.Unmarshal(body, &msg); err != nil {
		return nil, fmt.Errorf("stripping the push config: %w", err)
	}
	if c := msg.GetConfiguration(); c != nil {
		c.PushNotification = nil
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(&msg)
}

// RenderPushResult implements adapters.Push: the config, the list, or (a
// delete) nothing, as the service's messages.
func (GRPCEdge) RenderPushResult(req *task.Request, configs []task.PushConfig) wire.Rendered {
	view := func(c task.PushConfig) *a2apb.TaskPushNotificationConfig {
		pc := &a2apb.PushNotificationConfig{Id: c.ID, Url: c.URL, Token: c.Token}
		if c.AuthScheme != "" {
			pc.Authentication = &a2apb.AuthenticationInfo{Schemes: []string{c.AuthScheme}, Credentials: c.Credentials}
		}
		return &a2apb.TaskPushNotificationConfig{Name: "tasks/" + req.TaskID + "/pushNotificationConfigs/" + c.ID,
			PushNotificationConfig: pc}
	}
	view10 := func(c task.PushConfig) *a2apb10.TaskPushNotificationConfig {
		pc := &a2apb10.TaskPushNotificationConfig{Tenant: req.Tenant, Id: c.ID, TaskId: req.TaskID, Url: c.URL, Token: c.Token}
		if c.AuthScheme != "" {
			pc.Authentication = &a2apb10.AuthenticationInfo{Scheme: c.AuthScheme, Credentials: c.Credentials}
		}
		return pc
	}
	v1 := req.Protocol.Version == V10
	var msg proto.Message = &emptypb.Empty{}
	switch {
	case (req.Operation == task.OpPushSet || req.Operation == task.OpPushGet) && len(configs) > 0 && v1:
		msg = view10(configs[0])
	case req.Operation == task.OpPushSet || req.Operation == task.OpPushGet:
		if len(configs) > 0 {
			msg = view(configs[0])
		}
	case req.Operation == task.OpPushList && v1:
		l := &a2apb10.ListTaskPushNotificationConfigsResponse{}
		for _, c := range configs {
			l.Configs = append(l.Configs, view10(c))
		}
		msg = l
	case req.Operation == task.OpPushList:
		l := &a2apb.ListTaskPushNotificationConfigResponse{}
		for _, c := range configs {
			l.Configs = append(l.Configs, view(c))
		}
		msg = l
	}
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return GRPCEdge{}.RenderFault(req, task.NewFault(task.KindInternal, "rendering the push config failed"))
	}
	return wire.Rendered{Status: http.StatusOK, ContentType: wire.GRPCMessage, Body: body}
}

// RenderNotification implements adapters.Push: a push callback is an HTTP
// POST whatever binding the task came by, in the task's version.
func (GRPCEdge) RenderNotification(t *task.Task, version string) (string, []byte, error) {
	return RenderNotification(t, version)
}

// NotificationHeaders implements adapters.Push, as over JSON-RPC.
func (GRPCEdge) NotificationHeaders(p task.PushConfig) http.Header {
	return Edge{}.NotificationHeaders(p)
}

// FilterTaskList implements adapters.Lister: a ListTasksResponse without
// the tasks keep refuses (its total then its own size, as over JSON).
func (GRPCEdge) FilterTaskList(req *task.Request, body []byte, keep func(string) bool) ([]byte, bool, error) {
	if req.Operation != task.OpList {
		return body, false, nil
	}
	if req.Protocol.Version == V10 {
		var l a2apb10.ListTasksResponse
		return filterTasks(body, &l, &l.Tasks, &l.TotalSize, keep)
	}
	var l a2apb.ListTasksResponse
	return filterTasks(body, &l, &l.Tasks, &l.TotalSize, keep)
}

// filterTasks is FilterTaskList on either version's ListTasksResponse: msg
// read from body, its tasks and total (pointers into msg) cut to what keep
// keeps, msg written again when anything went.
func filterTasks[T interface{ GetId() string }](body []byte, msg proto.Message, tasks *[]T, total *int32, keep func(string) bool) ([]byte, bool, error) {
	if err := proto.Unmarshal(body, msg); err != nil {
		return body, false, fmt.Errorf("list answer: %w", err)
	}
	kept := (*tasks)[:0:0]
	for _, t := range *tasks {
		if keep(t.GetId()) {
			kept = append(kept, t)
		}
	}
	if len(kept) == len(*tasks) {
		return body, false, nil
	}
	*tasks, *total = kept, int32(len(kept)) //nolint:gosec // G115: a list's length, far below 2^31
	out, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	return out, true, err
}

// RewriteCardAnswer implements adapters.ExtendedCards: the agent's
// AgentCard checked, rewritten and signed as the JSON bindings' extended
// card is (over its 0.3 JSON form), and rendered back as an AgentCard.
func (GRPCEdge) RewriteCardAnswer(req *task.Request, status int, body []byte, rw wire.CardRewrite) ([]byte, error) {
	if status != http.StatusOK {
		return body, nil
	}
	jreq := *req
	jreq.Protocol.Binding = task.BindingREST
	if req.Protocol.Version == V10 {
		// A 1.0 card's JSON is its proto-JSON.
		var pc a2apb10.AgentCard
		if err := proto.Unmarshal(body, &pc); err != nil {
			return nil, fmt.Errorf("extended card: %w", err)
		}
		raw, err := protojson.Marshal(&pc)
		if err != nil {
			return nil, fmt.Errorf("extended card: %w", err)
		}
		out, err := RewriteCardAnswer(&jreq, status, raw, rw)
		if err != nil {
			return nil, err
		}
		var back a2apb10.AgentCard
		if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(out, &back); err != nil {
			return nil, fmt.Errorf("extended card: %w", err)
		}
		return proto.MarshalOptions{Deterministic: true}.Marshal(&back)
	}
	var pc a2apb.AgentCard
	if err := proto.Unmarshal(body, &pc); err != nil {
		return nil, fmt.Errorf("extended card: %w", err)
	}
	card, err := pbconv.FromProtoAgentCard(&pc)
	if err != nil {
		return nil, fmt.Errorf("extended card: %w", err)
	}
	raw, err := json.Marshal(card)
	if err != nil {
		return nil, fmt.Errorf("extended card: %w", err)
	}
	out, err := RewriteCardAnswer(&jreq, status, raw, rw)
	if err != nil {
		return nil, err
	}
	var back a2a.AgentCard
	if err := json.Unmarshal(out, &back); err != nil {
		return nil, fmt.Errorf("extended card: %w", err)
	}
	pout, err := pbconv.ToProtoAgentCard(&back)
	if err != nil {
		return nil, fmt.Errorf("extended card: %w", err)
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(pout)
}
