package proxy

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/task"
)

// DirectoryPath serves the filtered directory of routed agents.
const DirectoryPath = "/.well-known/writ/directory"

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
}

// ServeHTTP runs the pipeline: limits → parse → identity → lifecycle record →
// decision → lifecycle law → serve (card, directory) or forward.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.stats.Requests.Add(1)
	// writ's own header is never believed from a caller.
	r.Header.Del(CallerHeader)
	if r.URL.Path == DirectoryPath && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		s.serveDirectory(w, r, directoryA2A)
		return
	}
	rt, rest := s.match(r.URL.Path)
	if rt == nil {
		http.NotFound(w, r)
		return
	}
	x := &exchange{rt: rt, edge: rt.edge(rest)}
	if len(r.TransferEncoding) > 0 && !s.cfg.Limits.AllowChunkedRequests {
		// Go drops a Content-Length sent beside Transfer-Encoding, so this also
		// refuses the classic smuggling pair. The connection is closed after the
		// answer: whatever follows on it is not read as another request.
		w.Header().Set("Connection", "close")
		x.req, _ = x.edge.Parse(wire.Inbound{Method: r.Method, Path: rest, Query: r.URL.Query(), Header: r.Header}, s.lim)
		s.fail(w, x, task.NewFault(task.KindNotARequest, "Transfer-Encoding is not accepted on requests; send Content-Length"))
		return
	}
	in, err := wire.FromHTTP(r, s.lim.MaxBodyBytes)
	in.Path = rest
	x.in = in
	if err != nil {
		x.in.Body = nil
		x.req, _ = x.edge.Parse(x.in, s.lim)
		if errors.Is(err, wire.ErrBodyTooLarge) {
			s.fail(w, x, task.NewFault(task.KindTooLarge, fmt.Sprintf("request body exceeds %d bytes", s.lim.MaxBodyBytes)))
		} else {
			s.fail(w, x, task.NewFault(task.KindMalformed, "the request body could not be read"))
		}
		return
	}
	req, fault := x.edge.Parse(x.in, s.lim)
	x.req = req
	if fault != nil {
		s.fail(w, x, fault)
		return
	}
	if req.Operation == task.OpDiscover {
		s.serveDirectory(w, r, directoryACP)
		return
	}
	caller, idErr := s.ident.Identify(r.Context(), identity.Credentials{Header: r.Header, PeerCertificates: peerCerts(r)})
	if idErr != nil {
		s.log.Info("credentials refused; the caller is anonymous", "error", idErr, "path", r.URL.Path)
	}
	x.caller = caller
	if f := s.lookupTask(r.Context(), x); f != nil {
		s.fail(w, x, f)
		return
	}
	var rec *task.Task
	if x.record != nil {
		rec = &x.record.Task
	}
	x.input = authz.BuildInput(&authz.Facts{Request: &x.req, Caller: caller, Target: rt.target, Record: rec,
		HTTP:                  authz.HTTPInfo{Method: r.Method, Path: r.URL.Path, Host: r.Host, RemoteAddr: r.RemoteAddr},
		DefaultClassification: s.cfg.DefaultClassification})
	d, err := s.engine.Decide(r.Context(), x.input)
	if err != nil {
		s.log.Error("policy error; the request is denied (fail closed)", "error", err, "decision_id", d.ID)
	}
	x.dec = d
	if !d.Allow {
		s.stats.Denied.Add(1)
		if req.Operation == task.OpCard {
			// A card is only for callers who may see the agent; to everyone else
			// the agent does not exist.
			w.Header().Set(DecisionHeader, d.ID)
			http.NotFound(w, r)
			return
		}
		s.fail(w, x, denialFault(x))
		return
	}
	if f := lifecycleLaw(x); f != nil {
		s.fail(w, x, f)
		return
	}
	if req.Operation == task.OpCard && req.Protocol.Name == "a2a" {
		s.serveCard(w, r, x)
		return
	}
	s.forward(w, r, x)
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


