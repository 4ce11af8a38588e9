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
)

// Config is the identity section of writ's configuration. The zero value is valid: it
// accepts no credentials, so every caller is anonymous.
type Config struct {
	// JWT lists the trusted token issuers.
	JWT []IssuerConfig `yaml:"jwt" json:"jwt"`
	// MTLS, when set, identifies callers by the SPIFFE ID of their client certificate.
	MTLS *MTLSConfig `yaml:"mtls" json:"mtls"`
	// StaticTokensFile is a YAML or JSON map token → {agent_id, user_id, tenant,
	// scopes, classification}. For development only: New logs a warning when set.
	StaticTokensFile string `yaml:"static_tokens_file" json:"static_tokens_file"`
	// MaxChainDepth bounds the nesting of RFC 8693 act claims; default 16. Deeper
	// tokens are refused outright (the policy's own, lower depth limit is separate).
	MaxChainDepth int `yaml:"max_chain_depth" json:"max_chain_depth"`
	// TokenCacheSize is the number of verified tokens kept; default 10000.
	TokenCacheSize int `yaml:"token_cache_size" json:"token_cache_size"`
}

// IssuerConfig is one trusted JWT issuer. Durations are strings such as "30s" in YAML.
type IssuerConfig struct {
	// Issuer must equal the token's iss claim exactly.
	Issuer string `yaml:"issuer" json:"issuer"`
	// Audiences: the token's aud must contain at least one of them. Required.
	Audiences []string `yaml:"audiences" json:"audiences"`
	// JWKSFile is a JWKS document read once at load. Exactly one of JWKSFile and
	// JWKSURL is required.
	JWKSFile string `yaml:"jwks_file" json:"jwks_file"`
	// JWKSURL is fetched on first use and then every JWKSRefresh. It must be https
	// (http only for localhost and 127.0.0.1).
	JWKSURL string `yaml:"jwks_url" json:"jwks_url"`
	// Algorithms accepted in the token's alg header; default RS256, ES256, EdDSA. Only
	// asymmetric algorithms are allowed: HS* and none are refused at load.
	Algorithms []string `yaml:"algorithms" json:"algorithms"`
	// Leeway is the clock skew allowed on exp and nbf; default 30s.
	Leeway time.Duration `yaml:"leeway" json:"leeway"`
	// JWKSRefresh is how often a JWKS URL is fetched again; default 10m. A token with
	// an unknown kid also triggers a fetch, at most once a minute.
	JWKSRefresh time.Duration `yaml:"jwks_refresh" json:"jwks_refresh"`
	// TenantClaim names the tenant claim (a string); default "tenant".
	TenantClaim string `yaml:"tenant_claim" json:"tenant_claim"`
	// ScopeClaim names the scopes claim, a space-separated string or a list of
	// strings. Default: "scope", else "scp".
	ScopeClaim string `yaml:"scope_claim" json:"scope_claim"`
	// ClassificationClaim names the classification claim (public, internal,
	// confidential or restricted). Default: "classification", else
	// "data_classification".
	ClassificationClaim string `yaml:"classification_claim" json:"classification_claim"`
	// HTTPClient fetches JWKSURL; default a client with a 10s timeout that follows
	// redirects only to https.
	HTTPClient *http.Client `yaml:"-" json:"-"`
}

// MTLSConfig maps client certificates' SPIFFE IDs to callers.
type MTLSConfig struct {
	// TrustDomain is the only SPIFFE trust domain accepted, e.g. "bank.ae".
	TrustDomain string `yaml:"trust_domain" json:"trust_domain"`
	// MappingFile is a YAML or JSON map SPIFFE ID → {agent_id, tenant, scopes}.
	// Optional: an unmapped ID is the agent, with no tenant or scopes.
	MappingFile string `yaml:"mapping_file" json:"mapping_file"`
}

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
func (c Config) withDefaults() (Config, error) {
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
		key := fmt.Sprintf("identity.jwt[%d]", i)
		ic, err := ic.withDefaults(key)
		if err != nil {
			return c, err
		}
		if j, dup := seen[ic.Issuer]; dup {
			return c, fmt.Errorf("%s.issuer: %q is already configured in identity.jwt[%d]", key, ic.Issuer, j)
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

func (ic IssuerConfig) withDefaults(key string) (IssuerConfig, error) {
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
	if ic.HTTPClient == nil {
		ic.HTTPClient = &http.Client{Timeout: defaultHTTPTimeout, CheckRedirect: httpsRedirectsOnly}
	}
	return ic, nil
}

// validJWKSURL accepts https, and http to the loopback host only (tests, and an IdP
// sidecar on the same host): keys fetched in clear text are attacker-supplied keys.
func validJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a URL: %v", err)
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
