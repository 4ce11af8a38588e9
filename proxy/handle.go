package proxy

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/task"
)

// DirectoryPath serves the filtered directory of routed agents as A2A cards;
// ACPDirectoryPath serves it as ACP manifests (the ACP listing), whatever the
// routes' protocols.
const (
	DirectoryPath    = "/.well-known/writ/directory"
	ACPDirectoryPath = "/agents"
)

// directoryRequest reports whether a request asks for writ's directory, and in
// which shape.
func directoryRequest(method, path string) (directoryShape, bool) {
	if method != http.MethodGet && method != http.MethodHead {
		return 0, false
	}
	switch path {
	case DirectoryPath:
		return directoryA2A, true
	case ACPDirectoryPath:
		return directoryACP, true
	}
	return 0, false
}

// exchange is one request on its way through the sidecar.
type exchange struct {
	rt     *route
	edge   adapters.Edge
	in     wire.Inbound
	req    task.Request
	caller identity.Caller
	record *task.Record
	input  *authz.Input
	dec    authz.Decision
	// pushAttached: the send's push config is stored on its task.
	pushAttached bool
	// upstream is how long the agent took to answer.
	upstream time.Duration
}

// Incoming is one request as the decision path sees it, whether it reached the
// sidecar or came in an Envoy CheckRequest.
type Incoming struct {
	Method, Path, Host, RemoteAddr string
	Query                          url.Values
	Header                         http.Header
	Body                           []byte
	// BodyErr is set when the body could not be read whole (wire.ErrBodyTooLarge,
	// or a partial body).
	BodyErr error
	// Chunked: the body came with Transfer-Encoding instead of Content-Length.
	Chunked          bool
	PeerCertificates []*x509.Certificate
	// Caller, when set, is the caller as something in front of writ already
	// verified it (Envoy's jwt_authn, in ext_authz mode): the request's own
	// credentials are then not read. The sidecar never sets it.
	Caller *identity.Caller
}

// errHidden marks a denied card request: the agent does not exist for this caller.
var errHidden = errors.New("hidden")

// ServeHTTP runs the pipeline: limits → parse → identity → lifecycle record →
// decision → lifecycle law → serve (card, directory) or forward.
func (s *Server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	s.stats.Requests.Add(1)
	start := time.Now()
	w := &statusWriter{ResponseWriter: rw}
	var x *exchange
	defer func() {
		ev := RequestEvent{Mode: ModeSidecar, Status: w.status, Duration: time.Since(start)}
		if x != nil {
			ev.Route, ev.Operation, ev.Upstream = x.rt.agent.Name, x.req.Operation, x.upstream
		}
		s.hooks.Served(ev)
	}()
	if shape, ok := directoryRequest(r.Method, r.URL.Path); ok {
		r.Header.Del(CallerHeader)
		s.serveDirectory(w, r, shape)
		return
	}
	inc := Incoming{Method: r.Method, Path: r.URL.Path, Host: r.Host, RemoteAddr: r.RemoteAddr, Query: r.URL.Query(),
		Header: r.Header, Chunked: len(r.TransferEncoding) > 0, PeerCertificates: peerCerts(r)}
	if !inc.Chunked || s.cfg.Limits.AllowChunkedRequests {
		in, err := wire.FromHTTP(r, s.lim.MaxBodyBytes)
		inc.Body, inc.BodyErr = in.Body, err
	}
	var f *task.Fault
	var hidden bool
	x, f, hidden = s.decide(r.Context(), inc, ModeSidecar, start)
	switch {
	case x == nil:
		http.NotFound(w, r)
	case hidden:
		http.NotFound(w, r)
	case f != nil:
		if inc.Chunked && !s.cfg.Limits.AllowChunkedRequests {
			// Whatever follows on this connection is not read as another request.
			w.Header().Set("Connection", "close")
		}
		s.fail(w, x, f)
	case x.req.Operation == task.OpDiscover:
		s.serveDirectory(w, r, directoryACP)
	case x.req.Operation == task.OpCard && len(x.edge.CardPaths()) > 0:
		s.serveCard(w, r, x)
	case isPushOp(x.req.Operation) && s.pushOn():
		s.servePush(w, x)
	default:
		s.forward(w, r, x)
	}
}

func isPushOp(op task.Operation) bool {
	switch op {
	case task.OpPushSet, task.OpPushGet, task.OpPushList, task.OpPushDelete:
		return true
	}
	return false
}

