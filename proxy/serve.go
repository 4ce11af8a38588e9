package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/proxy/writheader"
	"github.com/writ-authz/writ/task"
)

// Serving: the answers writ gives itself. Each returns a rendered answer in
// an Outcome; none writes to a connection of its own.

// served is the Serve outcome of an answer to an admitted request.
func (c *Core) served(x *exchange, out wire.Rendered) Outcome {
	out.Header = withHeader(out.Header, writheader.Decision, x.dec.ID)
	return Outcome{Kind: Serve, Answer: out, DecisionID: x.dec.ID, DryRun: x.dec.DryRun, Denials: x.dec.Denials,
		Operation: x.req.Operation, Protocol: x.req.Protocol, Route: x.rt.agent.Name}
}

// serveCard answers an allowed card request with the card writ publishes.
func (c *Core) serveCard(ctx context.Context, x *exchange) Outcome {
	cards, _ := x.rt.edges.Cards()
	card, version, err := c.publicCard(ctx, x.rt)
	if err != nil {
		c.log.Warn("the agent's card could not be fetched", "agent", x.rt.agent.Name, "error", err)
		return c.refuse(x, task.NewFault(task.KindUpstreamUnavailable, "the agent's card is unavailable"))
	}
	body, err := c.renderCard(x.rt, cards, card, version)
	if err != nil {
		c.log.Error("the agent's card could not be rendered", "agent", x.rt.agent.Name, "error", err)
		return c.refuse(x, task.NewFault(task.KindInternal, "rendering the card failed"))
	}
	return c.served(x, wire.Rendered{Status: http.StatusOK, ContentType: "application/json", Body: body,
		Header: http.Header{"Cache-Control": {"private, max-age=60"}}})
}

// servePush answers a push-config operation from the lifecycle store; the agent
// never sees it (so push works in front of agents that do not support it). The
// decision has run: the caller owns the task, and a new config passed the
// callback policy.
func (c *Core) servePush(ctx context.Context, x *exchange) Outcome {
	ps, ok := x.edge.(adapters.Push)
	if !ok {
		return c.refuse(x, task.NewFault(task.KindPushNotSupported, "this protocol has no push notifications"))
	}
	if x.record == nil {
		// No record (lifecycle.unknown_tasks: allow let the policy decide): writ
		// keeps no configs for a task it never saw.
		return c.refuse(x, notFound(x.req.TaskID))
	}
	ref := x.record.Ref()
	var configs []task.PushConfig
	switch x.req.Operation {
	case task.OpPushSet:
		p, err := c.store.SetPush(ctx, ref, *x.req.Push)
		if err != nil {
			return c.refuse(x, c.pushFault(ctx, x, err))
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
			return c.refuse(x, notFound(x.req.TaskID+" push config "+x.req.PushConfigID))
		}
	case task.OpPushList:
		configs = x.record.Push
	case task.OpPushDelete:
		if err := c.store.DeletePush(ctx, ref, x.req.PushConfigID); err != nil {
			return c.refuse(x, c.pushFault(ctx, x, err))
		}
	}
	return c.served(x, ps.RenderPushResult(&x.req, configs))
}

func (c *Core) pushFault(ctx context.Context, x *exchange, err error) *task.Fault {
	switch {
	case errors.Is(err, task.ErrPushLimit):
		return task.NewFault(task.KindInvalidParams, err.Error())
	case errors.Is(err, task.ErrNotFound), errors.Is(err, task.ErrPushNotFound):
		return notFound(x.req.TaskID)
	}
	return c.storeDown(ctx, "a push-config operation", err)
}

