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
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/proxy/writheader"
	"github.com/writ-authz/writ/task"
)

// Incoming is one request as the admission core sees it, whatever door it came
// through: the sidecar's listener, an Envoy CheckRequest, an ext_proc stream.
type Incoming struct {
	// Mode names the front door (events.ModeSidecar, ...), for the events.
	Mode string
	// Path is the request's path, percent-decoded as net/http decodes it.
	Method, Path, Host, RemoteAddr string
	// RawPath is the path as it arrived (the request target before '?',
	// percent-encoding intact), which is checked for canonical form
	// (canonical.go) before anything is routed. Every door sets it; empty,
	// Path stands for it.
	RawPath string
	// Route, when set, names the agent the platform in front already routed
	// the request to (Envoy's route: the writ-agent context extension,
	// gRPC metadata or header its per-route config sets). Admit then decides
	// for exactly that agent, and an agent writ does not protect is refused;
	// writ never re-derives the agent from bytes the router read differently.
	Route string
	// Routed: the door sits behind a router that chooses the agent itself
	// (Envoy's ext_authz and ext_proc filters). While
	// envoy.require_route_name is on, such a request that names no Route is
	// refused rather than routed by writ.
	Routed bool
	// Query is the parsed query; RawQuery the query as sent (forwarded as is).
	Query    url.Values
	RawQuery string
	Header   http.Header
	Body     []byte
	// BodyErr is set when the body could not be read whole (wire.ErrBodyTooLarge,
	// or a partial body).
	BodyErr error
	// Chunked: the body came with Transfer-Encoding instead of Content-Length.
	Chunked bool
	// Verbatim: the platform forwards the caller's own bytes whatever writ
	// decides (Envoy's ext_authz filter cannot replace a body), so a Forward
	// plan's Body is the caller's: no push config is stripped from a copy
	// the agent never receives (it cost an encoding/json round trip of the
	// whole body on every allowed send, a quarter of a check's CPU).
	Verbatim bool
	// TLS: the request came over TLS (for X-Forwarded-Proto).
	TLS              bool
	PeerCertificates []*x509.Certificate
	// Caller, when set, is the caller as something in front of writ already
	// verified it (Envoy's jwt_authn): the request's own credentials are then
	// not read. The sidecar never sets it.
	Caller *identity.Caller
	// CallerErr is why the door made Caller anonymous (the claims Envoy
	// verified failed writ's checks): an *identity.Refusal, recorded with
	// the decision as a refused credential is.
	CallerErr error
	// Egress, when set, makes the request a call the local agent makes
	// through writ's egress listener (egress.go): Route names the target,
	// and the caller is the agent acting inside the request Egress.ParentID
	// names. Only the egress door sets it.
	Egress *EgressCall
}

// OutcomeKind is what a front door does with a request.
type OutcomeKind uint8

// The outcomes of Admit: a closed set.
const (
	// NotFound: no route, or an agent hidden from this caller. Answer is the
	// plain not-found page.
	NotFound OutcomeKind = iota + 1
	// Refuse: Answer is the protocol-shaped refusal (Fault says why), or a
	// plain-text one where no agent was chosen (a target not in canonical
	// form, a route that names no agent writ protects).
	Refuse
	// Serve: Answer is writ's own answer (a card, the directory, a push-config
	// operation); the agent is not asked.
	Serve
	// Forward: the request goes to the agent as Plan says.
	Forward
)

func (k OutcomeKind) String() string {
	switch k {
	case NotFound:
		return "not_found"
	case Refuse:
		return "refuse"
	case Serve:
		return "serve"
	case Forward:
		return "forward"
	}
	return "unknown"
}

// Outcome is the result of admitting one request.
type Outcome struct {
	Kind OutcomeKind
	// Answer is what the caller gets for NotFound, Refuse and Serve.
	Answer wire.Rendered
	// Fault is the refusal (Refuse only).
	Fault *task.Fault
	// DecisionID is the decision's id, "" where an answer must look like one
	// that had no decision (a hidden agent, a task the caller may not see).
	DecisionID string
	Denials    []task.Denial
	// DryRun: the policy denied, and dry-run let the request through.
	DryRun    bool
	Operation task.Operation
	Protocol  task.Protocol
	// Route is the protected agent's name ("" when no route matched).
	Route string
	// CloseConnection: the request's framing cannot be trusted, so nothing
	// after it on the connection may be read as another request.
	CloseConnection bool
	// Plan is how to forward the request (Forward only).
	Plan *Plan
}

