package exchange

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
)

// The RFC 8693 values the client sends and accepts.
const (
	grantTokenExchange     = "urn:ietf:params:oauth:grant-type:token-exchange"
	grantClientCredentials = "client_credentials"
	tokenTypeJWT           = "urn:ietf:params:oauth:token-type:jwt"
	tokenTypeAccessToken   = "urn:ietf:params:oauth:token-type:access_token"
)

const (
	// maxAnswerBytes bounds an STS answer or discovery document: a token
	// is at most 16 KiB (what identity accepts), the rest is short.
	maxAnswerBytes = 64 << 10
	// discoveryRetry is how soon a failed discovery is tried again: an STS
	// that is down is not asked on every request.
	discoveryRetry = 2 * time.Second
)

// endpoints are where the STS issues and how what it issues is verified.
type endpoints struct {
	token    string
	verifier *identity.Resolver
}

// stsClient speaks to one STS: discovery, the token endpoint, its keys.
type stsClient struct {
	cfg    config.Exchange
	client *http.Client
	now    func() time.Time

	mu      sync.Mutex
	ep      *endpoints
	lastTry time.Time
	lastErr error
}

func newSTSClient(cfg config.Exchange, client *http.Client, now func() time.Time) (*stsClient, error) {
	c := &stsClient{cfg: cfg, client: client, now: now}
	if cfg.TokenEndpoint != "" && cfg.JWKSURL != "" {
		ep, err := c.build(cfg.TokenEndpoint, cfg.JWKSURL)
		if err != nil {
			return nil, err
		}
		c.ep = ep
	}
	return c, nil
}

// build makes the verifier of the STS's tokens: writ's identity, with the
// STS as its one issuer and the keys at jwksURL (fetched on first use,
// refreshed, refetched on an unknown kid).
func (c *stsClient) build(tokenURL, jwksURL string) (*endpoints, error) {
	// VerifyFor names the audience of each verification; the configured
	// audience is required by the config but never consulted.
	v, err := identity.New(identity.Config{JWT: []config.JWTIssuer{{Issuer: c.cfg.Issuer, Audiences: []string{c.cfg.Issuer},
		JWKSURL: jwksURL}}}, identity.WithHTTPClient(c.client), identity.WithConfigKey(config.ExchangeKey+".sts"))
	if err != nil {
		return nil, err
	}
	return &endpoints{token: tokenURL, verifier: v}, nil
}

// endpoints returns the STS's endpoints, reading its discovery document on
// first use (and again, at most every discoveryRetry, after a failure).
func (c *stsClient) endpoints(ctx context.Context) (*endpoints, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ep != nil {
		return c.ep, nil
	}
	if now := c.now(); !c.lastTry.IsZero() && now.Sub(c.lastTry) < discoveryRetry {
		return nil, c.lastErr
	}
	c.lastTry = c.now()
	meta, err := c.discover(ctx)
	if err == nil {
		tokenURL, jwksURL := meta.TokenEndpoint, meta.JWKSURI
		if c.cfg.TokenEndpoint != "" {
			tokenURL = c.cfg.TokenEndpoint
		}
		if c.cfg.JWKSURL != "" {
			jwksURL = c.cfg.JWKSURL
		}
		c.ep, err = c.build(tokenURL, jwksURL)
		if err != nil {
			err = invalid(nil, "discovery: %v", err)
		}
	}
	c.lastErr = err
	return c.ep, err
}

// metadata is the part of RFC 8414's document writ reads.
type metadata struct {
	Issuer        string `json:"issuer"`
	TokenEndpoint string `json:"token_endpoint"`
	JWKSURI       string `json:"jwks_uri"`
}

// discoveryURLs are where an issuer's metadata may be: RFC 8414's
// well-known path before the issuer's path, the same after it (where many
// servers put it, Keycloak's realms among them), and OpenID Connect's.
func discoveryURLs(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil
	}
	rfc := *u
	rfc.Path = "/.well-known/oauth-authorization-server" + strings.TrimSuffix(u.Path, "/")
	urls := []string{rfc.String(), issuer + "/.well-known/oauth-authorization-server", issuer + "/.well-known/openid-configuration"}
	if urls[0] == urls[1] {
		urls = urls[1:]
	}
	return urls
}

