package exchange

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
)

const subjectToken = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2ln"

// TestExchangeAndCache: a token is exchanged once (the actor token once,
// by client_credentials) and then served from the cache for the same
// subject, audience and scope set, in any order; another audience is
// another exchange. The request the STS sees is RFC 8693's.
func TestExchangeAndCache(t *testing.T) {
	f := newFakeSTS(t)
	rec := &recorder{}
	e := newExchanger(t, clientConfig(t, f.URL), WithEvents(rec))
	ctx := context.Background()
	tok, err := e.Exchange(ctx, Request{SubjectToken: subjectToken, Audience: "agent:b", Scope: []string{"write", "read"}})
	if err != nil {
		t.Fatal(err)
	}
	if tok.Audience != "agent:b" || strings.Join(tok.Scope, " ") != "read write" || tok.ChainID != "chain-1" ||
		tok.Subject != "alice" || len(tok.Actors) != 1 || tok.Actors[0] != "agent-a" || !tok.Expires.After(time.Now()) {
		t.Fatalf("token %+v", tok)
	}
	form, basic := f.form()
	if form.Get("grant_type") != grantTokenExchange || form.Get("subject_token") != subjectToken ||
		form.Get("subject_token_type") != tokenTypeAccessToken || form.Get("actor_token_type") != tokenTypeAccessToken ||
		form.Get("actor_token") == "" || form.Get("scope") != "read write" || form.Get("audience") != "agent:b" ||
		!strings.HasPrefix(basic, "Basic ") {
		t.Errorf("the STS saw %v (Authorization %q)", form, basic)
	}
	if _, err := e.Exchange(ctx, Request{SubjectToken: subjectToken, Audience: "agent:b", Scope: []string{"read", "write", "read"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Exchange(ctx, Request{SubjectToken: subjectToken, Audience: "agent:c", Scope: []string{"read"}}); err != nil {
		t.Fatal(err)
	}
	if n, cc := f.exchanges.Load(), f.clientCred.Load(); n != 2 || cc != 1 {
		t.Errorf("%d exchanges and %d client_credentials calls, want 2 and 1", n, cc)
	}
	s := e.Stats()
	if s.Exchanges != 2 || s.Hits != 1 || s.Misses != 2 || s.Errors != 0 || s.CacheEntries != 2 || s.CacheBytes <= 0 {
		t.Errorf("stats %+v", s)
	}
	if got := rec.outcomes(); got != "issued cache_hit issued" {
		t.Errorf("events %q", got)
	}
}

// TestRefreshBeforeExpiry: a cached token is used until refresh_before its
// exp, then exchanged again.
func TestRefreshBeforeExpiry(t *testing.T) {
	f := newFakeSTS(t)
	f.lifetime.Store(120)
	clk := newClock()
	cfg := clientConfig(t, f.URL)
	cfg.RefreshBefore = 30 * time.Second
	e := newExchanger(t, cfg, WithClock(clk.now))
	r := Request{SubjectToken: subjectToken, Audience: "agent:b", Scope: []string{"read"}}
	for _, step := range []time.Duration{0, 80 * time.Second, 11 * time.Second} {
		clk.advance(step)
		if _, err := e.Exchange(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	// 0s: exchanged; 80s: 40s left, still used; 91s: 29s left, exchanged again.
	if n := f.exchanges.Load(); n != 2 {
		t.Errorf("%d exchanges, want 2", n)
	}
}

// TestSingleflight: N concurrent misses for one token are one STS call.
//
// Threat: a burst of requests for a target (one agent fanning out) turns
// into a burst of exchanges that loads the STS and multiplies tokens.
// Defence: concurrent misses for the same key wait for one call (and the
// STS's answer is cached for the next ones).
func TestSingleflight(t *testing.T) {
	f := newFakeSTS(t)
	f.gate = make(chan struct{})
	e := newExchanger(t, clientConfig(t, f.URL))
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := e.Exchange(context.Background(), Request{SubjectToken: subjectToken, Audience: "agent:b", Scope: []string{"read"}})
			errs <- err
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.Stats().Waiting < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d requests waiting", e.Stats().Waiting)
		}
		time.Sleep(time.Millisecond)
	}
	close(f.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := f.exchanges.Load(); got != 1 {
		t.Errorf("%d concurrent misses made %d STS calls, want 1", n, got)
	}
}

// TestSTSFailures: an STS that is down, slow, answers garbage or refuses, or
// a token for the wrong audience, expired, from another issuer, signed by
// another key or wider than asked: each is its own typed error, nothing is
// cached, and the next request asks again.
//
// Threat: a broken or hostile STS makes writ forward a token it should not
// (for another target, dead, forged, wider), or an error that the door
// cannot tell from another.
// Defence: every answer is verified against the STS's published keys, iss,
// aud, exp and the requested scope before it is returned; each failure wraps
// its own sentinel.
func TestSTSFailures(t *testing.T) {
	down := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return "http://" + addr
	}()
	all := []error{ErrSTSUnavailable, ErrSTSTimeout, ErrSTSRefused, ErrSTSInvalidAnswer, ErrWrongAudience,
		ErrExpired, ErrBadSignature, ErrWrongIssuer, ErrScopeWidened}
	for _, tc := range []struct {
		name string
		mode answerMode
		url  string
		want []error // every sentinel it wraps
		kind string
	}{
		{"down", answerOK, down, []error{ErrSTSUnavailable}, "unavailable"},
		{"slow", answerSlow, "", []error{ErrSTSUnavailable, ErrSTSTimeout}, "timeout"},
		{"503", answer503, "", []error{ErrSTSUnavailable}, "unavailable"},
		{"garbage", answerGarbage, "", []error{ErrSTSInvalidAnswer}, "invalid_answer"},
		{"HTML", answerHTML, "", []error{ErrSTSInvalidAnswer}, "invalid_answer"},
		{"no token", answerNoToken, "", []error{ErrSTSInvalidAnswer}, "invalid_answer"},
		{"refused", answerRefuse, "", []error{ErrSTSRefused}, "refused:invalid_scope"},
		{"wrong audience", answerWrongAudience, "", []error{ErrSTSInvalidAnswer, ErrWrongAudience}, "wrong_audience"},
		{"expired", answerExpired, "", []error{ErrSTSInvalidAnswer, ErrExpired}, "expired"},
		{"another key", answerOtherKey, "", []error{ErrSTSInvalidAnswer, ErrBadSignature}, "bad_signature"},
		{"another issuer", answerWrongIssuer, "", []error{ErrSTSInvalidAnswer, ErrWrongIssuer}, "wrong_issuer"},
		{"wider scope", answerWiderScope, "", []error{ErrSTSInvalidAnswer, ErrScopeWidened}, "scope_widened"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSTS(t)
			f.mode.Store(int32(tc.mode))
			cfg := clientConfig(t, f.URL)
			if tc.url != "" {
				cfg.Issuer = tc.url
			}
			cfg.Timeout = 300 * time.Millisecond
			e := newExchanger(t, cfg)
			r := Request{SubjectToken: subjectToken, Audience: "agent:b", Scope: []string{"read"}}
			for i := range 2 {
				tok, err := e.Exchange(context.Background(), r)
				if err == nil || tok.Value != "" {
					t.Fatalf("try %d: token %q, error %v", i, tok.Value, err)
				}
				for _, s := range all {
					if wants := contains(tc.want, s); errors.Is(err, s) != wants {
						t.Errorf("try %d: %v: errors.Is(%v) = %t", i, err, s, !wants)
					}
				}
				if k := Kind(err); k != tc.kind {
					t.Errorf("Kind = %q, want %q", k, tc.kind)
				}
				if strings.Contains(err.Error(), subjectToken) {
					t.Errorf("the error quotes the subject token: %v", err)
				}
			}
			var ref *RefusedError
			if tc.mode == answerRefuse && (!errors.As(mustErr(e, r), &ref) ||
				ref.Code != "invalid_scope" || !strings.Contains(ref.Description, "widens") || ref.Status != 400) {
				t.Errorf("refusal %+v", ref)
			}
			if tc.url == "" && tc.mode != answerSlow {
				if n := f.exchanges.Load(); n < 2 {
					t.Errorf("a failure was cached: %d STS calls for 2 requests", n)
				}
			}
			if s := e.Stats(); s.Errors < 2 || s.CacheEntries != 0 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

func mustErr(e *Exchanger, r Request) error {
	_, err := e.Exchange(context.Background(), r)
	return err
}

func contains(list []error, e error) bool {
	for _, x := range list {
		if errors.Is(x, e) {
			return true
		}
	}
	return false
}

// TestDiscoveryChecked: a discovery document of another issuer is refused;
// configured endpoints skip discovery.
//
// Threat: a discovery document (or whoever answers at its URL) names another
// issuer's endpoints and keys, whose tokens writ would then accept.
// Defence: RFC 8414 §3.3: the document's issuer must be the configured one.
func TestDiscoveryChecked(t *testing.T) {
	f := newFakeSTS(t)
	cfg := clientConfig(t, f.URL+"/realm") // the document at the root names f.URL
	e := newExchanger(t, cfg)
	_, err := e.Exchange(context.Background(), Request{SubjectToken: subjectToken, Audience: "agent:b", Scope: []string{"read"}})
	if !errors.Is(err, ErrSTSUnavailable) && !errors.Is(err, ErrWrongIssuer) {
		t.Fatalf("another issuer's discovery: %v", err)
	}
	cfg = clientConfig(t, f.URL)
	cfg.TokenEndpoint, cfg.JWKSURL = f.URL+"/token", f.URL+"/jwks"
	e = newExchanger(t, cfg)
	if _, err := e.Exchange(context.Background(), Request{SubjectToken: subjectToken, Audience: "agent:b", Scope: []string{"read"}}); err != nil {
		t.Fatal(err)
	}
}

// TestInvalidRequests: what cannot be exchanged is refused before the STS
// is asked.
//
// Threat: an empty scope (RFC 6749: the same as none) gets the subject
// token's whole scope from the STS.
// Defence: Exchange requires a scope, a subject token and an audience.
func TestInvalidRequests(t *testing.T) {
	f := newFakeSTS(t)
	e := newExchanger(t, clientConfig(t, f.URL))
	for _, r := range []Request{
		{SubjectToken: subjectToken, Audience: "agent:b"},
		{SubjectToken: subjectToken, Audience: "agent:b", Scope: []string{""}},
		{SubjectToken: "", Audience: "agent:b", Scope: []string{"read"}},
		{SubjectToken: subjectToken, Audience: "agent b", Scope: []string{"read"}},
		{SubjectToken: strings.Repeat("a", maxSubjectTokenBytes+1), Audience: "agent:b", Scope: []string{"read"}},
	} {
		if _, err := e.Exchange(context.Background(), r); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%+v: %v", r, err)
		}
	}
	if n := f.exchanges.Load(); n != 0 {
		t.Errorf("the STS was asked %d times", n)
	}
}

// TestActorTokenFile: a JWT-SVID file is the actor token, read again when it
// changes; an unreadable one is ErrActorCredential.
func TestActorTokenFile(t *testing.T) {
	f := newFakeSTS(t)
	svid := filepath.Join(t.TempDir(), "svid.jwt")
	write := func(tok string) {
		if err := os.WriteFile(svid, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("aaa.bbb.ccc")
	cfg := config.Exchange{Issuer: f.URL, ActorTokenFile: svid}
	cfg.ApplyDefaults()
	e := newExchanger(t, cfg)
	ask := func(aud string) error {
		_, err := e.Exchange(context.Background(), Request{SubjectToken: subjectToken, Audience: aud, Scope: []string{"read"}})
		return err
	}
	if err := ask("agent:b"); err != nil {
		t.Fatal(err)
	}
	form, basic := f.form()
	if form.Get("actor_token") != "aaa.bbb.ccc" || form.Get("actor_token_type") != tokenTypeJWT || basic != "" {
		t.Fatalf("actor %q %q, Authorization %q", form.Get("actor_token"), form.Get("actor_token_type"), basic)
	}
	write("dddd.eeee.ffff")
	if err := ask("agent:c"); err != nil {
		t.Fatal(err)
	}
	if form, _ := f.form(); form.Get("actor_token") != "dddd.eeee.ffff" {
		t.Errorf("the rotated SVID was not read: %q", form.Get("actor_token"))
	}
	write("not a jwt at all")
	if err := ask("agent:d"); !errors.Is(err, ErrActorCredential) {
		t.Errorf("a file without a JWT: %v", err)
	}
	if err := os.Remove(svid); err != nil {
		t.Fatal(err)
	}
	if err := ask("agent:e"); !errors.Is(err, ErrActorCredential) || Kind(err) != "actor_credential" {
		t.Errorf("no file: %v", err)
	}
}

// TestEventsOnFailure: a failure is reported with its kind.
func TestEventsOnFailure(t *testing.T) {
	f := newFakeSTS(t)
	f.mode.Store(int32(answerWrongAudience))
	rec := &recorder{}
	e := newExchanger(t, clientConfig(t, f.URL), WithEvents(rec))
	_, _ = e.Exchange(context.Background(), Request{SubjectToken: subjectToken, Audience: "agent:b", Scope: []string{"read"}})
	if got := rec.outcomes(); got != events.ExchangeFailed+":wrong_audience" {
		t.Errorf("events %q", got)
	}
}
