// Package exchange obtains writ's outbound tokens on egress by RFC 8693 token
// exchange at an STS: the subject token is the one the agent's own caller
// presented, the actor is this agent's credential, the audience is the target
// and the scope what the policy grants for this hop. What the STS returns is
// verified (signature against the STS's published keys, iss, aud, exp, and
// no scope beyond the request's) before anyone forwards it, and kept in a
// bounded, fair cache until shortly before it expires. Every failure is a
// typed error (errors.go), so the egress door can answer the agent with a
// clear protocol error and forward nothing.
package exchange

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
)

// Request is one exchange: the subject token, the target's audience and the
// scope to ask for.
type Request struct {
	// SubjectToken is the token the agent's caller presented (verified by
	// writ's identity before the exchange is asked for).
	SubjectToken string
	// Audience is the target agent's audience (config.Exchange.Audience).
	Audience string
	// Scope is what the policy grants for this hop; required: an exchange
	// without one would get the subject token's whole scope.
	Scope []string
}

// Token is an exchanged token, verified.
type Token struct {
	// Value is the token to forward (Authorization: Bearer).
	Value string
	// Type is the issued_token_type.
	Type string
	// Audience is the audience it was asked and verified for.
	Audience string
	// Scope is its scope claim's values.
	Scope []string
	// Expires is its exp.
	Expires time.Time
	// ChainID is its txn claim, "" when the STS sets none.
	ChainID string
	// Actors is its act chain, oldest first, the calling agent (this one)
	// last.
	Actors []string
	// Subject is its sub: the delegation's initiator.
	Subject string
}

// Stats are the Exchanger's counts since New, and its cache's size.
type Stats struct {
	// Exchanges are the tokens the STS issued; Hits the requests answered
	// from the cache; Misses those that were not (an STS call, or waiting
	// for another request's); Errors the requests that got no token.
	Exchanges, Hits, Misses, Errors uint64
	// Waiting is the requests waiting for the STS now (several may wait
	// for one call).
	Waiting                  int64
	CacheEntries, CacheBytes int
}

// Exchanger obtains outbound tokens. It is safe for concurrent use.
type Exchanger struct {
	cfg    config.Exchange
	sts    *stsClient
	actor  *actorCredential
	cache  *cache
	flight singleflight.Group
	sink   events.ExchangeSink
	now    func() time.Time

	ctx    context.Context // the flights' context: cancelled by Close
	cancel context.CancelFunc
	mu     sync.Mutex // guards closed, and wg.Add against Close's wg.Wait
	closed bool
	wg     sync.WaitGroup

	exchanges, hits, misses, errs atomic.Uint64
	waiting                       atomic.Int64
}

// Option adjusts an Exchanger.
type Option func(*Exchanger)

// WithEvents reports every exchange (issued, cache hit, failed) to sink.
func WithEvents(sink events.ExchangeSink) Option { return func(e *Exchanger) { e.sink = sink } }

// WithClock makes the cache read the time from now (tests of expiry). Token
// verification keeps the real clock.
func WithClock(now func() time.Time) Option { return func(e *Exchanger) { e.now = now } }

// New builds an Exchanger from a validated config (defaults applied). It
// reads no file and makes no network call: the discovery document, the
// STS's keys and the actor credential are read on first use, so a missing
// STS fails the exchanges (closed), never the start.
func New(cfg config.Exchange, opts ...Option) (*Exchanger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// No redirects: a token request is never replayed elsewhere, and keys
	// and metadata come from where the configuration says.
	client := &http.Client{Timeout: cfg.Timeout, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	e := &Exchanger{cfg: cfg, cache: newCache(cfg.CacheBytes, cfg.CacheBytesPerSubject), now: time.Now,
		actor: &actorCredential{clientID: cfg.ClientID}}
	if cfg.ClientSecretFile != "" {
		e.actor.secret = &watchedFile{path: cfg.ClientSecretFile}
	}
	if cfg.ActorTokenFile != "" {
		e.actor.file = &watchedFile{path: cfg.ActorTokenFile}
	}
	var err error
	if e.sts, err = newSTSClient(cfg, client, func() time.Time { return e.now() }); err != nil {
		return nil, err
	}
	for _, o := range opts {
		o(e)
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	return e, nil
}

// Close cancels exchanges in flight and waits for them; exchanges after it
// fail with ErrSTSUnavailable.
func (e *Exchanger) Close() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.cancel()
	e.wg.Wait()
	e.sts.close()
}

// begin counts a flight in, unless Close has been called.
func (e *Exchanger) begin() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.wg.Add(1)
	return true
}