// EnvoyStatus is the HTTP status an Envoy front door answers with. A refusal
// is never a 2xx there, so that Envoy's access logs, stats and retry
// policies see it as one: a JSON-RPC error, which the sidecar (like the A2A
// SDKs) sends in a 200, gets the status the HTTP+JSON binding gives the same
// fault (400 malformed or invalid, 404 unknown method or task, 413 too large,
// 401, 403, 5xx), with the same body. Writ's own answers (Serve) keep theirs.
func (o Outcome) EnvoyStatus() int {
	st := o.Answer.Status
	if o.Kind == Refuse && st >= 200 && st < 300 && o.Fault != nil {
		return wire.HTTPStatus(o.Fault.Kind)
	}
	return st
}

// exchange is one request on its way through the core.
type exchange struct {
	rt     *route
	edge   adapters.Edge
	inc    Incoming
	in     wire.Inbound // the request below the route
	req    task.Request
	caller identity.Caller
	// idErr is why the request's credential was refused (an
	// *identity.Refusal), nil when none was: the decision event records it.
	idErr  error
	record *task.Record
	input  *authz.Input
	dec    authz.Decision
	// missingID is the referenced task a request is answered "not found"
	// for (missingReference).
	missingID string
	// eg is set on an egress call (egress.go).
	eg *egressFacts
}

// notFoundPage is the answer for a path no route serves and for a hidden agent.
var notFoundPage = wire.Rendered{Status: http.StatusNotFound, ContentType: "text/plain; charset=utf-8",
	Body: []byte("404 page not found\n")}

// Admit runs the admission pipeline on one request and says what to do with
// it. It is the only place a decision is made. Every answer it returns
// (NotFound, Refuse, Serve) is writ's own and marked so
// (writheader.AnsweredBy), whichever door sends it.
func (c *Core) Admit(ctx context.Context, inc Incoming) Outcome {
	if c.tracer == nil {
		out := c.admit(ctx, inc)
		if out.Kind != Forward {
			out.Answer = ownAnswer(out.Answer)
		}
		return out
	}
	ctx, span := c.startAdmit(ctx, inc)
	out := c.admit(ctx, inc)
	if out.Kind != Forward {
		out.Answer = ownAnswer(out.Answer)
	}
	if out.Plan != nil {
		// The forward, and what the answers make, belong to this request's trace.
		out.Plan.parent = span.SpanContext()
	}
	endAdmit(span, out)
	return out
}

// ownAnswer is r marked as writ's own answer, its header copied first: a
// rendered answer's header may be shared (a fixed page, a cached card's).
func ownAnswer(r wire.Rendered) wire.Rendered {
	r.Header = writheader.Mark(r.Header.Clone())
	return r
}

// admit is Admit's pipeline.
func (c *Core) admit(ctx context.Context, inc Incoming) Outcome {
	start := time.Now()
	c.stats.Requests.Add(1)
	if inc.Mode == "" {
		inc.Mode = events.ModeSidecar
	}
	// writ's own headers are never believed from a caller.
	inc.Header = writheader.Strip(inc.Header)
	if out, ok := c.canonical(inc); !ok {
		return out
	}
	if inc.Egress != nil && c.egress == nil {
		c.log.Error("an egress call reached the core with egress mode off; refused", "mode", inc.Mode)
		return plainRefusal(task.KindInternal, "egress mode is off")
	}
	if renderer, ok := adapters.Directory(inc.Method, inc.Path); ok {
		return c.directoryFor(ctx, inc, renderer, start)
	}
	if inc.Path == JWKSPath && (inc.Method == http.MethodGet || inc.Method == http.MethodHead) {
		return c.serveJWKS() // public keys: no caller, no decision
	}
	rt, rest, out, ok := c.routeOf(inc)
	if !ok {
		return out
	}
	x := &exchange{rt: rt, edge: rt.edges.For(rest), inc: inc,
		in: wire.Inbound{Method: inc.Method, Path: rest, Query: inc.Query, Header: inc.Header, Body: inc.Body}}
	if f, closeConn := c.framing(x); f != nil {
		out := c.refuse(x, f)
		out.CloseConnection = closeConn
		return out
	}
	query, qf := strictQuery(inc)
	x.in.Query = query
	req, fault := x.edge.Parse(x.in, c.lim)
	x.req = req
	if qf != nil {
		return c.refuse(x, qf) // in the shape Parse found
	}
	if fault != nil {
		return c.refuse(x, fault)
	}
	if name := connectionNamesDecisionHeader(inc.Header, x.edge.DecisionHeaders()); name != "" {
		return c.refuse(x, task.NewFault(task.KindNotARequest, fmt.Sprintf(
			"the Connection header names %s, which the decision depends on: forwarding would drop it (send it end to end)", name)))
	}
	if req.Operation == task.OpDiscover {
		if renderer, ok := x.edge.(adapters.CardRenderer); ok {
			return c.directoryFor(ctx, inc, renderer, start) // the directory decides per agent
		}
	}
	if f := namedAgent(x); f != nil {
		return c.refuse(x, f)
	}
	var missing string
	if inc.Egress != nil {
		// The remote agent's writ keeps the task's lifecycle: nothing of it
		// is looked up here.
		if f := c.egressCaller(ctx, x); f != nil {
			return c.refuse(x, f)
		}
	} else {
		x.caller, x.idErr = c.identify(ctx, inc)
		var f *task.Fault
		if missing, f = c.lookup(ctx, x); f != nil {
			return c.refuse(x, f)
		}
	}
	// A task or context the caller may not see is decided like any other, so
	// that it costs what a decision costs, and then answered like a missing one.
	ev := c.decide(ctx, x, start)
	out = c.conclude(ctx, x, missing)
	if out.Kind == Refuse || out.Kind == NotFound {
		ev.Refused = "not_found"
		if out.Fault != nil {
			ev.Refused = string(out.Fault.Kind)
		}
	}
	if x.eg != nil && out.Kind == Forward {
		// Recorded once the door has the outbound token (Plan.Delegate), with
		// its chain id and actors, or could not get one (Plan.Undelegated).
		x.eg.event = &ev
		return out
	}
	c.events.Decided(ev)
	c.logMissing(x, missing, out.Fault)
	return out
}

