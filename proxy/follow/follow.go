// Package follow follows the tasks that outlive their request: when a task
// with push configs is still running once its answer has been passed on (an
// A2A 1.0 returnImmediately, a 0.3 non-blocking send), writ keeps watching it
// — bounded in number of followers, in followers per owner, and in time (the
// lifecycle TTL) — and observes what the agent says, which delivers every
// change. When the agent's card says it streams, a follower subscribes to the
// task's events; otherwise (or when the subscription ends early) it asks for
// the task again with backoff. With a work queue the followed tasks are kept
// there, under this process's lease, and resumed after a restart or by
// another replica (durable.go).
//
// It is the admission core's Follower (proxy.Deps.Follow) and uses only the
// core's exported API: the plan of the request that revealed a task asks the
// agent about it (proxy.Plan.Subscribe, Poll), and a kept task's plan is
// rebuilt by proxy.Core.Resume.
package follow

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/task"
)

// The polling backoff: the first ask after followFirst, doubling up to
// followMax.
const (
	followFirst = 200 * time.Millisecond
	followMax   = 30 * time.Second
)

// Options are what a follower needs besides the core.
type Options struct {
	// Store (required) is the lifecycle store the core records in: a
	// follower reads it to know whether a task still needs following.
	Store task.Store
	// Lifecycle bounds the followers (max_followers,
	// max_followers_per_owner) and their time (ttl).
	Lifecycle config.Lifecycle
	// Logger defaults to slog.Default.
	Logger *slog.Logger
	// Work, when set, keeps the followed tasks in a durable work queue,
	// resumed after a restart or by another replica.
	Work *Work
}

// Follower follows tasks for one core; it is the proxy.Follower New builds.
// Safe for concurrent use.
type Follower struct {
	core  *proxy.Core
	store task.Store
	log   *slog.Logger
	ttl   time.Duration
	// followers bounds the tasks followed at once, and byOwner (under mu)
	// counts them per owner, up to perOwner.
	followers chan struct{}
	perOwner  int
	mu        sync.Mutex
	byOwner   map[string]int
	// life ends the followers when the core closes.
	life  context.Context
	close context.CancelFunc
	// work keeps followed tasks in a durable queue (nil: in memory only).
	work *followWork
}

var _ proxy.Follower = (*Follower)(nil)

// New returns what proxy.Deps.Follow takes: the constructor of the core's
// follower, which starts resuming kept tasks at once (with a work queue).
func New(o Options) func(*proxy.Core) proxy.Follower {
	return func(core *proxy.Core) proxy.Follower { return start(core, o) }
}

func start(core *proxy.Core, o Options) *Follower {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	f := &Follower{core: core, store: o.Store, log: o.Logger, ttl: o.Lifecycle.TTL,
		followers: make(chan struct{}, max(1, o.Lifecycle.MaxFollowers)), byOwner: map[string]int{}}
	f.perOwner = o.Lifecycle.MaxFollowersPerOwner
	if f.perOwner <= 0 {
		f.perOwner = max(1, cap(f.followers)/4)
	}
	f.life, f.close = context.WithCancel(context.Background())
	f.startWork(o.Work)
	return f
}

// Close stops every follower and the work loop; what is kept in the work
// queue stays there, for whoever claims it once the leases run out.
func (f *Follower) Close() { f.close() }

// storeError counts a failed lifecycle store operation with the core's.
func (f *Follower) storeError() { f.core.Stats().StoreErrors.Add(1) }

// Follow starts followers for the running tasks an answer to p revealed, if
// they carry push configs. With a work queue, each followed task is kept
// there first, so that a restart or another replica resumes following it.
func (f *Follower) Follow(p *proxy.Plan, ids []string) {
	for _, id := range ids {
		ref := task.Ref{Agent: p.Agent(), ID: id}
		rec, ok, err := f.store.Get(f.life, ref)
		if err != nil {
			f.storeError()
			f.log.Error("lifecycle store unavailable; the task is not followed", "task_id", id, "error", err)
			continue
		}
		// A task waiting for its caller (input, auth) moves only when the caller
		// replies, and that reply's own answer is observed: following it too would
		// race two observers of one task.
		if !ok || rec.Task.State.Terminal() || rec.Task.State.Interrupted() || len(rec.Push) == 0 {
			continue
		}
		itemID := ""
		if f.work != nil {
			itemID = workID(ref)
			if !f.roomFor(task.OwnerKey(p.Owner())) {
				// No follower free: kept unheld, so that the first one free
				// (here or on another replica) claims it.
				if f.keep(p, id, 0) {
					f.log.Info("too many tasks followed; this one waits for a free follower", "task_id", id)
					continue
				}
				itemID = "" // not kept: followed here if a follower frees up, as without a queue
			} else if !f.keep(p, id, f.work.Lease) {
				itemID = ""
			}
		}
		f.startFollower(p, id, itemID, false)
	}
}

