package identity

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net/url"
	"slices"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// svid makes a client certificate carrying the given URI SANs.
func svid(t *testing.T, uris ...string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "workload"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// Threat: a client certificate from another trust domain, or with no or two
// SPIFFE IDs, speaks for an agent. Defence: exactly one SPIFFE URI SAN in the
// configured trust domain.
func TestMTLS(t *testing.T) {
	cfg := Config{MTLS: &MTLSConfig{TrustDomain: "bank.ae", MappingFile: testdata + "spiffe_mapping.yaml"}}
	r := newTestResolver(t, cfg, newClock())
	certs := func(c *x509.Certificate) Credentials { return Credentials{PeerCertificates: []*x509.Certificate{c}} }

	kyc := svid(t, "spiffe://bank.ae/agents/kyc")
	c, err := r.Identify(context.Background(), certs(kyc))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Authenticated || c.Method != MethodMTLS || c.AgentID != "spiffe://bank.ae/agents/kyc" || c.Issuer != "spiffe://bank.ae" ||
		c.Tenant != "retail" || !slices.Equal(c.Scopes, []string{"kyc.screen", "tasks.read"}) || !c.Expires.Equal(kyc.NotAfter) {
		t.Fatalf("caller = %+v", c)
	}

	c, err = r.Identify(context.Background(), certs(svid(t, "https://bank.ae/x", "spiffe://bank.ae/agents/payments")))
	if err != nil || c.AgentID != "payments-investigator" || c.Tenant != "wholesale" {
		t.Fatalf("mapped agent_id: %+v, %v", c, err)
	}
	c, err = r.Identify(context.Background(), certs(svid(t, "spiffe://bank.ae/agents/unmapped")))
	if err != nil || c.AgentID != "spiffe://bank.ae/agents/unmapped" || c.Tenant != "" || c.Scopes != nil {
		t.Fatalf("unmapped ID: %+v, %v", c, err)
	}

	for name, uris := range map[string][]string{
		"wrong trust domain": {"spiffe://evil.example/agents/kyc"},
		"no SPIFFE ID":       {"https://bank.ae/agents/kyc"},
		"two SPIFFE IDs":     {"spiffe://bank.ae/a", "spiffe://bank.ae/b"},
		"trust domain only":  {"spiffe://bank.ae"},
	} {
		c, err := r.Identify(context.Background(), certs(svid(t, uris...)))
		if !errors.Is(err, ErrCertificate) || c.Authenticated {
			t.Errorf("%s: %+v, %v, want ErrCertificate", name, c, err)
		}
	}

	// A bearer token wins over the certificate, and its failure does not fall back.
	creds := bearerCreds("eyJhbGciOiJSUzI1NiJ9.bm90LWpzb24.c2ln")
	creds.PeerCertificates = []*x509.Certificate{kyc}
	if c, err := r.Identify(context.Background(), creds); err == nil || c.Authenticated {
		t.Fatalf("failed bearer fell back to mTLS: %+v", c)
	}
}

func TestMTLSNotConfigured(t *testing.T) {
	r := newTestResolver(t, Config{}, newClock())
	c, err := r.Identify(context.Background(), Credentials{PeerCertificates: []*x509.Certificate{svid(t, "spiffe://bank.ae/agents/kyc")}})
	if err != nil || c.Authenticated {
		t.Fatalf("%+v, %v: without mtls config a certificate is no credential", c, err)
	}
}

func TestNoCredentials(t *testing.T) {
	k := newKey(t, jose.RS256, "rsa")
	srv := newJWKSServer(t, k)
	cfg := Config{JWT: []IssuerConfig{issuerFor(srv)}, StaticTokensFile: testdata + "static_tokens.yaml",
		MTLS: &MTLSConfig{TrustDomain: "bank.ae"}}
	r := newTestResolver(t, cfg, newClock())
	for _, creds := range []Credentials{{}, {Header: map[string][]string{"X-Agent-Id": {"orchestrator"}}}} {
		c, err := r.Identify(context.Background(), creds)
		if err != nil || c.Authenticated || c.Method != MethodAnonymous {
			t.Fatalf("%+v, %v, want Anonymous() and nil", c, err)
		}
	}
}
