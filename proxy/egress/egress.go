// Package egress is writ's egress door: the listener where the protected
// agent sends its own outbound A2A and ACP calls (docs/egress.md). A call to
// /to/{agent}/... is the request to the remote agent of egress.targets[]
// named agent; its Writ-Parent header names the inbound request it serves
// (the Writ-Decision-Id the agent received with it). The door admits the
// call through the admission core (proxy.Core.Admit, with Incoming.Egress:
// the same policy decides, roles swapped), obtains the outbound token for an
// allowed call by RFC 8693 token exchange (authz/exchange: the inbound token
// as the subject, the target's audience, the scope the call needs), and
// forwards it through the plan's one executor (proxy.Plan.Forward) with that
// token in place of any credential the agent sent, over a client that checks
// every address it dials (the push delivery's SSRF guard, proxy/push).
// GET /.well-known/writ/directory lists the targets the agent may delegate
// to for the task its Writ-Parent names. It is a peer of the other doors and
// uses only the core's exported API.
package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/authz/exchange"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/egress/calltarget"
	"github.com/writ-authz/writ/proxy/httpserve"
	"github.com/writ-authz/writ/proxy/push"
	"github.com/writ-authz/writ/proxy/writheader"
	"github.com/writ-authz/writ/task"
)

// Exchanger obtains outbound tokens; *exchange.Exchanger is the one writ
// runs. Exchange must be safe for concurrent use and return an error that
// wraps one of exchange's sentinels.
type Exchanger interface {
	Exchange(ctx context.Context, r exchange.Request) (exchange.Token, error)
}

var _ Exchanger = (*exchange.Exchanger)(nil)

// Stats counts what the door did.
type Stats struct {
	// Calls are the requests the door answered; Forwarded those that went to
	// a target with an exchanged token.
	Calls, Forwarded uint64
	// ExchangeFailures counts the calls that got no outbound token, by
	// exchange.Kind ("unavailable", "timeout", "refused:invalid_scope", ...).
	ExchangeFailures map[string]uint64
}

// Server is the egress door. Safe for concurrent use.
type Server struct {
	core   *proxy.Core
	exch   Exchanger
	client *http.Client
	cfg    config.Egress
	limits config.Limits
	log    *slog.Logger

	calls, forwarded atomic.Uint64
	failMu           sync.Mutex
	failures         map[string]uint64

	mu   sync.Mutex
	srv  *http.Server
	addr string
	// served receives what the listener's Serve returned (nil once stopped
	// by Shutdown).
	served chan error
	// stop makes Shutdown's work happen once; stopErr is its result.
	stop    sync.Once
	stopErr error
}

var _ http.Handler = (*Server)(nil)

// New builds the egress door over the admission core from a validated
// config with egress on; exch obtains the outbound tokens. Calls leave
// through the SSRF guard with egress.trusted_hosts. The listener opens with
// Listen.
func New(core *proxy.Core, exch Exchanger, cfg *config.Config, log *slog.Logger) (*Server, error) {
	switch {
	case core == nil:
		return nil, errors.New("egress: the admission core is required")
	case exch == nil:
		return nil, errors.New("egress: the token exchanger is required")
	case !cfg.Egress.Enabled():
		return nil, errors.New("egress: egress.listen is not set")
	}
	if log == nil {
		log = slog.Default()
	}
	guard := push.NewGuard(push.GuardConfig{TrustedHosts: cfg.Egress.TrustedHosts})
	// No client timeout and no body cap: the plan bounds a whole answer
	// (limits.upstream_timeout, proxy.MaxAnswerBytes) and a stream per event.
	return &Server{core: core, exch: exch, client: guard.Client(0, 1<<62), cfg: cfg.Egress, limits: cfg.Limits,
		log: log, failures: map[string]uint64{}}, nil
}

// Listen opens egress.listen and serves on it until Shutdown.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("egress.listen: %w", err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: s.limits.ReadHeaderTimeout, ReadTimeout: s.limits.ReadTimeout,
		MaxHeaderBytes: s.limits.MaxHeaderBytes, IdleTimeout: 120 * time.Second,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	s.mu.Lock()
	s.srv, s.addr, s.served = srv, ln.Addr().String(), served
	s.mu.Unlock()
	go s.serve(srv, ln, served)
	return nil
}

