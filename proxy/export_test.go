package proxy

import (
	"log/slog"

	"github.com/writ-authz/writ/task"
)

// What the tests of package proxy_test reach inside the core for: its pure
// helpers, and the store and logger a test swaps in once the core is built.

var (
	Rebase       = rebase
	PublicReason = publicReason
)

// PrefixCovers is a route's reading of a path: whether the route prefix
// covers it, and the path below it.
func PrefixCovers(prefix, path string) (string, bool) {
	return (&route{prefix: prefix}).prefixOf(path)
}

// SetStore replaces the core's lifecycle store (a faulty or counting one).
func (c *Core) SetStore(s task.Store) { c.store = s }

// SetLogger replaces the core's logger.
func (c *Core) SetLogger(l *slog.Logger) { c.log = l }

// Match is the agent the core routes host and path to ("" for none) and the
// path below its route.
func (c *Core) Match(host, path string) (agent, rest string) {
	rt, rest := c.match(host, path)
	if rt == nil {
		return "", rest
	}
	return rt.agent.Name, rest
}

// Failed is the store error that refused the plan's answer, if any.
func (p *Plan) Failed() error { return p.failed }
