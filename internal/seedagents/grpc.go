package seedagents

import (
	"context"
	"net"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/a2agrpc"
	"github.com/a2aproject/a2a-go/a2asrv"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// serveGRPC serves the agent's handler over gRPC (a2agrpc) on ln, recording
// every call: Method is the call's full method name, Header its metadata,
// Caller the writ-caller metadata, Body the request message as proto-JSON.
func (a *Agent) serveGRPC(ln net.Listener, handler a2asrv.RequestHandler) {
	a.grpc = grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
			ctx = a.observeCall(ctx, info.FullMethod, req)
			return next(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, next grpc.StreamHandler) error {
			return next(srv, &observedStream{ServerStream: ss, a: a, method: info.FullMethod})
		}))
	a2agrpc.NewHandler(handler).RegisterWith(a.grpc)
	go func() { _ = a.grpc.Serve(ln) }()
}

// observeCall records one call and returns its context carrying the record.
func (a *Agent) observeCall(ctx context.Context, method string, req any) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	h := http.Header{}
	for k, vs := range md {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	o := &Observed{Method: method, Path: method, Header: h, Caller: strings.Join(md.Get(strings.ToLower(CallerHeader)), ",")}
	if m, ok := req.(proto.Message); ok {
		if b, err := protojson.Marshal(m); err == nil {
			o.Body = clip(b)
		}
	}
	a.record(o)
	return context.WithValue(ctx, observedKey{}, o)
}

// observedStream records a server-streaming call's request message.
type observedStream struct {
	grpc.ServerStream
	a      *Agent
	method string
	ctx    context.Context
}

func (s *observedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if s.ctx == nil {
		s.ctx = s.a.observeCall(s.ServerStream.Context(), s.method, m)
	}
	return nil
}

func (s *observedStream) Context() context.Context {
	if s.ctx != nil {
		return s.ctx
	}
	return s.ServerStream.Context()
}