// serve serves the listener until Shutdown. A listener that fails takes the
// door down: logged at once, and returned by Shutdown.
func (s *Server) serve(srv *http.Server, ln net.Listener, served chan<- error) {
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if err != nil {
		err = fmt.Errorf("egress.listen: serving on %s: %w", ln.Addr(), err)
		s.log.Error("the egress listener stopped serving", "addr", ln.Addr().String(), "error", err)
	}
	served <- err
}

// Addr is the listener's address, "" before Listen.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Shutdown stops accepting, lets calls in flight finish until ctx ends, then
// closes what is left. It returns every error the listener met: serving that
// stopped before, and calls cut because ctx ended first. Calls after the
// first return the first one's result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stop.Do(func() { s.stopErr = s.shutdown(ctx) })
	return s.stopErr
}

func (s *Server) shutdown(ctx context.Context) error {
	s.mu.Lock()
	srv, served := s.srv, s.served
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	var errs []error
	if err := srv.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("egress.listen: draining: %w", err), srv.Close())
	}
	return errors.Join(append(errs, <-served)...)
}

// Stats returns the door's counts.
func (s *Server) Stats() Stats {
	s.failMu.Lock()
	fails := make(map[string]uint64, len(s.failures))
	for k, v := range s.failures {
		fails[k] = v
	}
	s.failMu.Unlock()
	return Stats{Calls: s.calls.Load(), Forwarded: s.forwarded.Load(), ExchangeFailures: fails}
}

// ServeHTTP admits the agent's call and executes the outcome.
func (s *Server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	start := time.Now()
	s.calls.Add(1)
	w := &httpserve.StatusWriter{ResponseWriter: rw}
	ev := events.Request{Mode: events.ModeEgress, Route: s.cfg.Agent}
	defer func() {
		ev.Status, ev.Duration = w.Status, time.Since(start)
		s.core.Served(ev)
	}()
	inc, ok := s.incoming(r)
	if !ok {
		proxy.WriteAnswer(w, plain(http.StatusNotFound, "no target: call /to/{agent}/... or /card/{card URL}/..., or GET "+calltarget.DirectoryPath), "")
		return
	}
	if parents := r.Header.Values(writheader.Parent); len(parents) > 1 {
		proxy.WriteAnswer(w, plain(http.StatusBadRequest, "more than one "+writheader.Parent+" header"), "")
		return
	} else if len(parents) == 1 {
		inc.Egress.ParentID = strings.TrimSpace(parents[0])
	}
	if !inc.Chunked || s.limits.AllowChunkedRequests {
		in, err := wire.FromHTTP(r, s.limits.MaxBodyBytes)
		inc.Body, inc.BodyErr = in.Body, err
	}
	out := s.core.Admit(r.Context(), inc)
	ev.Operation = out.Operation
	if out.Kind != proxy.Forward {
		if out.CloseConnection {
			w.Header().Set("Connection", "close")
		}
		proxy.WriteAnswer(w, out.Answer, out.DecisionID)
		return
	}
	if s.delegate(r.Context(), out.Plan, w) {
		s.forwarded.Add(1)
		out.Plan.Forward(r.Context(), s.client, inc, w, &ev)
	}
}

// incoming maps r to the core's Incoming: /to/{agent}/rest is a call to
// agent with the path /rest; the directory is the directory. ok is false for
// any other path, or an agent's name that is not a plain path segment.
func (s *Server) incoming(r *http.Request) (proxy.Incoming, bool) {
	raw := httpserve.RawPath(r)
	inc := proxy.Incoming{Mode: events.ModeEgress, Method: r.Method, Path: r.URL.Path, RawPath: raw, Host: r.Host,
		RemoteAddr: r.RemoteAddr, Query: r.URL.Query(), RawQuery: r.URL.RawQuery, Header: r.Header,
		Chunked: len(r.TransferEncoding) > 0, TLS: r.TLS != nil,
		Egress: &proxy.EgressCall{Base: "http://" + r.Host}}
	call, ok := calltarget.Parse(raw, r.URL.Path)
	switch {
	case !ok:
		return proxy.Incoming{}, false
	case call.Directory:
		return inc, true
	}
	inc.Route, inc.Egress.CardURL, inc.RawPath, inc.Path = call.Name, call.CardURL, call.RawPath, call.Path
	return inc, true
}

