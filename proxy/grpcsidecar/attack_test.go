package grpcsidecar_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2apb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/proxy"
)

// raw is a request message's bytes, sent as they are.
type raw []byte

// rawCodec sends raw bytes and reads any message.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }
func (rawCodec) Marshal(v any) ([]byte, error) {
	if r, ok := v.(raw); ok {
		return r, nil
	}
	return proto.Marshal(v.(proto.Message))
}
func (rawCodec) Unmarshal(b []byte, v any) error { return proto.Unmarshal(b, v.(proto.Message)) }

// conn is a plain gRPC connection to addr (no credentials of its own: each
// call's metadata carries what the test sends).
func conn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// call sends body to method with the metadata pairs kv and returns the
// error (nil: the call succeeded, its answer in out).
func call(t *testing.T, c *grpc.ClientConn, method string, body []byte, out proto.Message, kv ...string) error {
	t.Helper()
	ctx := metadata.NewOutgoingContext(t.Context(), metadata.Pairs(kv...))
	return c.Invoke(ctx, "/a2a.v1.A2AService/"+method, raw(body), out, grpc.ForceCodec(rawCodec{}))
}

func sendBody(t *testing.T, text string) []byte {
	t.Helper()
	b, err := proto.Marshal(&a2apb.SendMessageRequest{Request: &a2apb.Message{MessageId: "m-" + text, Role: a2apb.Role_ROLE_USER,
		Parts: []*a2apb.Part{{Part: &a2apb.Part_Text{Text: text}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGRPCAmbiguousMetadata — Threat: a caller sends a decision metadata key
// twice (a2a-version 0.3 and 1.0, two credentials, two classifications) or
// both spellings of the extensions, so that writ decides on one reading and
// the agent's SDK runs another (one takes the first value, one the last,
// one joins them). Defence: the gRPC edge refuses a call whose decision
// metadata is repeated or spelled twice, INVALID_ARGUMENT, before any
// decision; the agent never sees it.
func TestGRPCAmbiguousMetadata(t *testing.T) {
	w := newWorld(t)
	c := conn(t, w.addr)
	auth := "Bearer " + w.Token(proxytest.Investigator)
	other := "Bearer " + w.Token(proxytest.RetailBot)
	before := len(w.agent.Requests())
	for name, kv := range map[string][]string{
		"version twice":        {"authorization", auth, "a2a-version", "0.3", "a2a-version", "1.0"},
		"credential twice":     {"authorization", auth, "authorization", other},
		"classification twice": {"authorization", auth, "writ-data-classification", "public", "writ-data-classification", "restricted"},
		"extensions twice":     {"authorization", auth, "a2a-extensions", "urn:a", "x-a2a-extensions", "urn:b"},
	} {
		err := call(t, c, "SendMessage", sendBody(t, "x"), &a2apb.SendMessageResponse{}, kv...)
		if code, r := reasons(err); code != codes.InvalidArgument || !contains(r, "INVALID_REQUEST") {
			t.Errorf("%s: %v %v (%v)", name, code, r, err)
		}
	}
	if len(w.agent.Requests()) != before {
		t.Error("an ambiguous call reached the agent")
	}
	// Sent once, the same call goes through.
	if err := call(t, c, "SendMessage", sendBody(t, "x"), &a2apb.SendMessageResponse{}, "authorization", auth, "a2a-version", "0.3"); err != nil {
		t.Fatalf("the unambiguous call: %v", err)
	}
}

// TestGRPCCallerMetadata — Threat: a caller forges writ-caller (or writ's
// decision id) in its metadata so the agent believes another caller, or
// sends hop-by-hop metadata (proxy-authorization, te) for the agent to act
// on. Defence: writ's own metadata is set by writ alone (every spelling the
// caller sent is dropped first) and hop-by-hop metadata is stripped as the
// HTTP path strips it.
func TestGRPCCallerMetadata(t *testing.T) {
	w := newWorld(t)
	c := conn(t, w.addr)
	err := call(t, c, "SendMessage", sendBody(t, "x"), &a2apb.SendMessageResponse{},
		"authorization", "Bearer "+w.Token(proxytest.Investigator), "writ-caller", `{"agent_id":"root"}`,
		"writ-decision-id", "forged", "proxy-authorization", "Basic eA==", "keep-alive", "1")
	if err != nil {
		t.Fatal(err)
	}
	obs := w.agent.Requests()
	last := obs[len(obs)-1]
	if !strings.Contains(last.Caller, `"agent_id":"payments-investigator"`) || strings.Contains(last.Caller, "root") {
		t.Errorf("the agent saw writ-caller %q", last.Caller)
	}
	if ids := last.Header.Values("writ-decision-id"); len(ids) != 1 || ids[0] == "forged" {
		t.Errorf("the agent saw writ-decision-id %v", ids)
	}
	for _, k := range []string{"proxy-authorization", "keep-alive"} {
		if v := last.Header.Values(k); len(v) > 0 {
			t.Errorf("the agent saw hop-by-hop %s: %v", k, v)
		}
	}
}

// TestGRPCUnknownFields — Threat: a caller adds fields the 0.3 proto does
// not define (at the top, or inside the message or a part), which writ's
// reading skips and an agent built on a later revision of the proto reads
// as meaning (a tenant, a task to act on). Defence: a request holding an
// unknown field anywhere is refused (INVALID_ARGUMENT), never forwarded.
func TestGRPCUnknownFields(t *testing.T) {
	w := newWorld(t)
	c := conn(t, w.addr)
	auth := "Bearer " + w.Token(proxytest.Investigator)
	top := protowire.AppendString(protowire.AppendTag(sendBody(t, "x"), 99, protowire.BytesType), "tenant-b")
	// An unknown field inside the message (field 1 of the request).
	inner, _ := proto.Marshal(&a2apb.Message{MessageId: "m-1", Role: a2apb.Role_ROLE_USER,
		Parts: []*a2apb.Part{{Part: &a2apb.Part_Text{Text: "x"}}}})
	inner = protowire.AppendVarint(protowire.AppendTag(inner, 77, protowire.VarintType), 1)
	nested := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), inner)
	before := len(w.agent.Requests())
	for name, body := range map[string][]byte{"top": top, "nested": nested} {
		err := call(t, c, "SendMessage", body, &a2apb.SendMessageResponse{}, "authorization", auth)
		if code, r := reasons(err); code != codes.InvalidArgument || !contains(r, "INVALID_PARAMS") {
			t.Errorf("%s: %v %v (%v)", name, code, r, err)
		}
	}
	if len(w.agent.Requests()) != before {
		t.Error("a call with unknown fields reached the agent")
	}
}

// TestGRPCCanonicalEncoding — Threat: the caller encodes its request so
// that parsers may read it differently — a singular field sent twice
// (proto3 keeps the last; a lax parser the first), a varint padded with
// continuation bytes — and writ forwards those bytes: writ decides on one
// context, the agent acts in another. Defence: the agent receives writ's
// own deterministic encoding of the message writ read, never the caller's
// bytes: one reading.
func TestGRPCCanonicalEncoding(t *testing.T) {
	w := newWorld(t)
	// A message whose context_id (field 2) comes twice, the role's varint
	// padded: writ reads the last context.
	m := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "m-1")
	m = protowire.AppendString(protowire.AppendTag(m, 2, protowire.BytesType), "ctx-victim")
	m = protowire.AppendString(protowire.AppendTag(m, 2, protowire.BytesType), "ctx-own")
	m = append(protowire.AppendTag(m, 4, protowire.VarintType), 0x81, 0x80, 0x00) // ROLE_USER, padded
	part, _ := proto.Marshal(&a2apb.Part{Part: &a2apb.Part_Text{Text: "x"}})
	m = protowire.AppendBytes(protowire.AppendTag(m, 5, protowire.BytesType), part)
	body := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), m)
	var read a2apb.SendMessageRequest
	if err := proto.Unmarshal(body, &read); err != nil || read.GetRequest().GetContextId() != "ctx-own" || read.GetRequest().GetRole() != a2apb.Role_ROLE_USER {
		t.Fatalf("the crafted request reads as %v (%v)", &read, err)
	}
	want, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&read)

	out := w.Core.Admit(context.Background(), proxy.Incoming{Mode: events.ModeGRPC, Method: "POST",
		Path: "/grpc/a2a.v1.A2AService/SendMessage", Route: "sanctions-screening-agent", Body: body,
		Header: map[string][]string{"Content-Type": {"application/grpc"},
			"Authorization": {"Bearer " + w.Token(proxytest.Investigator)}}})
	if out.Kind != proxy.Forward {
		t.Fatalf("the call was not forwarded: %v %v", out.Kind, out.Fault)
	}
	if !bytes.Equal(out.Plan.Body, want) {
		t.Fatalf("the agent would receive the caller's bytes:\n%x\nnot writ's encoding\n%x", out.Plan.Body, want)
	}
	if bytes.Contains(out.Plan.Body, []byte("ctx-victim")) {
		t.Fatal("the forwarded body still names the context writ did not read")
	}
}

