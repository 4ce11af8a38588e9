// Package authzen is writ as an OpenID AuthZEN Authorization API 1.0 policy
// decision point: a front door for enforcement points that hold the
// request themselves (an API or MCP gateway, an application) and ask writ
// only whether it may go on. It serves, on a listener of its own with its
// own authentication, the Access Evaluation and Evaluations APIs, the three
// Search APIs with pagination and the metadata document, for two kinds of
// decision point:
//
//   - the delegation profile, at the root (docs/authzen-profile.md):
//     AuthZEN's subject, action, resource and context mapped onto writ/v1
//     and decided by the admission core (proxy.Core.Decide), so a
//     delegation decision asked here is the one the sidecar, ext_authz and
//     ext_proc make, with the same denial codes and neutral reasons;
//   - applications, each under /<name>: a Rego package of the policy set
//     that takes the AuthZEN request itself as its input, evaluated through
//     the decision engine's prepared rules (Rules).
//
// The door maps; it decides nothing itself.
package authzen

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/proxy"
)

// Rules is the decision engine as an application needs it: a rule of the
// serving policy, prepared once for all the evaluations of one request
// (authz.Engine.Prepare; the assembly adapts it with RulesFunc). Prepare
// fails for a reference the policy defines nothing at (authz.ErrNoRule): a
// search whose candidate rule it fails for is not offered.
type Rules interface {
	Prepare(ref string) (Rule, error)
}

// Rule is one prepared rule (authz.Prepared): Eval evaluates it on a JSON
// value and returns the rule's value, defined false when it is undefined.
// It is safe for concurrent use, and every Eval of one Rule is decided by
// one policy revision.
type Rule interface {
	Eval(ctx context.Context, input any) (value any, defined bool, err error)
}

// RulesFunc adapts a function to Rules.
type RulesFunc func(ref string) (Rule, error)

// Prepare calls f.
func (f RulesFunc) Prepare(ref string) (Rule, error) { return f(ref) }

// Options are the parts of a Server the assembly may give.
type Options struct {
	// TLS makes the listener serve HTTPS (built from authzen.tls).
	TLS    *tls.Config
	Logger *slog.Logger
}

// Stats counts what the door answered, for tests and logs.
type Stats struct {
	// Requests counts every request; BadRequests those answered 400,
	// Unauthenticated 401, Forbidden 403, Failures 5xx.
	Requests, BadRequests, Unauthenticated, Forbidden, Failures atomic.Uint64
	// Evaluations counts single evaluations, batch items and search
	// candidates evaluated; InvalidItems the batch items refused as invalid
	// (each answered decision false with its error, §7.2.1).
	Evaluations, InvalidItems atomic.Uint64
}

// Server is the AuthZEN policy decision point. It is safe for concurrent
// use.
type Server struct {
	core    *proxy.Core
	ident   *identity.Resolver
	cfg     config.AuthZEN
	limits  config.Limits
	clients map[string]bool
	log     *slog.Logger
	tls     *tls.Config
	// root is the delegation profile (nil when it is off); apps the
	// applications by name.
	root pdp
	apps map[string]pdp
	// appNames are the applications' names, in the configuration's order.
	appNames []string
	stats    Stats

	mu   sync.Mutex
	http *http.Server
	addr string
	// serveErr receives what the listener's Serve returned (nil once
	// stopped by Shutdown).
	serveErr chan error
	// stop makes Shutdown's work happen once; stopErr is its result.
	stop    sync.Once
	stopErr error
}

// New builds the decision point over the admission core and the engine's
// rules from a validated config. ident authenticates enforcement points
// (and verifies the tokens subjects carry); rules may be nil when no
// application is configured.
func New(core *proxy.Core, rules Rules, ident *identity.Resolver, cfg *config.Config, opt Options) (*Server, error) {
	if core == nil || ident == nil {
		return nil, errors.New("authzen: the admission core and the identity resolver are required")
	}
	if len(cfg.AuthZEN.Applications) > 0 && rules == nil {
		return nil, errors.New("authzen: applications need the decision engine's rules")
	}
	log := opt.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{core: core, ident: ident, cfg: cfg.AuthZEN, limits: cfg.Limits, log: log, tls: opt.TLS,
		clients: map[string]bool{}, apps: map[string]pdp{}}
	for _, c := range cfg.AuthZEN.Clients {
		s.clients[c] = true
	}
	if !cfg.AuthZEN.Delegation.Disabled {
		s.root = newDelegation(core, ident, cfg, log)
	}
	for _, a := range cfg.AuthZEN.Applications {
		s.apps[a.Name] = &application{name: a.Name, pkg: a.PackageRef(), rules: rules, log: log}
		s.appNames = append(s.appNames, a.Name)
	}
	return s, nil
}

