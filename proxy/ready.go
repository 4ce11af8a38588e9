package proxy

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/writ-authz/writ/adapters/a2a"
)

// Ready reports whether every routed agent answers: an A2A agent serves its card,
// an ACP agent its agent listing. The admin API's /readyz uses it.
func (s *Server) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, rt := range s.routes {
		if rt.agent.Protocol == "acp" {
			u := *rt.upstream
			u.Path = joinPath(rt.upstream.Path, "/agents")
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
			if err != nil {
				return err
			}
			resp, err := s.client.Do(req)
			if err != nil {
				return fmt.Errorf("%s: %w", rt.agent.Name, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: GET /agents answered %d", rt.agent.Name, resp.StatusCode)
			}
			continue
		}
		// Fresh, not from the card cache: a cached card would keep an agent that
		// went down looking ready.
		var err error
		for _, path := range []string{a2a.CardPath, a2a.LegacyCardPath} {
			if _, err = rt.cards.fetch(ctx, path); err == nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("%s: its card is unavailable: %w", rt.agent.Name, err)
		}
	}
	return nil
}
