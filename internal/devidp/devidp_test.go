package devidp

import (
	"context"
	"net/http"
	"testing"

	"github.com/writ-authz/writ/authz/identity"
)

// TestTokensVerify: writ's own identity resolver verifies the provider's tokens
// and reads the act chain oldest hop first.
func TestTokensVerify(t *testing.T) {
	p, err := New(t.TempDir(), "https://idp.dev", "writ")
	if err != nil {
		t.Fatal(err)
	}
	r, err := identity.New(identity.Config{JWT: []identity.IssuerConfig{{Issuer: p.Issuer, Audiences: []string{p.Audience}, JWKSFile: p.JWKSFile}}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tok, err := p.Token(Caller{Agent: "b", User: "u", Tenant: "t", Classification: "restricted", Scope: "delegate", Chain: []string{"root", "a"}})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+tok)
	c, err := r.Identify(context.Background(), identity.Credentials{Header: h})
	if err != nil || c.AgentID != "b" || c.UserID != "u" || c.Tenant != "t" || len(c.Chain) != 2 || c.Chain[0] != "root" ||
		c.Classification != "restricted" || len(c.Scopes) != 1 {
		t.Fatalf("%+v %v", c, err)
	}
}
