package devidp

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
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

// TestOpenKeepsTheKey: Open creates the key on first use (0600, in a 0700
// directory) and every later Open signs with the same one, so a JWKS written
// once verifies every later token.
func TestOpenKeepsTheKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	first, err := Open(dir, "writ-dev", "a")
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v", st.Mode())
	}
	jwks, _ := first.JWKS()
	second, err := Open(dir, "writ-dev", "a")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := second.JWKS(); string(again) != string(jwks) {
		t.Fatal("a second Open made another key")
	}
	r, err := identity.New(identity.Config{JWT: []identity.IssuerConfig{{Issuer: "writ-dev", Audiences: []string{"a"}, JWKSFile: first.JWKSFile}}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tok, err := second.Token(Caller{Agent: "x", User: "u", Scope: "delegate"})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+tok)
	if c, err := r.Identify(context.Background(), identity.Credentials{Header: h}); err != nil || c.AgentID != "x" {
		t.Fatalf("%+v %v", c, err)
	}
}
