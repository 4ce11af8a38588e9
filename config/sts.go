package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// STS is the configuration of `writ sts` (sts.yaml), the development and CI
// token exchange service (package sts, docs/sts.md). It is a document of its
// own, read with the same machinery as writ.yaml (unknown keys, kinds and
// durations refused with their line).
type STS struct {
	// Listen is the STS's address (default DefaultSTSListen).
	Listen string `yaml:"listen"`
	// Issuer is the iss of every token the STS signs, and the base of its
	// endpoints (token, JWKS, discovery). Default: http://<listen address>.
	// It must be https, or http on a loopback host.
	Issuer string `yaml:"issuer"`
	// SigningKeyFile is the ES256 private key (a JWK) the STS signs with:
	// read when it exists, generated and written (0600) when it does not.
	// Empty: a key generated at start and never written (tokens stop
	// verifying when the STS restarts; for tests).
	SigningKeyFile string `yaml:"signing_key_file" writ:"path"`
	// Audiences are the targets the STS issues tokens for (the audience or
	// resource an exchange names): anything else is invalid_target. Required.
	// Tokens the STS issued are accepted back as subject tokens when their aud
	// is one of these.
	Audiences []string `yaml:"audiences"`
	// MaxLifetime bounds an issued token's life (default 10m); an exchanged
	// token never outlives its subject token or its actor's credential either.
	MaxLifetime time.Duration `yaml:"max_lifetime"`
	// MaxChainDepth bounds the actors in an issued token's act chain
	// (default 4, at most STSMaxChainDepthCeiling).
	MaxChainDepth int `yaml:"max_chain_depth"`
	// MayAct is how a subject token's may_act claim is used: "honour" (the
	// default: when present, only an actor it names may exchange) or
	// "require" (besides: a subject token from another issuer, where a
	// delegation enters the STS, must carry may_act; a token the STS issued
	// continues a delegation it already authorized, and carries none).
	MayAct string `yaml:"may_act"`
	// SubjectAudience, when set, binds a subject token to its holder: its aud
	// must contain this value with {actor} replaced by the authenticated
	// actor (e.g. "agent:{actor}"), so a token can be exchanged only by the
	// agent it was issued to. Empty: no binding (the issuer's audiences only).
	SubjectAudience string `yaml:"subject_audience"`
	// SubjectIssuers are the trusted issuers of subject tokens besides the
	// STS itself (issuer, audiences, jwks_file or jwks_url, claim names: as
	// identity.jwt[]).
	SubjectIssuers []JWTIssuer `yaml:"subject_issuers"`
	// ActorIssuers are the trusted issuers of actor tokens besides the STS's
	// own client-credentials tokens: an IdP's client-credentials tokens, or
	// SPIRE's JWT-SVIDs (audiences: what the actors ask their JWT-SVIDs for).
	ActorIssuers []JWTIssuer `yaml:"actor_issuers"`
	// ClientSecretsFile is a YAML map client_id → secret: the clients that
	// authenticate with HTTP Basic (the client_credentials grant, or an
	// exchange without an actor token). For development and CI.
	ClientSecretsFile string `yaml:"client_secrets_file" writ:"path"`
	// Log configures the STS's own log (JSON lines on stderr).
	Log Log `yaml:"log"`

	pos positions
}

// Defaults and bounds of sts.yaml.
const (
	DefaultSTSListen         = "127.0.0.1:8470"
	DefaultSTSMaxLifetime    = 10 * time.Minute
	DefaultSTSMaxChainDepth  = 4
	STSMaxChainDepthCeiling  = 16
	STSMayActHonour          = "honour"
	STSMayActRequire         = "require"
	stsActorPlaceholder      = "{actor}"
	maxSTSLifetimeConfigured = 24 * time.Hour
)

// LoadSTS reads, decodes and validates an sts.yaml. Its error is a *Problems
// naming the file, and each problem's key and line.
func LoadSTS(path string) (*STS, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := parseSTS(raw, filepath.Dir(path))
	var ps *Problems
	if errors.As(err, &ps) {
		ps.File = path
	}
	return c, err
}

// ParseSTS decodes and validates an sts.yaml document, as Parse does writ.yaml.
func ParseSTS(raw []byte) (*STS, error) { return parseSTS(raw, "") }

