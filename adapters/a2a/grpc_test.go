package a2a

import (
	"net/http"
	"testing"

	"github.com/a2aproject/a2a-go/a2apb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// TestGRPCNestingLimit — Threat: a call nests its metadata (a
// google.protobuf.Struct) deeper than the JSON bindings allow, so that the
// policy input writ builds from it, and every reader after writ, walks a
// structure no JSON request could carry. Defence: the gRPC edge applies the
// JSON bindings' nesting limit (limits.max_json_depth) to the message's
// proto-JSON: too deep is refused as over JSON.
func TestGRPCNestingLimit(t *testing.T) {
	deep := structpb.NewStringValue("x")
	for range 2 * wire.DefaultMaxJSONDepth {
		deep = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"a": deep}})
	}
	req := &a2apb.SendMessageRequest{Request: &a2apb.Message{MessageId: "m", Role: a2apb.Role_ROLE_USER,
		Parts: []*a2apb.Part{{Part: &a2apb.Part_Text{Text: "x"}}}}, Metadata: deep.GetStructValue()}
	body, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	in := wire.Inbound{Method: http.MethodPost, Path: "/a2a.v1.A2AService/SendMessage",
		Header: http.Header{"Content-Type": {"application/grpc"}}, Body: body}
	if _, f := parseGRPC(in, wire.Limits{}); f == nil || f.Kind != task.KindTooDeep {
		t.Fatalf("a nesting of %d: %v", 2*wire.DefaultMaxJSONDepth, f)
	}
	req.Metadata = nil
	in.Body, _ = proto.Marshal(req)
	if _, f := parseGRPC(in, wire.Limits{}); f != nil {
		t.Fatalf("the same call, flat: %v", f)
	}
}
