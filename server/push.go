package server

import (
	"log/slog"

	"go.opentelemetry.io/otel/trace"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/proxy/push"
	"github.com/writ-authz/writ/task"
)

// newDeliverer builds push delivery from the config (nil when push is left to the
// agents). Every attempt and outcome goes to the events, and is logged with
// the task and context ids and the receiver's host (never the token or the
// full URL). With a work queue, every notification is kept there until its
// outcome, under holder's lease, and what nobody holds is resumed.
func newDeliverer(cfg *config.Config, log *slog.Logger, sink events.Sink, q task.WorkQueue, holder string, tracer trace.Tracer) *push.Deliverer {
	if cfg.Push.Disabled {
		return nil
	}
	p := cfg.Push
	guard := push.NewGuard(push.GuardConfig{TrustedHosts: p.TrustedHosts})
	return push.NewDeliverer(push.DelivererConfig{Workers: p.Workers, QueueSize: p.QueueSize,
		MaxPerHost: p.MaxInFlightPerHost, MaxPerOwner: p.MaxInFlightPerOwner,
		MaxAttempts: p.MaxAttempts, AttemptTimeout: p.AttemptTimeout,
		Client: guard.Client(p.AttemptTimeout, p.MaxResponseBytes), Logger: log, Events: sink,
		OnAttempt: func(r push.Result) { logDelivery(log, "push delivery attempt", r) },
		OnResult:  func(r push.Result) { logDelivery(log, "push delivery", r) },
		Queue:     q, Holder: holder, Lease: cfg.Store.WorkLease, Tracer: tracer,
	})
}

// logDelivery logs one push attempt or outcome with the task and context ids and
// the receiver's host; never the token or the full URL.
func logDelivery(log *slog.Logger, msg string, r push.Result) {
	e := push.Event(r, false)
	attrs := []any{"task_id", e.TaskID, "context_id", e.ContextID, "host", e.Host, "delivered", e.Delivered,
		"attempt", e.Attempt, "status", e.Status, "latency_ms", e.Latency.Milliseconds()}
	if e.Reason != "" {
		attrs = append(attrs, "reason", e.Reason)
	}
	log.Info(msg, attrs...)
}