// TestGRPCResourceNames — Threat: a caller names a task in a shape that
// writ and the agent read differently: a2a-go takes the first
// "tasks/<segment>" anywhere in the name, so "x/tasks/victim" or
// "tasks/own/tasks/victim" could be decided for one task and run for
// another. Defence: only the exact shapes tasks/{id} and
// tasks/{id}/pushNotificationConfigs/{configId} are read; any other is
// refused (INVALID_ARGUMENT) before a lookup or a decision.
func TestGRPCResourceNames(t *testing.T) {
	w := newWorld(t)
	c := conn(t, w.addr)
	auth := "Bearer " + w.Token(proxytest.RetailBot)
	before := len(w.agent.Requests())
	for _, name := range []string{"x/tasks/victim", "tasks/own/tasks/victim", "tasks/", "victim", "tasks/a/b"} {
		body, _ := proto.Marshal(&a2apb.GetTaskRequest{Name: name})
		err := call(t, c, "GetTask", body, &a2apb.Task{}, "authorization", auth)
		if code, r := reasons(err); code != codes.InvalidArgument || !contains(r, "INVALID_PARAMS") {
			t.Errorf("get %q: %v %v (%v)", name, code, r, err)
		}
	}
	for _, name := range []string{"x/tasks/t/pushNotificationConfigs/c", "tasks/t/pushNotificationConfigs/c/pushNotificationConfigs/d"} {
		body, _ := proto.Marshal(&a2apb.DeleteTaskPushNotificationConfigRequest{Name: name})
		err := call(t, c, "DeleteTaskPushNotificationConfig", body, &a2apb.Task{}, "authorization", auth)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("delete %q: %v", name, err)
		}
	}
	if len(w.agent.Requests()) != before {
		t.Error("a call with an ambiguous name reached the agent")
	}
}

// TestGRPCOneRequestMessage — Threat: a caller opens a stream and sends a
// second request message after the first, which the door would relay
// undecided. Defence: a call carries exactly one request message; a second
// fails the call before any decision.
func TestGRPCOneRequestMessage(t *testing.T) {
	w := newWorld(t)
	c := conn(t, w.addr)
	ctx := metadata.NewOutgoingContext(t.Context(), metadata.Pairs("authorization", "Bearer "+w.Token(proxytest.Investigator)))
	before := len(w.agent.Requests())
	cs, err := c.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/a2a.v1.A2AService/SendStreamingMessage", grpc.ForceCodec(rawCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg(raw(sendBody(t, "one"))); err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg(raw(sendBody(t, "two"))); err != nil {
		t.Fatal(err)
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var resp a2apb.StreamResponse
	if err := cs.RecvMsg(&resp); status.Code(err) != codes.InvalidArgument {
		t.Errorf("two request messages: %v", err)
	}
	if len(w.agent.Requests()) != before {
		t.Error("a call with two request messages reached the agent")
	}
}
