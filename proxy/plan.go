package proxy

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/proxy/writheader"
	"github.com/writ-authz/writ/task"
)

// MaxAnswerBytes bounds a non-streaming upstream answer that writ reads to
// observe it. Larger answers are refused as invalid rather than buffered.
const MaxAnswerBytes = 32 << 20

// Plan is how an admitted request goes to the agent, and how the agent's
// answers come back through the core. It is the one executor of a Forward
// outcome: a door that sends the request itself (the sidecar) hands the plan
// to Forward; a door whose platform sends it (ext_proc) applies Header, Drop
// and Body, and feeds the answer through Reads, then Answer (a whole answer)
// or Stream and Chunks (SSE). Either way the answers are recorded in the
// lifecycle store, push callbacks notified, tasks that outlive their request
// followed (Deps.Follow), listings filtered. A Plan serves one request and is
// not safe for concurrent use, but for what reads only what Admit decided
// (DecisionID, Agent, Owner, FollowSpec, Subscribe, Polls, Poll), which a
// follower calls from its own goroutine for as long as it follows.
type Plan struct {
	core *Core
	x    *exchange
	// Method, URL and Body are the request as decided: the URL on the agent's
	// upstream with the caller's query, the body with a push config stripped
	// when writ delivers push itself.
	Method string
	URL    *url.URL
	Body   []byte
	// Header holds the headers writ sets on the forwarded request
	// (Writ-Caller, Writ-Decision-Id). Every spelling of writ's own headers is
	// already gone from the caller's headers.
	Header http.Header
	// Streams is set when the operation answers with a stream (no answer
	// timeout applies).
	Streams bool
	// Drop names the caller's headers the forwarded request must not carry:
	// Accept-Encoding where writ reads the agent's answer, since it reads
	// answers only in the identity coding (Reads refuses any other), so the
	// caller may not ask the agent for one.
	Drop []string

	// delegation is set on an egress plan: the outbound token to obtain
	// (egress.go); delegated once Delegate put it on.
	delegation *Delegation
	delegated  bool

	pushAttached bool
	// invalid counts answers (or stream events) not valid for their protocol.
	invalid int
	// failed is set when this request's answer revealed a task that could not
	// be recorded (the store failed): the answer must not reach the caller.
	failed error
	// deferred is the store as this plan's answers write it (writes).
	deferred task.Deferred
	// parent is the request's admit span (trace.go); invalid when tracing
	// is off.
	parent trace.SpanContext
}

// writes is the lifecycle store as the plan's answers write it: deferred
// (task.Defer), so that everything one answer reveals — the task and its
// owner, its context's owner, its push config, its state — is applied as it
// comes and made durable by one sync, before the answer is passed on, rather
// than each write waiting for a commit of its own (the file store: an
// fsync). Reads through it see those writes at once.
func (p *Plan) writes() task.Deferred {
	if p.deferred == nil {
		p.deferred = task.Defer(p.core.store)
	}
	return p.deferred
}

// sync makes what the answer just observed durable before the answer reaches
// the caller (docs/state.md: a write that reveals a task is durable before
// the answer that reveals it). A store that cannot sets p.failed: the answer
// is refused, logged and counted like any store failure.
func (p *Plan) sync(ctx context.Context) {
	if p.deferred == nil || p.failed != nil {
		return
	}
	if err := p.deferred.Sync(ctx); err != nil {
		c := p.core
		if c.storeFault(ctx, err) {
			c.log.Error("lifecycle store: what the answer revealed could not be made durable; the answer is refused",
				"agent", p.x.rt.agent.Name, "operation", p.x.req.Operation, "error", err)
		} else {
			c.log.Debug("the caller cancelled the request while what the answer revealed was made durable; the answer is refused",
				"agent", p.x.rt.agent.Name, "operation", p.x.req.Operation)
		}
		p.failed = err
	}
}

// forward is the Forward outcome of an allowed request.
func (c *Core) forward(x *exchange) Outcome {
	target := *x.rt.upstream
	target.Path = joinPath(x.rt.upstream.Path, x.in.Path)
	target.RawPath = ""
	target.RawQuery = x.inc.RawQuery
	if target.RawQuery == "" && len(x.inc.Query) > 0 {
		target.RawQuery = x.inc.Query.Encode()
	}
	body := x.inc.Body
	if cz, ok := x.edge.(adapters.Canonical); ok {
		// The agent reads writ's encoding of what writ read.
		canon, err := cz.CanonicalBody(&x.req, body)
		if err != nil {
			return c.refuse(x, task.NewFault(task.KindInvalidParams, err.Error()))
		}
		body = canon
	}
	if x.eg == nil && c.pushOn() && x.req.Push != nil && !x.inc.Verbatim {
		if ps, ok := x.edge.(adapters.Push); ok {
			// The agent never learns the caller's callback: writ delivers itself.
			stripped, err := ps.StripPush(&x.req, body)
			if err != nil {
				return c.refuse(x, task.NewFault(task.KindInvalidParams, err.Error()))
			}
			body = stripped
		}
	}
	p := &Plan{core: c, x: x, Method: x.inc.Method, URL: &target, Body: body, Streams: streams(x.req.Operation),
		Header: http.Header{writheader.Caller: {writheader.CallerValue(x.caller)}, writheader.Decision: {x.dec.ID}}}
	if _, reads := x.edge.(adapters.Answers); reads {
		p.Drop = []string{"Accept-Encoding"}
	}
	if x.eg != nil {
		d, f := c.delegation(x)
		if f != nil {
			return c.refuse(x, f)
		}
		// The remote agent's writ tells it who calls; the agent's own
		// credential never leaves: Delegate puts the exchanged token on.
		p.delegation, p.Header = d, http.Header{}
		p.Drop = append(p.Drop, identity.CredentialHeaders...)
	} else {
		c.link(x)
	}
	return Outcome{Kind: Forward, Plan: p, DecisionID: x.dec.ID, DryRun: x.dec.DryRun, Denials: x.dec.Denials,
		Operation: x.req.Operation, Protocol: x.req.Protocol, Route: x.rt.agent.Name}
}

