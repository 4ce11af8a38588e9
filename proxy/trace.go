package proxy

import (
	"context"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/task"
)

// Tracing (docs/fleet.md#tracing). With Deps.Tracer set, every request a
// door admits is a span (writ.admit) whose parent is the W3C trace context
// the request carries (the caller's, or the one Envoy forwards in the
// headers of its check): a malformed one is no context at all, and the span
// starts a new trace. Its children are the identification (writ.identify),
// the decision (writ.decide) and the lifecycle store's calls; the forward
// (writ.forward) is a child of it too, and the agent receives the forward's
// context, as each push receiver receives its delivery's (proxy/push).
// Spans carry what the decision log's lines do of a request — the decision
// id, route, operation, protocol, allow or deny, the denial and fault codes
// — and never message content, a token, a credential, a denial's reason or
// a header's value. Without a tracer none of this runs: the core does not
// even read the trace context (the caller's passes to the agent as sent).

// propagator reads and writes the W3C trace context (traceparent,
// tracestate): only that, never baggage, which could carry anything.
var propagator = propagation.TraceContext{}

// The attributes of writ's spans that no OTel semantic convention names.
const (
	attrMode            = attribute.Key("writ.mode")
	attrRoute           = attribute.Key("writ.route")
	attrOperation       = attribute.Key("writ.operation")
	attrProtocol        = attribute.Key("writ.protocol.name")
	attrProtocolVersion = attribute.Key("writ.protocol.version")
	attrOutcome         = attribute.Key("writ.outcome")
	attrFault           = attribute.Key("writ.fault")
	attrDecisionID      = attribute.Key("writ.decision.id")
	attrAllow           = attribute.Key("writ.decision.allow")
	attrDryRun          = attribute.Key("writ.decision.dry_run")
	attrCacheHit        = attribute.Key("writ.decision.cache_hit")
	attrDenialCodes     = attribute.Key("writ.denial.codes")
	attrRevision        = attribute.Key("writ.policy.revision")
	attrAuthenticated   = attribute.Key("writ.caller.authenticated")
	attrCallerMethod    = attribute.Key("writ.caller.method")
	attrIdentityCode    = attribute.Key("writ.identity.code")
	attrUpstreamFailure = attribute.Key("writ.upstream.failure")
)

// startAdmit starts a request's admit span, a child of the trace context
// its headers carry.
func (c *Core) startAdmit(ctx context.Context, inc Incoming) (context.Context, trace.Span) {
	ctx = propagator.Extract(ctx, propagation.HeaderCarrier(inc.Header))
	mode := inc.Mode
	if mode == "" {
		mode = events.ModeSidecar
	}
	return c.tracer.Start(ctx, "writ.admit", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attrMode.String(mode), semconv.HTTPRequestMethodKey.String(inc.Method)))
}

// endAdmit records what Admit made of the request on its span, and ends it.
func endAdmit(s trace.Span, out Outcome) {
	attrs := []attribute.KeyValue{attrOutcome.String(out.Kind.String())}
	if out.Route != "" {
		attrs = append(attrs, attrRoute.String(out.Route))
	}
	if out.Operation != "" {
		attrs = append(attrs, attrOperation.String(string(out.Operation)))
	}
	if out.Protocol.Name != "" {
		attrs = append(attrs, attrProtocol.String(out.Protocol.Name), attrProtocolVersion.String(out.Protocol.Version))
	}
	if out.DecisionID != "" {
		attrs = append(attrs, attrDecisionID.String(out.DecisionID))
	}
	if len(out.Denials) > 0 {
		attrs = append(attrs, attrDenialCodes.StringSlice(denialCodes(out.Denials)))
	}
	if out.Kind != Forward {
		attrs = append(attrs, semconv.HTTPResponseStatusCode(out.EnvoyStatus()))
	}
	if out.Fault != nil {
		attrs = append(attrs, attrFault.String(string(out.Fault.Kind)))
		if internalFault(out.Fault.Kind) {
			// A refusal is an answer; writ failing (its store, its policy) is an error.
			s.SetStatus(codes.Error, string(out.Fault.Kind))
		}
	}
	s.SetAttributes(attrs...)
	s.End()
}

// internalFault reports the faults that are writ's own failure, not a
// refusal of the request.
func internalFault(k task.Kind) bool { return k == task.KindInternal || k == task.KindUnavailable }

// denialCodes are the denials' codes, never their reasons (which quote
// platform metadata, for the decision log only).
func denialCodes(ds []task.Denial) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Code
	}
	return out
}

