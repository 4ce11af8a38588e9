package exchange

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/sts"
)

// TestAgainstWritSTS: the client against the real writ sts on 127.0.0.1,
// through discovery. agent-a (client credentials) exchanges alice's token
// for agent:b; agent-b (a JWT-SVID file) exchanges that for agent:c; the
// chain, the chain id and the narrowing come through; a widening request is
// the STS's refusal, with its code and reason.
func TestAgainstWritSTS(t *testing.T) {
	dir := t.TempDir()
	idpKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	spireKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	writeJWKS := func(name string, k *ecdsa.PrivateKey) string {
		raw, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: name, Algorithm: "ES256"}}})
		path := filepath.Join(dir, name+".json")
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	sign := func(k *ecdsa.PrivateKey, kid string, claims map[string]any) string {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", kid))
		if err != nil {
			t.Fatal(err)
		}
		p, _ := json.Marshal(claims)
		jws, err := s.Sign(p)
		if err != nil {
			t.Fatal(err)
		}
		tok, _ := jws.CompactSerialize()
		return tok
	}
	secrets := filepath.Join(dir, "clients.yaml")
	if err := os.WriteFile(secrets, []byte("agent-a: secret-of-agent-a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.STS{Listen: "127.0.0.1:0", Audiences: []string{"agent:b", "agent:c"}, ClientSecretsFile: secrets,
		SubjectIssuers: []config.JWTIssuer{{Issuer: "https://idp.example", Audiences: []string{"agent:a"}, JWKSFile: writeJWKS("idp", idpKey)}},
		ActorIssuers:   []config.JWTIssuer{{Issuer: "https://spire.example", Audiences: []string{"writ-sts"}, JWKSFile: writeJWKS("spire", spireKey)}}}
	cfg.ApplyDefaults()
	s, err := sts.New(cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })

	alice := sign(idpKey, "idp", map[string]any{"iss": "https://idp.example", "sub": "alice", "aud": "agent:a",
		"scope": "read write pay", "tenant": "t1", "exp": time.Now().Add(time.Hour).Unix()})
	a := newExchanger(t, clientConfig(t, s.Issuer()))
	ctx := context.Background()
	t1, err := a.Exchange(ctx, Request{SubjectToken: alice, Audience: "agent:b", Scope: []string{"read", "write"}})
	if err != nil {
		t.Fatal(err)
	}
	if t1.Subject != "alice" || strings.Join(t1.Actors, ",") != "agent-a" || t1.ChainID == "" || strings.Join(t1.Scope, " ") != "read write" {
		t.Fatalf("first hop %+v", t1)
	}

	svid := filepath.Join(dir, "svid.jwt")
	if err := os.WriteFile(svid, []byte(sign(spireKey, "spire", map[string]any{"iss": "https://spire.example",
		"sub": "spiffe://example.org/agent-b", "aud": "writ-sts", "exp": time.Now().Add(time.Hour).Unix()})), 0o600); err != nil {
		t.Fatal(err)
	}
	bcfg := config.Exchange{Issuer: s.Issuer(), ActorTokenFile: svid}
	bcfg.ApplyDefaults()
	b := newExchanger(t, bcfg)
	t2, err := b.Exchange(ctx, Request{SubjectToken: t1.Value, Audience: "agent:c", Scope: []string{"read"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(t2.Actors, ",") != "agent-a,spiffe://example.org/agent-b" || t2.ChainID != t1.ChainID || t2.Expires.After(t1.Expires) {
		t.Fatalf("second hop %+v (first %+v)", t2, t1)
	}

	_, err = b.Exchange(ctx, Request{SubjectToken: t1.Value, Audience: "agent:c", Scope: []string{"read", "pay"}})
	var ref *RefusedError
	if !errors.As(err, &ref) || !errors.Is(err, ErrSTSRefused) || ref.Code != sts.CodeInvalidScope ||
		ref.Description != "requested scope widens the subject token's: pay" {
		t.Fatalf("a widening exchange: %v", err)
	}
}
