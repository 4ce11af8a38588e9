package follow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/lease"
)

// Work makes following survive the process: the followed tasks are kept in
// Queue (kind task.WorkFollow) under leases held by Holder, renewed every
// third of Lease, so that a restart — or, on a shared store, another replica
// — resumes following what this process no longer can. Push deliveries are
// kept by the push.Deliverer, in the same queue.
type Work struct {
	Queue task.WorkQueue
	// Holder names this process in the leases (unique per process).
	Holder string
	// Lease is how long an unrenewed lease lasts (default DefaultWorkLease).
	Lease time.Duration
}

// DefaultWorkLease is Work.Lease's default.
const DefaultWorkLease = 30 * time.Second

// followWork is the follower's share of the work queue: the followers it
// holds.
type followWork struct {
	Work
	mu   sync.Mutex
	held map[string]context.CancelCauseFunc // item id → its follower's cancel
}

// errLeaseLost ends a follower whose lease another holder took over.
var errLeaseLost = errors.New("the follow lease was taken over")

// startWork keeps the followers in w's queue and resumes the ones nobody
// holds, from now until Close. nil keeps them in memory only.
func (f *Follower) startWork(w *Work) {
	if w == nil || w.Queue == nil {
		return
	}
	fw := &followWork{Work: *w, held: map[string]context.CancelCauseFunc{}}
	if fw.Lease <= 0 {
		fw.Lease = DefaultWorkLease
	}
	f.work = fw
	go f.workLoop()
}

// workID names a followed task in the queue: one item per task.
func workID(ref task.Ref) string {
	sum := sha256.Sum256([]byte(ref.Agent + "\x00" + ref.ID))
	return hex.EncodeToString(sum[:16])
}

// keep puts a followed task in the queue, leased to this process for ttl (0:
// claimable by any holder at once). It reports whether it did.
func (f *Follower) keep(p *proxy.Plan, id string, ttl time.Duration) bool {
	fw := f.work
	if fw == nil {
		return false
	}
	raw, err := json.Marshal(p.FollowSpec(id))
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(f.life, lease.Timeout)
	defer cancel()
	ref := task.Ref{Agent: p.Agent(), ID: id}
	if err := fw.Queue.Put(ctx, task.Work{Kind: task.WorkFollow, ID: workID(ref), Payload: raw}, fw.Holder, ttl); err != nil {
		f.storeError()
		f.log.Warn("following a task: it could not be persisted; a restart will not resume it", "task_id", id, "error", err)
		return false
	}
	return true
}

// hold registers a follower of item id; a lost lease cancels it.
func (f *Follower) hold(id string, cancel context.CancelCauseFunc) bool {
	fw := f.work
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
func (f *Follower) release(id string, done bool) {
	fw := f.work
	fw.mu.Lock()
	delete(fw.held, id)
	fw.mu.Unlock()
	if !done {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), lease.Timeout)
	defer cancel()
	if err := fw.Queue.Done(ctx, task.WorkFollow, id, fw.Holder); err != nil && !errors.Is(err, task.ErrNotHolder) {
		f.storeError()
		f.log.Warn("a followed task that ended could not be removed from the work queue; it will be resumed and found ended",
			"error", err)
	}
}

// workLoop renews the leases of the followers this process holds and claims
// the followed tasks nobody holds, at once and then every third of the
// lease, until Close.
func (f *Follower) workLoop() {
	lease.Loop(f.life, f.work.Lease, func() {
		f.renewFollowers()
		f.claimFollowers()
	})
}

// renewFollowers extends the leases of the followers this process holds;
// one whose lease another holder took over is cancelled.
func (f *Follower) renewFollowers() {
	fw := f.work
	fw.mu.Lock()
	ids := slices.Collect(maps.Keys(fw.held))
	fw.mu.Unlock()
	lost, err := lease.Renew(f.life, fw.Queue, task.WorkFollow, fw.Holder, ids, fw.Lease)
	if err != nil {
		f.storeError()
		f.log.Warn("the leases of followed tasks could not be renewed", "held", len(ids), "error", err)
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
func (f *Follower) claimFollowers() {
	fw := f.work
	room := cap(f.followers) - len(f.followers)
	if room <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(f.life, lease.Timeout)
	defer cancel()
	ws, err := fw.Queue.Claim(ctx, task.WorkFollow, fw.Holder, room, fw.Lease)
	if err != nil {
		if f.life.Err() == nil {
			f.storeError()
			f.log.Warn("followed tasks could not be claimed", "error", err)
		}
		return
	}
	for _, w := range ws {
		var s proxy.FollowSpec
		var p *proxy.Plan
		err := json.Unmarshal(w.Payload, &s)
		if err == nil {
			p, err = f.core.Resume(s)
		}
		if err != nil {
			f.log.Warn("a followed task cannot be resumed; dropped", "task_id", s.TaskID, "agent", s.Agent, "error", err)
			if err := fw.Queue.Done(ctx, task.WorkFollow, w.ID, fw.Holder); err != nil && !errors.Is(err, task.ErrNotHolder) {
				f.storeError()
				f.log.Warn("a dropped followed task could not be removed from the work queue", "task_id", s.TaskID, "error", err)
			}
			continue
		}
		if f.startFollower(p, s.TaskID, w.ID, true) {
			f.log.Info("resumed following a task", "agent", s.Agent, "task_id", s.TaskID)
		}
	}
}
