// Package extauthz is writ behind Envoy: the ext_authz v3 servers (gRPC
// envoy.service.auth.v3.Authorization/Check, and the HTTP form of Envoy's
// http_service) that turn Envoy's check into one call of the admission core
// (proxy.Core.Admit) and its Outcome into Envoy's answer, so a client sees the
// same A2A or ACP answer through Envoy as through the sidecar.
package extauthz

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/envoyreq"
	"github.com/writ-authz/writ/proxy/grpcserve"
	"github.com/writ-authz/writ/proxy/writheader"
	"github.com/writ-authz/writ/task"
)

// Server answers Envoy's ext_authz checks with the admission core's outcomes.
// It is safe for concurrent use.
type Server struct {
	authv3.UnimplementedAuthorizationServer

	core    *proxy.Core
	ident   envoyreq.ClaimsMapper
	cfg     config.Envoy
	limits  config.Limits
	trusted map[string]bool // envoy.jwt_authn.issuers; nil when jwt_authn is off
	log     *slog.Logger

	mu       sync.Mutex
	grpc     *grpcserve.Server
	http     *http.Server
	grpcAddr string
	httpAddr string
	// httpServed receives what the HTTP listener's Serve returned (nil
	// once stopped by Shutdown).
	httpServed chan error
	// stop makes Shutdown's work happen once; stopErr is its result.
	stop    sync.Once
	stopErr error
}

var _ authv3.AuthorizationServer = (*Server)(nil)

