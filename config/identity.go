package config

import "time"

// Identity is the identity section: the sources a caller is identified by. The zero value is valid: it
// accepts no credentials, so every caller is anonymous.
type Identity struct {
	// JWT lists the trusted token issuers.
	JWT []JWTIssuer `yaml:"jwt" json:"jwt"`
	// MTLS, when set, identifies callers by the SPIFFE ID of their client certificate.
	MTLS *MTLS `yaml:"mtls" json:"mtls"`
	// StaticTokensFile is a YAML or JSON map token → {agent_id, user_id, tenant,
	// scopes, classification}. For development only: New logs a warning when set.
	StaticTokensFile string `yaml:"static_tokens_file" json:"static_tokens_file" writ:"path"`
	// MaxChainDepth bounds the nesting of RFC 8693 act claims; default 16. Deeper
	// tokens are refused outright (the policy's own, lower depth limit is separate).
	MaxChainDepth int `yaml:"max_chain_depth" json:"max_chain_depth"`
	// TokenCacheSize is the number of verified tokens kept; default 10000.
	TokenCacheSize int `yaml:"token_cache_size" json:"token_cache_size"`
}

// JWTIssuer is one trusted JWT issuer. Durations are strings such as "30s" in YAML.
type JWTIssuer struct {
	// Issuer must equal the token's iss claim exactly.
	Issuer string `yaml:"issuer" json:"issuer"`
	// Audiences: the token's aud must contain at least one of them. Required.
	Audiences []string `yaml:"audiences" json:"audiences"`
	// JWKSFile is a JWKS document read once at load. Exactly one of JWKSFile and
	// JWKSURL is required.
	JWKSFile string `yaml:"jwks_file" json:"jwks_file" writ:"path"`
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
}

// MTLS maps client certificates' SPIFFE IDs to callers.
type MTLS struct {
	// TrustDomain is the only SPIFFE trust domain accepted, e.g. "bank.ae".
	TrustDomain string `yaml:"trust_domain" json:"trust_domain"`
	// MappingFile is a YAML or JSON map SPIFFE ID → {agent_id, tenant, scopes}.
	// Optional: an unmapped ID is the agent, with no tenant or scopes.
	MappingFile string `yaml:"mapping_file" json:"mapping_file" writ:"path"`
}