// RequiredRules are the rules the policy set must define for cfg's
// applications (their decisions): the assembly passes them to the policy
// loader, so a set that lacks one is refused at start and on reload.
func RequiredRules(cfg *config.Config) []string {
	var out []string
	for _, a := range cfg.AuthZEN.Applications {
		out = append(out, a.PackageRef()+".decision")
	}
	return out
}

// Stats returns the door's counters.
func (s *Server) Stats() *Stats { return &s.stats }

// Listen opens authzen.listen and serves on it until Shutdown.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("authzen.listen: %w", err)
	}
	s.addr = ln.Addr().String()
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	s.http = s.HTTPServer()
	s.serveErr = make(chan error, 1)
	go s.serve(s.http, ln, s.addr, s.serveErr)
	return nil
}

// serve serves the listener until Shutdown. A listener that fails takes the
// door down: logged at once, and returned by Shutdown.
func (s *Server) serve(srv *http.Server, ln net.Listener, addr string, served chan<- error) {
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if err != nil {
		err = fmt.Errorf("authzen.listen: serving on %s: %w", addr, err)
		s.log.Error("the AuthZEN listener stopped serving", "addr", addr, "error", err)
	}
	served <- err
}

// Addr is the listener's address, "" before Listen.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Shutdown stops accepting, lets requests in flight finish until ctx ends,
// then closes what is left. It returns every error the listener met: serving
// that stopped before, and requests cut because ctx ended first. Calls after
// the first return the first one's result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stop.Do(func() { s.stopErr = s.shutdown(ctx) })
	return s.stopErr
}

func (s *Server) shutdown(ctx context.Context) error {
	s.mu.Lock()
	h, served := s.http, s.serveErr
	s.mu.Unlock()
	if h == nil {
		return nil
	}
	var errs []error
	if err := h.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("authzen.listen: draining: %w", err), h.Close())
	}
	return errors.Join(append(errs, <-served)...)
}

// HTTPServer wraps the door in an http.Server with the sidecar's header
// limits and timeouts.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.limits.ReadHeaderTimeout,
		ReadTimeout:       s.limits.ReadTimeout,
		MaxHeaderBytes:    s.limits.MaxHeaderBytes,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// The paths of the binding (§10.1, table 1), below a decision point's base.
const (
	pathEvaluation  = "/access/v1/evaluation"
	pathEvaluations = "/access/v1/evaluations"
	pathSearch      = "/access/v1/search/"
	wellKnown       = "/.well-known/authzen-configuration"
)

// requestIDHeader is the request identifier the binding echoes (§10.1.3).
const requestIDHeader = "X-Request-ID"

// exchange is one HTTP request to the door on its way through.
type exchange struct {
	w     http.ResponseWriter
	r     *http.Request
	start time.Time
	// app is the application's name, "" for the root.
	app    string
	client string
}

// ServeHTTP routes a request to its decision point and endpoint.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.stats.Requests.Add(1)
	x := &exchange{w: w, r: r, start: time.Now()}
	if id := r.Header.Get(requestIDHeader); id != "" {
		// Echoed on every answer, errors included (§10.1.3).
		w.Header().Set(requestIDHeader, id)
	}
	path := r.URL.Path
	if rest, ok := strings.CutPrefix(path, wellKnown); ok {
		s.metadata(x, rest)
		return
	}
	app, endpoint := "", path
	if !strings.HasPrefix(path, "/access/") {
		name, rest, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
		app, endpoint = name, "/"+rest
	}
	x.app = app
	p := s.pdpOf(app)
	if p == nil || !knownEndpoint(endpoint) {
		s.fail(x, http.StatusNotFound, "no such endpoint", nil)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.fail(x, http.StatusMethodNotAllowed, "the Authorization API's endpoints take POST", nil)
		return
	}
	if !s.authenticate(x) {
		return
	}
	m, ok := s.body(x)
	if !ok {
		return
	}
	switch {
	case endpoint == pathEvaluation:
		s.evaluation(x, p, m)
	case endpoint == pathEvaluations:
		s.evaluations(x, p, m)
	default:
		s.search(x, p, searchKind(strings.TrimPrefix(endpoint, pathSearch)), m)
	}
}

// knownEndpoint reports whether path is one of the binding's endpoints.
func knownEndpoint(path string) bool {
	if path == pathEvaluation || path == pathEvaluations {
		return true
	}
	kind, ok := strings.CutPrefix(path, pathSearch)
	return ok && slices.Contains(searchKinds, searchKind(kind))
}

// pdpOf is the decision point at base app ("" is the root), nil when none.
func (s *Server) pdpOf(app string) pdp {
	if app == "" {
		if s.root == nil {
			return nil // an interface holding no profile is not nil
		}
		return s.root
	}
	return s.apps[app]
}

