package proxy

import (
	"context"
	"time"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/proxy/push"
	"github.com/writ-authz/writ/task"
)

// attachPush stores a send's push config on the task the answer revealed and
// returns it as stored.
func (c *Core) attachPush(ctx context.Context, p *Plan, ref task.Ref) (task.PushConfig, bool) {
	x := p.x
	if !c.pushOn() || x.req.Push == nil || p.pushAttached {
		return task.PushConfig{}, false
	}
	p.pushAttached = true
	pc, err := p.writes().SetPush(ctx, ref, *x.req.Push)
	if err != nil {
		c.log.Warn("the send's push config was not stored", "task_id", ref.ID, "error", err)
		return task.PushConfig{}, false
	}
	return pc, true
}

// notify queues one notification per push config of a task whose state writ
// just saw change, rendered by the adapter of the task's protocol. Each
// carries ctx's trace context (tracing on): its deliveries are spans of the
// request whose answer raised it, and the receiver gets their context.
func (c *Core) notify(ctx context.Context, rec task.Record) {
	if !c.pushOn() || len(rec.Push) == 0 {
		return
	}
	edge, ok := adapters.ForProtocol(rec.Protocol)
	if !ok {
		return
	}
	ps, ok := edge.(adapters.Push)
	if !ok {
		return
	}
	ct, body, err := ps.RenderNotification(&rec.Task, rec.Version)
	if err != nil {
		c.log.Error("a push notification could not be rendered", "task_id", rec.Task.ID, "error", err)
		return
	}
	// The time the store recorded the change orders a task's notifications:
	// it holds across restarts (resumed notifications keep their place) and,
	// on Redis, across replicas (the server's clock).
	seq := uint64(rec.Updated.UnixNano())
	if rec.Updated.IsZero() {
		seq = uint64(time.Now().UnixNano())
	}
	trace := c.traceCarrier(ctx)
	for _, pc := range rec.Push {
		n := push.Notification{TaskID: rec.Task.ID, ContextID: rec.Task.ContextID, URL: pc.URL, Owner: task.OwnerKey(rec.Task.Owner),
			Header: ps.NotificationHeaders(pc), ContentType: ct, Body: body, Seq: seq, Trace: trace}
		if err := c.notifier.Enqueue(n); err != nil {
			c.log.Warn("push notification dropped", "task_id", rec.Task.ID, "error", err)
		}
	}
}