// directory lists the routed agents this caller may see, ranked by how many of
// the wanted tags one skill carries, then by name, rendered by renderer (A2A
// cards or ACP manifests). Filter before you list: an agent the policy would
// not let this caller discover never appears, because its card would enter
// the caller's context. Each agent is one decision.
func (c *Core) directory(ctx context.Context, inc Incoming, renderer adapters.CardRenderer, start time.Time) Outcome {
	caller, idErr := c.identify(ctx, inc)
	wanted := wantedTags(inc)
	type entry struct {
		overlap int
		name    string
		rt      *route
		card    *task.AgentCard
		version string
	}
	var visible []entry
	for _, rt := range c.routes {
		x := &exchange{rt: rt, inc: inc, caller: caller, idErr: idErr,
			req: task.Request{Operation: task.OpDiscover, Protocol: task.Protocol{Name: "writ", Method: inc.Method + " " + inc.Path}}}
		ev := c.decide(ctx, x, start)
		if !x.dec.Allow {
			ev.Refused = "not_listed"
			c.events.Decided(ev)
			continue
		}
		c.events.Decided(ev)
		// A slow agent does not hold the directory up: after a short wait its
		// entry is described from the cached card, or from writ's config.
		wctx, cancel := context.WithTimeout(ctx, c.cfg.Limits.DirectoryCardWait)
		card, version, err := c.publicCard(wctx, rt)
		cancel()
		if err != nil {
			card, version = configCard(rt), ""
		}
		skills := rt.target.Skills
		if len(skills) == 0 {
			skills = card.Skills
		}
		overlap := tagOverlap(skills, wanted)
		if len(wanted) > 0 && overlap == 0 {
			continue
		}
		visible = append(visible, entry{overlap, rt.agent.Name, rt, card, version})
	}
	sort.Slice(visible, func(i, j int) bool {
		if visible[i].overlap != visible[j].overlap {
			return visible[i].overlap > visible[j].overlap
		}
		return visible[i].name < visible[j].name
	})
	items := make([]json.RawMessage, 0, len(visible))
	for _, e := range visible {
		raw, err := c.renderCard(e.rt, renderer, e.card, e.version)
		if err != nil {
			c.log.Warn("a directory entry could not be rendered", "agent", e.name, "error", err)
			continue
		}
		items = append(items, raw)
	}
	return directoryAnswer(items)
}

// directoryFor is the directory for inc: the protected agents on ingress,
// the targets the local agent may delegate to on egress.
func (c *Core) directoryFor(ctx context.Context, inc Incoming, renderer adapters.CardRenderer, start time.Time) Outcome {
	if inc.Egress != nil {
		return c.egressDirectory(ctx, inc, renderer, start)
	}
	return c.directory(ctx, inc, renderer, start)
}

// wantedTags are the tags a directory request asks for (?tags=a,b).
func wantedTags(inc Incoming) []string {
	var wanted []string
	for t := range strings.SplitSeq(inc.Query.Get("tags"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			wanted = append(wanted, t)
		}
	}
	return wanted
}

// renderDirectory is the directory answer of cards, in order.
func (c *Core) renderDirectory(renderer adapters.CardRenderer, cards []*task.AgentCard) Outcome {
	items := make([]json.RawMessage, 0, len(cards))
	for _, card := range cards {
		raw, err := renderer.RenderCard(card, "")
		if err != nil {
			c.log.Warn("a directory entry could not be rendered", "agent", card.Name, "error", err)
			continue
		}
		items = append(items, raw)
	}
	return directoryAnswer(items)
}

// directoryAnswer is the Serve outcome of a directory's rendered entries.
func directoryAnswer(items []json.RawMessage) Outcome {
	body, _ := json.Marshal(map[string]any{"agents": items})
	return Outcome{Kind: Serve, Operation: task.OpDiscover, Protocol: task.Protocol{Name: "writ"},
		Answer: wire.Rendered{Status: http.StatusOK, ContentType: "application/json", Body: body,
			Header: http.Header{"Cache-Control": {"no-store"}}}}
}

// renderCard renders a card writ serves for rt, signed by writ where the
// protocol's cards carry signatures: every card writ renders is one it
// rewrote, so only writ's own signature can verify over it.
func (c *Core) renderCard(rt *route, r adapters.CardRenderer, card *task.AgentCard, version string) ([]byte, error) {
	body, err := r.RenderCard(card, version)
	if err != nil {
		return nil, err
	}
	if sc, ok := r.(adapters.SignedCards); ok {
		return sc.SignCard(body, version, rt.signer)
	}
	return body, nil
}

// tagOverlap is the largest number of wanted tags one skill carries.
func tagOverlap(skills []task.Skill, wanted []string) int {
	best := 0
	for _, sk := range skills {
		n := 0
		for _, w := range wanted {
			for _, t := range sk.Tags {
				if t == w {
					n++
					break
				}
			}
		}
		best = max(best, n)
	}
	return best
}

// configCard describes an agent from writ's config when its own card is
// unavailable (an ACP agent, or one that is down).
func configCard(rt *route) *task.AgentCard {
	return &task.AgentCard{Name: rt.agent.Name, Skills: rt.target.Skills,
		Interfaces: []task.Interface{{URL: rt.agent.PublicURL}}}
}
