package metrics_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/writ-authz/writ/authz/exchange"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/metrics"
	"github.com/writ-authz/writ/sts"
)

// TestTokenExchangeMetrics: the egress door's token exchanges, counted from
// the events a real exchanger reports against the real writ sts on
// 127.0.0.1: one issued token, a cache hit of it, a widening the STS refuses
// (its registered RFC 6749 code as the kind) and an STS that is down. Each
// outcome is a series; only STS round trips are timed.
func TestTokenExchangeMetrics(t *testing.T) {
	dir := t.TempDir()
	idpKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &idpKey.PublicKey, KeyID: "idp", Algorithm: "ES256"}}})
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stsCfg := config.STS{Listen: "127.0.0.1:0", Audiences: []string{"agent:b"},
		ClientSecretsFile: write("clients.yaml", []byte("agent-a: secret-of-agent-a\n")),
		SubjectIssuers: []config.JWTIssuer{{Issuer: "https://idp.example", Audiences: []string{"agent:a"},
			JWKSFile: write("idp.json", jwks)}}}
	stsCfg.ApplyDefaults()
	s, err := sts.New(stsCfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })

	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: idpKey}, (&jose.SignerOptions{}).WithHeader("kid", "idp"))
	if err != nil {
		t.Fatal(err)
	}
	claims, _ := json.Marshal(map[string]any{"iss": "https://idp.example", "sub": "alice", "aud": "agent:a",
		"scope": "read write", "tenant": "t1", "exp": time.Now().Add(time.Hour).Unix()})
	jws, err := signer.Sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	alice, _ := jws.CompactSerialize()

	m := metrics.New(config.Metrics{}, metrics.Sources{})
	bus := &events.Bus{}
	bus.Subscribe(m)
	secret := write("secret", []byte("secret-of-agent-a\n"))
	newExchanger := func(issuer string) *exchange.Exchanger {
		c := config.Exchange{Issuer: issuer, ClientID: "agent-a", ClientSecretFile: secret, Timeout: 500 * time.Millisecond}
		c.ApplyDefaults()
		e, err := exchange.New(c, exchange.WithEvents(bus))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Close)
		return e
	}
	ctx := context.Background()
	a := newExchanger(s.Issuer())
	for range 2 { // issued, then the cached token
		if _, err := a.Exchange(ctx, exchange.Request{SubjectToken: alice, Audience: "agent:b", Scope: []string{"read"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Exchange(ctx, exchange.Request{SubjectToken: alice, Audience: "agent:b", Scope: []string{"read", "pay"}}); err == nil {
		t.Fatal("a widening exchange was issued")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	_ = ln.Close()
	if _, err := newExchanger(down).Exchange(ctx, exchange.Request{SubjectToken: alice, Audience: "agent:b", Scope: []string{"read"}}); err == nil {
		t.Fatal("an STS that is down issued a token")
	}

	sc := scrapeURL(t, serveMetrics(t, m))
	sc.want(t, "writ_token_exchanges_total", counter, map[string]float64{
		L("error", "", "outcome", events.ExchangeIssued):                      1,
		L("error", "", "outcome", events.ExchangeCacheHit):                    1,
		L("error", "refused:invalid_scope", "outcome", events.ExchangeFailed): 1,
		L("error", "unavailable", "outcome", events.ExchangeFailed):           1,
	})
	sc.want(t, "writ_token_exchange_duration_seconds", histogram, map[string]float64{
		L("outcome", events.ExchangeIssued): 1, L("outcome", events.ExchangeFailed): 2})
}
