package proxy

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Ready reports whether every routed agent answers: an A2A agent serves its card,
// an ACP agent its agent listing. The admin API's /readyz uses it.
func (s *Server) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, rt := range s.routes {
		edge := rt.cardEdge()
		if len(edge.CardPaths()) == 0 {
			if err := s.probe(ctx, rt, edge.ReadyPath()); err != nil {
				return fmt.Errorf("%s: %w", rt.agent.Name, err)
			}
			continue
		}
		// Fresh, not from the card cache: a cached card would keep an agent that
		// went down looking ready.
		var err error
		for _, path := range edge.CardPaths() {
			if _, _, err = rt.cards.fetch(ctx, path); err == nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("%s: its card is unavailable: %w", rt.agent.Name, err)
		}
	}
	return nil
}

// probe asks the agent for path and wants a 200.
func (s *Server) probe(ctx context.Context, rt *route, path string) error {
	u := *rt.upstream
	u.Path = joinPath(rt.upstream.Path, path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s answered %d", path, resp.StatusCode)
	}
	return nil
}
