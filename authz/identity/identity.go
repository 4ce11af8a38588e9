// Package identity turns a request's credentials (JWT, mTLS certificate, static token) into the authenticated caller.
package identity

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/writ-authz/writ/authz/internal/segcache"
)

// The values of Caller.Method. They are part of the policy contract
// (input.caller.method), so they never change.
const (
	MethodJWT       = "jwt"
	MethodMTLS      = "mtls"
	MethodStatic    = "static"
	MethodAnonymous = "anonymous"
)

// Sentinel errors. Identify wraps exactly one of them (ErrTokenInvalid perhaps
// with one of its refinements below), so callers can map a failure to a stable
// reason with errors.Is; the wrapped text says what was wrong, never the token.
var (
	ErrTokenInvalid     = errors.New("identity: invalid token")
	ErrTokenExpired     = errors.New("identity: token expired")
	ErrTokenNotYetValid = errors.New("identity: token not yet valid")
	ErrUnknownIssuer    = errors.New("identity: unknown issuer")
	ErrUnknownKey       = errors.New("identity: unknown signing key")
	ErrKeysUnavailable  = errors.New("identity: signing keys unavailable")
	ErrChainTooDeep     = errors.New("identity: delegation chain too deep")
	ErrClaimType        = errors.New("identity: claim has the wrong type or value")
	ErrCertificate      = errors.New("identity: client certificate not accepted")
)

// Refinements of ErrTokenInvalid: a token whose signature does not verify,
// or whose aud names none of the issuer's audiences, fails with an error that
// wraps ErrTokenInvalid and one of these, for a caller that must say which
// (the STS's refusals).
var (
	ErrBadSignature     = errors.New("signature does not verify")
	ErrAudienceRejected = errors.New("audience not accepted")
)

// Caller is who authenticated, never what a header claims. Its JSON names are those of
// input.caller in the policy contract.
//
// A Caller returned by Identify may be shared with other requests through the token
// cache: treat Scopes, Chain and Claims as read-only.
type Caller struct {
	Authenticated bool     `json:"authenticated"`
	Method        string   `json:"method"` // one of the Method constants
	Issuer        string   `json:"issuer,omitempty"`
	AgentID       string   `json:"agent_id,omitempty"`
	UserID        string   `json:"user_id,omitempty"`
	Tenant        string   `json:"tenant,omitempty"`
	Scopes        []string `json:"scopes,omitempty"`
	// Chain is the delegation chain, oldest hop first, the caller itself excluded.
	Chain []string `json:"delegation_chain,omitempty"`
	// ChainID is the delegation's chain id: the token's txn claim (the JWT
	// transaction identifier of RFC 8417), which every token exchange of one
	// delegation keeps; "" when the credential names none.
	ChainID string `json:"chain_id,omitempty"`
	// Classification is the highest data classification the credential allows
	// (public|internal|confidential|restricted), or "" when it names none.
	Classification string `json:"classification,omitempty"`
	// Hops is the authority each actor of the delegation chain held when it
	// delegated, oldest first, the caller last (Chain, then AgentID), where
	// the token's act claims carry it; nil when they carry none.
	Hops []Hop `json:"hops,omitempty"`
	// Claims are the verified JWT claims, for policies; nil for other methods.
	Claims map[string]any `json:"claims,omitempty"`
	// Expires is when the credential stops being valid; zero when not applicable.
	Expires time.Time `json:"-"`
	// ClaimsDigest stands for Claims in per-request work (decision-cache keys),
	// computed once when a token is verified so that the claims need not be
	// encoded again: DigestClaims(Claims), or for a token writ verified the
	// digest of its payload's bytes (which determine the claims). Equal digests
	// mean equal claims; equal claims may have two digests (a cache miss, never
	// a wrong hit). Zero means not computed. A Caller from Identify is read-only.
	ClaimsDigest [sha256.Size]byte `json:"-"`
}

// Hop is what one actor of a delegation chain was granted: the scope, tenant
// and classification ceiling of the token it received, as the act claim that
// names it records them. A field is empty where the act claim has none;
// HasScopes tells an empty scope from one not recorded.
type Hop struct {
	AgentID        string   `json:"agent_id"`
	Scopes         []string `json:"scopes,omitempty"`
	HasScopes      bool     `json:"-"`
	Tenant         string   `json:"tenant,omitempty"`
	Classification string   `json:"classification,omitempty"`
}

