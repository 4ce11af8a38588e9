package proxy

import (
	"encoding/json"
	"testing"

	"github.com/writ-authz/writ/authz/identity"
)

// marshaledCallerHeader is the header as json.Marshal writes it: what
// plainCallerHeader must reproduce byte for byte.
func marshaledCallerHeader(c identity.Caller) string {
	chain := c.Chain
	if chain == nil {
		chain = []string{}
	}
	raw, _ := json.Marshal(callerDoc{Authenticated: c.Authenticated, Method: c.Method, Issuer: c.Issuer,
		AgentID: c.AgentID, UserID: c.UserID, Tenant: c.Tenant, Chain: chain})
	return string(raw)
}

func TestCallerHeaderMatchesMarshal(t *testing.T) {
	for _, c := range []identity.Caller{
		{},
		{Authenticated: true, Method: "jwt", Issuer: "https://idp.bank.ae", AgentID: "kyc-agent", UserID: "u-1", Tenant: "wholesale",
			Chain: []string{"orchestrator", "kyc-agent"}},
		{Authenticated: true, Method: "mtls", AgentID: "a"},
		{Method: "jwt", Chain: []string{}},
		{Method: "jwt", Tenant: `a"b`},
		{Method: "jwt", UserID: `a\b`},
		{Method: "jwt", UserID: "<script>&"},
		{Method: "jwt", AgentID: "é"},
		{Method: "jwt", AgentID: "\u2028"},
		{Method: "jwt", Chain: []string{"a", "\x00", "\xff"}},
		{Method: "jwt\x7f"},
	} {
		if got, want := callerHeader(c), marshaledCallerHeader(c); got != want {
			t.Errorf("%+v: %s, want %s", c, got, want)
		}
	}
}

func FuzzCallerHeader(f *testing.F) {
	f.Add(true, "jwt", "https://idp", "agent", "user", "tenant", "a", "b")
	f.Add(false, "", "", "", "", "", "", "")
	f.Fuzz(func(t *testing.T, auth bool, method, iss, agent, user, tenant, c1, c2 string) {
		c := identity.Caller{Authenticated: auth, Method: method, Issuer: iss, AgentID: agent, UserID: user, Tenant: tenant}
		if c1 != "" {
			c.Chain = []string{c1, c2}
		}
		if got, want := callerHeader(c), marshaledCallerHeader(c); got != want {
			t.Fatalf("%+v: %s, want %s", c, got, want)
		}
	})
}
