package extauthz_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/proxy/envoyreq"
)

// grpcEnvoy plays Envoy in front of one gRPC agent, with writ's gRPC
// ext_authz filter configured as deploy/envoy/envoy-grpc.yaml does: each
// call becomes a CheckRequest (the method as the path, the metadata as a
// header_map of raw values, the one request message in its frame as the
// raw_body of pack_as_bytes, the route's writ-agent context extension);
// an OK check forwards the caller's own bytes with writ's headers set and
// removed as Envoy applies them, and relays the agent's answer or stream;
// a denied one is Envoy's local reply to a gRPC request: a trailers-only
// answer whose status is the denied response's grpc-status header (else
// Envoy's mapping of its HTTP status), whose message is the body when there
// is one (else grpc-message), with the details in grpc-status-details-bin.
type grpcEnvoy struct {
	authz authv3.AuthorizationClient
	agent *grpc.ClientConn
	route string
	addr  string

	mu     sync.Mutex
	checks []*authv3.CheckResponse
}

// rawFrame is one message's bytes, passed through untouched.
type rawFrame struct{ b []byte }

type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }
func (rawCodec) Marshal(v any) ([]byte, error) {
	if f, ok := v.(*rawFrame); ok {
		return f.b, nil
	}
	return nil, fmt.Errorf("cannot encode %T", v)
}
func (rawCodec) Unmarshal(b []byte, v any) error {
	if f, ok := v.(*rawFrame); ok {
		f.b = append([]byte(nil), b...)
		return nil
	}
	return fmt.Errorf("cannot decode into %T", v)
}

// newGRPCEnvoy starts the test Envoy on loopback: calls for route (the
// agent's name) checked at authzAddr, forwarded to the agent at agentAddr.
func newGRPCEnvoy(t *testing.T, authzAddr, agentAddr, route string) *grpcEnvoy {
	t.Helper()
	ac, err := grpc.NewClient("passthrough:///"+authzAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	up, err := grpc.NewClient("passthrough:///"+agentAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	e := &grpcEnvoy{authz: authv3.NewAuthorizationClient(ac), agent: up, route: route}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(e.handle))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); ac.Close(); up.Close() })
	return e
}

// streaming are the A2A methods that answer with a server stream.
func streaming(method string) bool {
	m := method[strings.LastIndex(method, "/")+1:]
	return m == "SendStreamingMessage" || m == "TaskSubscription" || m == "SubscribeToTask"
}

