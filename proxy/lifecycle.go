package proxy

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/events"
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

// Why a request is answered like one for a missing task or context.
const (
	missingTask    = "unknown_task"
	missingEvicted = "evicted_task"
	missingRetired = "retired_task"
	missingContext = "foreign_context"
	// missingReference: a task the message references is not the caller's,
	// or writ never saw it (the two are one answer).
	missingReference = "unowned_reference"
	retiredContext   = "retired_context"
)

// lookup loads the lifecycle record of the task the request continues, and
// checks the context (or ACP session) it names. It says why the request must
// be answered like one for a missing task or context: a task writ never saw on
// this agent (unless the migration rule lets the policy decide), a task
// evicted while another caller owned it, a task writ held once and no longer
// does (its retired id is never claimable again), a context another caller
// owns, a context writ held once and no longer does (unless a task the caller
// owns in it vouches for the caller), a referenced task that is not the
// caller's. A store that cannot answer refuses the request.
func (c *Core) lookup(ctx context.Context, x *exchange) (string, *task.Fault) {
	missing, f := c.references(ctx, x)
	if missing == "" && f == nil {
		missing, f = c.find(ctx, x)
	}
	if missing != "" && x.record == nil && continues(&x.req) {
		// Decided as a foreign task is: with an owner (nobody the caller can
		// be), so that the policy takes the same path and the answer costs
		// what a foreign task's costs (DESIGN §7: in bytes and in cost).
		x.record = &task.Record{Task: task.Task{ID: x.req.TaskID, State: task.Running}}
	}
	return missing, f
}

// find is lookup's check of the task and the context the request names.
func (c *Core) find(ctx context.Context, x *exchange) (string, *task.Fault) {
	agent := x.rt.agent.Name
	if continues(&x.req) {
		rec, ok, err := c.store.Get(ctx, task.Ref{Agent: agent, ID: x.req.TaskID})
		if err != nil {
			return "", c.storeDown(ctx, "looking up a task", err)
		}
		if ok {
			x.record = &rec
		}
	}
	if ctxID := x.req.ContextID; ctxID != "" {
		owner, ok, err := c.store.Context(ctx, task.Ref{Agent: agent, ID: ctxID})
		switch {
		case errors.Is(err, task.ErrRetired):
			// A context writ no longer holds is nobody's to claim again; the
			// caller's own task in it still lets the caller go on there (a
			// task outlives its context when it is updated and the context is
			// not claimed again).
			if r := x.record; r == nil || r.Task.ContextID != ctxID || !task.SameOwner(r.Task.Owner, ownerOf(x)) {
				return retiredContext, nil
			}
		case err != nil:
			return "", c.storeDown(ctx, "looking up a context", err)
		case ok && !task.SameOwner(owner, ownerOf(x)):
			return missingContext, nil
		}
	}
	if !continues(&x.req) || x.record != nil {
		return "", nil
	}
	if c.cfg.Lifecycle.UnknownTasks != "allow" {
		return missingTask, nil
	}
	// Under the migration rule the policy decides about a task writ never saw,
	// and its answer claims it (ClaimTask checks again, atomically); never one
	// writ evicted from another owner, nor one writ held once and forgot.
	owner, evicted, err := c.store.Tombstone(ctx, task.Ref{Agent: agent, ID: x.req.TaskID})
	switch {
	case errors.Is(err, task.ErrRetired):
		return missingRetired, nil
	case err != nil:
		return "", c.storeDown(ctx, "looking up an evicted task", err)
	case evicted && !task.SameOwner(owner, ownerOf(x)):
		return missingEvicted, nil
	}
	return "", nil
}

