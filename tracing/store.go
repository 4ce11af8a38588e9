package tracing

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/writ-authz/writ/task"
)

// StoreKindKey is the attribute naming the lifecycle store's kind (file,
// redis, memory) on its spans.
const StoreKindKey = attribute.Key("writ.store.kind")

// Store is s with a span around each of its calls (writ.store.<operation>,
// a child of the span in the call's context), or s itself when tracing is
// off: the store's cost is then untouched. kind names the store on the
// spans. A store that is task.Deferring stays one: its deferred writes and
// their Sync are spanned too. A span records the operation and an error's
// class (error.type: not_found, exists, retired, unavailable, ...), never
// a record, an id or an error's text.
func (p *Provider) Store(s task.Store, kind string) task.Store {
	if !p.On() {
		return s
	}
	return &tracedStore{s: s, t: p.tracer, kind: StoreKindKey.String(kind)}
}

type tracedStore struct {
	s    task.Store
	t    trace.Tracer
	kind attribute.KeyValue
}

var (
	_ task.Store     = (*tracedStore)(nil)
	_ task.Deferring = (*tracedStore)(nil)
	_ task.Deferred  = (*tracedDeferred)(nil)
)

// span starts the span of one store operation.
func (t *tracedStore) span(ctx context.Context, op string) (context.Context, trace.Span) {
	return t.t.Start(ctx, "writ.store."+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.DBOperationName(op), t.kind))
}

// end ends a store operation's span with the class of its error. A missing
// task or a lost claim is an answer, not a failure of the store: only
// what fails the request (unavailable, cancelled, unknown) marks the span
// an error.
func end(s trace.Span, err error) {
	if err != nil {
		class := errorClass(err)
		s.SetAttributes(semconv.ErrorTypeKey.String(class))
		if class == "unavailable" || class == "canceled" || class == "deadline_exceeded" || class == "other" {
			s.SetStatus(codes.Error, class)
		}
	}
	s.End()
}

// errorClass is the stable class of a store error: never its text, which
// may name ids or hosts.
func errorClass(err error) string {
	for _, c := range []struct {
		err  error
		name string
	}{
		{task.ErrNotFound, "not_found"}, {task.ErrExists, "exists"}, {task.ErrRetired, "retired"},
		{task.ErrTerminal, "terminal"}, {task.ErrIllegalTransition, "illegal_transition"},
		{task.ErrInvalidRecord, "invalid_record"}, {task.ErrPushLimit, "push_limit"},
		{task.ErrPushNotFound, "push_not_found"}, {task.ErrUnavailable, "unavailable"},
		{context.Canceled, "canceled"}, {context.DeadlineExceeded, "deadline_exceeded"},
	} {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return "other"
}

func (t *tracedStore) Get(ctx context.Context, ref task.Ref) (task.Record, bool, error) {
	ctx, s := t.span(ctx, "get")
	r, ok, err := t.s.Get(ctx, ref)
	end(s, err)
	return r, ok, err
}

func (t *tracedStore) Create(ctx context.Context, r task.Record) error {
	ctx, s := t.span(ctx, "create")
	err := t.s.Create(ctx, r)
	end(s, err)
	return err
}

func (t *tracedStore) ClaimTask(ctx context.Context, r task.Record) error {
	ctx, s := t.span(ctx, "claim_task")
	err := t.s.ClaimTask(ctx, r)
	end(s, err)
	return err
}

func (t *tracedStore) Apply(ctx context.Context, ref task.Ref, ev task.Event) (prev, next task.Record, err error) {
	ctx, s := t.span(ctx, "apply")
	prev, next, err = t.s.Apply(ctx, ref, ev)
	end(s, err)
	return prev, next, err
}

func (t *tracedStore) Delete(ctx context.Context, ref task.Ref) error {
	ctx, s := t.span(ctx, "delete")
	err := t.s.Delete(ctx, ref)
	end(s, err)
	return err
}

func (t *tracedStore) SetPush(ctx context.Context, ref task.Ref, pc task.PushConfig) (task.PushConfig, error) {
	ctx, s := t.span(ctx, "set_push")
	out, err := t.s.SetPush(ctx, ref, pc)
	end(s, err)
	return out, err
}

func (t *tracedStore) DeletePush(ctx context.Context, ref task.Ref, cid string) error {
	ctx, s := t.span(ctx, "delete_push")
	err := t.s.DeletePush(ctx, ref, cid)
	end(s, err)
	return err
}

func (t *tracedStore) ClaimContext(ctx context.Context, ref task.Ref, owner task.Owner) (task.Owner, error) {
	ctx, s := t.span(ctx, "claim_context")
	out, err := t.s.ClaimContext(ctx, ref, owner)
	end(s, err)
	return out, err
}

func (t *tracedStore) Context(ctx context.Context, ref task.Ref) (task.Owner, bool, error) {
	ctx, s := t.span(ctx, "context")
	out, ok, err := t.s.Context(ctx, ref)
	end(s, err)
	return out, ok, err
}

func (t *tracedStore) Tombstone(ctx context.Context, ref task.Ref) (task.Owner, bool, error) {
	ctx, s := t.span(ctx, "tombstone")
	out, ok, err := t.s.Tombstone(ctx, ref)
	end(s, err)
	return out, ok, err
}

// Stats is not spanned: the metrics scrape reads it, not a request.
func (t *tracedStore) Stats(ctx context.Context) (task.StoreStats, error) { return t.s.Stats(ctx) }

// Defer implements task.Deferring: the inner store's deferred writes,
// spanned.
func (t *tracedStore) Defer() task.Deferred {
	d := task.Defer(t.s)
	return &tracedDeferred{tracedStore: tracedStore{s: d, t: t.t, kind: t.kind}, d: d}
}

// tracedDeferred is a deferred store whose writes and Sync are spanned.
type tracedDeferred struct {
	tracedStore
	d task.Deferred
}

// Defer of a deferred store is itself: its writes already wait for Sync.
func (t *tracedDeferred) Defer() task.Deferred { return t }

func (t *tracedDeferred) Sync(ctx context.Context) error {
	ctx, s := t.span(ctx, "sync")
	err := t.d.Sync(ctx)
	end(s, err)
	return err
}
