// Package extproc is writ behind Envoy's ext_proc filter: the gRPC server of
// envoy.service.ext_proc.v3.ExternalProcessor/Process. Envoy opens one stream
// per HTTP request and shows writ the request (headers, then the buffered
// body) and the agent's answer (headers, then the body); writ answers each
// message. It is one more mapping of the admission core's Outcome, over the
// same Core (and so the same lifecycle store and push deliverer) as the
// sidecar:
//
//   - request phase: Core.Admit decides, exactly as for ext_authz, for the
//     agent Envoy's route names in the stream's initial metadata
//     (envoyreq.RouteKey). Writ's own
//     answer (a refusal, a card, a push-config operation) is an
//     ImmediateResponse with the protocol-shaped body; a forwarded request gets
//     the sidecar's upstream headers by mutation (Writ-Caller, Writ-Decision-Id,
//     every other spelling of them removed) and, when writ keeps the push
//     config itself, the stripped body.
//   - response phase: a JSON answer (held whole, up to
//     envoy.max_response_bytes) goes through Plan.Answer, which records it in
//     the lifecycle store, notifies push callbacks, follows tasks, and filters
//     listings to the caller's own tasks (the filtered body replaces the
//     agent's); an SSE answer is fed chunk by chunk into Plan.Chunks, whose
//     event-aligned output replaces each chunk.
//
// What happens when Envoy's processing mode or message timeout keeps a phase
// from writ is in docs/envoy.md (ext_proc): requests fail closed;
// answers writ cannot read lose what the sidecar does with them.
package extproc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/envoyreq"
	"github.com/writ-authz/writ/proxy/grpcserve"
)

// Server answers Envoy's ext_proc streams with the admission core. It is safe
// for concurrent use: each stream is one request.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer

	core    *proxy.Core
	ident   envoyreq.ClaimsMapper
	cfg     config.Envoy
	limits  config.Limits
	maxReq  int64           // envoy.max_request_bytes (or limits.max_body_bytes)
	maxResp int64           // envoy.max_response_bytes
	trusted map[string]bool // envoy.jwt_authn.issuers; nil when jwt_authn is off
	log     *slog.Logger

	// warned keeps configuration complaints to one log line each.
	warned sync.Map
	// streams counts the streams in flight (tests, shutdown).
	streams atomic.Int64

	mu   sync.Mutex
	grpc *grpcserve.Server
	addr string
}

var _ extprocv3.ExternalProcessorServer = (*Server)(nil)

// New builds the ext_proc server over the admission core from a validated
// config. ident is needed only for envoy.jwt_authn; the listener opens with
// Listen.
func New(core *proxy.Core, ident envoyreq.ClaimsMapper, cfg *config.Config, log *slog.Logger) (*Server, error) {
	if core == nil {
		return nil, errors.New("extproc: the admission core is required")
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Server{core: core, ident: ident, cfg: cfg.Envoy, limits: cfg.Limits, log: log,
		maxReq: cfg.Envoy.BodyLimit(cfg.Limits), maxResp: cfg.Envoy.ResponseLimit()}
	if j := s.cfg.JWTAuthn; j != nil {
		if ident == nil {
			return nil, errors.New("extproc: envoy.jwt_authn needs the identity resolver")
		}
		s.trusted = make(map[string]bool, len(j.Issuers))
		for _, iss := range j.Issuers {
			s.trusted[iss] = true
		}
	}
	return s, nil
}

// Process implements envoy.service.ext_proc.v3.ExternalProcessor/Process: one
// stream, one HTTP request and its answer.
func (s *Server) Process(srv grpc.BidiStreamingServer[extprocv3.ProcessingRequest, extprocv3.ProcessingResponse]) error {
	s.streams.Add(1)
	defer s.streams.Add(-1)
	st := newStream(srv.Context(), s)
	defer st.finish()
	for {
		req, err := srv.Recv()
		if err != nil {
			return st.ended(err)
		}
		resp, err := st.handle(req)
		if err != nil {
			return err
		}
		if resp == nil {
			continue
		}
		if err := srv.Send(resp); err != nil {
			return err
		}
	}
}

// warnOnce logs a configuration problem once per server.
func (s *Server) warnOnce(key, msg string, args ...any) {
	if _, seen := s.warned.LoadOrStore(key, true); !seen {
		s.log.Error(msg, args...)
	}
}

// maxRecvMsgSize bounds one ProcessingRequest: the largest body writ reads
// (request or answer), the header block, and room around them. A larger
// message fails the stream (Envoy then answers status_on_error).
func (s *Server) maxRecvMsgSize() int {
	return int(max(s.maxReq, s.maxResp)) + s.limits.MaxHeaderBytes + 64<<10
}

// Listen opens envoy.ext_proc_listen and serves on it until Shutdown.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.cfg.ExtProcListen)
	if err != nil {
		return fmt.Errorf("envoy.ext_proc_listen: %w", err)
	}
	s.Serve(ln)
	return nil
}

// Serve serves ext_proc (and grpc.health.v1, and reflection when
// envoy.reflection is on) on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) {
	g := grpcserve.New(&extprocv3.ExternalProcessor_ServiceDesc, s, s.maxRecvMsgSize(), s.cfg.Reflection)
	s.mu.Lock()
	s.grpc, s.addr = g, ln.Addr().String()
	s.mu.Unlock()
	g.Start(ln)
}

// Addr is the listener's address, "" before Listen.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Shutdown reports NOT_SERVING to health checks, lets streams in flight (SSE
// answers included) finish until ctx ends, then closes what is left. It
// returns every error the listener met: stopping to serve before, and
// streams cut because ctx ended first.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	g := s.grpc
	s.mu.Unlock()
	if err := g.Shutdown(ctx); err != nil {
		return fmt.Errorf("envoy.ext_proc_listen: %w", err)
	}
	return nil
}