// streams reports whether the operation answers with a stream.
func streams(op task.Operation) bool { return op.Streams() }

func joinPath(base, rest string) string {
	if base == "" || base == "/" {
		return rest
	}
	return strings.TrimSuffix(base, "/") + rest
}

// InvalidAnswers counts the agent's answers (or stream events) that were not
// valid for their protocol, or too large.
func (p *Plan) InvalidAnswers() int { return p.invalid }

// DecisionID is the id of the decision that let the request through, which
// every answer the caller gets carries (Writ-Decision-Id).
func (p *Plan) DecisionID() string { return p.x.dec.ID }

// Agent is the protected agent the request goes to (agents[].name).
func (p *Plan) Agent() string { return p.x.rt.agent.Name }

// Owner is the caller as the owner of the tasks its request creates.
func (p *Plan) Owner() task.Owner { return ownerOf(p.x) }

// Fail renders an upstream failure (the agent unreachable, too slow, broken)
// in the request's protocol shape, with writ's decision id, marked as
// writ's own answer (writheader.AnsweredBy): it takes the agent's place.
func (p *Plan) Fail(f *task.Fault) wire.Rendered {
	out := p.x.edge.RenderFault(&p.x.req, f)
	out.Header = writheader.Mark(withHeader(out.Header, writheader.Decision, p.x.dec.ID))
	out.Header.Set("Cache-Control", "no-store")
	return out
}

// AgentHeaders readies the headers of the agent's own answer for the caller
// (in place): an ingress agent's copy of writ's mark (writheader.AnsweredBy)
// is removed, so the mark means writ answered. On egress the answer comes
// from the target's writ, whose own refusals carry its mark: it is passed
// on.
func (p *Plan) AgentHeaders(h http.Header) {
	if p.x.eg == nil {
		writheader.Unmark(h)
	}
}

// FailUpstream renders the failure of an agent that could not be reached, or
// (timeout) that did not answer in time, and names the failure for the served
// event (events.UpstreamTimeout or UpstreamUnavailable): the one choice of
// fault every door makes.
func (p *Plan) FailUpstream(timeout bool) (failed wire.Rendered, failure string) {
	if timeout {
		return p.Fail(task.NewFault(task.KindUpstreamTimeout, "the agent did not answer in time")), events.UpstreamTimeout
	}
	return p.Fail(task.NewFault(task.KindUpstreamUnavailable, "the agent could not be reached")), events.UpstreamUnavailable
}

