package identity

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/writ-authz/writ/config"
)

// Config is the identity section of writ's configuration (config.Identity).
// The zero value is valid: it accepts no credentials, so every caller is
// anonymous.
type Config = config.Identity

// IssuerConfig is one trusted JWT issuer (config.JWTIssuer).
type IssuerConfig = config.JWTIssuer

// MTLSConfig maps client certificates' SPIFFE IDs to callers (config.MTLS).
type MTLSConfig = config.MTLS

// Defaults, and why.
const (
	defaultMaxChainDepth  = 16
	defaultTokenCacheSize = 10000
	defaultLeeway         = 30 * time.Second
	defaultJWKSRefresh    = 10 * time.Minute
	minJWKSRefresh        = time.Second // anything lower would refetch on every request
	defaultHTTPTimeout    = 10 * time.Second
)

var defaultAlgorithms = []string{"RS256", "ES256", "EdDSA"}

// asymmetric lists the signature algorithms an issuer may allow. HMAC is absent on
// purpose: a verifier holding only public keys must never accept a MAC, or the public
// key itself becomes the secret (the classic RS256→HS256 confusion).
var asymmetric = map[string]jose.SignatureAlgorithm{
	"RS256": jose.RS256, "RS384": jose.RS384, "RS512": jose.RS512,
	"PS256": jose.PS256, "PS384": jose.PS384, "PS512": jose.PS512,
	"ES256": jose.ES256, "ES384": jose.ES384, "ES512": jose.ES512,
	"EdDSA": jose.EdDSA,
}

// withDefaults checks the settings that need no file and fills in defaults.
func withDefaults(c Config, o options) (Config, error) {
	switch {
	case c.MaxChainDepth < 0:
		return c, errors.New("identity.max_chain_depth: must not be negative")
	case c.MaxChainDepth == 0:
		c.MaxChainDepth = defaultMaxChainDepth
	}
	switch {
	case c.TokenCacheSize < 0:
		return c, errors.New("identity.token_cache_size: must not be negative")
	case c.TokenCacheSize == 0:
		c.TokenCacheSize = defaultTokenCacheSize
	}
	seen := make(map[string]int, len(c.JWT))
	issuers := make([]IssuerConfig, len(c.JWT))
	for i, ic := range c.JWT {
		key := fmt.Sprintf("%s[%d]", o.prefix, i)
		ic, err := issuerDefaults(ic, key, len(o.keys[ic.Issuer]) > 0)
		if err != nil {
			return c, err
		}
		if j, dup := seen[ic.Issuer]; dup {
			return c, fmt.Errorf("%s.issuer: %q is already configured in %s[%d]", key, ic.Issuer, o.prefix, j)
		}
		seen[ic.Issuer] = i
		issuers[i] = ic
	}
	c.JWT = issuers
	if c.MTLS != nil {
		if err := validTrustDomain(c.MTLS.TrustDomain); err != nil {
			return c, fmt.Errorf("identity.mtls.trust_domain: %w", err)
		}
	}
	return c, nil
}

// issuerDefaults checks one issuer and fills in its defaults; codeKeys says
// its keys were given in code (WithIssuerKeys), not by file or URL.
func issuerDefaults(ic IssuerConfig, key string, codeKeys bool) (IssuerConfig, error) {
	if ic.Issuer == "" {
		return ic, fmt.Errorf("%s.issuer: required", key)
	}
	if len(ic.Audiences) == 0 {
		return ic, fmt.Errorf("%s.audiences: required (a token for any audience must not be accepted)", key)
	}
	for i, a := range ic.Audiences {
		if a == "" {
			return ic, fmt.Errorf("%s.audiences[%d]: empty", key, i)
		}
	}
	switch {
	case codeKeys && (ic.JWKSFile != "" || ic.JWKSURL != ""):
		return ic, fmt.Errorf("%s: its keys are given by the program; set neither jwks_file nor jwks_url", key)
	case codeKeys:
	case ic.JWKSFile != "" && ic.JWKSURL != "":
		return ic, fmt.Errorf("%s: set one of jwks_file and jwks_url, not both", key)
	case ic.JWKSFile == "" && ic.JWKSURL == "":
		return ic, fmt.Errorf("%s: one of jwks_file and jwks_url is required", key)
	case ic.JWKSURL != "":
		if err := validJWKSURL(ic.JWKSURL); err != nil {
			return ic, fmt.Errorf("%s.jwks_url: %w", key, err)
		}
	}
	if len(ic.Algorithms) == 0 {
		ic.Algorithms = defaultAlgorithms
	}
	for i, a := range ic.Algorithms {
		if _, ok := asymmetric[a]; ok {
			continue
		}
		k := fmt.Sprintf("%s.algorithms[%d]", key, i)
		switch {
		case strings.EqualFold(a, "none"):
			return ic, fmt.Errorf("%s: %q is not a signature; only asymmetric algorithms are allowed", k, a)
		case strings.HasPrefix(strings.ToUpper(a), "HS"):
			return ic, fmt.Errorf("%s: %s is symmetric; only asymmetric algorithms (RS*, PS*, ES*, EdDSA) are allowed", k, a)
		default:
			return ic, fmt.Errorf("%s: unknown algorithm %q (allowed: RS*, PS*, ES256/384/512, EdDSA)", k, a)
		}
	}
	switch {
	case ic.Leeway < 0:
		return ic, fmt.Errorf("%s.leeway: must not be negative", key)
	case ic.Leeway == 0:
		ic.Leeway = defaultLeeway
	}
	switch {
	case ic.JWKSRefresh == 0:
		ic.JWKSRefresh = defaultJWKSRefresh
	case ic.JWKSRefresh < minJWKSRefresh:
		return ic, fmt.Errorf("%s.jwks_refresh: must be at least %s", key, minJWKSRefresh)
	}
	if ic.TenantClaim == "" {
		ic.TenantClaim = "tenant"
	}
	return ic, nil
}

// validJWKSURL accepts https, and http to the loopback host only (tests, and an IdP
// sidecar on the same host): keys fetched in clear text are attacker-supplied keys.
func validJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a URL: %w", err)
	}
	if u.Host == "" {
		return errors.New("must be an absolute https URL")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopbackHost(u.Hostname()) {
			return nil
		}
	}
	return errors.New("must be https (http is allowed only for localhost and 127.0.0.1)")
}

func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// httpsRedirectsOnly keeps a redirect from downgrading the JWKS fetch to http.
func httpsRedirectsOnly(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("too many redirects")
	}
	if req.URL.Scheme != "https" && !isLoopbackHost(req.URL.Hostname()) {
		return fmt.Errorf("redirect to %s refused: not https", req.URL.Redacted())
	}
	return nil
}
