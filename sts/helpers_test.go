package sts

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/writ-authz/writ/config"
)

const (
	idpIssuer   = "https://idp.test.example"
	spireIssuer = "https://spire.test.example"
	// stsAudience is what the actors ask their JWT-SVIDs for.
	stsAudience = "writ-sts"
	agentA      = "agent-a"
	secretA     = "secret-of-agent-a"
	agentB      = "spiffe://example.org/agent-b"
)

// issuer is a test token issuer: a key and its JWKS file.
type issuer struct {
	name string
	key  *ecdsa.PrivateKey
	kid  string
	file string
}

func newIssuer(t testing.TB, name, kid string) *issuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{name: name, key: key, kid: kid, file: filepath.Join(t.TempDir(), "jwks.json")}
	raw, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: kid, Algorithm: "ES256", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(is.file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return is
}

// sign signs claims with the issuer's key; iss and exp are filled in when
// absent (exp an hour ahead).
func (is *issuer) sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	c := map[string]any{"iss": is.name, "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
	for k, v := range claims {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: is.key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", is.kid))
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// world is a running STS with an IdP for subject tokens and a SPIRE-like
// issuer of actor JWT-SVIDs.
type world struct {
	sts   *Server
	idp   *issuer
	spire *issuer
}

// startSTS runs an STS on 127.0.0.1 trusting the world's issuers, with
// agent-a as an HTTP Basic client; edit adjusts the config first.
func startSTS(t testing.TB, edit func(*config.STS)) *world {
	t.Helper()
	w := &world{idp: newIssuer(t, idpIssuer, "idp-1"), spire: newIssuer(t, spireIssuer, "spire-1")}
	dir := t.TempDir()
	secrets := filepath.Join(dir, "clients.yaml")
	if err := os.WriteFile(secrets, []byte(agentA+": "+secretA+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.STS{
		Listen:    "127.0.0.1:0",
		Audiences: []string{"agent:a", "agent:b", "agent:c"},
		SubjectIssuers: []config.JWTIssuer{{Issuer: idpIssuer, Audiences: []string{"agent:a", "agent:x"},
			JWKSFile: w.idp.file}},
		ActorIssuers:      []config.JWTIssuer{{Issuer: spireIssuer, Audiences: []string{stsAudience}, JWKSFile: w.spire.file}},
		ClientSecretsFile: secrets,
	}
	if edit != nil {
		edit(&cfg)
	}
	cfg.ApplyDefaults()
	s, err := New(cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	w.sts = s
	return w
}

// userToken is a subject token from the IdP: alice's, for agent-a, with
// scope read write pay, tenant t1 and ceiling confidential; extra overrides
// claims (nil deletes one).
func (w *world) userToken(t testing.TB, extra map[string]any) string {
	t.Helper()
	c := map[string]any{"sub": "alice", "azp": "web-ui", "aud": "agent:a", "scope": "read write pay",
		"tenant": "t1", "classification": "confidential"}
	for k, v := range extra {
		c[k] = v
	}
	return w.idp.sign(t, c)
}

// svid is a JWT-SVID of agent-b for the STS.
func (w *world) svid(t testing.TB, sub string) string {
	t.Helper()
	return w.spire.sign(t, map[string]any{"sub": sub, "aud": stsAudience})
}

// exchangeForm is a token exchange of subject for audience with scope.
func exchangeForm(subject, audience, scope string) url.Values {
	f := url.Values{"grant_type": {GrantTokenExchange}, "subject_token": {subject},
		"subject_token_type": {TokenTypeAccessToken}, "audience": {audience}}
	if scope != "" {
		f.Set("scope", scope)
	}
	return f
}

// answer is the STS's JSON answer.
type answer struct {
	Status          int
	Header          http.Header
	AccessToken     string `json:"access_token"`
	IssuedTokenType string `json:"issued_token_type"`
	TokenType       string `json:"token_type"`
	ExpiresIn       int64  `json:"expires_in"`
	Scope           string `json:"scope"`
	Error           string `json:"error"`
	Description     string `json:"error_description"`
}

// post sends form to the token endpoint, with HTTP Basic when id is set.
func (w *world) post(t testing.TB, form url.Values, id, secret string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, w.sts.TokenEndpoint(), strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if id != "" {
		req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	}
	return do(t, req)
}

func do(t testing.TB, req *http.Request) answer {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := answer{Status: resp.StatusCode, Header: resp.Header}
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("answer %d is not JSON: %s", resp.StatusCode, raw)
	}
	return a
}

// asA exchanges as agent-a with HTTP Basic.
func (w *world) asA(t testing.TB, form url.Values) answer {
	t.Helper()
	return w.post(t, form, agentA, secretA)
}

// asB exchanges as agent-b with its JWT-SVID as actor token.
func (w *world) asB(t testing.TB, form url.Values) answer {
	t.Helper()
	form.Set("actor_token", w.svid(t, agentB))
	form.Set("actor_token_type", TokenTypeJWT)
	return w.post(t, form, "", "")
}

// claimsOf decodes a JWT's payload without verifying it (the tests verify
// separately, with go-jose and the published JWKS).
func claimsOf(t testing.TB, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWS: %q", tok)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// freeLoopback is an address on 127.0.0.1 nothing listens on.
func freeLoopback(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