// Stats returns the counts and the cache's size.
func (e *Exchanger) Stats() Stats {
	n, b := e.cache.stats()
	return Stats{Exchanges: e.exchanges.Load(), Hits: e.hits.Load(), Misses: e.misses.Load(), Errors: e.errs.Load(),
		Waiting: e.waiting.Load(), CacheEntries: n, CacheBytes: b}
}

// maxSubjectTokenBytes bounds the subject token, as identity does.
const maxSubjectTokenBytes = 16 << 10

// Exchange returns the token for r: from the cache while it has more than
// refresh_before to live, else from the STS. Concurrent requests for the same
// (subject token, audience, scope) share one STS call. The error wraps one
// of the sentinels of errors.go; ctx bounds the wait, not the shared call
// (which the config's timeout bounds).
func (e *Exchanger) Exchange(ctx context.Context, r Request) (Token, error) {
	start := time.Now()
	scope, err := checkRequest(r)
	if err != nil {
		e.report(r.Audience, events.ExchangeFailed, false, err, start)
		return Token{}, err
	}
	key := cacheKey(r.SubjectToken, r.Audience, scope)
	if tok, ok := e.cache.get(key, e.now()); ok {
		e.report(r.Audience, events.ExchangeCacheHit, false, nil, start)
		return tok, nil
	}
	e.misses.Add(1)
	ch := e.flight.DoChan(key, func() (any, error) {
		if !e.begin() {
			return Token{}, fmt.Errorf("%w: the exchanger is closed", ErrSTSUnavailable)
		}
		defer e.wg.Done()
		ctx, cancel := context.WithTimeout(e.ctx, 3*e.cfg.Timeout)
		defer cancel()
		tok, err := e.exchange(ctx, r.SubjectToken, r.Audience, scope)
		if err == nil {
			e.exchanges.Add(1)
			e.cache.add(key, subjectOf(tok, key), tok, tok.Expires.Add(-e.cfg.RefreshBefore), e.now())
		}
		return tok, err
	})
	// DoChan has joined this request to the flight: from here it waits.
	e.waiting.Add(1)
	defer e.waiting.Add(-1)
	select {
	case res := <-ch:
		if res.Err != nil {
			e.report(r.Audience, events.ExchangeFailed, res.Shared, res.Err, start)
			return Token{}, res.Err
		}
		e.report(r.Audience, events.ExchangeIssued, res.Shared, nil, start)
		return res.Val.(Token), nil
	case <-ctx.Done():
		err := ctx.Err()
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %w: waiting for the exchange", ErrSTSUnavailable, ErrSTSTimeout)
		}
		e.report(r.Audience, events.ExchangeFailed, false, err, start)
		return Token{}, err
	}
}

// checkRequest checks r and returns its scope sorted, each value once (the
// cache key's form: the STS grants a set).
func checkRequest(r Request) ([]string, error) {
	switch {
	case r.SubjectToken == "":
		return nil, fmt.Errorf("%w: no subject token", ErrInvalidRequest)
	case len(r.SubjectToken) > maxSubjectTokenBytes:
		return nil, fmt.Errorf("%w: subject token longer than %d bytes", ErrInvalidRequest, maxSubjectTokenBytes)
	case r.Audience == "" || strings.ContainsAny(r.Audience, " \t\r\n"):
		return nil, fmt.Errorf("%w: audience %q", ErrInvalidRequest, clip(r.Audience))
	case len(r.Scope) == 0:
		// RFC 6749 treats an empty scope as none sent, and an STS then
		// grants its default: the subject token's whole scope.
		return nil, fmt.Errorf("%w: no scope: an exchange without one would get the subject token's whole scope", ErrInvalidRequest)
	}
	scope := slices.Clone(r.Scope)
	slices.Sort(scope)
	scope = slices.Compact(scope)
	for _, v := range scope {
		if v == "" || strings.ContainsAny(v, " \t\r\n\"\\") {
			return nil, fmt.Errorf("%w: scope value %q", ErrInvalidRequest, clip(v))
		}
	}
	return scope, nil
}

