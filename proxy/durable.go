package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/proxy/writheader"
	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/lease"
)

// Work makes the core's own background work survive it: the tasks it
// follows are kept in Queue (kind task.WorkFollow) under leases held by
// Holder, renewed every third of Lease, so that a restart — or, on a shared
// store, another replica — resumes following what this process no longer
// can. Push deliveries are kept by the push.Deliverer, in the same queue.
type Work struct {
	Queue task.WorkQueue
	// Holder names this process in the leases (unique per process).
	Holder string
	// Lease is how long an unrenewed lease lasts (default 30s).
	Lease time.Duration
}

// DefaultWorkLease is Work.Lease's default.
const DefaultWorkLease = 30 * time.Second

// followWork is the core's share of the work queue: the followers it holds.
type followWork struct {
	Work
	mu   sync.Mutex
	held map[string]context.CancelCauseFunc // item id → its follower's cancel
}

// errLeaseLost ends a follower whose lease another holder took over.
var errLeaseLost = errors.New("the follow lease was taken over")

// startWork keeps the core's followers in w's queue and resumes the ones
// nobody holds, from now until Close. nil keeps them in memory only.
func (c *Core) startWork(w *Work) {
	if w == nil || w.Queue == nil {
		return
	}
	fw := &followWork{Work: *w, held: map[string]context.CancelCauseFunc{}}
	if fw.Lease <= 0 {
		fw.Lease = DefaultWorkLease
	}
	c.work = fw
	go c.workLoop()
}

// followSpec is what is kept of a followed task: enough to ask the agent
// about it again, as writ, and nothing of the caller's credentials. A resumed
// follower sends the agent writ's Writ-Caller and the protocol's own
// non-secret headers only: never the caller's Authorization or cookies.
type followSpec struct {
	V      int    `json:"v"`
	Agent  string `json:"agent"`
	TaskID string `json:"task_id"`
	// Path is the request's path below the route (it picks the protocol edge).
	Path     string        `json:"path"`
	Protocol task.Protocol `json:"protocol"`
	// Tenant is the tenant the request itself named (A2A 1.0's path prefix).
	Tenant string `json:"tenant,omitempty"`
	// Caller is the Writ-Caller document of the caller who created the task.
	Caller     string `json:"caller"`
	DecisionID string `json:"decision_id"`
	// Classification is the request's, for a record re-created under
	// lifecycle.unknown_tasks: allow.
	Classification string      `json:"classification,omitempty"`
	Header         http.Header `json:"header,omitempty"`
}

func specOf(x *exchange, id string) followSpec {
	s := followSpec{V: 1, Agent: x.rt.agent.Name, TaskID: id, Path: x.in.Path, Tenant: x.req.Tenant,
		Protocol:   task.Protocol{Name: x.req.Protocol.Name, Version: x.req.Protocol.Version, Binding: x.req.Protocol.Binding},
		Caller:     writheader.CallerValue(x.caller),
		DecisionID: x.dec.ID}
	if x.input != nil {
		s.Classification = x.input.Task.Classification
	}
	// The caller's protocol negotiation headers (the adapter's), never its
	// credentials, are what a resumed follower sends again.
	var negotiation []string
	if n, ok := x.edge.(adapters.Negotiator); ok {
		negotiation = n.NegotiationHeaders()
	}
	for _, k := range negotiation {
		if v := x.inc.Header.Values(k); len(v) > 0 {
			if s.Header == nil {
				s.Header = http.Header{}
			}
			s.Header[http.CanonicalHeaderKey(k)] = append([]string(nil), v...)
		}
	}
	return s
}

// followID names a followed task in the queue: one item per task.
func followID(ref task.Ref) string {
	sum := sha256.Sum256([]byte(ref.Agent + "\x00" + ref.ID))
	return hex.EncodeToString(sum[:16])
}

// exchangeOf rebuilds the exchange a follower needs from a kept spec: the
// route, the edge, the caller as the Writ-Caller document told it, the
// decision id.
func (c *Core) exchangeOf(s followSpec) (*exchange, error) {
	var rt *route
	for _, r := range c.routes {
		if r.agent.Name == s.Agent {
			rt = r
		}
	}
	if rt == nil {
		return nil, errors.New("no agent " + s.Agent + " in the configuration")
	}
	caller, err := writheader.ParseCaller(s.Caller)
	if err != nil {
		return nil, err
	}
	h := s.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	x := &exchange{rt: rt, edge: rt.edges.For(s.Path),
		inc:    Incoming{Mode: events.ModeSidecar, Method: http.MethodPost, Path: s.Path, Header: h},
		in:     wire.Inbound{Method: http.MethodPost, Path: s.Path, Header: h},
		req:    task.Request{Operation: task.OpSend, Protocol: s.Protocol, Tenant: s.Tenant, TaskID: s.TaskID},
		caller: caller, dec: authz.Decision{ID: s.DecisionID},
		input: &authz.Input{Task: authz.InputTask{ID: s.TaskID, Classification: s.Classification}}}
	return x, nil
}