// references checks the tasks a message references (A2A referenceTaskIds):
// an agent loads each into the context it answers from (the JS SDK's
// DefaultRequestHandler and a2a-go's ReferencedTasksLoader both do), so each
// is read as the task itself would be, and must be the caller's. A
// reference to a task writ never saw is answered exactly like one to another
// caller's task, and lifecycle.unknown_tasks does not apply: writ cannot say
// whose an unseen task is, the agent would load it if it exists, and letting
// only unseen ones through would tell a caller which ids are someone else's.
// Nothing of a reference is ever recorded or claimed. Every distinct id is
// read whatever the others are (one store read each, foreign or unknown
// alike), then the first one not owned is named, in the request's order.
// More references than limits.max_referenced_tasks are refused before any
// read.
func (c *Core) references(ctx context.Context, x *exchange) (string, *task.Fault) {
	if x.req.Message == nil || len(x.req.Message.References) == 0 {
		return "", nil
	}
	refs := x.req.Message.References
	if n, limit := len(refs), c.cfg.Limits.MaxReferencedTasks; n > limit {
		return "", task.NewFault(task.KindInvalidParams,
			fmt.Sprintf("the message references %d tasks; at most %d are accepted", n, limit))
	}
	owner := ownerOf(x)
	owned := make(map[string]bool, len(refs))
	for _, id := range refs {
		if _, read := owned[id]; read {
			continue
		}
		rec, ok, err := c.store.Get(ctx, task.Ref{Agent: x.rt.agent.Name, ID: id})
		if err != nil {
			return "", c.storeDown(ctx, "looking up a referenced task", err)
		}
		owned[id] = ok && task.SameOwner(rec.Task.Owner, owner)
	}
	for _, id := range refs {
		if !owned[id] {
			x.missingID = id
			return missingReference, nil
		}
	}
	return "", nil
}

