package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/task"
)

// cardTTL is how long an upstream card is served from cache.
const cardTTL = time.Minute

// cardCache fetches and caches an upstream agent's card.
type cardCache struct {
	s  *Server
	rt *route
	mu sync.Mutex
	// card is the parsed upstream card; version its protocol version.
	card    *task.AgentCard
	version string
	fetched time.Time
}

func newCardCache(s *Server, rt *route) *cardCache { return &cardCache{s: s, rt: rt} }

// get returns the upstream card, fetching it when the cached one is stale.
func (c *cardCache) get(ctx context.Context) (*task.AgentCard, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.card != nil && time.Since(c.fetched) < cardTTL {
		return c.card, c.version, nil
	}
	lastErr := fmt.Errorf("the agent's protocol publishes no card writ serves")
	for _, path := range c.rt.cardEdge().CardPaths() {
		card, version, err := c.fetch(ctx, path)
		if err == nil {
			c.card, c.version, c.fetched = card, version, time.Now()
			return c.card, c.version, nil
		}
		lastErr = err
	}
	if c.card != nil { // a stale card beats none while the agent is unreachable
		return c.card, c.version, nil
	}
	return nil, "", lastErr
}

func (c *cardCache) fetch(ctx context.Context, path string) (*task.AgentCard, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u := *c.rt.upstream
	u.Path = joinPath(c.rt.upstream.Path, path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := c.s.client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("GET %s: HTTP %d", path, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, "", err
	}
	return c.rt.cardEdge().ParseCard(body)
}

// cardEdge is the adapter of the route's card: the one that serves its
// well-known card path (A2A, for an auto route).
func (rt *route) cardEdge() adapters.Edge { return rt.edge("/.well-known/agent-card.json") }

// publicCard is the card writ publishes for a route: the upstream's card with its
// interface URLs moved to the public URL, its security schemes replaced by what
// writ verifies, and nothing of the platform metadata.
func (s *Server) publicCard(ctx context.Context, rt *route) (*task.AgentCard, string, error) {
	up, version, err := rt.cards.get(ctx)
	if err != nil {
		return nil, "", err
	}
	card := *up
	base := rt.agent.PublicURL
	if base == "" {
		base = "http://" + s.cfg.Listen + rt.prefix
	}
	card.Interfaces = nil
	for _, iface := range up.Interfaces {
		iface.URL = rebase(iface.URL, base, rt.upstream)
		card.Interfaces = append(card.Interfaces, iface)
	}
	if len(rt.target.Skills) > 0 {
		card.Skills = rt.target.Skills // the config's skills override the card's
	}
	if s.pushOn() {
		// Push is writ's own capability: it keeps configs and delivers itself.
		card.Capabilities.PushNotifications = true
	}
	card.SecuritySchemes = s.schemes
	card.Security = nil
	for _, sc := range s.schemes {
		card.Security = append(card.Security, map[string][]string{sc.Name: {}})
	}
	return &card, version, nil
}

// rebase moves an interface URL onto the public base URL: a URL of the upstream
// keeps its path below the upstream's own base; a URL that already is under the
// public base stays; any other URL (an address writ does not guard) becomes the
// base itself.
func rebase(raw, base string, upstream *url.URL) string {
	u, err := url.Parse(raw)
	if err != nil {
		return base
	}
	if strings.HasPrefix(raw, strings.TrimSuffix(base, "/")) {
		return raw
	}
	if u.Host != upstream.Host {
		return base
	}
	rest := strings.TrimPrefix(u.Path, strings.TrimSuffix(upstream.Path, "/"))
	if rest == "/" {
		rest = ""
	}
	return strings.TrimSuffix(base, "/") + rest
}

// serveCard answers an allowed card request (a denied one never gets here).
func (s *Server) serveCard(w http.ResponseWriter, r *http.Request, x *exchange) {
	card, version, err := s.publicCard(r.Context(), x.rt)
	if err != nil {
		s.log.Warn("the agent's card could not be fetched", "agent", x.rt.agent.Name, "error", err)
		s.fail(w, x, task.NewFault(task.KindUpstreamUnavailable, "the agent's card is unavailable"))
		return
	}
	body, err := x.edge.RenderCard(card, version)
	if err != nil {
		s.fail(w, x, task.NewFault(task.KindInternal, "rendering the card failed"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "private, max-age=60")
	w.Header().Set(DecisionHeader, x.dec.ID)
	_, _ = w.Write(body)
}
