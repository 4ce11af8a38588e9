package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/writ-authz/writ/task"
)

// maxResponseBytes bounds a non-streaming upstream answer that writ reads to
// observe it. Larger answers are refused as invalid rather than buffered.
const maxResponseBytes = 32 << 20

// hopHeaders are connection-level headers that a proxy must not forward
// (RFC 9110 section 7.6.1), plus writ's own.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func stripHop(h http.Header) {
	for _, f := range h.Values("Connection") {
		for name := range strings.SplitSeq(f, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// streams reports whether the operation answers with a stream.
func streams(op task.Operation) bool { return op == task.OpStream || op == task.OpSubscribe }

// forward sends an allowed request upstream and relays the answer, observing it.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, x *exchange) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if !streams(x.req.Operation) {
		ctx, cancel = context.WithTimeout(ctx, s.cfg.Limits.UpstreamTimeout)
		defer cancel()
	}
	target := *x.rt.upstream
	target.Path = joinPath(x.rt.upstream.Path, x.in.Path)
	target.RawPath = ""
	target.RawQuery = r.URL.RawQuery
	payload := x.in.Body
	if s.pushOn() && x.req.Push != nil {
		// The agent never learns the caller's callback: writ delivers itself.
		stripped, err := x.edge.StripPush(&x.req, payload)
		if err != nil {
			s.fail(w, x, task.NewFault(task.KindInvalidParams, err.Error()))
			return
		}
		payload = stripped
	}
	out, err := http.NewRequestWithContext(ctx, r.Method, target.String(), bytes.NewReader(payload))
	if err != nil {
		s.fail(w, x, task.NewFault(task.KindInternal, "building the upstream request failed"))
		return
	}
	out.Header = r.Header.Clone()
	stripHop(out.Header)
	out.Header.Del(CallerHeader)
	out.Header.Set(CallerHeader, callerHeader(x.caller))
	out.Header.Set(DecisionHeader, x.dec.ID)
	setForwarded(out.Header, r)
	out.ContentLength = int64(len(payload))
	if len(payload) == 0 {
		out.Body = http.NoBody
	}
	sent := time.Now()
	resp, err := s.client.Do(out)
	x.upstream = time.Since(sent)
	if err != nil {
		if r.Context().Err() != nil {
			return // the caller went away; the upstream request is cancelled with it
		}
		s.stats.UpstreamErrors.Add(1)
		kind, what := task.KindUpstreamUnavailable, "the agent could not be reached"
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			kind, what = task.KindUpstreamTimeout, "the agent did not answer in time"
		}
		s.log.Warn("upstream request failed", "agent", x.rt.agent.Name, "error", err)
		s.fail(w, x, task.NewFault(kind, what))
		return
	}
	defer resp.Body.Close()
	s.stats.Forwarded.Add(1)
	if isEventStream(resp.Header.Get("Content-Type")) {
		s.relayStream(w, x, resp, cancel)
		return
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		if r.Context().Err() != nil {
			return
		}
		s.stats.UpstreamErrors.Add(1)
		kind := task.KindUpstreamUnavailable
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			kind = task.KindUpstreamTimeout
		}
		s.fail(w, x, task.NewFault(kind, "reading the agent's answer failed"))
		return
	}
	if len(body) > maxResponseBytes {
		s.stats.InvalidUpstream.Add(1)
		s.fail(w, x, task.NewFault(task.KindUpstreamInvalid, fmt.Sprintf("the agent's answer exceeds %d bytes", maxResponseBytes)))
		return
	}
	events, perr := x.edge.ParseResponse(&x.req, resp.StatusCode, body)
	if perr != nil {
		// Passed on as is (the caller sees what the agent said), but nothing of it is
		// believed: the lifecycle store stays unchanged.
		s.stats.InvalidUpstream.Add(1)
		s.log.Warn("the agent's answer is not valid for its protocol; passed on unobserved",
			"agent", x.rt.agent.Name, "operation", x.req.Operation, "error", perr)
	}
	s.observe(r.Context(), x, events)
	s.maybeFollow(x, events)
	if x.req.Operation == task.OpList && perr == nil {
		body = s.ownTasksOnly(r.Context(), x, body)
	}
	writeAnswerHead(w, x, resp)
	_, _ = w.Write(body)
}

// writeAnswerHead passes the upstream answer's status and end-to-end headers on,
// with writ's decision id. The body may have been rewritten, so its length is
// left to net/http.
func writeAnswerHead(w http.ResponseWriter, x *exchange, resp *http.Response) {
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	stripHop(h)
	h.Del("Content-Length")
	h.Set(DecisionHeader, x.dec.ID)
	w.WriteHeader(resp.StatusCode)
}

func joinPath(base, rest string) string {
	if base == "" || base == "/" {
		return rest
	}
	return strings.TrimSuffix(base, "/") + rest
}

// setForwarded appends the client to X-Forwarded-For and records the original host
// and scheme.
func setForwarded(h http.Header, r *http.Request) {
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if prior := h.Values("X-Forwarded-For"); len(prior) > 0 {
			ip = strings.Join(prior, ", ") + ", " + ip
		}
		h.Set("X-Forwarded-For", ip)
	}
	h.Set("X-Forwarded-Host", r.Host)
	proto := "http"
	if r.TLS != nil {
		proto = "https"
	}
	h.Set("X-Forwarded-Proto", proto)
}

func isEventStream(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}

func isTimeout(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var ue *url.Error
	return errors.As(err, &ue) && ue.Timeout()
}
