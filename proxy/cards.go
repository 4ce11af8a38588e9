package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/writ-authz/writ/task"
)

// cardTTL is how long an upstream card is served from cache.
const cardTTL = time.Minute

// cardCache fetches and caches an upstream agent's card.
type cardCache struct {
	c  *Core
	rt *route
	mu sync.Mutex
	// card is the parsed upstream card; version its protocol version.
	card    *task.AgentCard
	version string
	fetched time.Time
}

func newCardCache(c *Core, rt *route) *cardCache { return &cardCache{c: c, rt: rt} }

// errNoCards: the route's protocol publishes no card writ serves.
var errNoCards = errors.New("the agent's protocol publishes no card writ serves")

// get returns the upstream card, fetching it when the cached one is stale.
func (cc *cardCache) get(ctx context.Context) (*task.AgentCard, string, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.card != nil && time.Since(cc.fetched) < cardTTL {
		return cc.card, cc.version, nil
	}
	cards, ok := cc.rt.edges.Cards()
	if !ok {
		return nil, "", errNoCards
	}
	lastErr := errNoCards
	for _, path := range cards.CardPaths() {
		card, version, err := cc.fetch(ctx, path)
		if err == nil {
			cc.card, cc.version, cc.fetched = card, version, time.Now()
			return cc.card, cc.version, nil
		}
		lastErr = err
	}
	if cc.card != nil { // a stale card beats none while the agent is unreachable
		return cc.card, cc.version, nil
	}
	return nil, "", lastErr
}

// fetch asks the agent for its card at path, fresh.
func (cc *cardCache) fetch(ctx context.Context, path string) (*task.AgentCard, string, error) {
	cards, ok := cc.rt.edges.Cards()
	if !ok {
		return nil, "", errNoCards
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u := *cc.rt.upstream
	u.Path = joinPath(cc.rt.upstream.Path, path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := cc.c.client.Do(req)
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
	return cards.ParseCard(body)
}

// publicCard is the card writ publishes for a route: the upstream's card with its
// interface URLs moved to the public URL, its security schemes replaced by what
// writ verifies, and nothing of the platform metadata.
func (c *Core) publicCard(ctx context.Context, rt *route) (*task.AgentCard, string, error) {
	up, version, err := rt.cards.get(ctx)
	if err != nil {
		return nil, "", err
	}
	card := *up
	base := rt.agent.PublicURL
	if base == "" {
		base = "http://" + c.cfg.Listen + rt.prefix
	}
	card.Interfaces = nil
	for _, iface := range up.Interfaces {
		iface.URL = rebase(iface.URL, base, rt.upstream)
		card.Interfaces = append(card.Interfaces, iface)
	}
	if len(rt.target.Skills) > 0 {
		card.Skills = rt.target.Skills // the config's skills override the card's
	}
	if c.pushOn() {
		// Push is writ's own capability: it keeps configs and delivers itself.
		card.Capabilities.PushNotifications = true
	}
	card.SecuritySchemes = c.schemes
	card.Security = nil
	for _, sc := range c.schemes {
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