// authenticate admits an enforcement point: one the identity sources
// authenticate (a bearer token, a client certificate the listener
// verified) and authzen.clients lists. Anyone else learns nothing more than
// 401 or 403, before a byte of the body is read.
func (s *Server) authenticate(x *exchange) bool {
	creds := identity.Credentials{Header: x.r.Header}
	if x.r.TLS != nil {
		creds.PeerCertificates = x.r.TLS.PeerCertificates
	}
	c, err := s.ident.Identify(x.r.Context(), creds)
	switch {
	case err != nil || !c.Authenticated:
		realm := s.publicURL(x.r)
		x.w.Header().Set("WWW-Authenticate", fmt.Sprintf("Bearer realm=%q", realm))
		s.fail(x, http.StatusUnauthorized, "authentication required", err)
		return false
	case !s.clients[c.AgentID]:
		s.fail(x, http.StatusForbidden, "this client may not ask this decision point", fmt.Errorf("%q is not in authzen.clients", c.AgentID))
		return false
	}
	x.client = c.AgentID
	return true
}

// body reads the request body as a JSON object under the sidecar's limits:
// application/json, at most limits.max_body_bytes, nested at most
// limits.max_json_depth, UTF-8, no key twice in one object (§11.7).
func (s *Server) body(x *exchange) (map[string]any, bool) {
	mt, _, err := mime.ParseMediaType(x.r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		s.fail(x, http.StatusBadRequest, "Content-Type must be application/json", err)
		return nil, false
	}
	in, err := wire.FromHTTP(x.r, s.limits.MaxBodyBytes)
	if err != nil {
		s.fail(x, http.StatusBadRequest, "the request body could not be read: "+err.Error(), err)
		return nil, false
	}
	if len(in.Body) == 0 {
		s.fail(x, http.StatusBadRequest, "the request body is empty", nil)
		return nil, false
	}
	if err := wire.CheckJSON(in.Body, s.limits.MaxJSONDepth); err != nil {
		s.fail(x, http.StatusBadRequest, err.Error(), err)
		return nil, false
	}
	m, err := decode(in.Body)
	if err != nil {
		s.fail(x, http.StatusBadRequest, err.Error(), err)
		return nil, false
	}
	return m, true
}

// fail answers an error (§10.1.2): the status and a message string, never
// a decision. Each is logged and counted.
func (s *Server) fail(x *exchange, status int, msg string, err error) {
	switch {
	case status == http.StatusBadRequest:
		s.stats.BadRequests.Add(1)
	case status == http.StatusUnauthorized:
		s.stats.Unauthenticated.Add(1)
	case status == http.StatusForbidden:
		s.stats.Forbidden.Add(1)
	case status >= 500:
		s.stats.Failures.Add(1)
	}
	attrs := []any{"status", status, "message", msg, "path", x.r.URL.Path, "request_id", x.r.Header.Get(requestIDHeader),
		"client", x.client, "remote", x.r.RemoteAddr}
	if err != nil {
		attrs = append(attrs, "error", err.Error())
	}
	if status >= 500 {
		s.log.Error("authzen: the request failed", attrs...)
	} else {
		s.log.Info("authzen: request refused", attrs...)
	}
	h := x.w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	x.w.WriteHeader(status)
	_, _ = x.w.Write([]byte(msg + "\n")) //nolint:gosec // G705: text/plain with nosniff, and msg is writ's own neutral reason
	s.served(x, status)
}

// reply answers 200 with v as JSON.
func (s *Server) reply(x *exchange, v any) {
	raw, err := json.Marshal(v)
	if err != nil {
		s.fail(x, http.StatusInternalServerError, "the answer could not be rendered", err)
		return
	}
	h := x.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	x.w.WriteHeader(http.StatusOK)
	_, _ = x.w.Write(raw)
	s.served(x, http.StatusOK)
}

// served reports the request to the events (metrics count it by status).
func (s *Server) served(x *exchange, status int) {
	s.core.Served(events.Request{Mode: events.ModeAuthZEN, Status: status, Duration: time.Since(x.start)})
}

// publicURL is the decision point's identifier: authzen.public_url, else
// the listener's own URL (or, for a handler served by someone else's
// listener, the request's host).
func (s *Server) publicURL(r *http.Request) string {
	if s.cfg.PublicURL != "" {
		return s.cfg.PublicURL
	}
	scheme := "http"
	if s.tls != nil || r.TLS != nil {
		scheme = "https"
	}
	if addr := s.Addr(); addr != "" {
		return scheme + "://" + addr
	}
	return scheme + "://" + r.Host
}
