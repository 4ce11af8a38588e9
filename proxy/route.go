package proxy

import (
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/proxy/canonical"
	"github.com/writ-authz/writ/task"
)

// Routing: which protected agent a request is for. An agent is served under
// host names (agents[].hosts: exact names and "*.suffix" wildcards; none means
// any host) and a path prefix (agents[].route). A request goes to the agents
// whose hosts match its Host best — an exact name, else the longest matching
// wildcard, else the agents with no hosts — and among those to the longest
// route that is a prefix of its path. The sidecar, ext_authz and ext_proc all
// route through this one function — unless the platform in front already
// routed the request (Incoming.Route), which then names the agent.

// hostRank says how well a route's hosts match a request host: 0 not at all,
// 1 any host (the route names none), 2+len(suffix) a wildcard, and the
// highest an exact name.
func (rt *route) hostRank(host string) int {
	if len(rt.agent.Hosts) == 0 {
		return 1
	}
	best := 0
	for _, h := range rt.agent.Hosts {
		h = strings.ToLower(h)
		switch {
		case h == host:
			return 1 << 20
		case strings.HasPrefix(h, "*.") && strings.HasSuffix(host, h[1:]) && len(host) > len(h)-1:
			best = max(best, 2+len(h))
		}
	}
	return best
}

// requestHost is the host of a Host header or :authority: lower-cased, the
// port and a trailing dot dropped.
func requestHost(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), ".")
	return strings.ToLower(h)
}

// prefixOf reports whether the route's prefix covers path, and the path
// below it.
func (rt *route) prefixOf(path string) (string, bool) { return canonical.Below(rt.prefix, path) }

// match finds the route for a request's host and path, and the path below
// the route.
func (c *Core) match(hostport, path string) (*route, string) {
	host := requestHost(hostport)
	var best *route
	bestRank, bestRest := 0, ""
	for _, rt := range c.routes { // longest prefix first
		rank := rt.hostRank(host)
		if rank == 0 || rank <= bestRank {
			continue
		}
		if rest, ok := rt.prefixOf(path); ok {
			best, bestRank, bestRest = rt, rank, rest
		}
	}
	return best, bestRest
}

// routeOf is the agent inc is for and the path below the agent's route: the
// agent the platform named, else the one match finds. When ok is false, out
// is the answer.
func (c *Core) routeOf(inc Incoming) (rt *route, rest string, out Outcome, ok bool) {
	if inc.Egress != nil {
		return c.egressRoute(inc)
	}
	if inc.Route == "" {
		if inc.Routed && c.cfg.Envoy.RequiresRouteName() {
			c.log.Error("Envoy's route names no agent (writ-agent); refused (envoy.require_route_name)",
				"mode", inc.Mode, "host", inc.Host, "path", inc.Path)
			return nil, "", plainRefusal(task.KindInternal, "the route Envoy chose names no agent for writ"), false
		}
		if rt, rest = c.match(inc.Host, inc.Path); rt == nil {
			return nil, "", Outcome{Kind: NotFound, Answer: notFoundPage}, false
		}
		return rt, rest, Outcome{}, true
	}
	if rt = c.byName[inc.Route]; rt == nil {
		// A misconfiguration in front of writ: never guessed around.
		c.log.Error("the platform routed the request to an agent writ does not protect; refused (fail closed)",
			"route", inc.Route, "mode", inc.Mode, "path", inc.Path)
		return nil, "", plainRefusal(task.KindInternal, "the route names no agent writ protects"), false
	}
	if rest, ok = rt.prefixOf(inc.Path); !ok {
		// The agent's route (agents[].route) is how writ reads the path below
		// it; a path outside it is not one writ can read for that agent.
		c.log.Warn("the platform's route names an agent whose route does not cover the path; refused",
			"agent", rt.agent.Name, "route", rt.agent.Route, "path", inc.Path, "mode", inc.Mode)
		return nil, "", Outcome{Kind: NotFound, Answer: notFoundPage}, false
	}
	return rt, rest, Outcome{}, true
}

// egressRoute is the target an egress call names: by its name (Route), or
// by its card's URL (Egress.CardURL), exactly; no target is guessed.
func (c *Core) egressRoute(inc Incoming) (rt *route, rest string, out Outcome, ok bool) {
	if u := inc.Egress.CardURL; u != "" {
		rt = c.egress.byCard[u]
	} else {
		rt = c.egress.targets[inc.Route]
	}
	if rt == nil {
		c.log.Info("egress: the agent called a target writ does not know", "target", inc.Route, "card_url", inc.Egress.CardURL)
		return nil, "", Outcome{Kind: NotFound, Answer: notFoundPage}, false
	}
	rest, _ = rt.prefixOf(inc.Path) // a target's route is "/": every path
	return rt, rest, Outcome{}, true
}

// canonical refuses a request whose raw path, or (where it routes) raw
// authority, is not in canonical form (canonical.go). ok is false with the
// refusal.
func (c *Core) canonical(inc Incoming) (Outcome, bool) {
	raw := inc.RawPath
	if raw == "" {
		raw = inc.Path
	}
	why := canonical.Path(raw)
	if why == "" && inc.Route == "" && c.byHost {
		why = canonical.Host(inc.Host)
	}
	if why == "" {
		return Outcome{}, true
	}
	c.log.Info("request target not in canonical form; refused", "why", why, "path", raw, "host", inc.Host, "mode", inc.Mode)
	return plainRefusal(task.KindMalformed, "the request target is not in canonical form ("+why+")"), false
}

// plainRefusal is a refusal made before any agent was chosen: plain text,
// with the status of its kind.
func plainRefusal(kind task.Kind, msg string) Outcome {
	f := task.NewFault(kind, msg)
	return Outcome{Kind: Refuse, Fault: f, Answer: wire.Rendered{Status: wire.HTTPStatus(kind),
		ContentType: "text/plain; charset=utf-8", Header: http.Header{"Cache-Control": {"no-store"}},
		Body: fmt.Appendf(nil, "writ: %s\n", msg)}}
}
