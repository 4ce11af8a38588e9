package a2a

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/a2aproject/a2a-go/a2apb"
	"github.com/a2aproject/a2a-go/a2apb/pbconv"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/writ-authz/writ/adapters/a2a/a2apb10"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// FuzzGRPCParse — Threat: protobuf bytes that writ reads as one request
// and the agent's SDK as another (unknown fields, a singular field sent
// twice, overlong varints, wrong wire types, names of odd shapes). Defence:
// whatever writ accepts, it forwards re-encoded (CanonicalBody), and the
// re-encoded bytes read back as exactly the request writ decided on; for
// the 0.3 methods a2a-go's own reading (pbconv, as its a2agrpc server
// converts a call) names the same task, context and push config id.
func FuzzGRPCParse(f *testing.F) {
	seed := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	msg03 := &a2apb.Message{MessageId: "m-1", ContextId: "c-1", TaskId: "t-1", Role: a2apb.Role_ROLE_USER,
		Parts: []*a2apb.Part{{Part: &a2apb.Part_Text{Text: "x"}}}}
	send03 := seed(&a2apb.SendMessageRequest{Request: msg03, Configuration: &a2apb.SendMessageConfiguration{
		PushNotification: &a2apb.PushNotificationConfig{Id: "p", Url: "https://h/cb", Token: "t"}}})
	twice := protowire.AppendString(protowire.AppendTag(send03, 1, protowire.BytesType), "")
	f.Add("SendMessage", "", send03)
	f.Add("SendMessage", "", twice)
	f.Add("SendMessage", "", append(send03, 0xf8, 0x06, 0x81, 0x80, 0x00)) // field 111, an overlong varint
	f.Add("GetTask", "", seed(&a2apb.GetTaskRequest{Name: "tasks/t-1", HistoryLength: 3}))
	f.Add("GetTask", "", seed(&a2apb.GetTaskRequest{Name: "x/tasks/t-1"}))
	f.Add("GetTask", "", seed(&a2apb.GetTaskRequest{Name: "tasks/own/tasks/victim"}))
	f.Add("CancelTask", "", seed(&a2apb.CancelTaskRequest{Name: "tasks/t-1"}))
	f.Add("GetTaskPushNotificationConfig", "", seed(&a2apb.GetTaskPushNotificationConfigRequest{Name: "tasks/t-1/pushNotificationConfigs/p"}))
	f.Add("CreateTaskPushNotificationConfig", "", seed(&a2apb.CreateTaskPushNotificationConfigRequest{Parent: "tasks/t-1",
		Config: &a2apb.TaskPushNotificationConfig{PushNotificationConfig: &a2apb.PushNotificationConfig{Url: "https://h/cb"}}}))
	f.Add("SendMessage", "1.0", seed(&a2apb10.SendMessageRequest{Message: &a2apb10.Message{MessageId: "m", Role: a2apb10.Role_ROLE_USER,
		Parts: []*a2apb10.Part{{Content: &a2apb10.Part_Text{Text: "x"}}}}}))
	f.Add("GetTask", "1.0", seed(&a2apb10.GetTaskRequest{Id: "t-1"}))
	f.Fuzz(func(t *testing.T, method, version string, body []byte) {
		service := grpcService03
		if version == V10 {
			service = grpcService10
		}
		in := wire.Inbound{Method: http.MethodPost, Path: "/" + service + "/" + method,
			Header: http.Header{"Content-Type": {"application/grpc"}}, Body: body}
		if version != "" {
			in.Header.Set(VersionHeader, version)
		}
		req, f := parseGRPC(in, wire.Limits{})
		if f != nil {
			return
		}
		canon, err := CanonicalBody(&req, body)
		if err != nil {
			t.Fatalf("an accepted call does not re-encode: %v", err)
		}
		in.Body = canon
		again, f := parseGRPC(in, wire.Limits{})
		if f != nil || !reflect.DeepEqual(again, req) {
			t.Fatalf("the forwarded bytes read otherwise:\n%+v %v\nwas\n%+v", again, f, req)
		}
		sdkAgrees(t, &req, canon)
	})
}

// sdkAgrees checks a2a-go's reading of a 0.3 call (what its a2agrpc server
// hands the agent) against writ's.
func sdkAgrees(t *testing.T, req *task.Request, body []byte) {
	if req.Protocol.Version != V03 {
		return
	}
	m, _ := grpcMethodOf(req)
	msg := m.request()
	if err := proto.Unmarshal(body, msg); err != nil {
		t.Fatal(err)
	}
	var taskID, contextID string
	switch r := msg.(type) {
	case *a2apb.SendMessageRequest:
		p, err := pbconv.FromProtoSendMessageRequest(r)
		if err != nil || p == nil || p.Message == nil {
			return // the SDK refuses it: nothing runs
		}
		taskID, contextID = string(p.Message.TaskID), p.Message.ContextID
		if p.Config != nil && p.Config.PushConfig != nil && req.Push != nil && p.Config.PushConfig.URL != req.Push.URL {
			t.Fatalf("push url: a2a-go %q, writ %q", p.Config.PushConfig.URL, req.Push.URL)
		}
	case *a2apb.GetTaskRequest:
		p, err := pbconv.FromProtoGetTaskRequest(r)
		if err != nil {
			return
		}
		taskID, contextID = string(p.ID), req.ContextID
	case *a2apb.CancelTaskRequest, *a2apb.TaskSubscriptionRequest:
		id, err := pbconv.ExtractTaskID(r.(interface{ GetName() string }).GetName())
		if err != nil {
			return
		}
		taskID, contextID = string(id), req.ContextID
	case *a2apb.GetTaskPushNotificationConfigRequest:
		p, err := pbconv.FromProtoGetTaskPushConfigRequest(r)
		if err != nil {
			return
		}
		taskID, contextID = string(p.TaskID), req.ContextID
		if p.ConfigID != req.PushConfigID {
			t.Fatalf("config id: a2a-go %q, writ %q", p.ConfigID, req.PushConfigID)
		}
	case *a2apb.DeleteTaskPushNotificationConfigRequest:
		p, err := pbconv.FromProtoDeleteTaskPushConfigRequest(r)
		if err != nil {
			return
		}
		taskID, contextID = string(p.TaskID), req.ContextID
		if p.ConfigID != req.PushConfigID {
			t.Fatalf("config id: a2a-go %q, writ %q", p.ConfigID, req.PushConfigID)
		}
	case *a2apb.CreateTaskPushNotificationConfigRequest:
		p, err := pbconv.FromProtoCreateTaskPushConfigRequest(r)
		if err != nil {
			return
		}
		taskID, contextID = string(p.TaskID), req.ContextID
	default:
		return
	}
	if taskID != req.TaskID || contextID != req.ContextID {
		t.Fatalf("a2a-go reads task %q context %q, writ task %q context %q", taskID, contextID, req.TaskID, req.ContextID)
	}
}
