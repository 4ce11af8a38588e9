// Package devidp is a development identity provider: an ES256 key, its JWKS
// file, and signed JWTs for delegating callers with RFC 8693 act chains. writ's
// demo and tests use it with a fresh key each time (New); `writ dev token` and
// `writ dev jwks` with a key kept in a local directory (Open). Production
// tokens come from a real issuer.
package devidp

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/writ-authz/writ/authz/identity"
)

// KeyID is the kid of the provider's key: identity.DevelopmentKeyID, which
// marks the key as the development identity's wherever its JWKS is copied
// (writ validate warns about a configuration that accepts it, writ serve logs
// it).
const KeyID = identity.DevelopmentKeyID

// Provider signs tokens for one issuer and audience.
type Provider struct {
	Issuer   string
	Audience string
	// JWKSFile is the key set writ's identity config points at.
	JWKSFile string
	signer   jose.Signer
	key      *ecdsa.PrivateKey
}

// DefaultDir is where writ's commands keep the development key (writ dev,
// writ sts): $WRIT_DEV_DIR, else $XDG_STATE_HOME/writ/dev
// (~/.local/state/writ/dev when unset or relative), else .writ-dev when
// there is no home directory.
func DefaultDir() string {
	if d := os.Getenv("WRIT_DEV_DIR"); d != "" {
		return d
	}
	state := os.Getenv("XDG_STATE_HOME")
	if state == "" || !filepath.IsAbs(state) {
		home, err := os.UserHomeDir()
		if err != nil {
			return ".writ-dev"
		}
		state = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(state, "writ", "dev")
}

// New generates a key and writes its JWKS to dir/jwks.json.
func New(dir, issuer, audience string) (*Provider, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return newProvider(dir, issuer, audience, key)
}

// KeyFile is the name of the private key Open keeps in its directory (a
// JWK, 0600).
const KeyFile = "key.jwk"

// Open is New on a key kept in dir: the one there (dir/key.jwk), or a new
// one written there (the directory 0700, the key 0600) on first use, so
// every token `writ dev token` signs verifies against the same JWKS.
func Open(dir, issuer, audience string) (*Provider, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("devidp: %w", err)
	}
	key, err := LoadOrCreateKey(filepath.Join(dir, KeyFile))
	if err != nil {
		return nil, err
	}
	return newProvider(dir, issuer, audience, key)
}

// LoadOrCreateKey reads the ES256 private key (a JWK) at path, or generates
// one and writes it there (0600) when the file does not exist. Two first
// uses at once keep one key. writ sts keeps its signing key this way.
func LoadOrCreateKey(path string) (*ecdsa.PrivateKey, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		jwk, err := json.Marshal(jose.JSONWebKey{Key: key, KeyID: KeyID, Algorithm: string(jose.ES256), Use: "sig"})
		if err != nil {
			return nil, err
		}
		// O_EXCL: two first uses at once keep one key.
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			_, err = f.Write(jwk)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, fmt.Errorf("devidp: %w", err)
			}
			return key, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("devidp: %w", err)
		}
		raw, err = os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("devidp: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("devidp: %w", err)
	}
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("devidp: %s: %w", path, err)
	}
	key, ok := jwk.Key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("devidp: %s: not an EC private key", path)
	}
	return key, nil
}

// JWKS is the provider's public key set.
func (p *Provider) JWKS() ([]byte, error) {
	return json.MarshalIndent(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &p.key.PublicKey, KeyID: KeyID, Algorithm: string(jose.ES256), Use: "sig"}}}, "", "  ")
}

func newProvider(dir, issuer, audience string, key *ecdsa.PrivateKey) (*Provider, error) {
	p := &Provider{Issuer: issuer, Audience: audience, JWKSFile: filepath.Join(dir, "jwks.json"), key: key}
	jwks, err := p.JWKS()
	if err != nil {
		return nil, err
	}
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
	// ChainScopes, when set, is the scope each earlier hop was granted
	// (space-separated, aligned with Chain), recorded in its act claim as
	// writ's STS records it: what AUTHORITY_WIDENED compares.
	ChainScopes []string
	// MayAct names the actors that may exchange the token (RFC 8693 may_act,
	// {"sub": [...]}); none: no may_act claim.
	MayAct []string
	// Expires defaults to an hour from now; in the past, the token is
	// expired (issued an hour before it expired).
	Expires time.Time
	// NotBefore, when set, is the token's nbf claim.
	NotBefore time.Time
}

// Claims are c's claims: sub is the user, act the RFC 8693 chain with Agent as
// the outermost actor and the earlier hops nested inside it.
func (p *Provider) Claims(c Caller) map[string]any {
	now := time.Now()
	exp := c.Expires
	if exp.IsZero() {
		exp = now.Add(time.Hour)
	}
	iat := now
	if !exp.After(now) {
		iat = exp.Add(-time.Hour)
	}
	claims := map[string]any{"iss": p.Issuer, "aud": p.Audience, "sub": c.User, "tenant": c.Tenant,
		"scope": c.Scope, "iat": iat.Unix(), "exp": exp.Unix()}
	if !c.NotBefore.IsZero() {
		claims["nbf"] = c.NotBefore.Unix()
	}
	if c.Classification != "" {
		claims["classification"] = c.Classification
	}
	act := map[string]any{"sub": c.Agent}
	cur := act
	for i := len(c.Chain) - 1; i >= 0; i-- {
		next := map[string]any{"sub": c.Chain[i]}
		if i < len(c.ChainScopes) {
			next["scope"] = c.ChainScopes[i]
		}
		cur["act"] = next
		cur = next
	}
	claims["act"] = act
	if len(c.MayAct) > 0 {
		subs := make([]any, len(c.MayAct))
		for i, a := range c.MayAct {
			subs[i] = a
		}
		claims["may_act"] = map[string]any{"sub": subs}
	}
	return claims
}

// Sign signs any claims with the provider's key.
func (p *Provider) Sign(claims map[string]any) (string, error) {
	return jwt.Signed(p.signer).Claims(claims).Serialize()
}

// Token signs c's claims.
func (p *Provider) Token(c Caller) (string, error) { return p.Sign(p.Claims(c)) }