// startFollower follows task id in the background if a follower is free. A
// follower kept in the work queue (itemID != "") is held by this process
// while it runs, removed from the queue when the task ends, and left there
// when writ stops or another holder takes it over. It reports whether a
// follower started.
func (f *Follower) startFollower(p *proxy.Plan, id, itemID string, resumed bool) bool {
	owner := task.OwnerKey(p.Owner())
	select {
	case f.followers <- struct{}{}:
	default:
		if itemID == "" {
			f.log.Warn("too many tasks followed; this one is not", "task_id", id)
		}
		return false // a kept one stays unheld: claimed again later
	}
	if !f.takeShare(owner) {
		<-f.followers
		if itemID == "" {
			f.log.Warn("too many of this caller's tasks followed; this one is not", "task_id", id)
		}
		return false // a kept one is claimed again when its lease runs out
	}
	ctx, cancel := context.WithCancelCause(f.life)
	if itemID != "" && !f.hold(itemID, cancel) {
		cancel(nil)
		f.dropShare(owner)
		<-f.followers
		return false // followed here already
	}
	go func() {
		defer func() { <-f.followers }()
		defer f.dropShare(owner)
		defer cancel(nil)
		ended := f.follow(ctx, p, id, resumed)
		if itemID != "" {
			f.release(itemID, ended && !errors.Is(context.Cause(ctx), errLeaseLost) && f.life.Err() == nil)
		}
	}()
	return true
}

// follow watches one task until it ends, expires or is forgotten (true), or
// ctx ends first (false; expiry after the lifecycle TTL counts as the end).
func (f *Follower) follow(ctx context.Context, p *proxy.Plan, id string, resumed bool) bool {
	ttl, cancel := context.WithTimeout(ctx, f.ttl)
	defer cancel()
	ref := task.Ref{Agent: p.Agent(), ID: id}
	if p.Subscribe(ttl, id) {
		rec, ok, err := f.store.Get(ttl, ref)
		switch {
		case err != nil:
			// Not ended as far as writ can tell: the follower goes on polling.
			f.storeError()
			f.log.Warn("following a task: the lifecycle store is unavailable after the stream", "task_id", id, "error", err)
		case !ok || rec.Task.State.Terminal():
			return true
		}
	}
	if !p.Polls() {
		return true
	}
	wait := followFirst
	if resumed {
		wait = 0 // what changed while nobody followed it is asked at once
	}
	for {
		select {
		case <-ttl.Done():
			return ctx.Err() == nil // the TTL ran out: the task is forgotten
		case <-time.After(wait):
		}
		wait = min(max(wait*2, followFirst), followMax)
		rec, ok, err := f.store.Get(ttl, ref)
		if err != nil {
			f.storeError()
			f.log.Warn("following a task: the lifecycle store is unavailable; retrying", "task_id", id, "error", err)
			continue
		}
		if !ok || rec.Task.State.Terminal() {
			return true
		}
		p.Poll(ttl, id)
	}
}

// roomFor reports whether a follower of owner's would start now.
func (f *Follower) roomFor(owner string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.followers) < cap(f.followers) && f.byOwner[owner] < f.perOwner
}

// takeShare counts one more follower of owner's, unless its share is full.
func (f *Follower) takeShare(owner string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byOwner[owner] >= f.perOwner {
		return false
	}
	f.byOwner[owner]++
	return true
}

// dropShare counts one follower of owner's less.
func (f *Follower) dropShare(owner string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byOwner[owner]--; f.byOwner[owner] <= 0 {
		delete(f.byOwner, owner)
	}
}