// ownerOf is the caller as a task owner.
func ownerOf(x *exchange) task.Owner {
	return task.Owner{AgentID: x.caller.AgentID, Tenant: x.caller.Tenant, UserID: x.caller.UserID}
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
// illegal transition keeps the stored state and is logged as a protocol
// violation. A store failure is logged and counted; when it loses the record
// of the task this request created, p.failed is set (the answer is refused).
func (c *Core) observe(ctx context.Context, p *Plan, evs []task.Event) {
	x := p.x
	for _, ev := range evs {
		if ev.TaskID == "" || ev.Kind == task.EventMessage || ev.Kind == task.EventError {
			continue
		}
		ref := task.Ref{Agent: x.rt.agent.Name, ID: ev.TaskID}
		prev, rec, err := p.writes().Apply(ctx, ref, ev)
		if errors.Is(err, task.ErrNotFound) {
			c.created(ctx, p, ev)
			continue
		}
		var te *task.TransitionError
		if err != nil && !errors.As(err, &te) {
			if mayCreate(&x.req, ev.TaskID) {
				// The store cannot say whether this request's own task is
				// recorded: its answer must not reach the caller (fail closed).
				p.failed = err
			}
			if c.storeFault(ctx, err) {
				c.log.Error("lifecycle store: recording an event failed; the stored state lags until the next one",
					"agent", x.rt.agent.Name, "task_id", ev.TaskID, "error", err)
			} else {
				c.log.Debug("the caller cancelled the request while an event was recorded; the stored state lags until the next one",
					"agent", x.rt.agent.Name, "task_id", ev.TaskID)
			}
			continue
		}
		c.artifactEvents(x, prev, rec)
		if rec.Task.State != prev.Task.State {
			c.events.TaskChanged(events.Task{Time: time.Now(), Kind: events.TaskStateChanged, Route: x.rt.agent.Name,
				TaskID: ev.TaskID, ContextID: rec.Task.ContextID, From: prev.Task.State, To: rec.Task.State})
		}
		if x.req.Push != nil && x.req.TaskID == ev.TaskID {
			// A reply that sets a new config.
			if pc, ok := c.attachPush(ctx, p, ref); ok {
				rec.Push = append(rec.Push, pc)
			}
		}
		if rec.Task.State != prev.Task.State {
			c.notify(ctx, rec)
		}
		if te != nil {
			c.stats.Violations.Add(1)
			c.events.TaskChanged(events.Task{Time: time.Now(), Kind: events.TaskViolation, Route: x.rt.agent.Name,
				TaskID: ev.TaskID, ContextID: prev.Task.ContextID, From: te.From, To: te.To})
			c.log.Warn("protocol violation: the upstream reported an illegal transition; the stored state is kept",
				"agent", x.rt.agent.Name, "task_id", ev.TaskID, "from", te.From, "to", te.To)
		}
	}
}

// created records a task an answer revealed for the first time, if this
// request may create it, and reports it.
func (c *Core) created(ctx context.Context, p *Plan, ev task.Event) {
	x := p.x
	rec, ok, err := c.create(ctx, p, ev)
	if errors.Is(err, task.ErrRetired) {
		// The claim lost to a retirement after the lookup (the lookup refuses
		// a retired task before it is forwarded): the answer is about a task
		// the caller may not see, so it is answered not found.
		c.log.Info("task not found", "agent", x.rt.agent.Name, "task_id", ev.TaskID, "why", "retired_at_claim",
			"caller_agent_id", x.caller.AgentID, "caller_tenant", x.caller.Tenant)
		p.failed = err
		return
	}
	if err != nil {
		if c.storeFault(ctx, err) {
			c.log.Error("lifecycle store: recording a new task failed", "agent", x.rt.agent.Name, "task_id", ev.TaskID, "error", err)
		} else {
			c.log.Debug("the caller cancelled the request while a new task was recorded", "agent", x.rt.agent.Name, "task_id", ev.TaskID)
		}
		p.failed = err
		return
	}
	if !ok {
		if x.req.Operation != task.OpList && ev.TaskID != x.req.TaskID {
			// An answer about a task this request neither created nor named: an
			// agent (or something in front of it) reporting another task's
			// state. Nothing of it is recorded.
			c.stats.Violations.Add(1)
			c.events.TaskChanged(events.Task{Time: time.Now(), Kind: events.TaskViolation, Route: x.rt.agent.Name,
				TaskID: ev.TaskID, ContextID: ev.ContextID, To: ev.State})
			c.log.Warn("protocol violation: an answer reported a task its request did not create or name; ignored",
				"agent", x.rt.agent.Name, "task_id", ev.TaskID, "request_task_id", x.req.TaskID, "operation", x.req.Operation)
		}
		return
	}
	c.events.TaskChanged(events.Task{Time: time.Now(), Kind: events.TaskCreated, Route: x.rt.agent.Name,
		TaskID: ev.TaskID, ContextID: rec.Task.ContextID, DecisionID: x.dec.ID, To: rec.Task.State})
	c.artifactEvents(x, task.Record{}, rec)
	c.notify(ctx, rec)
}

// mayCreate reports whether an answer's task id may be the task the request
// creates (a send or stream naming no task) or names.
func mayCreate(req *task.Request, id string) bool {
	if req.TaskID != "" {
		return req.TaskID == id
	}
	return req.Operation == task.OpSend || req.Operation == task.OpStream
}

// create records a newly revealed task and returns it as stored; ok is false
// when this request may not create it. Only the request that created it (a send
// or stream without a task id, or a follow-up under the migration rule) may.
func (c *Core) create(ctx context.Context, p *Plan, ev task.Event) (task.Record, bool, error) {
	x := p.x
	migrate := c.cfg.Lifecycle.UnknownTasks == "allow"
	if x.req.TaskID != "" && x.req.TaskID != ev.TaskID && !migrate {
		return task.Record{}, false, nil
	}
	switch x.req.Operation {
	case task.OpSend, task.OpStream:
	default:
		// A follow-up under the migration rule records only the task it names: a
		// list (or any answer revealing other tasks) claims nothing for its caller.
		if !migrate || x.req.TaskID != ev.TaskID {
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
	rec := task.Record{
		Task: task.Task{ID: ev.TaskID, ContextID: ev.ContextID, State: state, Chain: x.caller.Chain,
			Owner:          task.Owner{AgentID: x.caller.AgentID, Tenant: x.caller.Tenant, UserID: x.caller.UserID},
			Classification: task.Level(x.input.Task.Classification)},
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
	record := p.writes().Create
	if x.req.TaskID == ev.TaskID {
		// The request named a task writ did not hold (the migration rule, or
		// its record went since the lookup): a claim, which the store checks
		// again in the same step as it records it.
		record = p.writes().ClaimTask
	}
	err := record(ctx, rec)
	if errors.Is(err, task.ErrExists) { // created concurrently: apply instead
		_, _, err = p.writes().Apply(ctx, ref, ev)
		var te *task.TransitionError
		if errors.As(err, &te) {
			err = nil
		}
		return task.Record{}, false, err
	}
	if err != nil {
		return task.Record{}, false, err
	}
	if ctxID := rec.Task.ContextID; ctxID != "" {
		// The context belongs to whoever created its first task.
		owner, err := p.writes().ClaimContext(ctx, task.Ref{Agent: ref.Agent, ID: ctxID}, rec.Task.Owner)
		switch {
		case errors.Is(err, task.ErrRetired):
			// A context writ held once (or, at the retired-id set's
			// false-positive rate, a fresh one) stays unowned: requests
			// naming it are answered not found. The task itself is recorded.
			c.log.Info("a new task joined a retired context; the context stays nobody's",
				"agent", ref.Agent, "task_id", ref.ID, "context_id", ctxID)
		case err != nil:
			return task.Record{}, false, err
		case !task.SameOwner(owner, rec.Task.Owner):
			c.log.Warn("a new task joined a context another caller owns; the context keeps its owner",
				"agent", ref.Agent, "task_id", ref.ID, "context_id", ctxID)
		}
	}
	c.attachPush(ctx, p, ref)
	return p.writes().Get(ctx, ref)
}

// artifactEvents reports the artifact names rec has that prev had not.
func (c *Core) artifactEvents(x *exchange, prev, rec task.Record) {
	had := map[string]bool{}
	for _, a := range prev.Task.Artifacts {
		had[a] = true
	}
	for _, a := range rec.Task.Artifacts {
		if !had[a] {
			c.events.TaskChanged(events.Task{Time: time.Now(), Kind: events.TaskArtifact, Route: x.rt.agent.Name,
				TaskID: rec.Task.ID, ContextID: rec.Task.ContextID, Artifact: a})
		}
	}
}

// ownTasksOnly removes from a list answer the tasks the caller does not own
// (same tenant and agent), so a listing is no way around ownership: the shipped
// policy has no task to check on a list. Tasks writ never saw are removed too,
// unless lifecycle.unknown_tasks lets them through (migration). A task the
// store cannot answer for is removed.
func (c *Core) ownTasksOnly(ctx context.Context, x *exchange, body []byte) []byte {
	l, ok := x.edge.(adapters.Lister)
	if !ok {
		return body
	}
	out, removed, err := l.FilterTaskList(&x.req, body, func(id string) bool {
		rec, ok, err := c.store.Get(ctx, task.Ref{Agent: x.rt.agent.Name, ID: id})
		if err != nil {
			if c.storeFault(ctx, err) {
				c.log.Error("lifecycle store unavailable; a listed task is removed", "error", err)
			}
			return false
		}
		if !ok {
			return c.cfg.Lifecycle.UnknownTasks == "allow"
		}
		return task.SameOwner(rec.Task.Owner, task.Owner{Tenant: x.caller.Tenant, AgentID: x.caller.AgentID})
	})
	if err != nil {
		c.log.Warn("a list answer could not be filtered; passed on empty", "agent", x.rt.agent.Name, "error", err)
		return []byte{}
	}
	if removed {
		c.log.Info("tasks the caller does not own were removed from a list answer", "agent", x.rt.agent.Name)
	}
	return out
}

// upstreamErrors reports the protocol errors among an answer's events (a
// JSON-RPC error, an HTTP+JSON error status, an ACP Error, an error event of
// a stream) as upstream_error events with the decision that let the request
// through: the caller gets the agent's error as the agent sent it, and the
// decision log says the request was allowed and the agent refused it.
func (c *Core) upstreamErrors(p *Plan, evs []task.Event) {
	for _, ev := range evs {
		if ev.Kind != task.EventError || ev.Err == nil {
			continue
		}
		x := p.x
		u := &events.UpstreamError{Code: ev.Err.Code, Kind: string(ev.Err.Kind), Message: bounded(ev.Err.Message, events.MaxUpstreamMessage)}
		c.events.TaskChanged(events.Task{Time: time.Now(), Kind: events.TaskUpstreamError, Route: x.rt.agent.Name,
			TaskID: ev.TaskID, ContextID: ev.ContextID, DecisionID: x.dec.ID, Upstream: u})
		c.log.Info("the agent answered an allowed request with an error; passed on", "agent", x.rt.agent.Name,
			"operation", x.req.Operation, "decision_id", x.dec.ID, "code", u.Code, "kind", u.Kind, "message", u.Message)
	}
}

// bounded is s cut to at most n bytes, at a character boundary.
func bounded(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
