package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/proxy/writheader"
	"github.com/writ-authz/writ/task"
)

// Following a task after its request returned: when a task with push configs is
// still running once its answer has been relayed (an A2A 1.0 returnImmediately, a
// 0.3 non-blocking send), writ keeps watching it — bounded in number of followers
// and in time (the lifecycle TTL) — and observes what the agent says, which
// delivers every change. With a work queue the followed tasks are kept there,
// under this process's lease, and resumed after a restart (or by another
// replica) — see durable.go. When the agent's card says it streams, writ subscribes
// to the task's events; otherwise (or when the subscription ends early) it asks
// for the task again with backoff.
const (
	followFirst = 200 * time.Millisecond
	followMax   = 30 * time.Second
)

// maybeFollow starts followers for the running tasks an answer revealed, if they
// carry push configs. A stream follows its task by itself and needs none.
// With a work queue (Deps.Work), each followed task is kept there first, so
// that a restart or another replica resumes following it.
func (c *Core) maybeFollow(p *Plan, evs []task.Event) {
	x := p.x
	if !c.pushOn() || p.Streams {
		return
	}
	seen := map[string]bool{}
	for _, ev := range evs {
		if ev.TaskID == "" || seen[ev.TaskID] {
			continue
		}
		seen[ev.TaskID] = true
		ref := task.Ref{Agent: x.rt.agent.Name, ID: ev.TaskID}
		rec, ok, err := c.store.Get(c.life, ref)
		if err != nil {
			c.stats.StoreErrors.Add(1)
			c.log.Error("lifecycle store unavailable; the task is not followed", "task_id", ev.TaskID, "error", err)
			continue
		}
		// A task waiting for its caller (input, auth) moves only when the caller
		// replies, and that reply's own answer is observed: following it too would
		// race two observers of one task.
		if !ok || rec.Task.State.Terminal() || rec.Task.State.Interrupted() || len(rec.Push) == 0 {
			continue
		}
		id := ""
		if c.work != nil {
			id = followID(ref)
			if !c.roomFor(task.OwnerKey(ownerOf(x))) {
				// No follower free: kept unheld, so that the first one free
				// (here or on another replica) claims it.
				if c.keep(x, ev.TaskID, 0) {
					c.log.Info("too many tasks followed; this one waits for a free follower", "task_id", ev.TaskID)
					continue
				}
				id = "" // not kept: followed here if a follower frees up, as without a queue
			} else if !c.keep(x, ev.TaskID, c.work.Lease) {
				id = ""
			}
		}
		c.startFollower(x, ev.TaskID, id, false)
	}
}

// startFollower follows task id in the background if a follower is free. A
// follower kept in the work queue (itemID != "") is held by this process
// while it runs, removed from the queue when the task ends, and left there
// when writ stops or another holder takes it over. It reports whether a
// follower started.
func (c *Core) startFollower(x *exchange, id, itemID string, resumed bool) bool {
	owner := task.OwnerKey(ownerOf(x))
	select {
	case c.followers <- struct{}{}:
	default:
		if itemID == "" {
			c.log.Warn("too many tasks followed; this one is not", "task_id", id)
		}
		return false // a kept one stays unheld: claimed again later
	}
	if !c.takeShare(owner) {
		<-c.followers
		if itemID == "" {
			c.log.Warn("too many of this caller's tasks followed; this one is not", "task_id", id)
		}
		return false // a kept one is claimed again when its lease runs out
	}
	ctx, cancel := context.WithCancelCause(c.life)
	if itemID != "" && !c.hold(itemID, cancel) {
		cancel(nil)
		c.dropShare(owner)
		<-c.followers
		return false // followed here already
	}
	go func() {
		defer func() { <-c.followers }()
		defer c.dropShare(owner)
		defer cancel(nil)
		ended := c.follow(ctx, x, id, resumed)
		if itemID != "" {
			c.release(itemID, ended && !errors.Is(context.Cause(ctx), errLeaseLost) && c.life.Err() == nil)
		}
	}()
	return true
}

// follower is the plan of writ's own requests about a task it follows: the
// caller and decision of the request that created it.
func (c *Core) follower(x *exchange, req *task.Request) *Plan {
	fx := *x
	fx.req = *req
	return &Plan{core: c, x: &fx, pushAttached: true}
}