// logMissing logs a request answered like one for a missing task or
// context, with why: the caller learns nothing, the audit trail keeps it.
func (c *Core) logMissing(x *exchange, missing string, f *task.Fault) {
	if missing == "" && (f == nil || f.Kind != task.KindTaskNotFound) {
		return
	}
	if missing == "" {
		missing = "foreign_task"
	}
	c.log.Info("task not found", "agent", x.rt.agent.Name, "task_id", x.req.TaskID, "context_id", x.req.ContextID,
		"referenced_task_id", x.missingID, "why", missing, "decision_id", x.dec.ID, "caller_agent_id", x.caller.AgentID, "caller_tenant", x.caller.Tenant)
}

// judgement is what the decision, the lifecycle lookup and the lifecycle law
// make of a request once the policy decided: nil when it may go on, else the
// refusal the caller learns (the disclosure rules applied: a foreign task is
// a missing one, an unauthenticated caller learns only that); hidden when
// the agent is to look as if it did not exist (a card the caller may not
// see). Every door's answer comes from here: Admit's and Decide's.
func (c *Core) judgement(x *exchange, missing string) (f *task.Fault, hidden bool) {
	req := &x.req
	if missing != "" {
		switch missing {
		case missingContext, retiredContext:
			return task.NewFault(task.KindTaskNotFound, fmt.Sprintf("context %s not found", req.ContextID)), false
		case missingReference:
			return notFound(x.missingID), false
		}
		return notFound(req.TaskID), false
	}
	if !x.dec.Allow {
		c.stats.Denied.Add(1)
		if req.Operation == task.OpCard && x.eg == nil {
			// A card is only for callers who may see the agent; to everyone else
			// the agent does not exist (and what does not exist had no decision).
			return nil, true
		}
		return c.denialFault(x), false
	}
	return lifecycleLaw(x), false
}

// conclude is the outcome of an admitted request once the policy decided.
func (c *Core) conclude(ctx context.Context, x *exchange, missing string) Outcome {
	req, rt := &x.req, x.rt
	f, hidden := c.judgement(x, missing)
	switch {
	case hidden:
		return Outcome{Kind: NotFound, Answer: notFoundPage, Operation: req.Operation, Protocol: req.Protocol,
			Route: rt.agent.Name}
	case f != nil:
		return c.refuse(x, f)
	}
	if x.eg != nil {
		return c.forward(x) // the target answers, cards and push configs too
	}
	switch {
	case req.Operation == task.OpCard:
		if _, ok := rt.edges.Cards(); ok {
			return c.serveCard(ctx, x)
		}
	case isPushOp(req.Operation) && c.pushOn():
		return c.servePush(ctx, x)
	}
	return c.forward(x)
}

