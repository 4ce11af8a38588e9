package proxy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/writ-authz/writ/task"
)

// continues reports whether the request acts on an existing task: the follow-up
// operations, and a send or stream that names a task (a reply).
func continues(req *task.Request) bool {
	if req.TaskID == "" {
		return false
	}
	switch req.Operation {
	case task.OpSend, task.OpStream:
		return true
	}
	return req.Operation.FollowUp()
}

// lookupTask loads the lifecycle record of the task the request continues. A task
// writ never saw, or one that runs on another agent, is not found (unless the
// configured migration rule lets the policy decide).
func (s *Server) lookupTask(ctx context.Context, x *exchange) *task.Fault {
	if !continues(&x.req) {
		return nil
	}
	rec, ok, err := s.store.Get(ctx, task.Ref{Agent: x.rt.agent.Name, ID: x.req.TaskID})
	if err != nil {
		s.log.Error("lifecycle store unavailable; the request is denied", "error", err)
		return task.NewFault(task.KindInternal, "the task lifecycle store is unavailable")
	}
	if !ok {
		if s.cfg.Lifecycle.UnknownTasks != "allow" {
			return notFound(x.req.TaskID)
		}
		return nil
	}
	x.record = &rec
	return nil
}

// lifecycleLaw is enforced in Go, never by policy: no message to a terminal task,
// no cancel of a terminal task. It runs after the decision, so a caller who does
// not own the task learns nothing of its state (it was answered TaskNotFound).
func lifecycleLaw(x *exchange) *task.Fault {
	if x.record == nil {
		return nil
	}
	st := x.record.Task.State
	if !st.Terminal() {
		return nil
	}
	switch x.req.Operation {
	case task.OpSend, task.OpStream:
		return task.NewFault(task.KindTaskTerminal, fmt.Sprintf("task %s is %s: it takes no more messages", x.req.TaskID, st))
	case task.OpCancel:
		return task.NewFault(task.KindTaskNotCancelable, fmt.Sprintf("task %s is %s and cannot be cancelled", x.req.TaskID, st))
	}
	return nil
}

// observe records what an upstream answer said about tasks. A task is recorded
// the first time an answer reveals it, owned by the caller who created it. An
// illegal transition keeps the stored state and is logged as a protocol violation.
func (s *Server) observe(ctx context.Context, x *exchange, events []task.Event) {
	for _, ev := range events {
		if ev.TaskID == "" || ev.Kind == task.EventMessage || ev.Kind == task.EventError {
			continue
		}
		ref := task.Ref{Agent: x.rt.agent.Name, ID: ev.TaskID}
		prev, rec, err := s.store.Apply(ctx, ref, ev)
		if errors.Is(err, task.ErrNotFound) {
			created, ok, cerr := s.create(ctx, x, ev)
			if cerr != nil {
				s.log.Error("lifecycle store: recording a new task failed", "task_id", ev.TaskID, "error", cerr)
				continue
			}
			if !ok {
				continue
			}
			s.hooks.TaskChanged(TaskEvent{Time: time.Now(), Kind: TaskCreated, Route: x.rt.agent.Name,
				TaskID: ev.TaskID, ContextID: created.Task.ContextID, To: created.Task.State})
			s.artifactEvents(x, task.Record{}, created)
			s.notify(created)
			continue
		}
		var te *task.TransitionError
		switch {
		case err == nil || errors.As(err, &te):
			s.artifactEvents(x, prev, rec)
			if rec.Task.State != prev.Task.State {
				s.hooks.TaskChanged(TaskEvent{Time: time.Now(), Kind: TaskStateChanged, Route: x.rt.agent.Name,
					TaskID: ev.TaskID, ContextID: rec.Task.ContextID, From: prev.Task.State, To: rec.Task.State})
			}
			if x.req.Push != nil && x.req.TaskID == ev.TaskID && !x.pushAttached {
				// A reply that sets a new config.
				if p, ok := s.attachPush(ctx, x, ref); ok {
					rec.Push = append(rec.Push, p)
				}
			}
			if rec.Task.State != prev.Task.State {
				s.notify(rec)
			}
		default:
			s.log.Error("lifecycle store: recording an event failed", "task_id", ev.TaskID, "error", err)
		}
		if te != nil {
			s.stats.Violations.Add(1)
			s.hooks.TaskChanged(TaskEvent{Time: time.Now(), Kind: TaskViolation, Route: x.rt.agent.Name,
				TaskID: ev.TaskID, ContextID: prev.Task.ContextID, From: te.From, To: te.To})
			s.log.Warn("protocol violation: the upstream reported an illegal transition; the stored state is kept",
				"agent", x.rt.agent.Name, "task_id", ev.TaskID, "from", te.From, "to", te.To)
		}
	}
}

