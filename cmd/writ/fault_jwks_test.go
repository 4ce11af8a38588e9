package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/writ-authz/writ/internal/devidp"
)

// jwksIdP is an identity provider whose JWKS endpoint can go down and come
// back on the same address, with signing keys by kid.
type jwksIdP struct {
	t      *testing.T
	addr   string
	srv    *http.Server
	mu     sync.Mutex
	keys   map[string]*ecdsa.PrivateKey
	served []string // the kids the endpoint publishes
	hits   atomic.Int64
}

func newJWKSIdP(t *testing.T, kids ...string) *jwksIdP {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &jwksIdP{t: t, addr: ln.Addr().String(), keys: map[string]*ecdsa.PrivateKey{}}
	for _, k := range []string{"key-a", "key-b"} {
		if p.keys[k], err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			t.Fatal(err)
		}
	}
	p.served = kids
	p.up(ln)
	t.Cleanup(p.down)
	return p
}

func (p *jwksIdP) url() string { return "http://" + p.addr + "/jwks.json" }

func (p *jwksIdP) up(ln net.Listener) {
	if ln == nil {
		ln = relisten(p.t, p.addr, "JWKS")
	}
	p.srv = &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		p.hits.Add(1)
		p.mu.Lock()
		var set jose.JSONWebKeySet
		for _, kid := range p.served {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: &p.keys[kid].PublicKey, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"})
		}
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set)
	})}
	go func() { _ = p.srv.Serve(ln) }()
}

func (p *jwksIdP) down() { _ = p.srv.Close() }

func (p *jwksIdP) publish(kids ...string) {
	p.mu.Lock()
	p.served = kids
	p.mu.Unlock()
}

var jti atomic.Int64

// token signs a fresh token (its own jti, so never a token-cache hit) for c
// with the key kid.
func (p *jwksIdP) token(idp *devidp.Provider, kid string, c devidp.Caller) string {
	p.t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: p.keys[kid]},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		p.t.Fatal(err)
	}
	claims := idp.Claims(c)
	claims["jti"] = fmt.Sprintf("jti-%d", jti.Add(1))
	s, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		p.t.Fatal(err)
	}
	return s
}

// TestFaultJWKSDownAndBack: the IdP's JWKS endpoint goes away while traffic
// runs. Tokens signed with a key writ already fetched keep working (new
// tokens too: the keys are cached, not just the tokens), also after the
// refresh interval has passed with failed refreshes; a token with a kid writ
// has never seen fails closed (401 UNAUTHENTICATED with WWW-Authenticate,
// protocol-shaped) and never reaches the agent; when the endpoint is back
// with the new key, that kid is accepted with no restart.
func TestFaultJWKSDownAndBack(t *testing.T) {
	idp := newJWKSIdP(t, "key-a")
	w := startFaultWrit(t, fwOptions{identity: fmt.Sprintf(
		"identity:\n  jwt: [{issuer: '%s', audiences: [%s], jwks_url: '%s', jwks_refresh: 1s}]\n", fwIssuer, fwAudience, idp.url())})
	bot := devidp.Caller{Agent: "fault-bot", User: "u-1", Tenant: "wholesale", Classification: "internal", Scope: "delegate"}
	w.token = idp.token(w.idp, "key-a", bot)
	w.outsider = idp.token(w.idp, "key-a", devidp.Caller{Agent: "corp-bot", User: "u-2", Tenant: "corporate", Classification: "internal", Scope: "delegate"})
	if st, body, err := w.send(t.Context(), w.token, nil); !completed(st, body, err) {
		t.Fatalf("with the JWKS up: %d %v %s", st, err, body)
	}
	before := w.idleGoroutines(t)
	stop := w.steady(t, 2)

	idp.down()
	fetches := idp.hits.Load()
	if st, body, err := w.send(t.Context(), idp.token(w.idp, "key-a", bot), nil); !completed(st, body, err) {
		t.Errorf("a new token of a cached key, JWKS down: %d %v %s", st, err, body)
	}
	time.Sleep(1500 * time.Millisecond) // past jwks_refresh: writ tries, and fails, to refresh
	if st, body, err := w.send(t.Context(), idp.token(w.idp, "key-a", bot), nil); !completed(st, body, err) {
		t.Errorf("a new token of a cached key after a failed refresh: %d %v %s", st, err, body)
	}
	rotated := bot
	rotated.Agent = "rotated-bot"
	st, hdr, body, err := w.sendFull(t.Context(), idp.token(w.idp, "key-b", rotated), nil)
	if err != nil || st != http.StatusUnauthorized || !strings.Contains(string(body), "UNAUTHENTICATED") ||
		!strings.Contains(string(body), `"code":-32000`) || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("a token with an unknown kid while the JWKS is down: %d %v %v %s", st, err, hdr, body)
	}
	for _, o := range w.agent.Requests() {
		if strings.Contains(o.Caller, "rotated-bot") {
			t.Errorf("a request with the unknown kid reached the agent: %s", o.Caller)
		}
	}

	idp.publish("key-a", "key-b")
	idp.up(nil)
	var got int
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if st, body, err := w.send(t.Context(), idp.token(w.idp, "key-b", rotated), nil); completed(st, body, err) {
			got = st
			break
		}
	}
	if got != http.StatusOK {
		t.Error("the new kid is still refused after the JWKS came back")
	}
	if idp.hits.Load() == fetches {
		t.Error("writ never fetched the JWKS again")
	}
	if n := stop(); n == 0 {
		t.Fatal("no traffic ran")
	}
	w.settled(t, before)
}