// delegate obtains the plan's outbound token and puts it on; false when the
// answer was written instead (nothing is forwarded).
func (s *Server) delegate(ctx context.Context, p *proxy.Plan, w http.ResponseWriter) bool {
	d := p.Delegation()
	if d == nil {
		proxy.WriteAnswer(w, p.Fail(task.NewFault(task.KindInternal, "the call has no delegation")), "")
		return false
	}
	tok, err := s.exch.Exchange(ctx, exchange.Request{SubjectToken: d.SubjectToken, Audience: d.Audience, Scope: d.Scope})
	if err != nil {
		kind := exchange.Kind(err)
		if ctx.Err() != nil {
			p.Undelegated(task.NewFault(task.KindUnavailable, "the call was cancelled"), kind)
			return false // the agent went away
		}
		s.failMu.Lock()
		s.failures[kind]++
		s.failMu.Unlock()
		s.log.Warn("egress: no outbound token; nothing is forwarded", "error", err, "kind", kind,
			"audience", d.Audience, "decision_id", p.DecisionID())
		proxy.WriteAnswer(w, p.Undelegated(exchangeFault(err), kind), "")
		return false
	}
	if refused, why := p.Delegate(ctx, proxy.Delegated{Token: tok.Value, ChainID: tok.ChainID, Actors: tok.Actors, Subject: tok.Subject}); refused != nil {
		if why == proxy.DelegateChainMismatch {
			s.failMu.Lock()
			s.failures[why]++
			s.failMu.Unlock()
		}
		proxy.WriteAnswer(w, *refused, "")
		return false
	}
	return true
}

// DelegationRefused is the denial code of a call the STS refused to make a
// token for; its reason names the STS's RFC 6749 error code.
const DelegationRefused = "DELEGATION_REFUSED"

// exchangeFault is the agent's answer when the exchange failed: 503 when the
// STS (or writ's own credential at it) is unavailable, 502 when its answer is
// not a token writ accepts, 403 when it refused, with its error code; each
// names the failure's kind (exchange.Kind). The STS's description, which
// may quote the token's claims, goes to the log.
func exchangeFault(err error) *task.Fault {
	kind := exchange.Kind(err)
	var ref *exchange.RefusedError
	switch {
	case errors.As(err, &ref):
		code := strings.TrimPrefix(kind, "refused:")
		msg := "the token service refused the delegation (" + code + ")"
		return &task.Fault{Kind: task.KindDenied, Message: msg, Denials: []task.Denial{{Code: DelegationRefused, Reason: code}}}
	case errors.Is(err, exchange.ErrSTSInvalidAnswer):
		return proxy.ExchangeFault(task.KindUpstreamUnavailable, "the token service's answer is not a token writ accepts for the target", kind)
	case errors.Is(err, exchange.ErrSTSTimeout):
		return proxy.ExchangeFault(task.KindUnavailable, "the token service did not answer in time; retry later", kind)
	case errors.Is(err, exchange.ErrSTSUnavailable):
		return proxy.ExchangeFault(task.KindUnavailable, "the token service is unavailable; retry later", kind)
	case errors.Is(err, exchange.ErrActorCredential):
		return proxy.ExchangeFault(task.KindUnavailable, "this agent's credential at the token service is not usable; retry later", kind)
	}
	return proxy.ExchangeFault(task.KindInternal, "the outbound token could not be asked for", kind)
}

// plain is a plain-text answer of the door's own, before any target was
// chosen.
func plain(status int, msg string) wire.Rendered {
	return wire.Rendered{Status: status, ContentType: "text/plain; charset=utf-8",
		Header: http.Header{"Cache-Control": {"no-store"}}, Body: []byte("writ: " + msg + "\n")}
}
