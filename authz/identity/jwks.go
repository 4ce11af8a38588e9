package identity

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

const (
	// kidRefetchInterval bounds fetches caused by unknown kids: a stream of tokens
	// with made-up kids must not turn writ into a load generator against the IdP.
	kidRefetchInterval = time.Minute
	// firstFetchRetry is how soon a failed first fetch (no keys at all yet) is retried.
	firstFetchRetry = 5 * time.Second
	// maxJWKSBytes bounds a JWKS response; real ones are a few KiB.
	maxJWKSBytes = 1 << 20
)

// keySnapshot is one fetched key set; it is never modified once published.
type keySnapshot struct {
	keys    []jose.JSONWebKey
	fetched time.Time
}

// match returns the keys that may have signed a token with this kid and alg: the keys
// with that kid (any key when the token names none) whose own alg, if set, agrees.
func (s *keySnapshot) match(kid, alg string) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, k := range s.keys {
		if (kid == "" || k.KeyID == kid) && (k.Algorithm == "" || k.Algorithm == alg) {
			out = append(out, k)
		}
	}
	return out
}

// keySet is an issuer's public keys: from a file (fixed at load) or from a URL
// (fetched lazily, refreshed in the background, refetched on an unknown kid). When a
// fetch fails the last good keys keep being served: an unreachable IdP must not log
// everybody out, and a key it has revoked is removed from its JWKS, not by an outage.
type keySet struct {
	url     string
	client  *http.Client
	refresh time.Duration
	now     func() time.Time
	bg      *background

	cur         atomic.Pointer[keySnapshot]
	lastAttempt atomic.Int64 // UnixNano of the last fetch attempt, 0 before the first
	refreshing  atomic.Bool  // a background refresh is in flight

	mu      sync.Mutex // one fetch at a time; guards lastErr
	lastErr error
}

func loadKeyFile(path string, now time.Time) (*keySet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	keys, err := parseJWKS(data)
	if err != nil {
		return nil, err
	}
	ks := &keySet{}
	ks.cur.Store(&keySnapshot{keys: keys, fetched: now})
	return ks, nil
}

// keyIDs are the key ids the set holds now (none before a URL's first
// fetch), sorted, at most maxAcceptedKeyIDs: what a refusal names as
// accepted. A key without an id is listed as "".
func (ks *keySet) keyIDs() []string {
	snap := ks.cur.Load()
	if snap == nil {
		return nil
	}
	var out []string
	for _, k := range snap.keys {
		if !slices.Contains(out, k.KeyID) && len(out) < maxAcceptedKeyIDs {
			out = append(out, k.KeyID)
		}
	}
	slices.Sort(out)
	return out
}

// find returns the candidate keys for a token's kid and alg.
func (ks *keySet) find(kid, alg string) ([]jose.JSONWebKey, error) {
	snap := ks.cur.Load()
	if ks.url == "" {
		if keys := snap.match(kid, alg); len(keys) > 0 {
			return keys, nil
		}
		return nil, fmt.Errorf("%w: no key with kid %q for %s", ErrUnknownKey, trunc(kid), alg)
	}
	if snap == nil {
		var err error
		if snap, err = ks.refetch(nil, firstFetchRetry); snap == nil {
			if err == nil {
				err = errors.New("first fetch failed recently; not retried yet")
			}
			return nil, fmt.Errorf("%w: %s: %w", ErrKeysUnavailable, ks.url, err)
		}
	} else {
		ks.maybeRefresh(snap)
	}
	if keys := snap.match(kid, alg); len(keys) > 0 {
		return keys, nil
	}
	// An unknown kid usually means the IdP rotated: look again, but rate-limited.
	if fresh, _ := ks.refetch(snap, kidRefetchInterval); fresh != snap {
		if keys := fresh.match(kid, alg); len(keys) > 0 {
			return keys, nil
		}
	}
	return nil, fmt.Errorf("%w: no key with kid %q for %s at %s", ErrUnknownKey, trunc(kid), alg, ks.url)
}

