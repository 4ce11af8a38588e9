// Package grpcserve is the gRPC server the gRPC doors (ext_authz, ext_proc,
// the sidecar's gRPC listener) share: one service with a bound on the message size,
// grpc.health.v1 reporting it SERVING, reflection when configured, and a
// shutdown that turns health to NOT_SERVING and drains what is in flight
// until a deadline.
package grpcserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
)

// Server is a gRPC server serving one service and grpc.health.v1.
type Server struct {
	*grpc.Server
	health *health.Server
	// served receives what Serve returned (nil once stopped by Shutdown);
	// nil before Start.
	served chan error
	// stop makes Shutdown's work happen once; stopErr is its result.
	stop    sync.Once
	stopErr error
}

// New builds the server for the service desc, implemented by impl: calls are
// served by reused workers, messages above maxRecv bytes fail the call, health reports SERVING for "" and the
// service's name, and reflection is registered when reflect is set.
func New(desc *grpc.ServiceDesc, impl any, maxRecv int, reflect bool) *Server {
	g := grpc.NewServer(grpc.MaxRecvMsgSize(maxRecv), grpc.NumStreamWorkers(streamWorkers()))
	g.RegisterService(desc, impl)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(desc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(g, hs)
	if reflect {
		reflection.Register(g)
	}
	return &Server{Server: g, health: hs}
}

// NewProxy builds the server of a door that serves every call itself
// (grpc.UnknownServiceHandler: the calls of a service it relays, whatever
// its methods), with grpc.health.v1 beside it, messages above maxRecv bytes
// failing the call; opts add to the server's options (credentials, codec).
func NewProxy(handler grpc.StreamHandler, maxRecv int, opts ...grpc.ServerOption) *Server {
	opts = append([]grpc.ServerOption{grpc.MaxRecvMsgSize(maxRecv), grpc.NumStreamWorkers(streamWorkers()),
		grpc.UnknownServiceHandler(handler)}, opts...)
	g := grpc.NewServer(opts...)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(g, hs)
	return &Server{Server: g, health: hs}
}

// streamWorkers is how many goroutines serve calls. grpc-go otherwise starts a
// fresh goroutine per call, whose stack OPA's recursive evaluator grows through
// several copies on every check; a worker keeps the stack it grew. A call that
// finds every worker busy still gets its own goroutine.
func streamWorkers() uint32 { return uint32(max(16, 4*runtime.GOMAXPROCS(0))) }

// Start serves on ln in the background until Shutdown. A listener that
// fails takes the door down: that is logged at once, never silent, and
// Shutdown returns it.
func (s *Server) Start(ln net.Listener) {
	s.served = make(chan error, 1)
	go func() {
		err := s.Serve(ln)
		if errors.Is(err, grpc.ErrServerStopped) {
			err = nil
		}
		if err != nil {
			err = fmt.Errorf("serving on %s: %w", ln.Addr(), err)
			slog.Error("a gRPC door stopped serving", "addr", ln.Addr().String(), "error", err)
		}
		s.served <- err
	}()
}

// Shutdown reports NOT_SERVING to health checks, lets calls and streams in
// flight finish until ctx ends, then closes what is left. It returns why
// serving stopped before (a listener that failed) and, when ctx ended with
// calls still in flight, ctx's error: those calls were cut. A nil Server (a
// listener that never opened) has nothing to shut down. Calls after the
// first return the first one's result.
func (s *Server) Shutdown(ctx context.Context) error {
	if s == nil {
		return nil
	}
	s.stop.Do(func() { s.stopErr = s.shutdown(ctx) })
	return s.stopErr
}

func (s *Server) shutdown(ctx context.Context) error {
	s.health.Shutdown()
	done := make(chan struct{})
	go func() { s.GracefulStop(); close(done) }()
	var cut error
	select {
	case <-done:
	case <-ctx.Done():
		s.Stop()
		<-done
		cut = fmt.Errorf("draining: %w", ctx.Err())
	}
	if s.served == nil {
		return cut
	}
	return errors.Join(<-s.served, cut)
}
