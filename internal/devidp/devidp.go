// Package devidp is a development identity provider: an ES256 key, its JWKS
// file, and signed JWTs for delegating callers with RFC 8693 act chains. writ's
// demo and tests use it; production tokens come from a real issuer.
package devidp

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// KeyID is the kid of the provider's key.
const KeyID = "dev-1"

// Provider signs tokens for one issuer and audience.
type Provider struct {
	Issuer   string
	Audience string
	// JWKSFile is the key set writ's identity config points at.
	JWKSFile string
	signer   jose.Signer
}

// New generates a key and writes its JWKS to dir/jwks.json.
func New(dir, issuer, audience string) (*Provider, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &key.PublicKey, KeyID: KeyID, Algorithm: string(jose.ES256), Use: "sig"}}})
	if err != nil {
		return nil, err
	}
	p := &Provider{Issuer: issuer, Audience: audience, JWKSFile: filepath.Join(dir, "jwks.json")}
	if err := os.WriteFile(p.JWKSFile, jwks, 0o600); err != nil {
		return nil, err
	}
	p.signer, err = jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", KeyID))
	if err != nil {
		return nil, fmt.Errorf("devidp: %w", err)
	}
	return p, nil
}

// Caller is who a token speaks for.
type Caller struct {
	Agent, User, Tenant string
	// Classification is the token's data classification claim ("" for none).
	Classification string
	// Scope is the space-separated scope claim.
	Scope string
	// Chain lists the earlier hops, oldest first; Agent is the current actor.
	Chain []string
	// Expires defaults to an hour from now.
	Expires time.Time
}

// Claims are c's claims: sub is the user, act the RFC 8693 chain with Agent as
// the outermost actor and the earlier hops nested inside it.
func (p *Provider) Claims(c Caller) map[string]any {
	now := time.Now()
	exp := c.Expires
	if exp.IsZero() {
		exp = now.Add(time.Hour)
	}
	claims := map[string]any{"iss": p.Issuer, "aud": p.Audience, "sub": c.User, "tenant": c.Tenant,
		"scope": c.Scope, "iat": now.Unix(), "exp": exp.Unix()}
	if c.Classification != "" {
		claims["classification"] = c.Classification
	}
	act := map[string]any{"sub": c.Agent}
	cur := act
	for i := len(c.Chain) - 1; i >= 0; i-- {
		next := map[string]any{"sub": c.Chain[i]}
		cur["act"] = next
		cur = next
	}
	claims["act"] = act
	return claims
}

// Sign signs any claims with the provider's key.
func (p *Provider) Sign(claims map[string]any) (string, error) {
	return jwt.Signed(p.signer).Claims(claims).Serialize()
}

// Token signs c's claims.
func (p *Provider) Token(c Caller) (string, error) { return p.Sign(p.Claims(c)) }
