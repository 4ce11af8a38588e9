// Package proxy is writ's sidecar: a reverse proxy in front of A2A and ACP agents
// that parses every request into the internal model, asks the decision core,
// enforces the task lifecycle, forwards what is allowed (streams event by event),
// observes the answers into the lifecycle store, and serves rewritten agent cards
// and a filtered directory.
package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/task"
)

// Deps are the parts a Server is built from. Identity, Engine and Store are
// required; the others have defaults.
type Deps struct {
	Identity *identity.Resolver
	Engine   *authz.Engine
	Store    task.Store
	Logger   *slog.Logger
	// Transport carries upstream requests (default: a tuned http.Transport).
	Transport http.RoundTripper
	// Hooks observe decisions, requests and lifecycle events (metrics, the
	// decision log); nil observes nothing.
	Hooks Hooks
	// Push delivers push notifications. With it, writ keeps push configs itself
	// (stripped from what the agent receives), answers the push-config
	// operations, and advertises push in the cards it serves; nil leaves push
	// to the agents.
	Push Notifier
}

// Server is the sidecar's HTTP handler. It is safe for concurrent use.
type Server struct {
	cfg    *config.Config
	routes []*route // longest route first
	ident  *identity.Resolver
	engine *authz.Engine
	store  task.Store
	client *http.Client
	log    *slog.Logger
	lim    wire.Limits
	// schemes are the security schemes writ itself accepts, for published cards.
	schemes  []task.SecurityScheme
	hooks    Hooks
	notifier Notifier
	// followers bounds the tasks followed after their request returned.
	followers chan struct{}
	// life ends the followers when the server closes.
	life  context.Context
	close context.CancelFunc
	stats Stats
}

// MaxFollowers bounds the tasks followed at once after their request returned.
const MaxFollowers = 256

// Close stops the background work of the server (task followers).
func (s *Server) Close() { s.close() }

// Stats counts what the sidecar did, for tests and the metrics that build on it.
type Stats struct {
	Requests, Denied, Forwarded, Violations, UpstreamErrors, InvalidUpstream atomic.Uint64
}

type route struct {
	agent    *config.Agent
	target   *authz.Target
	prefix   string // route without trailing slash ("" for "/")
	upstream *url.URL
	cards    *cardCache
}

// New builds a sidecar from a validated config.
func New(cfg *config.Config, d Deps) (*Server, error) {
	if d.Identity == nil || d.Engine == nil || d.Store == nil {
		return nil, fmt.Errorf("proxy: identity, engine and store are required")
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Transport == nil {
		d.Transport = &http.Transport{
			Proxy:                 nil, // never send agent traffic through an environment proxy
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:          256,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: cfg.Limits.UpstreamTimeout,
			ForceAttemptHTTP2:     false,
		}
	}
	s := &Server{cfg: cfg, ident: d.Identity, engine: d.Engine, store: d.Store, log: d.Logger,
		client: &http.Client{Transport: d.Transport, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // an upstream redirect goes back to the caller, never followed
		}},
		lim:     wire.Limits{MaxBodyBytes: cfg.Limits.MaxBodyBytes, MaxJSONDepth: cfg.Limits.MaxJSONDepth},
		schemes: acceptedSchemes(cfg), notifier: d.Push, hooks: d.Hooks, followers: make(chan struct{}, MaxFollowers)}
	if s.hooks == nil {
		s.hooks = nopHooks{}
	}
	s.life, s.close = context.WithCancel(context.Background())
	for i := range cfg.Agents {
		a := &cfg.Agents[i]
		u, err := url.Parse(a.Upstream)
		if err != nil {
			return nil, fmt.Errorf("agents[%d].upstream: %w", i, err)
		}
		rt := &route{agent: a, target: a.Target(), prefix: strings.TrimSuffix(a.Route, "/"), upstream: u}
		rt.cards = newCardCache(s, rt)
		s.routes = append(s.routes, rt)
	}
	sort.Slice(s.routes, func(i, j int) bool { return len(s.routes[i].prefix) > len(s.routes[j].prefix) })
	return s, nil
}

// Stats returns the sidecar's counters.
func (s *Server) Stats() *Stats { return &s.stats }

// HTTPServer wraps the handler in an http.Server with the configured limits:
// header read timeout (slow-loris), header size, no write timeout (streams).
func (s *Server) HTTPServer(addr string) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           s,
		ReadHeaderTimeout: s.cfg.Limits.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.Limits.ReadTimeout,
		MaxHeaderBytes:    s.cfg.Limits.MaxHeaderBytes,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// match finds the route for a path and the path below it.
func (s *Server) match(path string) (*route, string) {
	for _, rt := range s.routes {
		if rt.prefix == "" || path == rt.prefix || strings.HasPrefix(path, rt.prefix+"/") {
			rest := strings.TrimPrefix(path, rt.prefix)
			if rest == "" {
				rest = "/"
			}
			return rt, rest
		}
	}
	return nil, ""
}

// edge picks the adapter for a request on a route.
func (rt *route) edge(path string) adapters.Edge {
	e, err := adapters.Select(rt.agent.Protocol, path)
	if err != nil { // config validation rules this out
		e, _ = adapters.Select("auto", path)
	}
	return e
}

// acceptedSchemes are the security schemes a published card advertises: what
// writ verifies, not what the agent behind it does.
func acceptedSchemes(cfg *config.Config) []task.SecurityScheme {
	var out []task.SecurityScheme
	if len(cfg.Identity.JWT) > 0 {
		out = append(out, task.SecurityScheme{Name: "bearer", Kind: task.SchemeHTTP, HTTPScheme: "Bearer",
			BearerFormat: "JWT", Description: "A JWT from " + issuers(cfg)})
	}
	if cfg.Identity.MTLS != nil {
		out = append(out, task.SecurityScheme{Name: "mtls", Kind: task.SchemeMTLS,
			Description: "A client certificate with a SPIFFE ID in " + cfg.Identity.MTLS.TrustDomain})
	}
	if cfg.Identity.StaticTokensFile != "" && len(cfg.Identity.JWT) == 0 {
		out = append(out, task.SecurityScheme{Name: "bearer", Kind: task.SchemeHTTP, HTTPScheme: "Bearer",
			Description: "A development token"})
	}
	return out
}

func issuers(cfg *config.Config) string {
	var names []string
	for _, j := range cfg.Identity.JWT {
		names = append(names, j.Issuer)
	}
	return strings.Join(names, ", ")
}
