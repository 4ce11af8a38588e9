package proxy_test

import (
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
)

// TestMatchHostThenPath: the best host match wins, then the longest route;
// ports, case and a trailing dot do not matter.
func TestMatchHostThenPath(t *testing.T) {
	mk := func(name, route string, hosts ...string) config.Agent {
		a := proxytest.SanctionsAgent("http://127.0.0.1:1")
		a.Name, a.Route, a.Hosts = name, route, hosts
		return a
	}
	h := proxytest.New(t, []config.Agent{
		mk("any-root", "/"),
		mk("any-kyc", "/kyc"),
		mk("a-root", "/", "a.agents.example"),
		mk("wild-root", "/", "*.agents.example"),
		mk("wild-deep", "/", "*.eu.agents.example"),
		mk("b-api", "/api", "b.agents.example"),
	}, nil)
	for _, tt := range []struct {
		host, path, want, rest string
	}{
		{"a.agents.example", "/", "a-root", "/"},
		{"A.Agents.Example:8443", "/x", "a-root", "/x"},
		{"a.agents.example.", "/kyc/x", "a-root", "/kyc/x"}, // a host match beats a longer route on any host
		{"c.agents.example", "/", "wild-root", "/"},
		{"x.eu.agents.example", "/", "wild-deep", "/"}, // the longest wildcard
		{"agents.example", "/", "any-root", "/"},       // *.agents.example needs a label before it
		{"b.agents.example", "/api/tasks", "b-api", "/tasks"},
		{"b.agents.example", "/other", "wild-root", "/other"}, // b's only route does not cover the path
		{"elsewhere.example", "/kyc/t", "any-kyc", "/t"},
		{"[::1]:8080", "/", "any-root", "/"},
		{"", "/", "any-root", "/"},
	} {
		agent, rest := h.Core.Match(tt.host, tt.path)
		if agent == "" || agent != tt.want || rest != tt.rest {
			got := "<none>"
			if agent != "" {
				got = agent
			}
			t.Errorf("match(%q, %q) = %s %q, want %s %q", tt.host, tt.path, got, rest, tt.want, tt.rest)
		}
	}
}
