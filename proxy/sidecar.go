package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/proxy/writheader"
	"github.com/writ-authz/writ/task"
)

// Sidecar is the reverse-proxy front door: an http.Handler that admits every
// request through the Core and executes the Outcome — writes writ's answer, or
// forwards the request as planned (streams event by event) and feeds the
// agent's answers back through the Plan. Safe for concurrent use.
type Sidecar struct {
	core   *Core
	client *http.Client
}

// NewSidecar builds the sidecar over c; transport carries the forwarded
// requests (nil: NewTransport with the configured upstream timeout).
func NewSidecar(c *Core, transport http.RoundTripper) *Sidecar {
	if transport == nil {
		transport = NewTransport(c.cfg.Limits.UpstreamTimeout)
	}
	return &Sidecar{core: c, client: NewClient(transport)}
}

// Core is the admission core the sidecar serves.
func (s *Sidecar) Core() *Core { return s.core }

// HTTPServer wraps the sidecar in an http.Server with the configured limits:
// header read timeout (slow-loris), header size, no write timeout (streams).
func (s *Sidecar) HTTPServer(addr string) *http.Server {
	l := s.core.cfg.Limits
	return &http.Server{
		Addr:              addr,
		Handler:           s,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.core.log.Handler(), slog.LevelWarn),
	}
}

// ServeHTTP admits the request and executes the outcome.
func (s *Sidecar) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	start := time.Now()
	w := &statusWriter{ResponseWriter: rw}
	inc := Incoming{Mode: events.ModeSidecar, Method: r.Method, Path: r.URL.Path, RawPath: rawPath(r), Host: r.Host, RemoteAddr: r.RemoteAddr,
		Query: r.URL.Query(), RawQuery: r.URL.RawQuery, Header: r.Header, Chunked: len(r.TransferEncoding) > 0,
		TLS: r.TLS != nil}
	if r.TLS != nil {
		inc.PeerCertificates = r.TLS.PeerCertificates
	}
	if !inc.Chunked || s.core.cfg.Limits.AllowChunkedRequests {
		in, err := wire.FromHTTP(r, s.core.lim.MaxBodyBytes)
		inc.Body, inc.BodyErr = in.Body, err
	}
	out := s.core.Admit(r.Context(), inc)
	ev := events.Request{Mode: events.ModeSidecar, Route: out.Route, Operation: out.Operation}
	if out.Kind == Forward {
		s.forward(w, r, inc, out.Plan, &ev)
	} else {
		if out.CloseConnection {
			// Whatever follows on this connection is not read as another request.
			w.Header().Set("Connection", "close")
		}
		writeRendered(w, out.Answer, out.DecisionID)
	}
	ev.Status, ev.Duration = w.status, time.Since(start)
	s.core.events.Served(ev)
}

// rawPath is r's path as it arrived: the origin-form request target (HTTP/2:
// :path) before '?', or for any other form the URL's escaped path.
func rawPath(r *http.Request) string {
	if t := r.RequestURI; strings.HasPrefix(t, "/") {
		p, _, _ := strings.Cut(t, "?")
		return p
	}
	return r.URL.EscapedPath()
}

// writeRendered writes a whole answer writ made.
func writeRendered(w http.ResponseWriter, out wire.Rendered, decisionID string) {
	h := w.Header()
	for k, v := range out.Header {
		h[k] = v
	}
	if decisionID != "" {
		h.Set(writheader.Decision, decisionID)
	}
	if out.ContentType != "" {
		h.Set("Content-Type", out.ContentType)
	}
	w.WriteHeader(out.Status)
	_, _ = w.Write(out.Body)
}