// cacheKey is the digest of the subject token (the token itself is never
// kept as a key), the audience and the scope set.
func cacheKey(subject, audience string, scope []string) string {
	d := sha256.Sum256([]byte(subject))
	return string(d[:]) + "\x00" + audience + "\x00" + strings.Join(scope, " ")
}

// subjectOf is the cache's fairness key: the issued token's verified sub,
// else the subject token's digest.
func subjectOf(t Token, key string) string {
	if t.Subject != "" {
		return "sub\x00" + t.Subject
	}
	return "digest\x00" + key[:sha256.Size]
}

// exchange asks the STS once and verifies what it answers.
func (e *Exchanger) exchange(ctx context.Context, subject, audience string, scope []string) (Token, error) {
	ep, err := e.sts.endpoints(ctx)
	if err != nil {
		return Token{}, err
	}
	id, secret, err := e.actor.basic()
	if err != nil {
		return Token{}, err
	}
	actorTok, actorType, err := e.actor.actorToken(ctx, e.now(), e.cfg.RefreshBefore, func(ctx context.Context) (tokenAnswer, error) {
		return e.sts.call(ctx, ep.token, clientCredentialsForm(), id, secret)
	})
	if err != nil {
		return Token{}, err
	}
	form := url.Values{
		"grant_type":           {grantTokenExchange},
		"subject_token":        {subject},
		"subject_token_type":   {tokenTypeAccessToken},
		"actor_token":          {actorTok},
		"actor_token_type":     {actorType},
		"audience":             {audience},
		"scope":                {strings.Join(scope, " ")},
		"requested_token_type": {tokenTypeAccessToken},
	}
	ans, err := e.sts.call(ctx, ep.token, form, id, secret)
	if err != nil {
		return Token{}, err
	}
	return verify(ep.verifier, ans, audience, scope)
}

// verify checks the STS's token: signature against the STS's keys, iss, aud,
// exp, and a scope within the request's.
func verify(v *identity.Resolver, ans tokenAnswer, audience string, scope []string) (Token, error) {
	switch ans.IssuedTokenType {
	case "", tokenTypeAccessToken, tokenTypeJWT:
	default:
		return Token{}, invalid(nil, "issued_token_type %q is not a JWT access token", clip(ans.IssuedTokenType))
	}
	c, err := v.VerifyFor(ans.AccessToken, audience)
	if err != nil {
		return Token{}, verifyError(err)
	}
	for _, s := range c.Scopes {
		if !slices.Contains(scope, s) {
			return Token{}, invalid(ErrScopeWidened, "scope %q was not asked for", clip(s))
		}
	}
	t := Token{Value: ans.AccessToken, Type: ans.IssuedTokenType, Audience: audience, Scope: c.Scopes, Expires: c.Expires}
	if t.Type == "" {
		t.Type = tokenTypeAccessToken
	}
	t.ChainID, _ = c.Claims["txn"].(string)
	t.Subject, _ = c.Claims["sub"].(string)
	if _, ok := c.Claims["act"]; ok {
		t.Actors = append(slices.Clone(c.Chain), c.AgentID)
	}
	return t, nil
}

// verifyError maps a failed verification of the STS's token to its error.
func verifyError(err error) error {
	switch {
	case errors.Is(err, identity.ErrKeysUnavailable):
		return unavailable("the STS's keys", err)
	case errors.Is(err, identity.ErrAudienceRejected):
		return invalid(ErrWrongAudience, "%v", err)
	case errors.Is(err, identity.ErrUnknownIssuer):
		return invalid(ErrWrongIssuer, "%v", err)
	case errors.Is(err, identity.ErrTokenExpired), errors.Is(err, identity.ErrTokenNotYetValid):
		return invalid(ErrExpired, "%v", err)
	case errors.Is(err, identity.ErrBadSignature), errors.Is(err, identity.ErrUnknownKey):
		return invalid(ErrBadSignature, "%v", err)
	}
	return invalid(nil, "%v", err)
}

// report counts one exchange and tells the sink.
func (e *Exchanger) report(audience, outcome string, shared bool, err error, start time.Time) {
	switch outcome {
	case events.ExchangeCacheHit:
		e.hits.Add(1)
	case events.ExchangeFailed:
		e.errs.Add(1)
	}
	if e.sink != nil {
		e.sink.Exchanged(events.Exchange{Time: start, Audience: audience, Outcome: outcome, Shared: shared,
			Error: Kind(err), Latency: time.Since(start)})
	}
}
