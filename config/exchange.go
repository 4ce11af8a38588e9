package config

import (
	"net/url"
	"strings"
	"time"
)

// Exchange configures how writ obtains outbound tokens on egress: RFC 8693
// token exchange at an STS (package authz/exchange). It is the
// egress.exchange block of writ.yaml, validated with the rest of the file
// when egress is on, and on its own by Validate.
type Exchange struct {
	// Issuer is the STS's issuer URL: the iss every token it returns must
	// carry, and where its discovery document is
	// (<issuer>/.well-known/oauth-authorization-server). Required; https, or
	// http on a loopback host.
	Issuer string `yaml:"issuer"`
	// TokenEndpoint overrides the discovery document's token_endpoint.
	TokenEndpoint string `yaml:"token_endpoint"`
	// JWKSURL overrides the discovery document's jwks_uri: the keys the
	// returned tokens are verified with.
	JWKSURL string `yaml:"jwks_url"`
	// ClientID and ClientSecretFile are this agent's client credentials at
	// the STS: sent with HTTP Basic, and used for the client_credentials
	// grant that obtains the actor token when ActorTokenFile is unset.
	ClientID         string `yaml:"client_id"`
	ClientSecretFile string `yaml:"client_secret_file" writ:"path"`
	// ActorTokenFile is this agent's own credential as a JWT (a SPIFFE
	// JWT-SVID, written by the SPIFFE helper or an agent sidecar), read again
	// whenever the file changes. One of ActorTokenFile and ClientID is
	// required.
	ActorTokenFile string `yaml:"actor_token_file" writ:"path"`
	// AudienceFormat makes a target agent's audience from its name; {name}
	// is replaced (default "agent:{name}").
	AudienceFormat string `yaml:"audience_format"`
	// Timeout bounds one call to the STS, discovery and JWKS included
	// (default 5s).
	Timeout time.Duration `yaml:"timeout"`
	// CacheBytes bounds the cache of exchanged tokens (default 8 MiB; -1
	// disables it), and CacheBytesPerSubject what one subject may hold of it
	// (default an eighth of CacheBytes): one caller fanning out to many
	// targets cannot evict everybody else's tokens.
	CacheBytes           int `yaml:"cache_bytes"`
	CacheBytesPerSubject int `yaml:"cache_bytes_per_subject"`
	// RefreshBefore is how long before its exp a cached token stops being
	// used, and a new one is exchanged (default 30s).
	RefreshBefore time.Duration `yaml:"refresh_before"`
}

// ExchangeKey is where the Exchange block lives in writ.yaml; its problems
// name their keys under it.
const ExchangeKey = "egress.exchange"

// Defaults of the exchange client.
const (
	DefaultAudienceFormat    = "agent:{name}"
	DefaultExchangeTimeout   = 5 * time.Second
	DefaultExchangeCache     = 8 << 20
	DefaultRefreshBefore     = 30 * time.Second
	maxExchangeTimeout       = 2 * time.Minute
	maxRefreshBefore         = 5 * time.Minute
	exchangeNamePlaceholder  = "{name}"
	minExchangeSubjectShare  = 4 << 10 // a few tokens: any smaller and one exchange could not be kept
	exchangeSubjectShareFrac = 8
)

// ApplyDefaults fills in every unset key.
func (e *Exchange) ApplyDefaults() {
	if e.AudienceFormat == "" {
		e.AudienceFormat = DefaultAudienceFormat
	}
	if e.Timeout == 0 {
		e.Timeout = DefaultExchangeTimeout
	}
	if e.CacheBytes == 0 {
		e.CacheBytes = DefaultExchangeCache
	}
	if e.CacheBytesPerSubject == 0 && e.CacheBytes > 0 {
		e.CacheBytesPerSubject = max(minExchangeSubjectShare, e.CacheBytes/exchangeSubjectShareFrac)
	}
	if e.RefreshBefore == 0 {
		e.RefreshBefore = DefaultRefreshBefore
	}
}

// Audience is the audience writ asks the STS for when it calls the agent
// named name.
func (e *Exchange) Audience(name string) string {
	return strings.ReplaceAll(e.AudienceFormat, exchangeNamePlaceholder, name)
}

// Validate checks an Exchange with its defaults applied. The error is a
// *Problems whose keys start with ExchangeKey.
func (e *Exchange) Validate() error {
	ps := &problems{pos: positions{}}
	e.validate(ps.add)
	return ps.err()
}

// validate reports the block's problems to add, under ExchangeKey.
func (e *Exchange) validate(add func(key, format string, args ...any)) {
	bad := func(key, format string, args ...any) { add(ExchangeKey+"."+key, format, args...) }
	if e.Issuer == "" {
		bad("issuer", "required: the STS's issuer URL")
	} else if err := validIssuerURL(e.Issuer); err != nil {
		bad("issuer", "%v", err)
	}
	for key, raw := range map[string]string{"token_endpoint": e.TokenEndpoint, "jwks_url": e.JWKSURL} {
		if raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			bad(key, "%q is not an absolute URL", raw)
		} else if err := secureURL(u); err != nil {
			bad(key, "%v", err)
		}
	}
	switch {
	case e.ClientID == "" && e.ActorTokenFile == "":
		bad("client_id", "one of client_id (with client_secret_file) and actor_token_file is required: this agent's credential at the STS")
	case e.ClientID != "" && e.ClientSecretFile == "":
		bad("client_secret_file", "required with client_id")
	case e.ClientID == "" && e.ClientSecretFile != "":
		bad("client_id", "required with client_secret_file")
	}
	if strings.ContainsAny(e.ClientID, ":") {
		// RFC 7617: a user-id with a colon cannot be told from the password.
		bad("client_id", "must not contain a colon")
	}
	if !strings.Contains(e.AudienceFormat, exchangeNamePlaceholder) || strings.ContainsAny(e.AudienceFormat, " \t") {
		bad("audience_format", "must contain %s (the target agent's name) and no spaces, not %q", exchangeNamePlaceholder, e.AudienceFormat)
	}
	if e.Timeout <= 0 || e.Timeout > maxExchangeTimeout {
		bad("timeout", "must be positive and at most %s, not %s", maxExchangeTimeout, e.Timeout)
	}
	switch {
	case e.CacheBytes < -1:
		bad("cache_bytes", "must be -1 (off), 0 (the default) or positive, not %d", e.CacheBytes)
	case e.CacheBytes > 0 && (e.CacheBytesPerSubject <= 0 || e.CacheBytesPerSubject > e.CacheBytes):
		bad("cache_bytes_per_subject", "must be positive and at most cache_bytes (%d), not %d", e.CacheBytes, e.CacheBytesPerSubject)
	}
	if e.RefreshBefore < 0 || e.RefreshBefore > maxRefreshBefore {
		// Tokens live minutes (writ sts: 10m at most by default): a larger
		// margin would exchange again on nearly every call.
		bad("refresh_before", "must be from 0 to %s, not %s", maxRefreshBefore, e.RefreshBefore)
	}
}
