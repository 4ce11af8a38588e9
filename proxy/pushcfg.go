package proxy

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/proxy/push"
	"github.com/writ-authz/writ/task"
)

// Notifier takes rendered notifications for delivery; push.Deliverer is the one
// writ runs. Enqueue must not block.
type Notifier interface {
	Enqueue(n push.Notification) error
}

var _ Notifier = (*push.Deliverer)(nil)

// notifySeq orders notifications: each gets a larger number than the last.
var notifySeq atomic.Uint64

// pushOn reports whether writ handles push notifications itself.
func (s *Server) pushOn() bool { return s.notifier != nil }

// servePush answers a push-config operation from the lifecycle store; the agent
// never sees it (so push works in front of agents that do not support it). The
// decision has run: the caller owns the task, and a new config passed the
// callback policy.
func (s *Server) servePush(w http.ResponseWriter, x *exchange) {
	ctx := context.Background()
	if x.record == nil {
		// No record (lifecycle.unknown_tasks: allow let the policy decide): writ
		// keeps no configs for a task it never saw.
		s.fail(w, x, notFound(x.req.TaskID))
		return
	}
	var configs []task.PushConfig
	switch x.req.Operation {
	case task.OpPushSet:
		p, err := s.store.SetPush(ctx, task.Ref{Agent: x.rt.agent.Name, ID: x.req.TaskID}, *x.req.Push)
		if err != nil {
			s.fail(w, x, pushFault(x, err))
			return
		}
		configs = []task.PushConfig{p}
	case task.OpPushGet:
		for _, p := range x.record.Push {
			if p.ID == x.req.PushConfigID || x.req.PushConfigID == "" {
				configs = append(configs, p)
				break
			}
		}
		if len(configs) == 0 {
			s.fail(w, x, notFound(x.req.TaskID+" push config "+x.req.PushConfigID))
			return
		}
	case task.OpPushList:
		configs = x.record.Push
	case task.OpPushDelete:
		if err := s.store.DeletePush(ctx, task.Ref{Agent: x.rt.agent.Name, ID: x.req.TaskID}, x.req.PushConfigID); err != nil {
			s.fail(w, x, pushFault(x, err))
			return
		}
	}
	out := x.edge.RenderPushResult(&x.req, configs)
	w.Header().Set(DecisionHeader, x.dec.ID)
	if out.ContentType != "" {
		w.Header().Set("Content-Type", out.ContentType)
	}
	w.WriteHeader(out.Status)
	_, _ = w.Write(out.Body)
}

func pushFault(x *exchange, err error) *task.Fault {
	switch {
	case errors.Is(err, task.ErrPushLimit):
		return task.NewFault(task.KindInvalidParams, err.Error())
	case errors.Is(err, task.ErrNotFound), errors.Is(err, task.ErrPushNotFound):
		return notFound(x.req.TaskID)
	}
	return task.NewFault(task.KindInternal, "the push config could not be stored")
}

// attachPush stores a send's push config on the task the answer revealed and
// returns it as stored.
func (s *Server) attachPush(ctx context.Context, x *exchange, ref task.Ref) (task.PushConfig, bool) {
	if !s.pushOn() || x.req.Push == nil || x.pushAttached {
		return task.PushConfig{}, false
	}
	x.pushAttached = true
	p, err := s.store.SetPush(ctx, ref, *x.req.Push)
	if err != nil {
		s.log.Warn("the send's push config was not stored", "task_id", ref.ID, "error", err)
		return task.PushConfig{}, false
	}
	return p, true
}

// notify queues one notification per push config of a task whose state writ
// just saw change.
func (s *Server) notify(rec task.Record) {
	if !s.pushOn() || len(rec.Push) == 0 {
		return
	}
	edge, err := adapters.Select(rec.Protocol, "/")
	if err != nil {
		return
	}
	ct, body, err := edge.RenderNotification(&rec.Task, rec.Version)
	if err != nil {
		return
	}
	seq := notifySeq.Add(1)
	for _, p := range rec.Push {
		n := push.Notification{TaskID: rec.Task.ID, ContextID: rec.Task.ContextID, URL: p.URL, Token: p.Token,
			AuthScheme: p.AuthScheme, Credentials: p.Credentials, ContentType: ct, Body: body, Seq: seq}
		if err := s.notifier.Enqueue(n); err != nil {
			s.log.Warn("push notification dropped", "task_id", rec.Task.ID, "error", err)
		}
	}
}