func (e *grpcEnvoy) handle(_ any, ss grpc.ServerStream) error {
	ctx := ss.Context()
	method, _ := grpc.MethodFromServerStream(ss)
	md, _ := metadata.FromIncomingContext(ctx)
	var req rawFrame
	if err := ss.RecvMsg(&req); err != nil {
		return err
	}
	resp, err := e.authz.Check(ctx, grpcCheck(method, md, wire.AppendGRPCFrame(nil, wire.GRPCData, req.b), e.route))
	if err != nil {
		// failure_mode_allow: false: Envoy's 403, as a gRPC local reply.
		return status.Error(codes.PermissionDenied, "ext_authz failed")
	}
	e.mu.Lock()
	e.checks = append(e.checks, resp)
	e.mu.Unlock()
	if resp.GetStatus().GetCode() != 0 {
		return localReply(ss, resp.GetDeniedResponse())
	}
	out := metadata.MD{}
	for k, vs := range md {
		if !strings.HasPrefix(k, ":") && !strings.HasPrefix(k, "grpc-") && k != "content-type" && k != "user-agent" && k != "te" {
			out[k] = vs
		}
	}
	for _, h := range resp.GetOkResponse().GetHeaders() {
		out.Set(h.GetHeader().GetKey(), h.GetHeader().GetValue())
	}
	for _, k := range resp.GetOkResponse().GetHeadersToRemove() {
		delete(out, k)
	}
	octx := metadata.NewOutgoingContext(ctx, out)
	if !streaming(method) {
		var ans rawFrame
		var hdr, trl metadata.MD
		err := e.agent.Invoke(octx, method, &req, &ans, grpc.Header(&hdr), grpc.Trailer(&trl))
		_ = ss.SendHeader(hdr)
		ss.SetTrailer(trl)
		if err != nil {
			return err
		}
		return ss.SendMsg(&ans)
	}
	cs, err := e.agent.NewStream(octx, &grpc.StreamDesc{ServerStreams: true}, method)
	if err != nil {
		return err
	}
	if err := cs.SendMsg(&req); err != nil {
		return err
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	if hdr, err := cs.Header(); err == nil {
		_ = ss.SendHeader(hdr)
	}
	for {
		var m rawFrame
		if err := cs.RecvMsg(&m); err != nil {
			ss.SetTrailer(cs.Trailer())
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := ss.SendMsg(&m); err != nil {
			return err
		}
	}
}

// grpcCheck is the CheckRequest Envoy sends for a gRPC call of method
// with metadata md and body (its frames, as pack_as_bytes gives them), on
// a route that names route.
func grpcCheck(method string, md metadata.MD, body []byte, route string) *authv3.CheckRequest {
	authority := "sanctions.example"
	if a := md.Get(":authority"); len(a) > 0 {
		authority = a[0]
	}
	hm := &corev3.HeaderMap{}
	add := func(k, v string) { hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: k, RawValue: []byte(v)}) }
	add(":method", "POST")
	add(":path", method)
	add(":authority", authority)
	add(":scheme", "http")
	add("te", "trailers")
	for k, vs := range md {
		if strings.HasPrefix(k, ":") {
			continue
		}
		for _, v := range vs {
			add(k, v)
		}
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 50000}}}}},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{Method: "POST", Path: method,
			Host: authority, Protocol: "HTTP/2", HeaderMap: hm, RawBody: body}},
		ContextExtensions: map[string]string{envoyreq.RouteKey: route}}}
}

// localReply is Envoy's local reply to a gRPC call for a denied check.
func localReply(ss grpc.ServerStream, d *authv3.DeniedHttpResponse) error {
	h := map[string]string{}
	md := metadata.MD{}
	for _, hv := range d.GetHeaders() {
		k := strings.ToLower(hv.GetHeader().GetKey())
		h[k] = hv.GetHeader().GetValue()
		if !strings.HasPrefix(k, "grpc-") && k != "content-type" && k != "content-length" {
			md.Set(k, hv.GetHeader().GetValue())
		}
	}
	st := &spb.Status{Code: int32(envoyGRPCOfHTTP(int(d.GetStatus().GetCode())))}
	if v, ok := h[envoyreq.GRPCStatusKey]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return status.Error(codes.Internal, "bad grpc-status "+v)
		}
		st.Code = int32(n)
	}
	st.Message = d.GetBody()
	if st.Message == "" {
		st.Message, _ = url.PathUnescape(h[envoyreq.GRPCMessageKey])
	}
	if v := h[envoyreq.GRPCDetailsKey]; v != "" {
		raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(v, "="))
		var full spb.Status
		if err != nil || proto.Unmarshal(raw, &full) != nil {
			return status.Error(codes.Internal, "bad grpc-status-details-bin")
		}
		st.Details = full.GetDetails()
	}
	_ = ss.SetHeader(md)
	return status.ErrorProto(st)
}

// envoyGRPCOfHTTP is Envoy's own mapping of an HTTP status to a gRPC code
// (Grpc::Utility::httpToGrpcStatus), which its local reply uses when the
// answer names no grpc-status.
func envoyGRPCOfHTTP(st int) codes.Code {
	switch st {
	case 400:
		return codes.Internal
	case 401:
		return codes.Unauthenticated
	case 403:
		return codes.PermissionDenied
	case 404:
		return codes.Unimplemented
	case 429, 502, 503, 504:
		return codes.Unavailable
	}
	return codes.Unknown
}