// startIdentify starts the span of a request's identification (nil span
// when tracing is off).
func (c *Core) startIdentify(ctx context.Context) (context.Context, trace.Span) {
	if c.tracer == nil {
		return ctx, nil
	}
	return c.tracer.Start(ctx, "writ.identify")
}

// endIdentify records who the caller turned out to be, as a kind (never
// who), and ends the span.
func endIdentify(s trace.Span, caller identity.Caller, err error) {
	if s == nil {
		return
	}
	s.SetAttributes(attrAuthenticated.Bool(caller.Authenticated), attrCallerMethod.String(caller.Method))
	if f := identityFailure(err); f != nil {
		s.SetAttributes(attrIdentityCode.String(f.Code))
	}
	s.End()
}

// startDecide starts the span of a decision (nil span when tracing is off).
func (c *Core) startDecide(ctx context.Context, x *exchange) (context.Context, trace.Span) {
	if c.tracer == nil {
		return ctx, nil
	}
	return c.tracer.Start(ctx, "writ.decide", trace.WithAttributes(attrRoute.String(x.rt.agent.Name),
		attrOperation.String(string(x.req.Operation))))
}

// endDecide records the decision on its span and ends it.
func endDecide(s trace.Span, d authz.Decision, err error) {
	if s == nil {
		return
	}
	s.SetAttributes(attrDecisionID.String(d.ID), attrAllow.Bool(d.Allow), attrRevision.String(d.Revision),
		attrCacheHit.Bool(d.CacheHit))
	if d.DryRun {
		s.SetAttributes(attrDryRun.Bool(true))
	}
	if len(d.Denials) > 0 {
		s.SetAttributes(attrDenialCodes.StringSlice(denialCodes(d.Denials)))
	}
	if err != nil {
		s.SetStatus(codes.Error, "policy error")
	}
	s.End()
}

// traceIDs are the trace and span ids of ctx's span, for the decision
// log; "" when there is none (tracing off).
func traceIDs(ctx context.Context) (traceID, spanID string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	return sc.TraceID().String(), sc.SpanID().String()
}

// within is ctx under the plan's admit span when ctx has no span of its
// own (a door's stream context, Envoy's): what the answers make — store
// calls, push deliveries — belongs to the request's trace.
func (p *Plan) within(ctx context.Context) context.Context {
	if p.core.tracer == nil || !p.parent.IsValid() || trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	return trace.ContextWithSpanContext(ctx, p.parent)
}

// startForward starts the span of the forward to the agent, a child of the
// admit span (nil span when tracing is off).
func (p *Plan) startForward(ctx context.Context) (context.Context, trace.Span) {
	c := p.core
	if c.tracer == nil {
		return ctx, nil
	}
	if p.parent.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, p.parent)
	}
	attrs := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(p.Method), semconv.URLScheme(p.URL.Scheme),
		attrRoute.String(p.x.rt.agent.Name), attrOperation.String(string(p.x.req.Operation)), attrDecisionID.String(p.x.dec.ID)}
	host, port := p.URL.Hostname(), p.URL.Port()
	attrs = append(attrs, semconv.ServerAddress(host))
	if n, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, semconv.ServerPort(n))
	}
	return c.tracer.Start(ctx, "writ.forward", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endForward records the agent's answer (its status, or why none came) on
// the forward's span and ends it.
func endForward(s trace.Span, status int, failure string) {
	if s == nil {
		return
	}
	if status != 0 {
		s.SetAttributes(semconv.HTTPResponseStatusCode(status))
	}
	if failure != "" {
		s.SetAttributes(attrUpstreamFailure.String(failure), semconv.ErrorTypeKey.String(failure))
		s.SetStatus(codes.Error, failure)
	} else if status >= 500 {
		s.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
		s.SetStatus(codes.Error, "")
	}
	s.End()
}

// inject puts ctx's trace context on a forwarded request's headers in
// place of the caller's: the agent's spans are children of the forward.
// The caller's own trace context headers go, whatever they held (a
// malformed one, a tracestate of another trace).
func inject(ctx context.Context, h http.Header) {
	for _, k := range propagator.Fields() {
		h.Del(k)
	}
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// traceCarrier is ctx's trace context as a push notification carries it
// to its delivery (nil when tracing is off or ctx has none).
func (c *Core) traceCarrier(ctx context.Context) map[string]string {
	if c.tracer == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	m := propagation.MapCarrier{}
	propagator.Inject(ctx, m)
	return m
}