// discover reads the first discovery document the STS serves. Its issuer
// must be the configured one (RFC 8414 §3.3), and its endpoints https (or
// http on loopback).
func (c *stsClient) discover(ctx context.Context) (metadata, error) {
	var lastErr error
	for _, u := range discoveryURLs(c.cfg.Issuer) {
		status, body, err := c.get(ctx, u)
		if err != nil {
			return metadata{}, unavailable("discovery", err)
		}
		if status == http.StatusNotFound {
			lastErr = fmt.Errorf("%w: discovery: no metadata at %s", ErrSTSUnavailable, u)
			continue
		}
		if status >= 500 {
			return metadata{}, fmt.Errorf("%w: discovery: HTTP %d", ErrSTSUnavailable, status)
		}
		if status != http.StatusOK {
			return metadata{}, invalid(nil, "discovery: HTTP %d from %s", status, u)
		}
		var m metadata
		if err := json.Unmarshal(body, &m); err != nil {
			return metadata{}, invalid(nil, "discovery: %s is not a JSON document", u)
		}
		if m.Issuer != c.cfg.Issuer {
			return metadata{}, invalid(ErrWrongIssuer, "discovery: the document at %s is issuer %q's", u, clip(m.Issuer))
		}
		for name, raw := range map[string]string{"token_endpoint": m.TokenEndpoint, "jwks_uri": m.JWKSURI} {
			if err := secureURL(raw); err != nil {
				return metadata{}, invalid(nil, "discovery: %s: %v", name, err)
			}
		}
		return m, nil
	}
	return metadata{}, lastErr
}

func (c *stsClient) get(ctx context.Context, u string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	return c.do(req)
}

// post sends a form to the token endpoint, with HTTP Basic when id is set
// (RFC 6749 §2.3.1: both parts form-encoded first).
func (c *stsClient) post(ctx context.Context, tokenURL string, form url.Values, id, secret string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if id != "" {
		req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	}
	return c.do(req)
}

func (c *stsClient) do(req *http.Request) (int, []byte, error) {
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return 0, nil, err
	}
	if len(body) > maxAnswerBytes {
		return resp.StatusCode, nil, fmt.Errorf("answer larger than %d bytes", maxAnswerBytes)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode < 500 && ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return resp.StatusCode, body, errNotJSON
		}
	}
	return resp.StatusCode, body, nil
}

// errNotJSON is an answer whose Content-Type is not JSON.
var errNotJSON = errors.New("the answer is not application/json")

// tokenAnswer is RFC 8693 §2.2.1's (and RFC 6749 §5.1's) answer.
type tokenAnswer struct {
	AccessToken     string `json:"access_token"`
	IssuedTokenType string `json:"issued_token_type"`
	TokenType       string `json:"token_type"`
	ExpiresIn       *int64 `json:"expires_in"`
	Scope           string `json:"scope"`
}

// call posts a token request and reads the answer: a token answer, an RFC
// 6749 refusal (*RefusedError), the STS's unavailability or an invalid
// answer, each its own error.
func (c *stsClient) call(ctx context.Context, tokenURL string, form url.Values, id, secret string) (tokenAnswer, error) {
	status, body, err := c.post(ctx, tokenURL, form, id, secret)
	switch {
	case errors.Is(err, errNotJSON):
		return tokenAnswer{}, invalid(nil, "HTTP %d that is not JSON", status)
	case err != nil && status == 0:
		return tokenAnswer{}, unavailable("token endpoint", err)
	case err != nil:
		return tokenAnswer{}, invalid(nil, "HTTP %d: %v", status, err)
	case status >= 500:
		return tokenAnswer{}, fmt.Errorf("%w: token endpoint: HTTP %d", ErrSTSUnavailable, status)
	case status != http.StatusOK:
		var e struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			return tokenAnswer{}, invalid(nil, "HTTP %d without an RFC 6749 error", status)
		}
		return tokenAnswer{}, &RefusedError{Code: clip(e.Error), Description: clip(e.Description), Status: status}
	}
	var a tokenAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return tokenAnswer{}, invalid(nil, "the answer is not a JSON token response")
	}
	if a.AccessToken == "" || !strings.EqualFold(a.TokenType, "Bearer") {
		return tokenAnswer{}, invalid(nil, "the answer has no access_token of token_type Bearer")
	}
	return a, nil
}

// secureURL accepts an absolute https URL, or http to a loopback host.
func secureURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not an absolute URL", clip(raw))
	}
	if u.Scheme == "https" {
		return nil
	}
	if h := u.Hostname(); u.Scheme == "http" {
		if strings.EqualFold(h, "localhost") {
			return nil
		}
		if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
			return nil
		}
	}
	return fmt.Errorf("%q must be https (http only on loopback)", clip(raw))
}

// clip shortens what an STS said before it goes into an error.
func clip(s string) string {
	if len(s) > 200 {
		return strings.ToValidUTF8(s[:200], "") + "…"
	}
	return s
}

// close releases the verifier.
func (c *stsClient) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ep != nil {
		c.ep.verifier.Close()
	}
}
