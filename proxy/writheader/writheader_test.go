package writheader

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

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
		if CallerValue(tc.c) != marshaledCallerHeader(tc.c) {
			t.Errorf("%+v: callerHeader differs from the marshaled header", tc.c)
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
		// The header is printable ASCII, and reads back as the caller.
		h := CallerValue(c)
		for i := 0; i < len(h); i++ {
			if h[i] < 0x20 || h[i] > 0x7e {
				t.Fatalf("%+v: byte %#x at %d of %q", c, h[i], i, h)
			}
		}
		var back callerDoc
		if err := json.Unmarshal([]byte(h), &back); err != nil {
			t.Fatalf("%q: %v", h, err)
		}
		for _, f := range [][2]string{{method, back.Method}, {iss, back.Issuer}, {agent, back.AgentID}, {user, back.UserID}, {tenant, back.Tenant}} {
			if utf8.ValidString(f[0]) && f[0] != f[1] {
				t.Fatalf("%q reads back as %q from %q", f[0], f[1], h)
			}
		}
	})
}

// TestCallerHeaderASCII: characters outside printable ASCII are escaped in
// the JSON, so the header is ASCII and decodes to the caller's own strings.
func TestCallerHeaderASCII(t *testing.T) {
	c := identity.Caller{Method: "jwt", AgentID: "bänk-名-😀\x7f", UserID: "\u2028", Chain: []string{"é"}}
	h := CallerValue(c)
	want := `{"authenticated":false,"method":"jwt","agent_id":"b\u00e4nk-\u540d-\ud83d\ude00\u007f","user_id":"\u2028","chain":["\u00e9"]}`
	if h != want {
		t.Fatalf("header %s, want %s", h, want)
	}
	var back callerDoc
	if err := json.Unmarshal([]byte(h), &back); err != nil || back.AgentID != c.AgentID || back.UserID != c.UserID || back.Chain[0] != "é" {
		t.Fatalf("%+v %v", back, err)
	}
}
