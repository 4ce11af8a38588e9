package push

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/writ-authz/writ/task"
)

// TestAttemptsAreSpansOfTheRequest: with a tracer, every delivery attempt
// is a span (writ.push) under the trace context the notification carries,
// and the receiver gets the attempt's own traceparent, in place of one a
// rendered header held; the span names the receiver's host, the attempt
// and its status, never the URL's path or query or the token. Without a
// tracer the receiver gets no trace context.
func TestAttemptsAreSpansOfTheRequest(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	rv := newReceiver(t, func(r *http.Request, attempt int) int {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		if attempt == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	parent := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	n := note("t-1", rv.URL+"/cb/secret-path?token=q-secret", 1)
	n.Header = http.Header{"X-A2A-Notification-Token": {"tok-secret"}, "Traceparent": {"00-11111111111111111111111111111111-2222222222222222-01"}}
	n.Trace = map[string]string{"traceparent": parent}
	d, rs := newTestDeliverer(t, DelivererConfig{Tracer: tp.Tracer("test"), MaxAttempts: 3})
	if err := d.Enqueue(n); err != nil {
		t.Fatal(err)
	}
	if r := rs.waitFor(t, 1)[0]; !r.Delivered || r.Attempts != 2 {
		t.Fatalf("result %+v", r)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 || len(got) != 2 {
		t.Fatalf("%d spans, %d requests; want 2 of each", len(spans), len(got))
	}
	for i, s := range spans {
		if s.Name != "writ.push" || s.SpanKind != trace.SpanKindClient || s.Parent.SpanID().String() != "00f067aa0ba902b7" ||
			s.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("span %d: %s kind %s parent %s trace %s", i, s.Name, s.SpanKind, s.Parent.SpanID(), s.SpanContext.TraceID())
		}
		want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + s.SpanContext.SpanID().String() + "-01"
		if tp := got[i].Get("Traceparent"); tp != want {
			t.Errorf("attempt %d: the receiver got traceparent %q, want the attempt's %q", i+1, tp, want)
		}
		for _, a := range s.Attributes {
			if v := a.Value.String(); strings.Contains(v, "secret") || strings.Contains(v, "/cb") {
				t.Errorf("span %d: %s = %q", i, a.Key, v)
			}
		}
	}
	if spans[0].Status.Description != "status_503" {
		t.Errorf("the failed attempt's status %+v", spans[0].Status)
	}

	// No tracer: no trace context but the rendered headers'.
	mu.Lock()
	got = nil
	mu.Unlock()
	plain, rs2 := newTestDeliverer(t, DelivererConfig{})
	m := note("t-2", rv.URL+"/cb", 1)
	m.Trace = map[string]string{"traceparent": parent}
	if err := plain.Enqueue(m); err != nil {
		t.Fatal(err)
	}
	rs2.waitFor(t, 1)
	mu.Lock()
	defer mu.Unlock()
	for _, h := range got {
		if h.Get("Traceparent") != "" {
			t.Errorf("without a tracer the receiver got traceparent %q", h.Get("Traceparent"))
		}
	}
}

// TestQueuedNotificationKeepsItsTrace: a notification kept in the work
// queue keeps its trace context, so that one resumed after a restart (or by
// another replica) is still delivered as a span of its request.
func TestQueuedNotificationKeepsItsTrace(t *testing.T) {
	n := note("t-1", "https://cb.example/x", 7)
	n.Trace = map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "congo=t61rcWkgMzE"}
	back, err := decodeNotification(task.Work{ID: "w-1", Payload: encodeNotification(n)})
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Trace) != 2 || back.Trace["traceparent"] != n.Trace["traceparent"] || back.Trace["tracestate"] != n.Trace["tracestate"] {
		t.Errorf("the stored notification's trace %v, want %v", back.Trace, n.Trace)
	}
}