// digestPayload is the ClaimsDigest of a verified JWS payload: the SHA-256 of
// its bytes, under a prefix that keeps it apart from DigestClaims' digests.
func digestPayload(payload []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte("writ/jws-payload\x00"))
	h.Write(payload)
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// DigestClaims is the SHA-256 of the claims' JSON form (encoding/json sorts
// object keys, so the form is canonical).
func DigestClaims(claims map[string]any) [sha256.Size]byte {
	raw, err := json.Marshal(claims)
	if err != nil {
		// Claims from a JWT always encode, but claims from Envoy's metadata may
		// hold what JSON cannot (NaN, ±Inf). They still get a digest of their
		// own: Go's printing of the map (keys sorted), under a prefix that keeps
		// it apart from the JSON digests. Never the zero digest, which means
		// "not computed" and would be shared by every such claim set.
		h := sha256.New()
		h.Write([]byte("writ/claims-fmt\x00"))
		fmt.Fprintf(h, "%#v", claims)
		var d [sha256.Size]byte
		h.Sum(d[:0])
		return d
	}
	return sha256.Sum256(raw)
}

// Anonymous is the caller of a request that presented no credentials.
func Anonymous() Caller { return Caller{Method: MethodAnonymous} }

// Credentials are what a request presents.
type Credentials struct {
	// Header is the request's header; only Authorization is read. Keys must be in
	// canonical form, as http.Header's methods make them.
	Header http.Header
	// PeerCertificates is the client's certificate chain, leaf first. Identify trusts
	// it as verified: chain verification against the trust bundle is the TLS layer's
	// job (or Envoy's, in ext_authz mode), and it must have been done before Identify.
	PeerCertificates []*x509.Certificate
}

// maxTokenBytes bounds the bearer token: anything larger is refused before it is
// hashed or decoded.
const maxTokenBytes = 16 << 10

// Resolver identifies callers. It is safe for concurrent use; Identify of a token seen
// before (and not yet expired) is a hash and a cache lookup. A cached token stays
// accepted until its exp even if its key leaves the JWKS meanwhile: short-lived tokens
// are what bound that window.
type Resolver struct {
	issuers  map[string]*jwtIssuer
	static   map[[sha256.Size]byte]Caller // keyed by SHA-256 of the token
	mtls     *mtlsSource
	maxDepth int

	// cache holds verified tokens by their hash. A token seen once waits in a
	// small probation segment and only one presented again stays (segcache):
	// callers that mint a token per request do not fill the heap with tokens
	// that never come back.
	cache         *segcache.Cache[[sha256.Size]byte, Caller]
	hits, misses  atomic.Uint64
	verifications atomic.Uint64 // signature checks attempted: lets tests see the cache work

	now func() time.Time
	bg  *background
}

// New validates cfg, loads the files it names (JWKS files, static tokens, the SPIFFE
// mapping) and returns a Resolver. Errors name the offending configuration key, e.g.
// `identity.jwt[0].jwks_url: must be https`. JWKS URLs are not fetched here but on
// first use, so New does no network I/O and is what `writ validate` runs.
func New(cfg Config, opts ...Option) (*Resolver, error) { return newResolver(cfg, time.Now, opts...) }

// Option adjusts a Resolver.
type Option func(*options)

type options struct {
	client *http.Client
	// keys are issuers' keys given in code, by issuer (WithIssuerKeys).
	keys map[string][]jose.JSONWebKey
	// prefix names the issuers' list in errors ("identity.jwt").
	prefix string
}

// WithHTTPClient fetches every JWKS URL with c instead of the default client (a
// 10s timeout, redirects to https only).
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.client = c } }

// WithIssuerKeys gives the public keys of the configured issuer named issuer
// in code, for an issuer whose keys the program holds itself (the STS
// verifying the tokens it issued): that issuer then has neither jwks_file nor
// jwks_url. Private keys are reduced to their public halves.
func WithIssuerKeys(issuer string, keys []jose.JSONWebKey) Option {
	return func(o *options) {
		if o.keys == nil {
			o.keys = map[string][]jose.JSONWebKey{}
		}
		for _, k := range keys {
			o.keys[issuer] = append(o.keys[issuer], k.Public())
		}
	}
}

// WithConfigKey names the list of issuers in error messages (default
// "identity.jwt"), for a configuration that keeps its issuers elsewhere
// (sts.yaml's subject_issuers).
func WithConfigKey(key string) Option { return func(o *options) { o.prefix = key } }