// follow watches one task until it ends, expires or is forgotten (true), or
// ctx ends first (false; expiry after the lifecycle TTL counts as the end).
func (c *Core) follow(ctx context.Context, x *exchange, id string, resumed bool) bool {
	ttl, cancel := context.WithTimeout(ctx, c.cfg.Lifecycle.TTL)
	defer cancel()
	if c.subscribe(ttl, x, id) {
		return true
	}
	poller, ok := x.edge.(adapters.Poller)
	ans, ok2 := x.edge.(adapters.Answers)
	if !ok || !ok2 {
		return true
	}
	method, path, body, get := poller.GetTaskRequest(&x.req, id)
	fp := c.follower(x, get)
	ref := task.Ref{Agent: x.rt.agent.Name, ID: id}
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
		rec, ok, err := c.store.Get(ttl, ref)
		if err != nil {
			c.stats.StoreErrors.Add(1)
			c.log.Warn("following a task: the lifecycle store is unavailable; retrying", "task_id", id, "error", err)
			continue
		}
		if !ok || rec.Task.State.Terminal() {
			return true
		}
		resp, err := c.followRequest(ttl, x, method, path, body)
		if err != nil {
			continue
		}
		raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes))
		resp.Body.Close()
		if err != nil {
			continue
		}
		evs, err := ans.ParseResponse(get, resp.StatusCode, raw)
		if err != nil {
			c.log.Warn("following a task: the agent's answer is not valid", "task_id", id, "error", err)
			continue
		}
		c.observe(ttl, fp, evs)
		fp.sync(ttl)
	}
}

// followRequest sends writ's own request about a task upstream, on behalf of the
// caller who created it (their headers, writ's Writ-Caller). A follower resumed
// from the work queue has only the protocol's non-secret headers of that
// request (see followSpec): the agent gets writ's Writ-Caller and no
// credentials of the caller's.
func (c *Core) followRequest(ctx context.Context, x *exchange, method, path string, body []byte) (*http.Response, error) {
	target := *x.rt.upstream
	target.Path = joinPath(x.rt.upstream.Path, path)
	req, err := http.NewRequestWithContext(ctx, method, target.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = x.inc.Header.Clone()
	stripHop(req.Header)
	req.Header.Del("Content-Length")
	req.Header.Set(writheader.Caller, writheader.CallerValue(x.caller))
	req.Header.Set(writheader.Decision, x.dec.ID)
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.client.Do(req)
}

// subscribe follows a task through the agent's own event stream, when its card
// says it streams. It reports whether the task was followed to its end; false
// means polling should take over.
func (c *Core) subscribe(ctx context.Context, x *exchange, id string) bool {
	sub, ok := x.edge.(adapters.Subscriber)
	if !ok {
		return false
	}
	card, _, err := x.rt.cards.get(ctx)
	if err != nil || !card.Capabilities.Streaming {
		return false
	}
	method, path, body, req := sub.SubscribeRequest(&x.req, id)
	resp, err := c.followRequest(ctx, x, method, path, body)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !isEventStream(resp.Header.Get("Content-Type")) {
		return false
	}
	relay := c.follower(x, req).Relay(ctx, resp.Body)
	for {
		if _, err := relay.Next(); err != nil {
			break
		}
	}
	rec, ok, err := c.store.Get(ctx, task.Ref{Agent: x.rt.agent.Name, ID: id})
	if err != nil {
		// Not ended as far as writ can tell: the follower goes on polling.
		c.stats.StoreErrors.Add(1)
		c.log.Warn("following a task: the lifecycle store is unavailable after the stream", "task_id", id, "error", err)
		return false
	}
	return !ok || rec.Task.State.Terminal()
}

// perOwner is the followers one owner may have at once.
func (c *Core) perOwner() int {
	if n := c.cfg.Lifecycle.MaxFollowersPerOwner; n > 0 {
		return n
	}
	return max(1, cap(c.followers)/4)
}

// roomFor reports whether a follower of owner's would start now.
func (c *Core) roomFor(owner string) bool {
	c.followMu.Lock()
	defer c.followMu.Unlock()
	return len(c.followers) < cap(c.followers) && c.byOwner[owner] < c.perOwner()
}

// takeShare counts one more follower of owner's, unless its share is full.
func (c *Core) takeShare(owner string) bool {
	c.followMu.Lock()
	defer c.followMu.Unlock()
	if c.byOwner[owner] >= c.perOwner() {
		return false
	}
	c.byOwner[owner]++
	return true
}

// dropShare counts one follower of owner's less.
func (c *Core) dropShare(owner string) {
	c.followMu.Lock()
	defer c.followMu.Unlock()
	if c.byOwner[owner]--; c.byOwner[owner] <= 0 {
		delete(c.byOwner, owner)
	}
}
