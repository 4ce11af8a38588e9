package identity

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigErrorsNameTheKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	jwks := testdata + "bench_jwks.json"
	ok := IssuerConfig{Issuer: "https://idp.bank.ae", Audiences: []string{"a2a-gateway"}, JWKSFile: jwks}
	with := func(mut func(*IssuerConfig)) Config {
		ic := ok
		mut(&ic)
		return Config{JWT: []IssuerConfig{ok, ic}}
	}
	cases := map[string]struct {
		cfg  Config
		want string
	}{
		"HS256 in algorithms": {with(func(c *IssuerConfig) { c.Issuer = "b"; c.Algorithms = []string{"RS256", "HS256"} }),
			"identity.jwt[1].algorithms[1]: HS256 is symmetric"},
		"none in algorithms": {with(func(c *IssuerConfig) { c.Issuer = "b"; c.Algorithms = []string{"none"} }),
			"identity.jwt[1].algorithms[0]:"},
		"unknown algorithm": {with(func(c *IssuerConfig) { c.Issuer = "b"; c.Algorithms = []string{"RS1"} }),
			"identity.jwt[1].algorithms[0]: unknown algorithm"},
		"http jwks_url": {with(func(c *IssuerConfig) { c.Issuer = "b"; c.JWKSFile = ""; c.JWKSURL = "http://idp.bank.ae/jwks" }),
			"identity.jwt[1].jwks_url: must be https"},
		"relative jwks_url": {with(func(c *IssuerConfig) { c.Issuer = "b"; c.JWKSFile = ""; c.JWKSURL = "/jwks" }),
			"identity.jwt[1].jwks_url:"},
		"both jwks_file and jwks_url": {with(func(c *IssuerConfig) { c.Issuer = "b"; c.JWKSURL = "https://idp/jwks" }),
			"identity.jwt[1]: set one of jwks_file and jwks_url"},
		"neither": {with(func(c *IssuerConfig) { c.Issuer = "b"; c.JWKSFile = "" }),
			"identity.jwt[1]: one of jwks_file and jwks_url is required"},
		"no issuer":        {with(func(c *IssuerConfig) { c.Issuer = "" }), "identity.jwt[1].issuer: required"},
		"duplicate issuer": {with(func(c *IssuerConfig) {}), "identity.jwt[1].issuer: \"https://idp.bank.ae\" is already configured"},
		"no audiences":     {with(func(c *IssuerConfig) { c.Issuer = "b"; c.Audiences = nil }), "identity.jwt[1].audiences: required"},
		"negative leeway":  {with(func(c *IssuerConfig) { c.Issuer = "b"; c.Leeway = -time.Second }), "identity.jwt[1].leeway:"},
		"tiny refresh": {with(func(c *IssuerConfig) { c.Issuer = "b"; c.JWKSRefresh = time.Millisecond }),
			"identity.jwt[1].jwks_refresh:"},
		"missing jwks_file": {with(func(c *IssuerConfig) { c.Issuer = "b"; c.JWKSFile = filepath.Join(dir, "nope.json") }),
			"identity.jwt[1].jwks_file:"},
		"jwks_file without usable keys": {with(func(c *IssuerConfig) { c.Issuer = "b"; c.JWKSFile = write("empty.json", `{"keys":[]}`) }),
			"identity.jwt[1].jwks_file: JWKS has no usable signing keys"},
		"negative depth":  {Config{MaxChainDepth: -1}, "identity.max_chain_depth:"},
		"negative cache":  {Config{TokenCacheSize: -1}, "identity.token_cache_size:"},
		"no trust domain": {Config{MTLS: &MTLSConfig{}}, "identity.mtls.trust_domain: required"},
		"trust domain with scheme": {Config{MTLS: &MTLSConfig{TrustDomain: "spiffe://bank.ae"}},
			"identity.mtls.trust_domain:"},
		"mapping in another trust domain": {Config{MTLS: &MTLSConfig{TrustDomain: "bank.ae",
			MappingFile: write("map.yaml", "spiffe://other.ae/a:\n  tenant: x\n")}}, "identity.mtls.mapping_file:"},
		"mapping with an unknown field": {Config{MTLS: &MTLSConfig{TrustDomain: "bank.ae",
			MappingFile: write("map2.yaml", "spiffe://bank.ae/a:\n  tenants: [x]\n")}}, "identity.mtls.mapping_file:"},
		"static file missing": {Config{StaticTokensFile: filepath.Join(dir, "nope.yaml")}, "identity.static_tokens_file:"},
		"static classification": {Config{StaticTokensFile: write("s1.yaml", "t1:\n  agent_id: a\n  classification: secret\n")},
			"identity.static_tokens_file: agent \"a\": unknown data classification"},
		"static without agent_id": {Config{StaticTokensFile: write("s2.yaml", "t1:\n  tenant: a\n")},
			"identity.static_tokens_file: an entry"},
		"static unknown field": {Config{StaticTokensFile: write("s3.yaml", "t1:\n  agent: a\n")}, "identity.static_tokens_file:"},
		"static empty":         {Config{StaticTokensFile: write("s4.yaml", "")}, "identity.static_tokens_file:"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r, err := New(tc.cfg)
			if err == nil {
				r.Close()
				t.Fatalf("New accepted the config; want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestConfigAccepts(t *testing.T) {
	for name, cfg := range map[string]Config{
		"zero value":           {},
		"http to localhost":    {JWT: []IssuerConfig{{Issuer: "a", Audiences: []string{"x"}, JWKSURL: "http://localhost:8080/jwks"}}},
		"http to 127.0.0.1":    {JWT: []IssuerConfig{{Issuer: "a", Audiences: []string{"x"}, JWKSURL: "http://127.0.0.1:8080/jwks"}}},
		"JSON static file":     {StaticTokensFile: writeTemp(t, "s.json", `{"tok":{"agent_id":"a","scopes":["x"]}}`)},
		"all asymmetric algs":  {JWT: []IssuerConfig{{Issuer: "a", Audiences: []string{"x"}, JWKSURL: "https://idp/jwks", Algorithms: []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}}}},
		"mtls without mapping": {MTLS: &MTLSConfig{TrustDomain: "bank.ae"}},
	} {
		r, err := New(cfg)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		r.Close()
	}
}

func writeTemp(t *testing.T, name, body string) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
