package push

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// propagator is the W3C trace context, the only context a receiver gets
// (never baggage).
var propagator = propagation.TraceContext{}

// attrAttempt is the attempt's number on its span.
const attrAttempt = attribute.Key("writ.push.attempt")

// startAttempt starts the span of one delivery attempt, a child of the
// trace context the notification carries. Its attributes are the
// receiver's host and port, never its path, query, token or credentials.
func (d *Deliverer) startAttempt(ctx context.Context, j *job) (context.Context, trace.Span) {
	if len(j.n.Trace) > 0 {
		ctx = propagator.Extract(ctx, propagation.MapCarrier(j.n.Trace))
	}
	attrs := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(http.MethodPost), attrAttempt.Int(j.attempts)}
	if u, err := url.Parse(j.n.URL); err == nil {
		attrs = append(attrs, semconv.ServerAddress(u.Hostname()), semconv.URLScheme(u.Scheme))
		if p, err := strconv.Atoi(u.Port()); err == nil {
			attrs = append(attrs, semconv.ServerPort(p))
		}
	}
	return d.cfg.Tracer.Start(ctx, "writ.push", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endAttempt records how the attempt went (the status, or a stable reason:
// never the error's text, which may hold the URL) and ends the span.
func endAttempt(s trace.Span, r Result) {
	if r.Status != 0 {
		s.SetAttributes(semconv.HTTPResponseStatusCode(r.Status))
	}
	if !r.Delivered {
		reason := reasonOf(r)
		s.SetAttributes(semconv.ErrorTypeKey.String(reason))
		s.SetStatus(codes.Error, reason)
	}
	s.End()
}

// injectTrace puts the attempt's trace context on its request, in place
// of any a rendered header held.
func injectTrace(ctx context.Context, h http.Header) {
	for _, k := range propagator.Fields() {
		h.Del(k)
	}
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}
