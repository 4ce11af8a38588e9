// Package grpcserve is the gRPC server the Envoy-facing doors (ext_authz,
// ext_proc) share: one service with a bound on the message size,
// grpc.health.v1 reporting it SERVING, reflection when configured, and a
// shutdown that turns health to NOT_SERVING and drains what is in flight
// until a deadline.
package grpcserve

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"runtime"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
)

// Server is a gRPC server serving one service and grpc.health.v1.
type Server struct {
	*grpc.Server
	health *health.Server
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

// streamWorkers is how many goroutines serve calls. grpc-go otherwise starts a
// fresh goroutine per call, whose stack OPA's recursive evaluator grows through
// several copies on every check; a worker keeps the stack it grew. A call that
// finds every worker busy still gets its own goroutine.
func streamWorkers() uint32 { return uint32(max(16, 4*runtime.GOMAXPROCS(0))) }

// Start serves on ln in the background until Shutdown. A listener that
// fails takes the door down: that is logged, never silent.
func (s *Server) Start(ln net.Listener) {
	go func() {
		if err := s.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			slog.Error("a gRPC door stopped serving", "addr", ln.Addr().String(), "error", err)
		}
	}()
}

// Shutdown reports NOT_SERVING to health checks, lets calls and streams in
// flight finish until ctx ends, then closes what is left. A nil Server (a
// listener that never opened) has nothing to shut down.
func (s *Server) Shutdown(ctx context.Context) {
	if s == nil {
		return
	}
	s.health.Shutdown()
	done := make(chan struct{})
	go func() { s.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.Stop()
		<-done
	}
}
