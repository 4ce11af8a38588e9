package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/proxy/writheader"
	"github.com/writ-authz/writ/task"
)

// Following a task after its request returned: when a task with push configs
// is still running once its answer was passed on (an A2A 1.0
// returnImmediately, a 0.3 non-blocking send), writ keeps asking the agent
// about it, so that every change is observed and delivered. When, how many
// and for how long is the Follower's (proxy/follow); how to ask is the
// core's: Subscribe and Poll send writ's own requests about the task, on
// behalf of the caller whose request created it, and observe the answers
// like any other. A follower kept across restarts keeps a FollowSpec and
// rebuilds the plan with Resume.

// Follower follows the tasks that outlive the request that revealed them
// (proxy/follow). The core tells it of every task a whole answer revealed,
// when writ delivers push notifications itself (a stream follows its task by
// itself); it decides which to follow. Safe for concurrent use.
type Follower interface {
	// Follow is told of the distinct tasks an answer to p revealed. It must
	// not wait for the agent (it may read the lifecycle store).
	Follow(p *Plan, taskIDs []string)
	// Close stops following; the core's Close calls it.
	Close()
}

// follow tells the follower of the tasks an answer revealed.
func (c *Core) follow(p *Plan, evs []task.Event) {
	if c.follower == nil || !c.pushOn() || p.Streams {
		return
	}
	var ids []string
	seen := map[string]bool{}
	for _, ev := range evs {
		if ev.TaskID == "" || seen[ev.TaskID] {
			continue
		}
		seen[ev.TaskID] = true
		ids = append(ids, ev.TaskID)
	}
	if len(ids) > 0 {
		c.follower.Follow(p, ids)
	}
}

// FollowSpec is what is kept of a followed task (in the work queue): enough
// to ask the agent about it again, as writ, and nothing of the caller's
// credentials. A resumed follower sends the agent writ's Writ-Caller and the
// protocol's own non-secret headers only: never the caller's Authorization
// or cookies.
type FollowSpec struct {
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

// followSpecVersion is the FollowSpec.V this core writes and resumes.
const followSpecVersion = 1

// FollowSpec is what to keep of task id, which an answer to p revealed, to
// follow it again later (Resume).
func (p *Plan) FollowSpec(id string) FollowSpec {
	x := p.x
	s := FollowSpec{V: followSpecVersion, Agent: x.rt.agent.Name, TaskID: id, Path: x.in.Path, Tenant: x.req.Tenant,
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

// Resume rebuilds, from a kept spec, the plan of the request that created a
// followed task: its route and protocol edge, the caller as the Writ-Caller
// document told it, the decision id. The plan is for following (Subscribe,
// Poll, FollowSpec, Owner); it forwards nothing. An agent no longer
// configured, or a spec of another version, is an error.
func (c *Core) Resume(s FollowSpec) (*Plan, error) {
	if s.V != followSpecVersion {
		return nil, errors.New("unknown version")
	}
	rt := c.byName[s.Agent]
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
	return &Plan{core: c, x: x}, nil
}

// follower is the plan of writ's own request req about a task p revealed:
// the caller and decision of the request that created it.
func (p *Plan) follower(req *task.Request) *Plan {
	fx := *p.x
	fx.req = *req
	return &Plan{core: p.core, x: &fx, pushAttached: true}
}

// Subscribe follows task id through the agent's own event stream, when its
// card says it streams, observing every event until the stream ends or ctx
// does. It reports whether the agent streamed the task; false (the protocol
// or the agent does not stream, or refused) means polling should take over.
func (p *Plan) Subscribe(ctx context.Context, id string) bool {
	x := p.x
	sub, ok := x.edge.(adapters.Subscriber)
	if !ok {
		return false
	}
	card, _, err := x.rt.cards.get(ctx)
	if err != nil || !card.Capabilities.Streaming {
		return false
	}
	method, path, body, req := sub.SubscribeRequest(&x.req, id)
	resp, err := p.ask(ctx, method, path, body)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !isEventStream(resp.Header.Get("Content-Type")) {
		return false
	}
	r := p.follower(req).relay(ctx, resp.Body)
	for {
		if _, err := r.Next(); err != nil {
			return true
		}
	}
}

// Polls reports whether the protocol lets writ ask the agent for a task
// (Poll).
func (p *Plan) Polls() bool {
	_, ok := p.x.edge.(adapters.Poller)
	_, ok2 := p.x.edge.(adapters.Answers)
	return ok && ok2
}

// Poll asks the agent for task id once and observes its answer. A request
// that fails is the next poll's to retry; an answer not valid for the
// protocol is logged and believed in nothing.
func (p *Plan) Poll(ctx context.Context, id string) {
	x := p.x
	poller, ok := x.edge.(adapters.Poller)
	ans, ok2 := x.edge.(adapters.Answers)
	if !ok || !ok2 {
		return
	}
	method, path, body, get := poller.GetTaskRequest(&x.req, id)
	resp, err := p.ask(ctx, method, path, body)
	if err != nil {
		return
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes))
	resp.Body.Close()
	if err != nil {
		return
	}
	evs, err := ans.ParseResponse(get, resp.StatusCode, raw)
	if err != nil {
		p.core.log.Warn("following a task: the agent's answer is not valid", "task_id", id, "error", err)
		return
	}
	fp := p.follower(get)
	p.core.observe(ctx, fp, evs)
	fp.sync(ctx)
}

// ask sends writ's own request about a task upstream, on behalf of the caller
// who created it (their headers, writ's Writ-Caller). A follower resumed from
// the work queue has only the protocol's non-secret headers of that request
// (see FollowSpec): the agent gets writ's Writ-Caller and no credentials of
// the caller's.
func (p *Plan) ask(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	x := p.x
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
	return p.core.client.Do(req)
}