// Answer observes a whole upstream answer to the plan's request and returns
// the body to pass on: a listing filtered to the caller's own tasks, anything
// else as the agent sent it. A non-nil refusal replaces the answer: the answer
// was too large or not valid for its protocol, or the task it revealed could
// not be recorded (the caller would own a task writ cannot check: fail
// closed).
func (p *Plan) Answer(ctx context.Context, status int, body []byte) ([]byte, *wire.Rendered) {
	ctx = p.within(ctx)
	if len(body) > MaxAnswerBytes {
		p.invalid++
		out := p.Fail(task.NewFault(task.KindUpstreamInvalid, fmt.Sprintf("the agent's answer exceeds %d bytes", MaxAnswerBytes)))
		return nil, &out
	}
	c, x := p.core, p.x
	if x.eg != nil && x.req.Operation == task.OpCard {
		return p.egressCard(ctx, status, body)
	}
	ans, ok := x.edge.(adapters.Answers)
	if !ok {
		return body, nil
	}
	events, perr := ans.ParseResponse(&x.req, status, body)
	if perr == nil {
		c.upstreamErrors(p, events)
	}
	if perr != nil {
		// Nothing of it is believed, and it is not passed on: the caller gets
		// the protocol's error, as for an invalid event inside a stream. (A
		// listing writ cannot read is one it cannot filter to the caller's
		// own tasks; a task it cannot read is one it cannot check later.)
		p.invalid++
		c.log.Warn("the agent's answer is not valid for its protocol; refused",
			"agent", x.rt.agent.Name, "operation", x.req.Operation, "error", perr)
		out := p.Fail(task.NewFault(task.KindUpstreamInvalid, "the agent's answer is not valid"))
		return nil, &out
	}
	if x.eg != nil {
		// The remote agent's writ records its tasks and filters its
		// listings: nothing of the answer is kept here.
		return body, nil
	}
	c.observe(ctx, p, events)
	p.sync(ctx)
	if p.failed != nil {
		out := p.Fail(p.failure()) // logged and counted where it failed
		return nil, &out
	}
	c.follow(p, events)
	switch {
	case x.req.Operation == task.OpList:
		body = c.ownTasksOnly(ctx, x, body)
	case x.req.Operation == task.OpExtendedCard:
		ext, ok := x.edge.(adapters.ExtendedCards)
		if !ok {
			break
		}
		// The extended card is checked, rewritten and signed like the public
		// one: a card whose signatures do not verify is not passed on, and the
		// agent's own address, schemes and unpublished skills never reach the
		// caller.
		rewritten, err := ext.RewriteCardAnswer(&x.req, status, body, wire.CardRewrite{
			Verify:  func(card []byte) ([]byte, error) { return c.checkCard(ctx, x.rt, x.edge, card) },
			Publish: func(card *task.AgentCard) *task.AgentCard { return c.publish(x.rt, card) },
			Sign:    x.rt.signer,
		})
		if err != nil {
			p.invalid++
			c.log.Warn("the agent's extended card could not be read; refused", "agent", x.rt.agent.Name, "error", err)
			out := p.Fail(task.NewFault(task.KindUpstreamInvalid, "the agent's extended card is not valid"))
			return nil, &out
		}
		body = rewritten
	}
	return body, nil
}

// RewritesAnswer reports whether writ rewrites the agent's answer to op
// before the caller sees it: a listing filtered to the caller's own tasks,
// the extended card rewritten as the public one is. Such an answer must be
// read whole, and read by writ, or not reach the caller at all.
func RewritesAnswer(op task.Operation) bool { return op == task.OpList || op == task.OpExtendedCard }

// Reads says how the agent's answer, by its headers, is read: as an SSE
// stream (Stream, Chunks) or whole (Answer). refused is set (and the answer
// counted invalid) when it may be read neither way, and then replaces it:
//   - an answer writ reads in a content coding (gzip, br, ...): writ reads
//     the identity coding only (and drops the caller's Accept-Encoding, see
//     Drop), so a coded stream would pass unobserved and a coded listing
//     unfiltered;
//   - a stream in answer to an operation that does not stream: relayed, a
//     listing would pass unfiltered and the extended card unrewritten, and
//     the caller's client expects one answer;
//   - an answer writ rewrites in a content type that is not JSON: writ reads
//     it as JSON (strictly, see adapters.Answers), and a client that reads
//     the type it names could see what writ did not. Go's net/http names a
//     JSON body written without a Content-Type text/plain (a2a-go's
//     JSON-RPC handler answers so): that, and no type, are read as JSON.
func (p *Plan) Reads(answer http.Header) (stream bool, refused *wire.Rendered) {
	contentType := answer.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(contentType)
	if contentType == "" {
		mt, err = "", nil
	}
	_, reads := p.x.edge.(adapters.Answers)
	switch {
	case reads && coded(answer):
		p.invalid++
		p.core.log.Warn("the agent's answer has a content coding writ does not read; refused",
			"agent", p.x.rt.agent.Name, "operation", p.x.req.Operation, "content_encoding", answer.Values("Content-Encoding"))
		out := p.Fail(task.NewFault(task.KindUpstreamInvalid, "the agent's answer is not valid"))
		return false, &out
	case err == nil && mt == "text/event-stream":
		if p.Streams {
			return true, nil
		}
	case !RewritesAnswer(p.x.req.Operation):
		return false, nil
	case err == nil && (mt == "" || mt == "text/plain" || mt == "application/json" || strings.HasSuffix(mt, "+json")):
		return false, nil
	}
	p.invalid++
	p.core.log.Warn("the agent's answer has a content type writ does not read for this operation; refused",
		"agent", p.x.rt.agent.Name, "operation", p.x.req.Operation, "content_type", contentType)
	out := p.Fail(task.NewFault(task.KindUpstreamInvalid, "the agent's answer is not valid"))
	return false, &out
}

// coded reports whether an answer names a content coding other than identity.
func coded(h http.Header) bool {
	for _, v := range h.Values("Content-Encoding") {
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return true
			}
		}
	}
	return false
}

// failure is the caller's answer when p.failed is set: not found for a task
// the store refused to let this request claim (ErrRetired), else the store
// was unavailable.
func (p *Plan) failure() *task.Fault {
	if errors.Is(p.failed, task.ErrRetired) {
		return notFound(p.x.req.TaskID)
	}
	return unavailable()
}