// create records a newly revealed task and returns it as stored; ok is false
// when this request may not create it. Only the request that created it (a send
// or stream without a task id, or a follow-up under the migration rule) may.
func (s *Server) create(ctx context.Context, x *exchange, ev task.Event) (task.Record, bool, error) {
	if x.req.TaskID != "" && x.req.TaskID != ev.TaskID && s.cfg.Lifecycle.UnknownTasks != "allow" {
		return task.Record{}, false, nil
	}
	switch x.req.Operation {
	case task.OpSend, task.OpStream:
	default:
		// A follow-up under the migration rule records only the task it names: a
		// list (or any answer revealing other tasks) claims nothing for its caller.
		if s.cfg.Lifecycle.UnknownTasks != "allow" || x.req.TaskID != ev.TaskID {
			return task.Record{}, false, nil
		}
	}
	state := ev.State
	if state == "" && ev.Task != nil {
		state = ev.Task.State
	}
	if state == "" {
		state = task.Queued
	}
	level := task.Level(x.input.Task.Classification)
	rec := task.Record{
		Task: task.Task{ID: ev.TaskID, ContextID: ev.ContextID, State: state, Chain: x.caller.Chain,
			Owner:          task.Owner{AgentID: x.caller.AgentID, Tenant: x.caller.Tenant, UserID: x.caller.UserID},
			Classification: level},
		Agent: x.rt.agent.Name, Protocol: x.req.Protocol.Name, Version: x.req.Protocol.Version,
	}
	if ev.Task != nil {
		rec.Task.Artifacts = ev.Task.Artifacts
		if rec.Task.ContextID == "" {
			rec.Task.ContextID = ev.Task.ContextID
		}
	}
	if ev.Artifact != nil && ev.Artifact.Name != "" {
		rec.Task.Artifacts = append(rec.Task.Artifacts, ev.Artifact.Name)
	}
	ref := rec.Ref()
	err := s.store.Create(ctx, rec)
	if errors.Is(err, task.ErrExists) { // created concurrently: apply instead
		_, _, err = s.store.Apply(ctx, ref, ev)
		var te *task.TransitionError
		if errors.As(err, &te) {
			err = nil
		}
		return task.Record{}, false, err
	}
	if err != nil {
		return task.Record{}, false, err
	}
	s.attachPush(ctx, x, ref)
	created, ok, err := s.store.Get(ctx, ref)
	return created, ok, err
}

// artifactEvents reports the artifact names rec has that prev had not.
func (s *Server) artifactEvents(x *exchange, prev, rec task.Record) {
	had := map[string]bool{}
	for _, a := range prev.Task.Artifacts {
		had[a] = true
	}
	for _, a := range rec.Task.Artifacts {
		if !had[a] {
			s.hooks.TaskChanged(TaskEvent{Time: time.Now(), Kind: TaskArtifact, Route: x.rt.agent.Name,
				TaskID: rec.Task.ID, ContextID: rec.Task.ContextID, Artifact: a})
		}
	}
}

// ownTasksOnly removes from a list answer the tasks the caller does not own
// (same tenant and agent), so a listing is no way around ownership: the shipped
// policy has no task to check on a list. Tasks writ never saw are removed too,
// unless lifecycle.unknown_tasks lets them through (migration).
func (s *Server) ownTasksOnly(ctx context.Context, x *exchange, body []byte) []byte {
	out, removed, err := x.edge.FilterTaskList(&x.req, body, func(id string) bool {
		rec, ok, err := s.store.Get(ctx, task.Ref{Agent: x.rt.agent.Name, ID: id})
		if err != nil {
			s.log.Error("lifecycle store unavailable; a listed task is removed", "error", err)
			return false
		}
		if !ok {
			return s.cfg.Lifecycle.UnknownTasks == "allow"
		}
		o := rec.Task.Owner
		return o.Tenant == x.caller.Tenant && o.AgentID == x.caller.AgentID
	})
	if err != nil {
		s.log.Warn("a list answer could not be filtered; passed on empty", "agent", x.rt.agent.Name, "error", err)
		return []byte{}
	}
	if removed {
		s.log.Info("tasks the caller does not own were removed from a list answer", "agent", x.rt.agent.Name)
	}
	return out
}
