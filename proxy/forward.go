package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
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

// Forward executes the plan for a door that sends the request itself (the
// sidecar; an egress listener): it sends the request with client — the
// caller's end-to-end headers (inc.Header: writ's own spellings are already
// gone) without p.Drop, with p.Header and the X-Forwarded headers set — and
// passes the agent's answer to w through the plan: whole, observed and
// filtered or rewritten by Answer; or an SSE stream relayed by Stream event by
// event, each flushed, until it ends, breaks off, or is silent for longer than
// limits.stream_idle_timeout. A non-streaming request gets its answer's
// headers within limits.upstream_timeout. The agent unreachable, too slow or
// broken is answered with the protocol-shaped failure. A caller that goes
// away (ctx) cancels the upstream request and gets nothing more. ev receives
// the upstream latency, the upstream failure and the invalid answers.
func (p *Plan) Forward(ctx context.Context, client *http.Client, inc Incoming, w http.ResponseWriter, ev *events.Request) {
	if p.delegation != nil && !p.delegated {
		// An egress plan goes out with the exchanged token or not at all.
		p.core.log.Error("egress: a call was forwarded without its outbound token; refused", "decision_id", p.DecisionID())
		WriteAnswer(w, p.Undelegated(task.NewFault(task.KindInternal, "the call has no outbound token"), "not_delegated"), "")
		return
	}
	ctx, span := p.startForward(ctx)
	status := 0
	defer func() { endForward(span, status, ev.UpstreamFailure) }()
	caller := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l := p.core.cfg.Limits
	if !p.Streams {
		ctx, cancel = context.WithTimeout(ctx, l.UpstreamTimeout)
		defer cancel()
	}
	out, err := http.NewRequestWithContext(ctx, p.Method, p.URL.String(), bytes.NewReader(p.Body))
	if err != nil {
		WriteAnswer(w, p.Fail(task.NewFault(task.KindInternal, "building the upstream request failed")), "")
		return
	}
	out.Header = p.outbound(inc.Header)
	setForwarded(out.Header, inc)
	if span != nil {
		inject(caller, out.Header)
	}
	out.ContentLength = int64(len(p.Body))
	if len(p.Body) == 0 {
		out.Body = http.NoBody
	}
	sent := time.Now()
	resp, err := client.Do(out)
	ev.Upstream = time.Since(sent)
	defer func() { ev.InvalidAnswers = p.InvalidAnswers() }()
	if err != nil {
		if caller.Err() != nil {
			return // the caller went away; the upstream request is cancelled with it
		}
		failed, failure := p.FailUpstream(errors.Is(err, context.DeadlineExceeded) || isTimeout(err))
		ev.UpstreamFailure = failure
		p.core.log.Warn("upstream request failed", "agent", ev.Route, "error", err)
		WriteAnswer(w, failed, "")
		return
	}
	defer resp.Body.Close()
	status = resp.StatusCode
	stream, refused := p.Reads(resp.Header)
	if refused != nil {
		WriteAnswer(w, *refused, "")
		return
	}
	if stream {
		p.relayTo(ctx, caller, w, resp, cancel, ev)
		return
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	if err != nil {
		if caller.Err() != nil {
			return
		}
		kind := task.KindUpstreamUnavailable
		ev.UpstreamFailure = events.UpstreamBroken
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			kind, ev.UpstreamFailure = task.KindUpstreamTimeout, events.UpstreamTimeout
		}
		WriteAnswer(w, p.Fail(task.NewFault(kind, "reading the agent's answer failed")), "")
		return
	}
	body, refused = p.Answer(caller, resp.StatusCode, body)
	if refused != nil {
		WriteAnswer(w, *refused, "")
		return
	}
	p.writeHead(w, resp)
	_, _ = w.Write(body)
}

// relayTo passes an upstream SSE answer on to w event by event, flushing
// each. A stream silent for longer than the idle timeout is closed; a caller
// that goes away cancels the upstream request (ctx derives from the
// caller's). Neither gets an error event.
func (p *Plan) relayTo(ctx, caller context.Context, w http.ResponseWriter, resp *http.Response, cancel context.CancelFunc, ev *events.Request) {
	flusher, _ := w.(http.Flusher)
	p.writeHead(w, resp)
	if flusher != nil {
		flusher.Flush()
	}
	idle := p.core.cfg.Limits.StreamIdleTimeout
	var timedOut atomic.Bool
	timer := time.AfterFunc(idle, func() { timedOut.Store(true); cancel() })
	defer timer.Stop()
	failure := p.Stream(ctx, resp.Body, func(out []byte) error {
		timer.Reset(idle)
		if len(out) == 0 {
			return nil
		}
		if _, err := w.Write(out); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	})
	switch {
	case timedOut.Load():
		p.core.log.Info("stream closed after the idle timeout", "agent", ev.Route, "idle", idle)
	case caller.Err() == nil && failure != "":
		ev.UpstreamFailure = failure
	}
}

// Outbound is the headers the forwarded request carries, for a door that
// sends it itself by other means than Forward (the gRPC door's metadata):
// the caller's end-to-end headers (writ's own spellings already gone),
// without a hop-by-hop header or one Connection names, without Drop, with
// Header set.
func (p *Plan) Outbound(caller http.Header) http.Header { return p.outbound(caller) }

// outbound is the forwarded request's headers: the caller's end-to-end
// headers (RFC 9110 section 7.6.1: nothing Connection names, no hop-by-hop
// header), without Drop, with writ's own set.
func (p *Plan) outbound(caller http.Header) http.Header {
	h := caller.Clone()
	stripHop(h)
	for _, k := range p.Drop {
		h.Del(k)
	}
	for k, v := range p.Header {
		h[k] = v
	}
	return h
}

// writeHead passes the upstream answer's status and end-to-end headers on,
// with writ's decision id. The body may have been rewritten, so its length
// is left to net/http.
func (p *Plan) writeHead(w http.ResponseWriter, resp *http.Response) {
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	stripHop(h)
	p.AgentHeaders(h)
	h.Del("Content-Length")
	h.Set(writheader.Decision, p.DecisionID())
	w.WriteHeader(resp.StatusCode)
}

// WriteAnswer writes a whole answer writ made (an Outcome's Answer, a
// Plan's refusal, a door's own) to an HTTP door's caller, with the decision
// id when there is one to tell, marked as writ's (writheader.AnsweredBy).
func WriteAnswer(w http.ResponseWriter, out wire.Rendered, decisionID string) {
	h := w.Header()
	for k, v := range out.Header {
		h[k] = v
	}
	writheader.Mark(h)
	if decisionID != "" {
		h.Set(writheader.Decision, decisionID)
	}
	if out.ContentType != "" {
		h.Set("Content-Type", out.ContentType)
	}
	w.WriteHeader(out.Status)
	_, _ = w.Write(out.Body)
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
