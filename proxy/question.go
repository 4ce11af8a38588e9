package proxy

import (
	"context"
	"fmt"
	"time"

	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/task"
)

// A Question is a decision asked without a request to forward: what a policy
// decision door (the AuthZEN PDP, proxy/authzen) asks on behalf of an
// enforcement point that holds the request itself. Admit's pipeline begins
// with bytes — the canonical target, routing by path and host, framing, the
// adapter's parse — and a question has none: its asker already says which
// agent, which operation and what the request carries. Building a protocol
// request from it would put protocol vocabulary in the door and decide on
// bytes the door invented, so the core takes the parsed request instead and
// runs the rest of Admit's pipeline on it, through the same functions: the
// route by name, the lifecycle lookup (ownership of the task, its context
// and every referenced task), the policy decision with its cache, the
// disclosure rules, the lifecycle law and one decision event. A Question is
// never forwarded, served or recorded: the store is only read.
type Question struct {
	// Mode names the door (events.ModeAuthZEN), for the events.
	Mode string
	// Agent is the protected agent asked about, by its configured name.
	Agent string
	// Caller is who the question is about, as the door established it (a
	// credential it verified through the identity resolver, or a caller its
	// platform vouches for). The zero Caller is anonymous.
	Caller identity.Caller
	// Request is the operation and what the request carries, as an adapter
	// would have parsed it (Operation must be one of task.Operations).
	Request task.Request
	// Method, Path, Host and SourceAddress are what the policy input's
	// request member records: the asker's view of the original request
	// ("" where it gives none).
	Method, Path, Host, SourceAddress string
}

// Verdict is the core's answer to a Question: what a caller of the sidecar
// would have learnt, without the protocol's rendering.
type Verdict struct {
	// Allow: the request may go on (dry-run included: see DryRun).
	Allow bool
	// DecisionID is the decision's id, "" where the answer must look like one
	// that had no decision (a hidden agent, a task the caller may not see).
	DecisionID string
	// Fault is the refusal (nil when allowed): its Kind, its neutral Message
	// and its Denials (each code with its neutral reason) are exactly what a
	// refused caller learns through any other door.
	Fault *task.Fault
	// NotFound: the agent does not exist, or is hidden from this caller (a
	// card it may not see); Fault is nil then.
	NotFound bool
	// DryRun: the policy denied, and dry-run let the request through.
	DryRun    bool
	Operation task.Operation
}

// Decide decides a Question as Admit decides a request: the same lookup,
// decision, disclosure rules, lifecycle law and decision event. It is safe
// for concurrent use.
func (c *Core) Decide(ctx context.Context, q Question) Verdict {
	start := time.Now()
	c.stats.Requests.Add(1)
	if q.Mode == "" {
		q.Mode = events.ModeAuthZEN
	}
	op := q.Request.Operation
	rt, ok := c.byName[q.Agent]
	if !ok {
		return Verdict{NotFound: true, Operation: op}
	}
	if !op.Known() {
		return Verdict{Operation: op, Fault: task.NewFault(task.KindUnknownOperation, fmt.Sprintf("unknown operation %q", op))}
	}
	x := &exchange{rt: rt, req: q.Request, caller: q.Caller,
		inc: Incoming{Mode: q.Mode, Method: q.Method, Path: q.Path, Host: q.Host, RemoteAddr: q.SourceAddress}}
	if x.caller.Method == "" {
		x.caller = identity.Anonymous()
	}
	if f := namedAgent(x); f != nil {
		return Verdict{Operation: op, Fault: f}
	}
	missing, f := c.lookup(ctx, x)
	if f != nil {
		return Verdict{Operation: op, Fault: f}
	}
	ev := c.decide(ctx, x, start)
	f, hidden := c.judgement(x, missing)
	v := Verdict{Allow: f == nil && !hidden, DecisionID: x.dec.ID, Fault: f, NotFound: hidden, DryRun: x.dec.DryRun,
		Operation: op}
	switch {
	case hidden:
		ev.Refused, v.DecisionID = "not_found", ""
	case f != nil:
		ev.Refused = string(f.Kind)
		if f.Kind == task.KindTaskNotFound {
			// Answered like a missing task, which has no decision (refuse does
			// the same for the other doors).
			v.DecisionID = ""
		}
	}
	c.events.Decided(ev)
	c.logMissing(x, missing, f)
	return v
}