// New builds the ext_authz servers over the admission core from a validated
// config. ident is needed only for envoy.jwt_authn (it maps the verified
// claims); the listeners open with Listen.
func New(core *proxy.Core, ident envoyreq.ClaimsMapper, cfg *config.Config, log *slog.Logger) (*Server, error) {
	if core == nil {
		return nil, errors.New("extauthz: the admission core is required")
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Server{core: core, ident: ident, cfg: cfg.Envoy, limits: cfg.Limits, log: log}
	s.cfg.MaxRequestBytes = cfg.Envoy.BodyLimit(cfg.Limits)
	if j := s.cfg.JWTAuthn; j != nil {
		if ident == nil {
			return nil, errors.New("extauthz: envoy.jwt_authn needs the identity resolver")
		}
		s.trusted = make(map[string]bool, len(j.Issuers))
		for _, iss := range j.Issuers {
			s.trusted[iss] = true
		}
	}
	return s, nil
}

// Check implements envoy.service.auth.v3.Authorization/Check.
func (s *Server) Check(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	start := time.Now()
	inc, err := s.fromCheck(req)
	if err != nil {
		if req.GetAttributes().GetRequest().GetHttp() == nil {
			// Not an HTTP check at all: a gRPC error, which Envoy fails closed on.
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		out := badRequest(err)
		s.served(out, start)
		hdr, _ := headersOf(req.GetAttributes().GetRequest().GetHttp())
		return answerResponse(out, envoyreq.GRPCCall(hdr)), nil
	}
	remove := writheader.Spellings(inc.Header)
	out, dry := s.decide(ctx, inc)
	s.served(out, start)
	if out.Kind == proxy.Forward || dry {
		return okResponse(out, remove, dry), nil
	}
	return answerResponse(out, envoyreq.GRPCCall(inc.Header)), nil
}

// answerResponse is writ's own answer to the check: to a gRPC call, the
// status Envoy sends for it (grpcDeniedResponse), else the HTTP answer.
func answerResponse(out proxy.Outcome, grpc bool) *authv3.CheckResponse {
	if grpc {
		return grpcDeniedResponse(out)
	}
	return deniedResponse(out)
}

// decide admits the request, then applies envoy.dry_run: an outcome that does
// not forward is logged and let through (dry reports that), except requests
// for writ's own directory, which no agent behind Envoy could answer.
func (s *Server) decide(ctx context.Context, inc proxy.Incoming) (out proxy.Outcome, dry bool) {
	inc.Mode, inc.Routed = events.ModeExtAuthz, true
	out = s.core.Admit(ctx, inc)
	if out.Kind == proxy.Forward || !s.cfg.DryRun || out.Operation == task.OpDiscover {
		return out, false
	}
	denied := make([]string, len(out.Denials))
	for i, d := range out.Denials {
		denied[i] = d.Code
	}
	s.log.Info("dry-run: Envoy mode lets through what writ would have answered itself",
		"decision_id", out.DecisionID, "status", out.Answer.Status, "denials", denied,
		"operation", string(out.Operation), "method", inc.Method, "path", inc.Path)
	return out, true
}

// served reports one check answered: status 200 when the request goes on.
func (s *Server) served(out proxy.Outcome, start time.Time) {
	st := out.Answer.Status
	if out.Kind == proxy.Forward {
		st = http.StatusOK
	}
	s.core.Served(events.Request{Mode: events.ModeExtAuthz, Route: out.Route, Operation: out.Operation,
		Status: st, Duration: time.Since(start)})
}

// badRequest is the answer to a check writ cannot read as an HTTP request.
func badRequest(err error) proxy.Outcome {
	return proxy.Outcome{Kind: proxy.Refuse, Answer: plainAnswer(http.StatusBadRequest, err.Error())}
}

// maxRecvMsgSize bounds one CheckRequest: the body Envoy may send, the header
// block, and room for the attributes around them.
func (s *Server) maxRecvMsgSize() int {
	return int(s.cfg.MaxRequestBytes) + s.limits.MaxHeaderBytes + 64<<10
}

// Listen opens the configured listeners (envoy.grpc_listen, envoy.http_listen)
// and serves on them until Shutdown.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gln, hln net.Listener
	var err error
	if s.cfg.GRPCListen != "" {
		if gln, err = net.Listen("tcp", s.cfg.GRPCListen); err != nil {
			return fmt.Errorf("envoy.grpc_listen: %w", err)
		}
	}
	if s.cfg.HTTPListen != "" {
		if hln, err = net.Listen("tcp", s.cfg.HTTPListen); err != nil {
			if gln != nil {
				gln.Close()
			}
			return fmt.Errorf("envoy.http_listen: %w", err)
		}
	}
	if gln != nil {
		s.grpc = grpcserve.New(&authv3.Authorization_ServiceDesc, s, s.maxRecvMsgSize(), s.cfg.Reflection)
		s.grpcAddr = gln.Addr().String()
		s.grpc.Start(gln)
	}
	if hln != nil {
		s.http = s.HTTPServer()
		s.httpAddr = hln.Addr().String()
		s.httpServed = make(chan error, 1)
		go s.serveHTTP(s.http, hln, s.httpServed)
	}
	return nil
}

// serveHTTP serves the HTTP listener until Shutdown. A listener that fails
// takes that listener down: logged at once, and returned by Shutdown.
func (s *Server) serveHTTP(srv *http.Server, ln net.Listener, served chan<- error) {
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if err != nil {
		err = fmt.Errorf("envoy.http_listen: serving on %s: %w", ln.Addr(), err)
		s.log.Error("the HTTP ext_authz listener stopped serving", "addr", ln.Addr().String(), "error", err)
	}
	served <- err
}

// GRPCAddr is the gRPC listener's address, "" when it is off.
func (s *Server) GRPCAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.grpcAddr
}

// HTTPAddr is the HTTP listener's address, "" when it is off.
func (s *Server) HTTPAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.httpAddr
}

// Shutdown reports NOT_SERVING to health checks, lets checks in flight finish
// until ctx ends, then closes what is left. It returns every error the
// listeners met: one that stopped serving before, and checks cut because
// ctx ended first. Calls after the first return the first one's result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stop.Do(func() { s.stopErr = s.shutdown(ctx) })
	return s.stopErr
}

func (s *Server) shutdown(ctx context.Context) error {
	s.mu.Lock()
	g, h, served := s.grpc, s.http, s.httpServed
	s.mu.Unlock()
	var errs []error
	if h != nil {
		if err := h.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("envoy.http_listen: draining: %w", err), h.Close())
		}
		errs = append(errs, <-served)
	}
	if err := g.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("envoy.grpc_listen: %w", err))
	}
	return errors.Join(errs...)
}

// HTTPServer wraps the HTTP ext_authz handler in an http.Server with the
// sidecar's header limits and timeouts.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           http.HandlerFunc(s.ServeHTTP),
		ReadHeaderTimeout: s.limits.ReadHeaderTimeout,
		ReadTimeout:       s.limits.ReadTimeout,
		MaxHeaderBytes:    s.limits.MaxHeaderBytes,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}
