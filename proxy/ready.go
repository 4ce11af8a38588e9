package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/writ-authz/writ/adapters"
)

// Ready reports whether every routed agent answers: an agent whose protocol
// publishes cards serves its card, any other answers its readiness path (ACP:
// the agent listing). The admin API's /readyz uses it.
func (c *Core) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, rt := range c.routes {
		if cards, ok := rt.edges.Cards(); ok {
			// Fresh, not from the card cache: a cached card would keep an agent
			// that went down looking ready. A card refused for its signature
			// says why.
			if _, _, err := rt.cards.fetchAny(ctx, cards); err != nil {
				if r := (*CardRefusedError)(nil); errors.As(err, &r) {
					return fmt.Errorf("%s: %w", rt.agent.Name, err)
				}
				return fmt.Errorf("%s: its card is unavailable: %w", rt.agent.Name, err)
			}
			continue
		}
		if p, ok := rt.edges.For("/").(adapters.Prober); ok {
			if err := c.probe(ctx, rt, p.ReadyPath()); err != nil {
				return fmt.Errorf("%s: %w", rt.agent.Name, err)
			}
		}
	}
	return nil
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