// decide runs the pipeline up to the answer: parse, identity, lifecycle record,
// decision, lifecycle law. It returns the exchange (nil when no route matches),
// the fault that refuses the request (nil: allowed), and whether a refused card
// request must look like a missing agent.
func (s *Server) decide(ctx context.Context, inc Incoming, mode string, start time.Time) (*exchange, *task.Fault, bool) {
	// writ's own header is never believed from a caller.
	inc.Header.Del(CallerHeader)
	rt, rest := s.match(inc.Path)
	if rt == nil {
		return nil, nil, false
	}
	x := &exchange{rt: rt, edge: rt.edge(rest),
		in: wire.Inbound{Method: inc.Method, Path: rest, Query: inc.Query, Header: inc.Header, Body: inc.Body}}
	if inc.Chunked && !s.cfg.Limits.AllowChunkedRequests {
		// Go drops a Content-Length sent beside Transfer-Encoding, so this also
		// refuses the classic smuggling pair.
		x.in.Body = nil
		x.req, _ = x.edge.Parse(x.in, s.lim)
		return x, task.NewFault(task.KindNotARequest, "Transfer-Encoding is not accepted on requests; send Content-Length"), false
	}
	if inc.BodyErr != nil {
		x.in.Body = nil
		x.req, _ = x.edge.Parse(x.in, s.lim)
		if errors.Is(inc.BodyErr, wire.ErrBodyTooLarge) {
			return x, task.NewFault(task.KindTooLarge, fmt.Sprintf("request body exceeds %d bytes", s.lim.MaxBodyBytes)), false
		}
		return x, task.NewFault(task.KindMalformed, "the request body could not be read whole: "+inc.BodyErr.Error()), false
	}
	req, fault := x.edge.Parse(x.in, s.lim)
	x.req = req
	if fault != nil {
		return x, fault, false
	}
	if req.Operation == task.OpDiscover {
		return x, nil, false // the directory decides per agent
	}
	var caller identity.Caller
	if inc.Caller != nil {
		caller = *inc.Caller
	} else {
		var idErr error
		caller, idErr = s.ident.Identify(ctx, identity.Credentials{Header: inc.Header, PeerCertificates: inc.PeerCertificates})
		if idErr != nil {
			s.log.Info("credentials refused; the caller is anonymous", "error", idErr, "path", inc.Path)
		}
	}
	x.caller = caller
	if f := s.lookupTask(ctx, x); f != nil {
		return x, f, false
	}
	var rec *task.Task
	if x.record != nil {
		rec = &x.record.Task
	}
	x.input = authz.BuildInput(&authz.Facts{Request: &x.req, Caller: caller, Target: rt.target, Record: rec,
		HTTP:                  authz.HTTPInfo{Method: inc.Method, Path: inc.Path, Host: inc.Host, RemoteAddr: inc.RemoteAddr},
		DefaultClassification: s.cfg.DefaultClassification})
	d, err := s.engine.Decide(ctx, x.input)
	ev := DecisionEvent{Time: time.Now(), ID: d.ID, Mode: mode, Route: rt.agent.Name, Operation: req.Operation,
		Protocol: req.Protocol, Caller: caller, TaskID: req.TaskID, ContextID: x.input.Task.ContextID,
		Allow: d.Allow, DryRun: d.DryRun, Denials: d.Denials, Revision: d.Revision, CacheHit: d.CacheHit,
		Eval: d.Duration, Latency: time.Since(start)}
	if err != nil {
		s.log.Error("policy error; the request is denied (fail closed)", "error", err, "decision_id", d.ID)
		ev.Error = err.Error()
	}
	s.hooks.Decided(ev)
	x.dec = d
	if !d.Allow {
		s.stats.Denied.Add(1)
		if req.Operation == task.OpCard {
			// A card is only for callers who may see the agent; to everyone else
			// the agent does not exist (and what does not exist had no decision).
			x.dec.ID = ""
			return x, task.NewFault(task.KindTaskNotFound, "not found"), true
		}
		f := denialFault(x)
		if f.Kind == task.KindTaskNotFound {
			// Answered like a missing task, which is refused before any decision:
			// a decision id would tell the two apart. The decision log keeps it.
			x.dec.ID = ""
		}
		return x, f, false
	}
	return x, lifecycleLaw(x), false
}

// fail answers with a fault in the request's protocol shape.
func (s *Server) fail(w http.ResponseWriter, x *exchange, f *task.Fault) {
	out := x.edge.RenderFault(&x.req, f)
	if x.dec.ID != "" {
		w.Header().Set(DecisionHeader, x.dec.ID)
	}
	w.Header().Set("Content-Type", out.ContentType)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(out.Status)
	_, _ = w.Write(out.Body)
}

// notFound is the answer for a task the caller may not see, identical to the
// answer for a task that does not exist: task ids are not an oracle.
func notFound(id string) *task.Fault {
	return task.NewFault(task.KindTaskNotFound, fmt.Sprintf("task %s not found", id))
}

// denialFault maps a denial to what the caller sees: a task owned by someone else
// is not found; an unauthenticated caller gets 401; anything else 403 with every
// denial listed.
func denialFault(x *exchange) *task.Fault {
	for _, d := range x.dec.Denials {
		if d.Code == "NOT_TASK_OWNER" {
			return notFound(x.req.TaskID)
		}
	}
	kind := task.KindDenied
	if !x.caller.Authenticated {
		kind = task.KindUnauthenticated
	}
	return &task.Fault{Kind: kind, Message: fmt.Sprintf("%s to %s denied by policy (decision %s)",
		x.req.Operation, x.rt.agent.Name, x.dec.ID), Denials: x.dec.Denials}
}

func peerCerts(r *http.Request) []*x509.Certificate {
	if r.TLS == nil {
		return nil
	}
	return r.TLS.PeerCertificates
}
