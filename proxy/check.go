package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"time"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// Verdict is the sidecar's decision for a request that something else forwards
// (Envoy's ext_authz): either let it through with headers for the upstream, or
// answer it here with Answer — a protocol-shaped refusal, or a card or directory
// that writ serves itself.
type Verdict struct {
	Allow bool
	// Answer is what the caller gets when Allow is false.
	Answer     wire.Rendered
	DecisionID string
	Denials    []task.Denial
	Operation  task.Operation
	Protocol   task.Protocol
	// Upstream are headers to set on the forwarded request (Writ-Caller,
	// Writ-Decision-Id); RemoveUpstream are headers to strip from it.
	Upstream       map[string]string
	RemoveUpstream []string
	route          string
}

// Check runs the same pipeline as ServeHTTP up to the decision and says what to
// do with the request, without forwarding it. Lifecycle observation needs the
// answers, which a decision-only caller does not see: tasks are recorded only by
// the sidecar path.
func (s *Server) Check(ctx context.Context, inc Incoming) Verdict {
	start := time.Now()
	v := s.check(ctx, inc, start)
	status := v.Answer.Status
	if v.Allow {
		status = http.StatusOK
	}
	s.hooks.Served(RequestEvent{Mode: ModeExtAuthz, Route: v.route, Operation: v.Operation, Status: status, Duration: time.Since(start)})
	return v
}

func (s *Server) check(ctx context.Context, inc Incoming, start time.Time) Verdict {
	s.stats.Requests.Add(1)
	if shape, ok := directoryRequest(inc.Method, inc.Path); ok {
		return s.answered(ctx, inc, func(w http.ResponseWriter, r *http.Request) { s.serveDirectory(w, r, shape) })
	}
	x, f, hidden := s.decide(ctx, inc, ModeExtAuthz, start)
	v := Verdict{RemoveUpstream: []string{CallerHeader}}
	if x != nil {
		v.route = x.rt.agent.Name
	}
	switch {
	case x == nil:
		v.Answer = wire.Rendered{Status: http.StatusNotFound, ContentType: "text/plain; charset=utf-8", Body: []byte("404 page not found\n")}
		return v
	case hidden:
		v.DecisionID, v.Operation, v.Protocol = x.dec.ID, x.req.Operation, x.req.Protocol
		v.Answer = wire.Rendered{Status: http.StatusNotFound, ContentType: "text/plain; charset=utf-8", Body: []byte("404 page not found\n")}
		return v
	}
	v.DecisionID, v.Operation, v.Protocol, v.Denials = x.dec.ID, x.req.Operation, x.req.Protocol, x.dec.Denials
	switch {
	case f != nil:
		v.Answer = x.edge.RenderFault(&x.req, f)
		return v
	case x.req.Operation == task.OpDiscover:
		return s.answered(ctx, inc, func(w http.ResponseWriter, r *http.Request) { s.serveDirectory(w, r, directoryACP) })
	case x.req.Operation == task.OpCard && len(x.edge.CardPaths()) > 0:
		out := s.answered(ctx, inc, func(w http.ResponseWriter, r *http.Request) { s.serveCard(w, r, x) })
		out.DecisionID, out.Operation, out.Protocol = v.DecisionID, v.Operation, v.Protocol
		return out
	case isPushOp(x.req.Operation) && s.pushOn():
		out := s.answered(ctx, inc, func(w http.ResponseWriter, _ *http.Request) { s.servePush(w, x) })
		out.DecisionID, out.Operation, out.Protocol = v.DecisionID, v.Operation, v.Protocol
		return out
	}
	v.Allow = true
	v.Upstream = map[string]string{CallerHeader: callerHeader(x.caller), DecisionHeader: x.dec.ID}
	return v
}

// answered captures what a serving handler writes as the Verdict's answer.
func (s *Server) answered(ctx context.Context, inc Incoming, serve func(http.ResponseWriter, *http.Request)) Verdict {
	r := (&http.Request{Method: inc.Method, URL: &url.URL{Path: inc.Path, RawQuery: inc.Query.Encode()},
		Header: inc.Header, Host: inc.Host, RemoteAddr: inc.RemoteAddr}).WithContext(ctx)
	rec := httptest.NewRecorder()
	serve(rec, r)
	return Verdict{Answer: wire.Rendered{Status: rec.Code, ContentType: rec.Header().Get("Content-Type"), Body: rec.Body.Bytes()},
		RemoveUpstream: []string{CallerHeader}}
}
