package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseSTSDefaults(t *testing.T) {
	c, err := ParseSTS([]byte("audiences: [agent:payments]\nsubject_issuers:\n  - {issuer: https://idp.example, audiences: [agent:a], jwks_file: idp.json}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != DefaultSTSListen || c.MaxLifetime != DefaultSTSMaxLifetime || c.MaxChainDepth != DefaultSTSMaxChainDepth ||
		c.MayAct != STSMayActHonour || c.IssuerFor("127.0.0.1:8470") != "http://127.0.0.1:8470" {
		t.Fatalf("defaults: %+v", c)
	}
	if len(c.SubjectIssuers) != 1 || c.SubjectIssuers[0].JWKSFile != "idp.json" {
		t.Fatalf("subject_issuers: %+v", c.SubjectIssuers)
	}
	keys := map[string]bool{}
	for _, w := range c.Warnings() {
		keys[w.Key] = true
	}
	if !keys["signing_key_file"] || !keys["subject_audience"] {
		t.Errorf("warnings %v", c.Warnings())
	}
}

// TestParseSTSProblems: every key is checked at load, with its line, and an
// unknown key's hint comes from sts.yaml's own keys.
func TestParseSTSProblems(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"audiences: [a]\nmax_lifetim: 5m\n", "line 2: max_lifetim: unknown key (did you mean max_lifetime?)"},
		{"audiences: [a]\nmax_lifetime: 300\n", "line 2: max_lifetime: 300 is not a duration: give its unit, as in 300s"},
		{"max_lifetime: 5m\n", "audiences: required"},
		{"audiences: [a, a]\n", "audiences[1]: \"a\" is listed twice"},
		{"audiences: [a]\nissuer: http://sts.example.com\n", "issuer: \"http://sts.example.com\" must be https"},
		{"audiences: [a]\nissuer: https://sts.example.com/\n", "no query, fragment, user or trailing slash"},
		{"audiences: [https://sts.example.com]\nissuer: https://sts.example.com\n", "must not be the STS's own issuer"},
		{"audiences: [a]\nmax_chain_depth: 40\n", "max_chain_depth: must be from 1 to 16"},
		{"audiences: [a]\nmay_act: always\n", "may_act: must be honour or require"},
		{"audiences: [a]\nsubject_audience: agent:x\n", "subject_audience: must contain {actor}"},
		{"audiences: [a]\nmax_lifetime: 48h\n", "max_lifetime: must be positive and at most 24h0m0s"},
		{"audiences: [a]\nlog: {level: loud}\n", "log.level: must be debug, info, warn or error"},
		{"audiences: [a]\nissuer: https://s.example\nactor_issuers: [{issuer: https://s.example}]\n", "actor_issuers[0].issuer: is the STS itself"},
	} {
		_, err := ParseSTS([]byte(tc.doc))
		var ps *Problems
		if !errors.As(err, &ps) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.doc, err, tc.want)
		}
	}
}

func TestLoadSTSNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sts.yaml")
	if err := os.WriteFile(path, []byte("audiences: [a]\nmay_act: sometimes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadSTS(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+":2: may_act:") {
		t.Fatalf("LoadSTS: %v", err)
	}
}

func TestExchangeDefaultsAndProblems(t *testing.T) {
	e := Exchange{Issuer: "https://sts.example", ClientID: "agent-a", ClientSecretFile: "s"}
	e.ApplyDefaults()
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	if e.Timeout != DefaultExchangeTimeout || e.CacheBytes != DefaultExchangeCache || e.CacheBytesPerSubject != DefaultExchangeCache/8 ||
		e.RefreshBefore != DefaultRefreshBefore || e.Audience("payments") != "agent:payments" {
		t.Fatalf("defaults: %+v", e)
	}
	for _, tc := range []struct {
		edit func(*Exchange)
		want string
	}{
		{func(e *Exchange) { e.Issuer = "" }, "egress.exchange.issuer: required"},
		{func(e *Exchange) { e.Issuer = "http://sts.example" }, "egress.exchange.issuer: \"http://sts.example\" must be https"},
		{func(e *Exchange) { e.TokenEndpoint = "http://10.0.0.1/token" }, "egress.exchange.token_endpoint: \"http://10.0.0.1/token\" must be https"},
		{func(e *Exchange) { e.JWKSURL = "jwks.json" }, "egress.exchange.jwks_url: \"jwks.json\" is not an absolute URL"},
		{func(e *Exchange) { e.ClientID, e.ClientSecretFile = "", "" }, "egress.exchange.client_id: one of client_id"},
		{func(e *Exchange) { e.ClientSecretFile = "" }, "egress.exchange.client_secret_file: required with client_id"},
		{func(e *Exchange) { e.ClientID = "a:b" }, "egress.exchange.client_id: must not contain a colon"},
		{func(e *Exchange) { e.AudienceFormat = "agent" }, "egress.exchange.audience_format: must contain {name}"},
		{func(e *Exchange) { e.Timeout = time.Hour }, "egress.exchange.timeout: must be positive and at most 2m0s"},
		{func(e *Exchange) { e.CacheBytes = -5 }, "egress.exchange.cache_bytes: must be -1 (off)"},
		{func(e *Exchange) { e.CacheBytesPerSubject = e.CacheBytes + 1 }, "egress.exchange.cache_bytes_per_subject: must be positive and at most cache_bytes"},
		{func(e *Exchange) { e.RefreshBefore = time.Hour }, "egress.exchange.refresh_before: must be from 0 to 5m0s"},
	} {
		bad := e
		tc.edit(&bad)
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", bad, err, tc.want)
		}
	}
	svid := Exchange{Issuer: "http://127.0.0.1:8470", ActorTokenFile: "/run/spire/svid.jwt", CacheBytes: -1}
	svid.ApplyDefaults()
	if err := svid.Validate(); err != nil || svid.CacheBytesPerSubject != 0 {
		t.Errorf("a JWT-SVID and no cache: %v %+v", err, svid)
	}
}