// namedAgent refuses a request that names an agent other than the route's (an
// ACP agent_name, GET /agents/{name}): the route's agent is the one the policy
// decides about, so it is the only one a request through it may reach.
func namedAgent(x *exchange) *task.Fault {
	if a := x.req.Agent; a != "" && a != x.rt.agent.Name {
		return task.NewFault(task.KindTaskNotFound, fmt.Sprintf("agent %s not found", a))
	}
	return nil
}

// framing refuses a request whose body writ could not read whole: a chunked
// body (unless allowed), one over the size limit, one cut short. The request
// is parsed without its body so the refusal has the right shape.
func (c *Core) framing(x *exchange) (*task.Fault, bool) {
	inc := x.inc
	switch {
	case inc.Chunked && !c.cfg.Limits.AllowChunkedRequests:
		// Go drops a Content-Length sent beside Transfer-Encoding, so this also
		// refuses the classic smuggling pair.
		x.in.Body = nil
		x.req, _ = x.edge.Parse(x.in, c.lim)
		return task.NewFault(task.KindNotARequest, "Transfer-Encoding is not accepted on requests; send Content-Length"), true
	case inc.BodyErr != nil:
		x.in.Body = nil
		x.req, _ = x.edge.Parse(x.in, c.lim)
		if errors.Is(inc.BodyErr, wire.ErrBodyTooLarge) {
			return task.NewFault(task.KindTooLarge, fmt.Sprintf("request body exceeds %d bytes", c.lim.MaxBodyBytes)), false
		}
		return task.NewFault(task.KindMalformed, "the request body could not be read whole: "+inc.BodyErr.Error()), false
	}
	return nil, false
}

// identify is the caller: as a door in front of writ verified it, or from the
// request's own credentials. Refused credentials make the caller anonymous;
// err then says why (an *identity.Refusal: what the credential presented and
// what writ accepts, never the token), for the decision event and the log.
func (c *Core) identify(ctx context.Context, inc Incoming) (identity.Caller, error) {
	ctx, span := c.startIdentify(ctx)
	if inc.Caller != nil {
		endIdentify(span, *inc.Caller, inc.CallerErr)
		return *inc.Caller, inc.CallerErr
	}
	caller, err := c.ident.Identify(ctx, identity.Credentials{Header: inc.Header, PeerCertificates: inc.PeerCertificates})
	endIdentify(span, caller, err)
	if err != nil {
		attrs := []any{"error", err, "path", inc.Path}
		if f := identityFailure(err); f != nil {
			attrs = append(attrs, "code", f.Code, "presented_iss", f.Presented.Issuer, "presented_aud", f.Presented.Audiences,
				"presented_kid", f.Presented.KeyID, "accepted_issuers", f.Accepted.Issuers,
				"accepted_audiences", f.Accepted.Audiences, "accepted_kids", f.Accepted.KeyIDs)
		}
		c.log.Info("credentials refused; the caller is anonymous", attrs...)
	}
	return caller, err
}

// identityFailure is a refused credential as the events carry it; nil for
// no error.
func identityFailure(err error) *events.IdentityFailure {
	if err == nil {
		return nil
	}
	var r *identity.Refusal
	if !errors.As(err, &r) {
		return &events.IdentityFailure{Code: identity.Code(err)}
	}
	p, a := r.Presented, r.Accepted
	return &events.IdentityFailure{Code: r.Code,
		Presented: events.PresentedCredential{Issuer: p.Issuer, Audiences: p.Audiences, KeyID: p.KeyID, Algorithm: p.Algorithm, SPIFFEID: p.SPIFFEID},
		Accepted:  events.AcceptedCredentials{Issuers: a.Issuers, Audiences: a.Audiences, KeyIDs: a.KeyIDs, TrustDomain: a.TrustDomain}}
}