// parseSTS is ParseSTS with relative paths taken from dir, as parse.
func parseSTS(raw []byte, dir string) (*STS, error) {
	c := STS{pos: positions{}}
	ps := &problems{pos: c.pos}
	decodeTree(raw, &c, ps)
	if err := ps.err(); err != nil {
		return nil, err
	}
	resolvePaths(&c, dir)
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// ApplyDefaults fills in every unset key but the issuer, which depends on the
// address the listener gets (IssuerFor).
func (c *STS) ApplyDefaults() {
	if c.Listen == "" {
		c.Listen = DefaultSTSListen
	}
	if c.MaxLifetime == 0 {
		c.MaxLifetime = DefaultSTSMaxLifetime
	}
	if c.MaxChainDepth == 0 {
		c.MaxChainDepth = DefaultSTSMaxChainDepth
	}
	if c.MayAct == "" {
		c.MayAct = STSMayActHonour
	}
}

// IssuerFor is the issuer: the configured one, else http:// and the address
// the listener is bound to.
func (c *STS) IssuerFor(addr string) string {
	if c.Issuer != "" {
		return c.Issuer
	}
	return "http://" + addr
}

// Validate checks every key of a config with its defaults applied. The error
// is a *Problems. The issuers' own keys (audiences, JWKS, algorithms) are
// checked by identity when the STS builds its verifiers, as for writ.yaml.
func (c *STS) Validate() error {
	ps := &problems{pos: c.pos}
	bad := ps.add
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port", c.Listen)
	}
	if c.Issuer != "" {
		if err := validIssuerURL(c.Issuer); err != nil {
			bad("issuer", "%v", err)
		}
	}
	if len(c.Audiences) == 0 {
		bad("audiences", "required: the targets the STS issues tokens for (e.g. agent:payments)")
	}
	seen := map[string]bool{}
	for i, a := range c.Audiences {
		key := fmt.Sprintf("audiences[%d]", i)
		switch {
		case strings.TrimSpace(a) == "" || strings.ContainsAny(a, " \t\r\n"):
			bad(key, "must be a non-empty value without spaces, not %q", a)
		case seen[a]:
			bad(key, "%q is listed twice", a)
		case a == c.Issuer && c.Issuer != "":
			// The STS's client-credentials tokens are addressed to its
			// issuer: were it a target, an actor token would pass as a
			// subject token.
			bad(key, "must not be the STS's own issuer")
		}
		seen[a] = true
	}
	if c.MaxLifetime < 0 || c.MaxLifetime > maxSTSLifetimeConfigured {
		bad("max_lifetime", "must be positive and at most %s, not %s", maxSTSLifetimeConfigured, c.MaxLifetime)
	}
	if c.MaxChainDepth < 0 || c.MaxChainDepth > STSMaxChainDepthCeiling {
		bad("max_chain_depth", "must be from 1 to %d (0: the default, %d), not %d",
			STSMaxChainDepthCeiling, DefaultSTSMaxChainDepth, c.MaxChainDepth)
	}
	if c.MayAct != STSMayActHonour && c.MayAct != STSMayActRequire {
		bad("may_act", "must be honour or require, not %q", c.MayAct)
	}
	if s := c.SubjectAudience; s != "" && (!strings.Contains(s, stsActorPlaceholder) || strings.ContainsAny(s, " \t")) {
		bad("subject_audience", "must contain %s (the actor's id) and no spaces, not %q", stsActorPlaceholder, s)
	}
	for _, list := range []struct {
		key     string
		issuers []JWTIssuer
	}{{"subject_issuers", c.SubjectIssuers}, {"actor_issuers", c.ActorIssuers}} {
		for i, ic := range list.issuers {
			if ic.Issuer != "" && ic.Issuer == c.Issuer {
				bad(fmt.Sprintf("%s[%d].issuer", list.key, i), "is the STS itself, which is always trusted with its own key")
			}
		}
	}
	c.Log.validate(bad)
	return ps.err()
}

// Line is the line of key in the file c was parsed from, else of its nearest
// parent there, else 0.
func (c *STS) Line(key string) int { return c.pos.line(key) }

// Warnings are what is valid but doubtful in c: `writ sts` logs them at start.
func (c *STS) Warnings() []Problem {
	ps := &problems{pos: c.pos}
	if c.SigningKeyFile == "" {
		ps.add("signing_key_file", "unset: the signing key is generated at start and lost at exit; tokens issued before a restart stop verifying")
	}
	if c.SubjectAudience == "" {
		ps.add("subject_audience", "unset: any authenticated actor may exchange any subject token it holds, not only those issued to it")
	}
	if c.ClientSecretsFile != "" {
		ps.add("client_secrets_file", "client secrets in a file are for development and CI only")
	}
	sorted(ps.list)
	return ps.list
}

// validIssuerURL accepts an absolute https URL, or http on a loopback host,
// without query, fragment or trailing slash: the form an iss claim is
// compared in, byte for byte.
func validIssuerURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not an absolute URL", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(raw, "/") || u.User != nil {
		return fmt.Errorf("%q: an issuer has no query, fragment, user or trailing slash", raw)
	}
	return secureURL(u)
}

// secureURL accepts https, and http to a loopback host only: what a token or
// key set is fetched over, or named by, must not travel in clear text.
func secureURL(u *url.URL) error {
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		h := u.Hostname()
		if strings.EqualFold(h, "localhost") {
			return nil
		}
		if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
			return nil
		}
	}
	return fmt.Errorf("%q must be https (http only for localhost and 127.0.0.1)", u.Redacted())
}