func newResolver(cfg Config, now func() time.Time, opts ...Option) (*Resolver, error) {
	o := options{client: &http.Client{Timeout: defaultHTTPTimeout, CheckRedirect: httpsRedirectsOnly}, prefix: "identity.jwt"}
	for _, f := range opts {
		f(&o)
	}
	cfg, err := withDefaults(cfg, o)
	if err != nil {
		return nil, err
	}
	r := &Resolver{
		issuers:  make(map[string]*jwtIssuer, len(cfg.JWT)),
		maxDepth: cfg.MaxChainDepth,
		now:      now,
		bg:       newBackground(),
	}
	r.cache, err = segcache.New[[sha256.Size]byte, Caller](cfg.TokenCacheSize, tokenCacheBytes, callerBytes)
	if err != nil {
		return nil, fmt.Errorf("identity.token_cache_size: %w", err)
	}
	for i, ic := range cfg.JWT {
		iss, err := newIssuer(ic, fmt.Sprintf("%s[%d]", o.prefix, i), now, r.bg, o.client, o.keys[ic.Issuer])
		if err != nil {
			return nil, err
		}
		r.issuers[iss.name] = iss
	}
	if cfg.StaticTokensFile != "" {
		if r.static, err = loadStatic(cfg.StaticTokensFile); err != nil {
			return nil, err
		}
	}
	if cfg.MTLS != nil {
		if r.mtls, err = newMTLS(*cfg.MTLS); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Identify returns the caller that c authenticates.
//
// No credentials: Anonymous() and a nil error. Credentials that fail: Anonymous() and
// a *Refusal (the failure's code, what the credential presented, what writ
// accepts) wrapping one of the sentinel errors. A bearer token is used if present (a
// JWT if it is in JWS compact form, else a static token); a failing bearer token never
// falls through to the client certificate. The certificate is used only when there is
// no bearer token and mTLS is configured.
//
// ctx is reserved: JWKS fetches deliberately run on the Resolver's own context (see
// keySet.refetch), so a request's cancellation cannot abort a shared fetch.
func (r *Resolver) Identify(_ context.Context, c Credentials) (Caller, error) {
	tok, ok, err := bearer(c.Header)
	if err != nil {
		return Anonymous(), r.refusal("", err, nil)
	}
	if ok {
		caller, err := r.identifyBearer(tok)
		if err != nil {
			return Anonymous(), r.refusal(tok, err, nil)
		}
		return caller, nil
	}
	if len(c.PeerCertificates) > 0 && r.mtls != nil {
		caller, err := r.mtls.identify(c.PeerCertificates[0])
		if err != nil {
			return Anonymous(), r.mtls.certRefusal(c.PeerCertificates[0], err)
		}
		return caller, nil
	}
	return Anonymous(), nil
}

// VerifyToken verifies a JWT (JWS compact form) against the configured
// issuers exactly as Identify verifies a bearer token, through the same
// cache, and returns its caller. It is for a token that arrives otherwise
// than in an Authorization header (an RFC 8693 subject or actor token);
// anything that is not a JWT fails with ErrTokenInvalid. Failures return
// Anonymous() and wrap one of the sentinel errors.
func (r *Resolver) VerifyToken(tok string) (Caller, error) {
	switch {
	case tok == "":
		return Anonymous(), r.refusal("", fmt.Errorf("%w: empty token", ErrTokenInvalid), nil)
	case len(tok) > maxTokenBytes:
		return Anonymous(), r.refusal("", fmt.Errorf("%w: token longer than %d bytes", ErrTokenInvalid, maxTokenBytes), nil)
	case !looksLikeJWS(tok):
		return Anonymous(), r.refusal("", fmt.Errorf("%w: not a JWT", ErrTokenInvalid), nil)
	}
	c, err := r.identifyBearer(tok)
	if err != nil {
		return Anonymous(), r.refusal(tok, err, nil)
	}
	return c, nil
}

// VerifyFor verifies a JWT as VerifyToken does, except that its aud must
// name audience, whatever the issuer's configured audiences are: for a
// client that asked an issuer for a token for one audience (an RFC 8693
// exchange) and checks that this is what it got. The result is not cached
// (nor looked up in the cache), so a token accepted for one audience is never
// accepted for another through it.
func (r *Resolver) VerifyFor(tok, audience string) (Caller, error) {
	switch {
	case audience == "":
		return Anonymous(), r.refusal("", fmt.Errorf("%w: %w: no audience to verify the token for", ErrTokenInvalid, ErrAudienceRejected), nil)
	case tok == "":
		return Anonymous(), r.refusal("", fmt.Errorf("%w: empty token", ErrTokenInvalid), nil)
	case len(tok) > maxTokenBytes:
		return Anonymous(), r.refusal("", fmt.Errorf("%w: token longer than %d bytes", ErrTokenInvalid, maxTokenBytes), nil)
	case !looksLikeJWS(tok):
		return Anonymous(), r.refusal("", fmt.Errorf("%w: not a JWT", ErrTokenInvalid), nil)
	}
	c, err := r.verifyJWT(tok, r.now(), []string{audience})
	if err != nil {
		return Anonymous(), r.refusal(tok, err, []string{audience})
	}
	return c, nil
}

// CredentialHeaders are the request headers Identify reads: who the caller is
// depends on them (and so does every decision).
var CredentialHeaders = []string{"Authorization"}

// BearerToken is the token of a request's `Authorization: Bearer` header, as
// Identify reads it; ok is false when there is none, or none usable.
func BearerToken(h http.Header) (tok string, ok bool) {
	tok, ok, err := bearer(h)
	return tok, ok && err == nil
}

// bearer extracts the token of an `Authorization: Bearer` header. ok is false when
// there is no Authorization header or it uses another scheme (which writ leaves to the
// upstream); a Bearer header with no usable token is an error.
func bearer(h http.Header) (tok string, ok bool, err error) {
	vals := h.Values(CredentialHeaders[0])
	if len(vals) == 0 {
		return "", false, nil
	}
	if len(vals) > 1 {
		return "", false, fmt.Errorf("%w: more than one Authorization header", ErrTokenInvalid)
	}
	scheme, rest, _ := strings.Cut(strings.TrimSpace(vals[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false, nil
	}
	tok = strings.TrimSpace(rest)
	switch {
	case tok == "":
		return "", false, fmt.Errorf("%w: empty bearer token", ErrTokenInvalid)
	case len(tok) > maxTokenBytes:
		return "", false, fmt.Errorf("%w: bearer token longer than %d bytes", ErrTokenInvalid, maxTokenBytes)
	case strings.ContainsAny(tok, " \t"):
		return "", false, fmt.Errorf("%w: bearer token contains whitespace", ErrTokenInvalid)
	}
	return tok, true, nil
}

func (r *Resolver) identifyBearer(tok string) (Caller, error) {
	key := sha256.Sum256([]byte(tok))
	now := r.now()
	if c, ok := r.cache.Get(key); ok {
		if now.Before(c.Expires) {
			r.hits.Add(1)
			return c, nil
		}
		r.cache.Remove(key)
	}
	if looksLikeJWS(tok) {
		r.misses.Add(1)
		c, err := r.verifyJWT(tok, now, nil)
		if err != nil {
			return Caller{}, err
		}
		// Only a token still strictly unexpired is cached; one accepted inside the
		// leeway is verified again next time, so the cache never extends a token's life.
		if now.Before(c.Expires) {
			r.cache.Add(key, c)
		}
		return c, nil
	}
	if c, ok := r.static[key]; ok {
		return c, nil
	}
	if r.static == nil {
		return Caller{}, fmt.Errorf("%w: not a JWT, and no static tokens are configured", ErrTokenInvalid)
	}
	return Caller{}, fmt.Errorf("%w: not a JWT, and not a known static token", ErrTokenInvalid)
}

// tokenCacheBytes bounds the verified-token cache's estimated heap, beside
// token_cache_size: the default 10,000 entries of a typical token's claims fit.
const tokenCacheBytes = 32 << 20

// callerBytes estimates the heap a cached Caller holds: the struct and the
// cache's entry, its strings, and its claims as decoded JSON.
// BenchmarkCacheBytes measures the real figure.
func callerBytes(c Caller) int {
	n := 400 + len(c.Issuer) + len(c.AgentID) + len(c.UserID) + len(c.Tenant) + len(c.Classification)
	for _, s := range c.Scopes {
		n += 16 + len(s)
	}
	for _, s := range c.Chain {
		n += 16 + len(s)
	}
	return n + jsonBytes(c.Claims)
}

// jsonBytes estimates the heap of a decoded JSON value.
func jsonBytes(v any) int {
	switch x := v.(type) {
	case map[string]any:
		n := 64
		for k, e := range x {
			n += 64 + len(k) + jsonBytes(e)
		}
		return n
	case []any:
		n := 24
		for _, e := range x {
			n += 16 + jsonBytes(e)
		}
		return n
	case string:
		return 16 + len(x)
	default:
		return 16
	}
}

// CacheStats returns the verified-token cache's hit and miss counts since New. Only
// JWTs go through the cache.
func (r *Resolver) CacheStats() (hits, misses uint64) { return r.hits.Load(), r.misses.Load() }

// Close stops background JWKS refreshes and waits for any in flight. Identify keeps
// working after Close with the keys already fetched.
func (r *Resolver) Close() { r.bg.close() }

// background runs the JWKS refreshes that must not hold up a request, and lets Close
// wait for them.
type background struct {
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func newBackground() *background {
	ctx, cancel := context.WithCancel(context.Background())
	return &background{ctx: ctx, cancel: cancel}
}

// goFunc runs f on a new goroutine unless Close has been called; it reports whether f
// was started.
func (b *background) goFunc(f func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.wg.Go(f)
	return true
}

func (b *background) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	b.wg.Wait()
}
