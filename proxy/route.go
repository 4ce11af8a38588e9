package proxy

import (
	"net"
	"strings"
)

// Routing: which protected agent a request is for. An agent is served under
// host names (agents[].hosts: exact names and "*.suffix" wildcards; none means
// any host) and a path prefix (agents[].route). A request goes to the agents
// whose hosts match its Host best — an exact name, else the longest matching
// wildcard, else the agents with no hosts — and among those to the longest
// route that is a prefix of its path. The sidecar, ext_authz and ext_proc all
// route through this one function.

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
func (rt *route) prefixOf(path string) (string, bool) {
	if rt.prefix == "" || path == rt.prefix || strings.HasPrefix(path, rt.prefix+"/") {
		rest := strings.TrimPrefix(path, rt.prefix)
		if rest == "" {
			rest = "/"
		}
		return rest, true
	}
	return "", false
}

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