// decide asks the policy about x and returns the decision event, for the
// caller to emit once it knows the outcome.
func (c *Core) decide(ctx context.Context, x *exchange, start time.Time) events.Decision {
	var rec *task.Task
	if x.record != nil {
		rec = &x.record.Task
	}
	f := &authz.Facts{Request: &x.req, Caller: x.caller, Target: x.rt.target, Record: rec,
		HTTP:                  authz.HTTPInfo{Method: x.inc.Method, Path: x.inc.Path, Host: x.inc.Host, RemoteAddr: x.inc.RemoteAddr},
		DefaultClassification: c.cfg.DefaultClassification}
	if x.eg != nil {
		f.Direction, f.Root = authz.DirectionEgress, x.eg.parent == ""
	}
	x.input = authz.BuildInput(f)
	ctx, span := c.startDecide(ctx, x)
	d, err := c.engine.Decide(ctx, x.input)
	endDecide(span, d, err)
	ev := events.Decision{Time: time.Now(), ID: d.ID, Mode: x.inc.Mode, Route: x.rt.agent.Name, Operation: x.req.Operation,
		Protocol: x.req.Protocol, Caller: eventCaller(x.caller), TaskID: x.req.TaskID, ContextID: x.input.Task.ContextID,
		Allow: d.Allow, DryRun: d.DryRun, Denials: d.Denials, Revision: d.Revision, CacheHit: d.CacheHit,
		Eval: d.Duration, Latency: time.Since(start), ChainID: x.caller.ChainID, Identity: identityFailure(x.idErr)}
	ev.TraceID, ev.SpanID = traceIDs(ctx)
	if x.eg != nil {
		c.egressEvent(x, &ev)
	}
	if c.inputs != nil {
		ev.Input = c.inputs.Of(x.input)
	}
	if err != nil {
		c.log.Error("policy error; the request is denied (fail closed)", "error", err, "decision_id", d.ID)
		ev.Error = err.Error()
	}
	x.dec = d
	return ev
}

// eventCaller is the caller as events carry it.
func eventCaller(c identity.Caller) events.Caller {
	return events.Caller{Authenticated: c.Authenticated, Method: c.Method, Issuer: c.Issuer, AgentID: c.AgentID,
		UserID: c.UserID, Tenant: c.Tenant, Chain: c.Chain}
}

// refuse is the Refuse outcome of f, rendered in the request's protocol shape.
func (c *Core) refuse(x *exchange, f *task.Fault) Outcome {
	out := Outcome{Kind: Refuse, Fault: f, Answer: x.edge.RenderFault(&x.req, f), DecisionID: x.dec.ID,
		Denials: x.dec.Denials, Operation: x.req.Operation, Protocol: x.req.Protocol, Route: x.rt.agent.Name}
	if f.Kind == task.KindTaskNotFound {
		// Answered like a missing task, which is refused before any decision:
		// a decision id would tell the two apart. The decision log keeps it.
		out.DecisionID = ""
	}
	out.Answer.Header = withHeader(out.Answer.Header, "Cache-Control", "no-store")
	challenge(&out)
	return out
}

// withHeader returns h (allocated when nil) with k set to v.
func withHeader(h http.Header, k, v string) http.Header {
	if h == nil {
		h = http.Header{}
	}
	h.Set(k, v)
	return h
}

// notFound is the answer for a task the caller may not see, identical to the
// answer for a task that does not exist: task ids are not an oracle.
func notFound(id string) *task.Fault {
	return task.NewFault(task.KindTaskNotFound, fmt.Sprintf("task %s not found", id))
}

// storeDown is the refusal of a request the lifecycle store could not serve;
// the error is logged and counted here, once (storeFault).
func (c *Core) storeDown(ctx context.Context, what string, err error) *task.Fault {
	if c.storeFault(ctx, err) {
		c.log.Error("lifecycle store unavailable; the request is refused (fail closed)", "during", what, "error", err)
	} else {
		c.log.Debug("the caller cancelled the request while the lifecycle store answered; refused", "during", what)
	}
	return unavailable()
}

// storeFault classifies an error of a store operation made for a request
// whose context is ctx, and counts it: a fault of the store (true:
// StoreErrors, for the caller to log as one), or the caller's own
// cancellation reaching the store through ctx (false: Cancelled, no fault of
// anyone's, though the request still fails closed). Only a cancellation is
// the caller's: a deadline that passed while the store answered may be the
// store's slowness, so it stays a fault.
func (c *Core) storeFault(ctx context.Context, err error) bool {
	if errors.Is(err, context.Canceled) && errors.Is(ctx.Err(), context.Canceled) {
		c.stats.Cancelled.Add(1)
		return false
	}
	c.stats.StoreErrors.Add(1)
	return true
}

// unavailable is the caller's answer when the lifecycle store failed: a
// 503-class protocol error.
func unavailable() *task.Fault {
	return task.NewFault(task.KindUnavailable, "the task lifecycle store is unavailable; retry later")
}

func isPushOp(op task.Operation) bool { return op.PushConfig() }

// Served reports a request a front door answered, to the events.
func (c *Core) Served(ev events.Request) { c.events.Served(ev) }

// pushOn reports whether writ handles push notifications itself.
func (c *Core) pushOn() bool { return c.notifier != nil }
