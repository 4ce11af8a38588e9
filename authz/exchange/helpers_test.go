package exchange

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
)

// answerMode is how the fake STS answers token exchanges.
type answerMode int

const (
	answerOK answerMode = iota
	answerSlow
	answerGarbage
	answerHTML
	answerWrongAudience
	answerExpired
	answerOtherKey
	answerWrongIssuer
	answerRefuse
	answerWiderScope
	answer503
	answerNoToken
)

// fakeSTS is an STS on 127.0.0.1 that issues well-formed tokens (ES256,
// its JWKS, RFC 8414 discovery) or misbehaves as told. It counts calls.
type fakeSTS struct {
	*httptest.Server
	key, other *ecdsa.PrivateKey
	mode       atomic.Int32
	lifetime   atomic.Int64  // seconds
	exchanges  atomic.Int64  // token-exchange calls
	clientCred atomic.Int64  // client_credentials calls
	gate       chan struct{} // when set, exchanges wait for it to close
	mu         sync.Mutex
	lastForm   url.Values
	lastBasic  string
}

func newFakeSTS(t testing.TB) *fakeSTS {
	t.Helper()
	f := &fakeSTS{}
	var err error
	if f.key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	if f.other, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	f.lifetime.Store(600)
	stop := make(chan struct{})
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.serve(w, r, stop) }))
	t.Cleanup(func() { close(stop); f.Close() })
	return f
}

func (f *fakeSTS) serve(w http.ResponseWriter, r *http.Request, stop chan struct{}) {
	switch r.URL.Path {
	case "/.well-known/oauth-authorization-server":
		writeJSON(w, 200, map[string]any{"issuer": f.URL, "token_endpoint": f.URL + "/token", "jwks_uri": f.URL + "/jwks"})
		return
	case "/jwks":
		writeJSON(w, 200, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &f.key.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
		return
	case "/token":
	default:
		http.NotFound(w, r)
		return
	}
	if err := r.ParseForm(); err != nil {
		writeJSON(w, 400, map[string]any{"error": "invalid_request"})
		return
	}
	f.mu.Lock()
	f.lastForm, f.lastBasic = r.PostForm, r.Header.Get("Authorization")
	f.mu.Unlock()
	if r.PostForm.Get("grant_type") == "client_credentials" {
		f.clientCred.Add(1)
		id, _, _ := r.BasicAuth()
		writeJSON(w, 200, map[string]any{"access_token": f.sign(map[string]any{"iss": f.URL, "sub": id, "aud": f.URL,
			"exp": time.Now().Add(time.Hour).Unix()}, f.key), "token_type": "Bearer", "expires_in": 3600})
		return
	}
	f.exchanges.Add(1)
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-stop:
		}
	}
	aud, scope := r.PostForm.Get("audience"), r.PostForm.Get("scope")
	claims := map[string]any{"iss": f.URL, "sub": "alice", "aud": aud, "scope": scope, "txn": "chain-1",
		"exp": time.Now().Add(time.Duration(f.lifetime.Load()) * time.Second).Unix(), "act": map[string]any{"sub": "agent-a"}}
	key := f.key
	switch answerMode(f.mode.Load()) {
	case answerSlow:
		select {
		case <-time.After(5 * time.Second):
		case <-stop:
		}
	case answerGarbage:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token": 12`))
		return
	case answerHTML:
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html>login</html>"))
		return
	case answerNoToken:
		writeJSON(w, 200, map[string]any{"token_type": "Bearer"})
		return
	case answerWrongAudience:
		claims["aud"] = "agent:elsewhere"
	case answerExpired:
		claims["exp"] = time.Now().Add(-time.Hour).Unix()
	case answerOtherKey:
		key = f.other
	case answerWrongIssuer:
		claims["iss"] = "https://another-sts.example"
	case answerRefuse:
		writeJSON(w, 400, map[string]any{"error": "invalid_scope", "error_description": "requested scope widens the subject token's: pay"})
		return
	case answerWiderScope:
		claims["scope"] = scope + " admin"
	case answer503:
		writeJSON(w, 503, map[string]any{"error": "temporarily_unavailable"})
		return
	}
	writeJSON(w, 200, map[string]any{"access_token": f.sign(claims, key), "token_type": "Bearer",
		"issued_token_type": tokenTypeAccessToken, "expires_in": f.lifetime.Load(), "scope": scope})
}

func (f *fakeSTS) sign(claims map[string]any, key *ecdsa.PrivateKey) string {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	if err != nil {
		panic(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := s.Sign(payload)
	if err != nil {
		panic(err)
	}
	tok, _ := jws.CompactSerialize()
	return tok
}

func (f *fakeSTS) form() (url.Values, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastForm, f.lastBasic
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// clientConfig is an exchange client of issuer as agent-a with a client
// secret file.
func clientConfig(t testing.TB, issuer string) config.Exchange {
	t.Helper()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("secret-of-agent-a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := config.Exchange{Issuer: issuer, ClientID: "agent-a", ClientSecretFile: secret, Timeout: 500 * time.Millisecond}
	c.ApplyDefaults()
	return c
}

func newExchanger(t testing.TB, cfg config.Exchange, opts ...Option) *Exchanger {
	t.Helper()
	e, err := New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// recorder is an ExchangeSink that keeps what it is told.
type recorder struct {
	events.Nop
	mu   sync.Mutex
	seen []events.Exchange
}

func (r *recorder) Exchanged(e events.Exchange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, e)
}

func (r *recorder) outcomes() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.seen {
		s := e.Outcome
		if e.Error != "" {
			s += ":" + e.Error
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// clock is a settable clock.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }
