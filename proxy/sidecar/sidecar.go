// Package sidecar is writ's reverse-proxy front door: an http.Handler in
// front of the protected agents that admits every request through the
// admission core (proxy.Core.Admit) and maps its Outcome — writ's own answer
// written as rendered, a Forward executed by the plan (proxy.Plan.Forward),
// which sends the request and feeds the agent's answers back through the
// core. It is a peer of the Envoy doors (proxy/extauthz, proxy/extproc) and
// uses only the core's exported API.
package sidecar

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/httpserve"
)

// Sidecar is the reverse-proxy front door. Safe for concurrent use.
type Sidecar struct {
	core   *proxy.Core
	client *http.Client
	limits config.Limits
	log    *slog.Logger
}

var _ http.Handler = (*Sidecar)(nil)

// New builds the sidecar over the admission core with the configured limits
// (the request body and header bounds, the server's timeouts); transport
// carries the forwarded requests (nil: proxy.NewTransport with
// limits.upstream_timeout), log takes the HTTP server's complaints (nil:
// slog.Default).
func New(core *proxy.Core, limits config.Limits, log *slog.Logger, transport http.RoundTripper) *Sidecar {
	if transport == nil {
		transport = proxy.NewTransport(limits.UpstreamTimeout)
	}
	if log == nil {
		log = slog.Default()
	}
	return &Sidecar{core: core, client: proxy.NewClient(transport), limits: limits, log: log}
}

// HTTPServer wraps the sidecar in an http.Server with the configured limits:
// header read timeout (slow-loris), header size, no write timeout (streams).
func (s *Sidecar) HTTPServer(addr string) *http.Server {
	l := s.limits
	return &http.Server{
		Addr:              addr,
		Handler:           s,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// ServeHTTP admits the request and executes the outcome.
func (s *Sidecar) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	start := time.Now()
	w := &httpserve.StatusWriter{ResponseWriter: rw}
	inc := proxy.Incoming{Mode: events.ModeSidecar, Method: r.Method, Path: r.URL.Path, RawPath: httpserve.RawPath(r), Host: r.Host, RemoteAddr: r.RemoteAddr,
		Query: r.URL.Query(), RawQuery: r.URL.RawQuery, Header: r.Header, Chunked: len(r.TransferEncoding) > 0,
		TLS: r.TLS != nil}
	if r.TLS != nil {
		inc.PeerCertificates = r.TLS.PeerCertificates
	}
	if !inc.Chunked || s.limits.AllowChunkedRequests {
		in, err := wire.FromHTTP(r, s.limits.MaxBodyBytes)
		inc.Body, inc.BodyErr = in.Body, err
	}
	out := s.core.Admit(r.Context(), inc)
	ev := events.Request{Mode: events.ModeSidecar, Route: out.Route, Operation: out.Operation}
	if out.Kind == proxy.Forward {
		out.Plan.Forward(r.Context(), s.client, inc, w, &ev)
	} else {
		if out.CloseConnection {
			// Whatever follows on this connection is not read as another request.
			w.Header().Set("Connection", "close")
		}
		proxy.WriteAnswer(w, out.Answer, out.DecisionID)
	}
	ev.Status, ev.Duration = w.Status, time.Since(start)
	s.core.Served(ev)
}