// forward sends a planned request upstream and relays the answer through the
// plan.
func (s *Sidecar) forward(w http.ResponseWriter, r *http.Request, inc Incoming, p *Plan, ev *events.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if !p.Streams {
		ctx, cancel = context.WithTimeout(ctx, s.core.cfg.Limits.UpstreamTimeout)
		defer cancel()
	}
	out, err := http.NewRequestWithContext(ctx, p.Method, p.URL.String(), bytes.NewReader(p.Body))
	if err != nil {
		writeRendered(w, p.Fail(task.NewFault(task.KindInternal, "building the upstream request failed")), "")
		return
	}
	out.Header = inc.Header.Clone()
	stripHop(out.Header)
	for _, k := range p.Drop {
		out.Header.Del(k)
	}
	for k, v := range p.Header {
		out.Header[k] = v
	}
	setForwarded(out.Header, inc)
	out.ContentLength = int64(len(p.Body))
	if len(p.Body) == 0 {
		out.Body = http.NoBody
	}
	sent := time.Now()
	resp, err := s.client.Do(out)
	ev.Upstream = time.Since(sent)
	defer func() { ev.InvalidAnswers = p.InvalidAnswers() }()
	if err != nil {
		if r.Context().Err() != nil {
			return // the caller went away; the upstream request is cancelled with it
		}
		failed, failure := p.FailUpstream(errors.Is(err, context.DeadlineExceeded) || isTimeout(err))
		ev.UpstreamFailure = failure
		s.core.log.Warn("upstream request failed", "agent", ev.Route, "error", err)
		writeRendered(w, failed, "")
		return
	}
	defer resp.Body.Close()
	stream, refused := p.Reads(resp.Header)
	if refused != nil {
		writeRendered(w, *refused, "")
		return
	}
	if stream {
		s.relay(ctx, w, r, p, resp, cancel, ev)
		return
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	if err != nil {
		if r.Context().Err() != nil {
			return
		}
		kind := task.KindUpstreamUnavailable
		ev.UpstreamFailure = events.UpstreamBroken
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			kind, ev.UpstreamFailure = task.KindUpstreamTimeout, events.UpstreamTimeout
		}
		writeRendered(w, p.Fail(task.NewFault(kind, "reading the agent's answer failed")), "")
		return
	}
	body, refused = p.Answer(r.Context(), resp.StatusCode, body)
	if refused != nil {
		writeRendered(w, *refused, "")
		return
	}
	writeAnswerHead(w, p, resp)
	_, _ = w.Write(body)
}

// relay passes an upstream SSE answer on event by event, flushing each. It
// never buffers the whole stream. A stream silent for longer than the idle
// timeout is closed; a caller that goes away cancels the upstream request (ctx
// derives from the caller's). Neither gets an error event.
func (s *Sidecar) relay(ctx context.Context, w http.ResponseWriter, r *http.Request, p *Plan, resp *http.Response, cancel context.CancelFunc, ev *events.Request) {
	flusher, _ := w.(http.Flusher)
	writeAnswerHead(w, p, resp)
	if flusher != nil {
		flusher.Flush()
	}
	idle := s.core.cfg.Limits.StreamIdleTimeout
	var timedOut atomic.Bool
	timer := time.AfterFunc(idle, func() { timedOut.Store(true); cancel() })
	defer timer.Stop()
	relay := p.Relay(ctx, resp.Body)
	for {
		out, err := relay.Next()
		timer.Reset(idle)
		if len(out) > 0 {
			if _, werr := w.Write(out); werr != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF):
		case timedOut.Load():
			s.core.log.Info("stream closed after the idle timeout", "agent", ev.Route, "idle", idle)
		case r.Context().Err() == nil:
			ev.UpstreamFailure = events.UpstreamBroken
			s.core.log.Warn("upstream stream ended with an error", "agent", ev.Route, "error", err)
		}
		return
	}
}

// writeAnswerHead passes the upstream answer's status and end-to-end headers on,
// with writ's decision id. The body may have been rewritten, so its length is
// left to net/http.
func writeAnswerHead(w http.ResponseWriter, p *Plan, resp *http.Response) {
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	stripHop(h)
	h.Del("Content-Length")
	h.Set(writheader.Decision, p.x.dec.ID)
	w.WriteHeader(resp.StatusCode)
}

// setForwarded appends the client to X-Forwarded-For and records the original host
// and scheme.
func setForwarded(h http.Header, inc Incoming) {
	if ip, _, err := net.SplitHostPort(inc.RemoteAddr); err == nil {
		if prior := h.Values("X-Forwarded-For"); len(prior) > 0 {
			ip = strings.Join(prior, ", ") + ", " + ip
		}
		h.Set("X-Forwarded-For", ip)
	}
	h.Set("X-Forwarded-Host", inc.Host)
	proto := "http"
	if inc.TLS {
		proto = "https"
	}
	h.Set("X-Forwarded-Proto", proto)
}

func isTimeout(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var ue *url.Error
	return errors.As(err, &ue) && ue.Timeout()
}

// statusWriter records the status an answer was sent with, keeping Flush.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
