package identity

import (
	"errors"
	"slices"
	"testing"
)

const testdata = "../../testdata/identity/"

func TestStaticTokens(t *testing.T) {
	r := newTestResolver(t, Config{StaticTokensFile: testdata + "static_tokens.yaml"}, newClock())

	c, err := identify(t, r, "dev-token-orchestrator")
	if err != nil {
		t.Fatal(err)
	}
	want := Caller{Authenticated: true, Method: MethodStatic, AgentID: "orchestrator", UserID: "u-7",
		Tenant: "wholesale", Scopes: []string{"delegate", "tasks.read"}, Classification: "confidential"}
	if c.Authenticated != want.Authenticated || c.Method != want.Method || c.AgentID != want.AgentID ||
		c.UserID != want.UserID || c.Tenant != want.Tenant || !slices.Equal(c.Scopes, want.Scopes) ||
		c.Classification != want.Classification || !c.Expires.IsZero() || c.Claims != nil {
		t.Fatalf("caller = %+v, want %+v", c, want)
	}

	if _, err := identify(t, r, "not-a-listed-token"); !errors.Is(err, ErrTokenInvalid) {
		t.Fatalf("unknown static token: err = %v, want ErrTokenInvalid", err)
	}
	// The file lists this string, but it is in JWS form, so it is judged as a JWT
	// (and fails: its payload is not JSON, and no issuer is configured anyway).
	c, err = identify(t, r, "eyJhbGciOiJSUzI1NiJ9.bm90LWpzb24.c2lnbmF0dXJl")
	if !errors.Is(err, ErrTokenInvalid) || c.Authenticated {
		t.Fatalf("malformed JWT fell through to the static file: %+v, %v", c, err)
	}
	if hits, misses := r.CacheStats(); hits != 0 || misses != 1 {
		t.Fatalf("hits, misses = %d, %d: only the JWT-shaped token goes through the cache", hits, misses)
	}
}