// maybeRefresh starts a background fetch when snap is older than the refresh interval.
// The request that notices does not wait: it is served from snap.
func (ks *keySet) maybeRefresh(snap *keySnapshot) {
	now := ks.now()
	if now.Sub(snap.fetched) < ks.refresh || now.Sub(time.Unix(0, ks.lastAttempt.Load())) < ks.retry() {
		return
	}
	if !ks.refreshing.CompareAndSwap(false, true) {
		return
	}
	started := ks.bg.goFunc(func() {
		defer ks.refreshing.Store(false)
		_, _ = ks.refetch(snap, ks.retry())
	})
	if !started {
		ks.refreshing.Store(false)
	}
}

// retry is how soon a failed refresh is tried again.
func (ks *keySet) retry() time.Duration { return min(ks.refresh, kidRefetchInterval) }

// refetch fetches the key set and publishes it, unless another goroutine replaced seen
// meanwhile (that snapshot is returned) or the last attempt was less than minInterval
// ago (seen is returned, with the last error). On failure seen stays in use.
//
// The fetch runs on the Resolver's context, not the request's: a client that hangs up
// must not abort a fetch other requests wait for, nor spend the rate-limited refetch.
// The HTTP client's timeout bounds it.
func (ks *keySet) refetch(seen *keySnapshot, minInterval time.Duration) (*keySnapshot, error) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if cur := ks.cur.Load(); cur != seen {
		return cur, nil
	}
	now := ks.now()
	if last := ks.lastAttempt.Load(); last != 0 && now.Sub(time.Unix(0, last)) < minInterval {
		return seen, ks.lastErr
	}
	ks.lastAttempt.Store(now.UnixNano())
	keys, err := ks.fetch()
	if err != nil {
		ks.lastErr = err
		slog.Warn("identity: JWKS fetch failed; serving the keys fetched before", "url", ks.url, "err", err, "cached_keys", seen != nil)
		return seen, err
	}
	ks.lastErr = nil
	for _, k := range keys {
		if IsDevelopmentKey(k) {
			// Logged at every fetch that still finds it, not only the first.
			slog.Warn("identity: the JWKS holds writ's development key: anyone with the key directory of writ dev signs any caller; never use it in production",
				"url", ks.url, "kid", k.KeyID)
		}
	}
	snap := &keySnapshot{keys: keys, fetched: now}
	ks.cur.Store(snap)
	return snap, nil
}

func (ks *keySet) fetch() ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ks.bg.ctx, http.MethodGet, ks.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := ks.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxJWKSBytes {
		return nil, fmt.Errorf("JWKS larger than %d bytes", maxJWKSBytes)
	}
	return parseJWKS(data)
}

// parseJWKS reads a JWKS document and keeps its public signing keys. Keys it cannot
// use (unknown types, symmetric keys, keys for encryption) are skipped, not fatal: an
// IdP that adds a key type writ does not know must not break the keys it does.
//
// Its base64url members (n, e, x, y) are decoded as go-jose decodes them,
// leniently (padding, spare bits): a key set is configuration, not something
// a caller sends, and two spellings of one key are still one key. What a
// caller sends, the token, must be canonical (canonical in jwt.go).
func parseJWKS(data []byte) ([]jose.JSONWebKey, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("not a JWKS document: %w", err)
	}
	var keys []jose.JSONWebKey
	var skipped []string
	for i, raw := range doc.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			skipped = append(skipped, fmt.Sprintf("keys[%d]: %v", i, err))
			continue
		}
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		// A private key published by mistake still verifies by its public half; a
		// symmetric key has none (Public returns an invalid key) and is dropped.
		kid := k.KeyID
		if k = k.Public(); !k.Valid() {
			skipped = append(skipped, fmt.Sprintf("keys[%d] (kid %q): not an asymmetric key", i, kid))
			continue
		}
		keys = append(keys, k)
	}
	if len(skipped) > 0 {
		slog.Warn("identity: JWKS keys skipped", "keys", skipped)
	}
	if len(keys) == 0 {
		return nil, errors.New("JWKS has no usable signing keys")
	}
	return keys, nil
}

// trunc shortens an attacker-supplied string before it goes into an error message.
func trunc(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
