package proxy

import (
	"testing"

	"github.com/writ-authz/writ/authz/identity"
)

// TestCallerHeaderMatchesMarshal: the header written without reflection is
// byte for byte what encoding/json writes, and it is used for the usual caller.
func TestCallerHeaderMatchesMarshal(t *testing.T) {
	for _, tc := range []struct {
		c     identity.Caller
		plain bool // written without reflection
	}{
		{identity.Caller{}, true},
		{identity.Caller{Authenticated: true, Method: "jwt", Issuer: "https://idp.bank.ae", AgentID: "kyc-agent", UserID: "u-1",
			Tenant: "wholesale", Chain: []string{"orchestrator", "kyc-agent"}}, true},
		{identity.Caller{Authenticated: true, Method: "mtls", AgentID: "a"}, true},
		{identity.Caller{Method: "jwt", Chain: []string{}}, true},
		{identity.Caller{Method: "jwt", Tenant: `a"b`}, false},
		{identity.Caller{Method: "jwt", UserID: `a\b`}, false},
		{identity.Caller{Method: "jwt", UserID: "<script>&"}, false},
		{identity.Caller{Method: "jwt", AgentID: "é"}, false},
		{identity.Caller{Method: "jwt", AgentID: "\u2028"}, false},
		{identity.Caller{Method: "jwt", Chain: []string{"a", "\x00", "\xff"}}, false},
		{identity.Caller{Method: "jwt\x7f"}, false},
	} {
		got, plain := plainCallerHeader(tc.c)
		if plain != tc.plain {
			t.Errorf("%+v: written without reflection %v, want %v", tc.c, plain, tc.plain)
		}
		if want := marshaledCallerHeader(tc.c); plain && got != want {
			t.Errorf("%+v: %s, want %s", tc.c, got, want)
		}
		if callerHeader(tc.c) != marshaledCallerHeader(tc.c) {
			t.Errorf("%+v: callerHeader differs from encoding/json", tc.c)
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
		if got, plain := plainCallerHeader(c); plain && got != marshaledCallerHeader(c) {
			t.Fatalf("%+v: %s, want %s", c, got, marshaledCallerHeader(c))
		}
	})
}
