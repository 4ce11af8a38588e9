package proxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	"github.com/writ-authz/writ/task"
)

// Following a task after its request returned: when a task with push configs is
// still running once its answer has been relayed (an A2A 1.0 returnImmediately, a
// 0.3 non-blocking send), writ keeps watching it — bounded in number of followers
// and in time (the lifecycle TTL) — and observes what the agent says, which
// delivers every change. When the agent's card says it streams, writ subscribes
// to the task's events; otherwise (or when the subscription ends early) it asks
// for the task again with backoff.
const (
	followFirst = 200 * time.Millisecond
	followMax   = 30 * time.Second
)

// maybeFollow starts followers for the running tasks an answer revealed, if they
// carry push configs. A stream follows its task by itself and needs none.
func (s *Server) maybeFollow(x *exchange, events []task.Event) {
	if !s.pushOn() || streams(x.req.Operation) {
		return
	}
	seen := map[string]bool{}
	for _, ev := range events {
		if ev.TaskID == "" || seen[ev.TaskID] {
			continue
		}
		seen[ev.TaskID] = true
		rec, ok, err := s.store.Get(context.Background(), task.Ref{Agent: x.rt.agent.Name, ID: ev.TaskID})
		if err != nil {
			s.log.Error("lifecycle store unavailable; the task is not followed", "task_id", ev.TaskID, "error", err)
			continue
		}
		// A task waiting for its caller (input, auth) moves only when the caller
		// replies, and that reply's own answer is observed: following it too would
		// race two observers of one task.
		if !ok || rec.Task.State.Terminal() || rec.Task.State.Interrupted() || len(rec.Push) == 0 {
			continue
		}
		select {
		case s.followers <- struct{}{}:
			go func(id string) {
				defer func() { <-s.followers }()
				s.follow(x, id)
			}(ev.TaskID)
		default:
			s.log.Warn("too many tasks followed; this one is not", "task_id", ev.TaskID)
		}
	}
}

// follow polls the agent for one task until it ends, expires or is forgotten.
func (s *Server) follow(x *exchange, id string) {
	ctx, cancel := context.WithTimeout(s.life, s.cfg.Lifecycle.TTL)
	defer cancel()
	if s.subscribe(ctx, x, id) {
		return
	}
	method, path, body, get := x.edge.GetTaskRequest(&x.req, id)
	fx := &exchange{rt: x.rt, edge: x.edge, req: *get, caller: x.caller, input: x.input, dec: x.dec}
	wait := followFirst
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, followMax)
		rec, ok, err := s.store.Get(ctx, task.Ref{Agent: x.rt.agent.Name, ID: id})
		if err != nil {
			s.log.Warn("following a task: the lifecycle store is unavailable; retrying", "task_id", id, "error", err)
			continue
		}
		if !ok || rec.Task.State.Terminal() {
			return
		}
		resp, err := s.followRequest(ctx, x, method, path, body)
		if err != nil {
			continue
		}
		raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
		resp.Body.Close()
		if err != nil {
			continue
		}
		events, err := x.edge.ParseResponse(get, resp.StatusCode, raw)
		if err != nil {
			s.log.Warn("following a task: the agent's answer is not valid", "task_id", id, "error", err)
			continue
		}
		s.observe(ctx, fx, events)
	}
}

// followRequest sends writ's own request about a task upstream, on behalf of the
// caller who created it (their headers, writ's Writ-Caller).
func (s *Server) followRequest(ctx context.Context, x *exchange, method, path string, body []byte) (*http.Response, error) {
	target := *x.rt.upstream
	target.Path = joinPath(x.rt.upstream.Path, path)
	req, err := http.NewRequestWithContext(ctx, method, target.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = x.in.Header.Clone()
	stripHop(req.Header)
	req.Header.Del("Content-Length")
	req.Header.Set(CallerHeader, callerHeader(x.caller))
	req.Header.Set(DecisionHeader, x.dec.ID)
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	return s.client.Do(req)
}

// subscribe follows a task through the agent's own event stream, when its card
// says it streams. It reports whether the task was followed to its end; false
// means polling should take over.
func (s *Server) subscribe(ctx context.Context, x *exchange, id string) bool {
	card, _, err := x.rt.cards.get(ctx)
	if err != nil || !card.Capabilities.Streaming {
		return false
	}
	method, path, body, sub, ok := x.edge.SubscribeRequest(&x.req, id)
	if !ok {
		return false
	}
	resp, err := s.followRequest(ctx, x, method, path, body)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !isEventStream(resp.Header.Get("Content-Type")) {
		return false
	}
	fx := &exchange{rt: x.rt, edge: x.edge, req: *sub, caller: x.caller, input: x.input, dec: x.dec}
	reader := x.edge.NewStreamReader(sub, resp.Body, s.cfg.Limits.MaxEventBytes)
	for {
		ev, events, err := reader.Next()
		if err != nil && len(ev.Raw) == 0 {
			break // the stream ended
		}
		if err == nil {
			s.observe(ctx, fx, events)
		}
	}
	rec, ok, err := s.store.Get(ctx, task.Ref{Agent: x.rt.agent.Name, ID: id})
	return err == nil && (!ok || rec.Task.State.Terminal())
}
