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

	"golang.org/x/sync/singleflight"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/task"
)

// cardCache fetches and caches an upstream agent's card. One fetch per agent
// runs at a time (the callers who want the card meanwhile wait for that one),
// a failure is remembered for a while (so a hung agent is asked again only
// after it), and a caller may stop waiting when its own deadline comes (the
// fetch goes on for the next).
type cardCache struct {
	c     *Core
	rt    *route
	group singleflight.Group
	mu    sync.Mutex
	// card is the parsed upstream card; version its protocol version.
	card    *task.AgentCard
	version string
	fetched time.Time
	// failed is when the last fetch failed, and why.
	failed  time.Time
	failErr error
	// source, when set, is where the card is fetched instead of the
	// agent's card paths below its upstream: an egress target's card_url.
	source *cardSource
}

// cardSource is where an egress target's card is: its card_url, fetched
// through the egress SSRF guard with the outbound token of the call that
// needs it. A failure is not remembered: it may be that caller's alone (the
// target's writ decides who sees its card).
type cardSource struct {
	url    string
	client *http.Client
}

func newCardCache(c *Core, rt *route) *cardCache { return &cardCache{c: c, rt: rt} }

// put caches a card read elsewhere, checked as a fetch checks it: an egress
// target's card as the local agent's own call for it fetched it, so that
// the calls that follow find it.
func (cc *cardCache) put(card *task.AgentCard, version string) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.card, cc.version, cc.fetched, cc.failed, cc.failErr = card, version, time.Now(), time.Time{}, nil
}

// errNoCards: the route's protocol publishes no card writ serves.
var errNoCards = errors.New("the agent's protocol publishes no card writ serves")

type fetched struct {
	card    *task.AgentCard
	version string
}

// get returns the upstream card: the cached one while it is fresh, else the
// result of one fetch shared with every caller asking meanwhile. While the
// agent fails (and for limits.card_failure_ttl after a failure) a stale card
// beats none. ctx bounds only this caller's wait.
func (cc *cardCache) get(ctx context.Context) (*task.AgentCard, string, error) {
	return cc.getAs(ctx, "")
}

// getAs is get with the credential a fetch sends (an Authorization value,
// "" for none): the calling request's, for an egress target's card. The
// fetch the callers share sends the first one's.
func (cc *cardCache) getAs(ctx context.Context, auth string) (*task.AgentCard, string, error) {
	l := cc.c.cfg.Limits
	cc.mu.Lock()
	card, version := cc.card, cc.version
	fresh := card != nil && time.Since(cc.fetched) < l.CardCacheTTL
	failing := !cc.failed.IsZero() && time.Since(cc.failed) < l.CardFailureTTL
	failErr := cc.failErr
	cc.mu.Unlock()
	switch {
	case fresh:
		return card, version, nil
	case failing && card != nil:
		return card, version, nil
	case failing:
		return nil, "", failErr
	}
	ch := cc.group.DoChan("card", func() (any, error) {
		// Detached from the caller: one that stops waiting does not cancel the
		// fetch the others wait for.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.CardFetchTimeout)
		defer cancel()
		return cc.refresh(fctx, auth)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			if card != nil { // a stale card beats none while the agent is unreachable
				return card, version, nil
			}
			return nil, "", r.Err
		}
		f := r.Val.(fetched)
		return f.card, f.version, nil
	case <-ctx.Done():
		if card != nil {
			return card, version, nil
		}
		return nil, "", ctx.Err()
	}
}

// refresh fetches the card from the first card path that serves it and
// caches the result, success or failure.
func (cc *cardCache) refresh(ctx context.Context, auth string) (fetched, error) {
	cards, ok := cc.rt.edges.Cards()
	if !ok {
		return fetched{}, errNoCards
	}
	var card *task.AgentCard
	var version string
	var err error
	if cc.source != nil {
		card, version, err = cc.fetchURL(ctx, cards, cc.source.client, cc.source.url, auth)
		if r := (*CardRefusedError)(nil); errors.As(err, &r) {
			cc.c.log.Warn("the target's card is refused", "target", cc.rt.agent.Name, "card_url", cc.source.url, "reason", r.Reason)
		}
	} else {
		card, version, err = cc.fetchAny(ctx, cards)
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if err != nil {
		if cc.source == nil {
			cc.failed, cc.failErr = time.Now(), err
		}
		return fetched{}, err
	}
	cc.card, cc.version, cc.fetched, cc.failed, cc.failErr = card, version, time.Now(), time.Time{}, nil
	return fetched{card, version}, nil
}

// fetchAny fetches the card from the first of the protocol's card paths
// that serves one. A card refused (its signature) ends the search: the next
// path must not serve what this one was refused for.
func (cc *cardCache) fetchAny(ctx context.Context, cards adapters.Cards) (*task.AgentCard, string, error) {
	lastErr := errNoCards
	for _, path := range cards.CardPaths() {
		card, version, err := cc.fetch(ctx, path)
		if err == nil {
			return card, version, nil
		}
		if r := (*CardRefusedError)(nil); errors.As(err, &r) {
			cc.c.log.Warn("the agent's card is refused", "agent", cc.rt.agent.Name, "path", path, "reason", r.Reason)
			return nil, "", err
		}
		lastErr = err
	}
	return nil, "", lastErr
}

// fetch asks the agent for its card at path, fresh.
func (cc *cardCache) fetch(ctx context.Context, path string) (*task.AgentCard, string, error) {
	cards, ok := cc.rt.edges.Cards()
	if !ok {
		return nil, "", errNoCards
	}
	u := *cc.rt.upstream
	u.Path = joinPath(cc.rt.upstream.Path, path)
	return cc.fetchURL(ctx, cards, cc.c.client, u.String(), "")
}

// maxCardBytes bounds a card writ reads.
const maxCardBytes = 1 << 20

// fetchURL gets the card at u with client (sending auth as Authorization
// when set), checks its signatures (checkCard) and parses it.
func (cc *cardCache) fetchURL(ctx context.Context, cards adapters.Cards, client *http.Client, u, auth string) (*task.AgentCard, string, error) {
	ctx, cancel := context.WithTimeout(ctx, cc.c.cfg.Limits.CardFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, "", err
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("GET %s: HTTP %d", req.URL.Path, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCardBytes))
	if err != nil {
		return nil, "", err
	}
	// What is read is what a signature covers: the verified content, never
	// the bytes around it.
	if body, err = cc.c.checkCard(ctx, cc.rt, cards, body); err != nil {
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
	return c.publish(rt, up), version, nil
}

// publish rewrites an agent's card (public or extended) for callers: its
// interface URLs moved to the public URL, its security schemes replaced by what
// writ verifies, the config's skills in place of the card's when configured.
func (c *Core) publish(rt *route, up *task.AgentCard) *task.AgentCard {
	card := *up
	base := c.publicBase(rt)
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
	return &card
}

// publicBase is the URL callers reach rt at: its public_url, or writ's own
// listener with the route.
func (c *Core) publicBase(rt *route) string {
	if rt.agent.PublicURL != "" {
		return rt.agent.PublicURL
	}
	return "http://" + c.cfg.Listen + rt.prefix
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