// keep puts a followed task in the queue, leased to this process for ttl (0:
// claimable by any holder at once). It reports whether it did.
func (c *Core) keep(x *exchange, id string, ttl time.Duration) bool {
	fw := c.work
	if fw == nil {
		return false
	}
	raw, err := json.Marshal(specOf(x, id))
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(c.life, lease.Timeout)
	defer cancel()
	ref := task.Ref{Agent: x.rt.agent.Name, ID: id}
	if err := fw.Queue.Put(ctx, task.Work{Kind: task.WorkFollow, ID: followID(ref), Payload: raw}, fw.Holder, ttl); err != nil {
		c.stats.StoreErrors.Add(1)
		c.log.Warn("following a task: it could not be persisted; a restart will not resume it", "task_id", id, "error", err)
		return false
	}
	return true
}

// hold registers a follower of item id; a lost lease cancels it.
func (c *Core) hold(id string, cancel context.CancelCauseFunc) bool {
	fw := c.work
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.held[id] != nil {
		return false // already followed here
	}
	fw.held[id] = cancel
	return true
}

// release ends this process's hold on item id: done removes it from the
// queue (the task ended, expired or was forgotten); otherwise it stays, for
// whoever claims it once its lease runs out (shutdown, or a lost lease).
func (c *Core) release(id string, done bool) {
	fw := c.work
	fw.mu.Lock()
	delete(fw.held, id)
	fw.mu.Unlock()
	if !done {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), lease.Timeout)
	defer cancel()
	if err := fw.Queue.Done(ctx, task.WorkFollow, id, fw.Holder); err != nil && !errors.Is(err, task.ErrNotHolder) {
		c.stats.StoreErrors.Add(1)
		c.log.Warn("a followed task that ended could not be removed from the work queue; it will be resumed and found ended",
			"error", err)
	}
}

// workLoop renews the leases of the followers this process holds and claims
// the followed tasks nobody holds, at once and then every third of the
// lease, until Close.
func (c *Core) workLoop() {
	lease.Loop(c.life, c.work.Lease, func() {
		c.renewFollowers()
		c.claimFollowers()
	})
}

// renewFollowers extends the leases of the followers this process holds;
// one whose lease another holder took over is cancelled.
func (c *Core) renewFollowers() {
	fw := c.work
	fw.mu.Lock()
	ids := slices.Collect(maps.Keys(fw.held))
	fw.mu.Unlock()
	lost, err := lease.Renew(c.life, fw.Queue, task.WorkFollow, fw.Holder, ids, fw.Lease)
	if err != nil {
		c.stats.StoreErrors.Add(1)
		c.log.Warn("the leases of followed tasks could not be renewed", "held", len(ids), "error", err)
		return
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	for _, id := range lost {
		if cancel := fw.held[id]; cancel != nil {
			cancel(errLeaseLost)
		}
	}
}

// claimFollowers resumes following the tasks nobody holds, as many as there
// are free followers.
func (c *Core) claimFollowers() {
	fw := c.work
	room := cap(c.followers) - len(c.followers)
	if room <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(c.life, lease.Timeout)
	defer cancel()
	ws, err := fw.Queue.Claim(ctx, task.WorkFollow, fw.Holder, room, fw.Lease)
	if err != nil {
		if c.life.Err() == nil {
			c.stats.StoreErrors.Add(1)
			c.log.Warn("followed tasks could not be claimed", "error", err)
		}
		return
	}
	for _, w := range ws {
		var s followSpec
		err := json.Unmarshal(w.Payload, &s)
		var x *exchange
		if err == nil && s.V != 1 {
			err = errors.New("unknown version")
		}
		if err == nil {
			x, err = c.exchangeOf(s)
		}
		if err != nil {
			c.log.Warn("a followed task cannot be resumed; dropped", "task_id", s.TaskID, "agent", s.Agent, "error", err)
			if err := fw.Queue.Done(ctx, task.WorkFollow, w.ID, fw.Holder); err != nil && !errors.Is(err, task.ErrNotHolder) {
				c.stats.StoreErrors.Add(1)
				c.log.Warn("a dropped followed task could not be removed from the work queue", "task_id", s.TaskID, "error", err)
			}
			continue
		}
		if c.startFollower(x, s.TaskID, w.ID, true) {
			c.log.Info("resumed following a task", "agent", s.Agent, "task_id", s.TaskID)
		}
	}
}
