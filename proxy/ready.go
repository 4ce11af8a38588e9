package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/writ-authz/writ/adapters"
)

// readyTimeout bounds Ready's checks of all the agents together, and
// Readiness's check of each.
const readyTimeout = 5 * time.Second

// Ready reports whether every routed agent answers: an agent whose protocol
// publishes cards serves its card, any other answers its readiness path (ACP:
// the agent listing). The admin API's /readyz uses it; it stops at the first
// agent that does not answer.
func (c *Core) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for _, rt := range c.routes {
		if _, err := c.readyRoute(ctx, rt); err != nil {
			return err
		}
	}
	return nil
}

// AgentReadiness is what Ready asks of one agent, and what it would say.
type AgentReadiness struct {
	// Agent is the agent's name.
	Agent string
	// Asked is what writ asks the agent for: "its card", "GET <path>", or
	// "" when its protocol has nothing to ask (it is ready as configured).
	Asked string
	// Err is nil when the agent is ready, else Ready's error for it
	// ("<agent>: its card is unavailable: ...").
	Err error
}

// Readiness asks every agent, in configuration order, what Ready asks,
// each within readyTimeout of its own (one agent's silence does not use up
// the next one's time), and reports each: `writ validate -probe`.
func (c *Core) Readiness(ctx context.Context) []AgentReadiness {
	out := make([]AgentReadiness, 0, len(c.cfg.Agents))
	for i := range c.cfg.Agents {
		rt := c.byName[c.cfg.Agents[i].Name]
		if rt == nil {
			continue
		}
		actx, cancel := context.WithTimeout(ctx, readyTimeout)
		asked, err := c.readyRoute(actx, rt)
		cancel()
		out = append(out, AgentReadiness{Agent: rt.agent.Name, Asked: asked, Err: err})
	}
	return out
}

// readyRoute is Ready's check of one agent: what it asked, and the agent's
// error (naming the agent) when it did not answer.
func (c *Core) readyRoute(ctx context.Context, rt *route) (string, error) {
	if cards, ok := rt.edges.Cards(); ok {
		// Fresh, not from the card cache: a cached card would keep an agent
		// that went down looking ready. A card refused for its signature
		// says why.
		if _, _, err := rt.cards.fetchAny(ctx, cards); err != nil {
			if r := (*CardRefusedError)(nil); errors.As(err, &r) {
				return "its card", fmt.Errorf("%s: %w", rt.agent.Name, err)
			}
			return "its card", fmt.Errorf("%s: its card is unavailable: %w", rt.agent.Name, err)
		}
		return "its card", nil
	}
	if p, ok := rt.edges.For("/").(adapters.Prober); ok {
		path := p.ReadyPath()
		if err := c.probe(ctx, rt, path); err != nil {
			return "GET " + path, fmt.Errorf("%s: %w", rt.agent.Name, err)
		}
		return "GET " + path, nil
	}
	return "", nil
}

// probe asks the agent for path and wants a 200.
func (c *Core) probe(ctx context.Context, rt *route, path string) error {
	u := *rt.upstream
	u.Path = joinPath(rt.upstream.Path, path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s answered %d", path, resp.StatusCode)
	}
	return nil
}
