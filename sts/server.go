// Package sts is writ's development and CI security token service: RFC 8693
// token exchange that only ever narrows authority. An agent's writ presents
// the token its caller sent (the subject token) and its own credential (the
// actor); the STS answers with a token for one target whose act chain is the
// subject's chain plus that actor, whose scope, classification ceiling,
// tenant and lifetime are within the subject's, and which keeps the chain id
// (txn) of the delegation. It refuses every exchange that would widen
// authority, with the RFC 6749 error code and a description that says why.
//
// It signs with one ES256 key, publishes its JWKS and RFC 8414 discovery
// document, and verifies subject and actor tokens with writ's identity
// package, exactly as writ verifies callers. It is meant for development and
// CI; docs/production-sts.md says how to make a production STS enforce the
// same rules.
package sts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
)

// The STS's endpoints, below its issuer URL's path.
const (
	TokenPath     = "/token"
	JWKSPath      = "/.well-known/jwks.json"
	DiscoveryPath = "/.well-known/oauth-authorization-server"
)

// Server is a running STS. Build it with New, then Listen (or Serve on a
// listener of one's own); it is safe for concurrent use.
type Server struct {
	cfg     config.STS
	log     *slog.Logger
	key     *signingKey
	clients clients
	now     func() time.Time

	mu  sync.Mutex
	st  *state // nil before Serve
	srv *http.Server
}

// state is what depends on the issuer, known once the listener is bound.
type state struct {
	issuer    string
	base      string // the issuer URL's path: the endpoints' prefix
	audiences map[string]bool
	subjects  *identity.Resolver // subject-token issuers, the STS first among them
	actors    *identity.Resolver // actor-token issuers, the STS's client-credentials tokens among them
	discovery []byte
	jwks      []byte
	addr      string
}

// Option adjusts a Server.
type Option func(*Server)

// WithClock makes the STS read the time from now (tests of lifetimes). Token
// verification keeps the real clock.
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// New loads what cfg names (the signing key, generated when its file is
// absent; the client secrets) and checks it. cfg must have its defaults
// applied and be valid (config.ParseSTS does both). Nothing listens yet.
func New(cfg config.STS, log *slog.Logger, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	key, err := loadKey(cfg.SigningKeyFile)
	if err != nil {
		return nil, err
	}
	cl, err := loadClients(cfg.ClientSecretsFile)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, key: key, clients: cl, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Listen opens cfg.Listen and serves on it until Shutdown.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	return s.Serve(ln)
}

// Serve serves on ln until Shutdown. The issuer is the configured one, else
// http://<ln's address>, which must then be a loopback address.
func (s *Server) Serve(ln net.Listener) error {
	st, err := s.build(ln.Addr().String())
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{Handler: s.handler(st), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		MaxHeaderBytes: 64 << 10, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	s.mu.Lock()
	if s.st != nil {
		s.mu.Unlock()
		ln.Close()
		st.close()
		return errors.New("sts: already serving")
	}
	s.st, s.srv = st, srv
	s.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
	return nil
}

// build makes the issuer-dependent state for a listener bound to addr.
func (s *Server) build(addr string) (*state, error) {
	if s.cfg.Issuer == "" {
		host, _, _ := net.SplitHostPort(addr)
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("issuer: required when the STS listens on %s, not a loopback address", addr)
		}
	}
	issuer := s.cfg.IssuerFor(addr)
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, fmt.Errorf("issuer: %w", err)
	}
	st := &state{issuer: issuer, base: strings.TrimSuffix(u.Path, "/"), audiences: map[string]bool{}, addr: addr}
	for _, a := range s.cfg.Audiences {
		if a == issuer {
			return nil, errors.New("audiences: must not be the STS's own issuer")
		}
		st.audiences[a] = true
	}
	self := []jose.JSONWebKey{s.key.public()}
	// The STS's own issuer goes last, so subject_issuers[i] in an error is
	// the configuration's i-th entry.
	st.subjects, err = identity.New(identity.Config{
		JWT: append(append([]config.JWTIssuer(nil), s.cfg.SubjectIssuers...),
			config.JWTIssuer{Issuer: issuer, Audiences: s.cfg.Audiences, Algorithms: []string{"ES256"}}),
		MaxChainDepth: s.cfg.MaxChainDepth,
	}, identity.WithIssuerKeys(issuer, self), identity.WithConfigKey("subject_issuers"))
	if err != nil {
		return nil, err
	}
	st.actors, err = identity.New(identity.Config{
		JWT: append(append([]config.JWTIssuer(nil), s.cfg.ActorIssuers...),
			config.JWTIssuer{Issuer: issuer, Audiences: []string{issuer}, Algorithms: []string{"ES256"}}),
		MaxChainDepth: 1,
	}, identity.WithIssuerKeys(issuer, self), identity.WithConfigKey("actor_issuers"))
	if err != nil {
		st.subjects.Close()
		return nil, err
	}
	if st.jwks, err = s.key.jwks(); err == nil {
		st.discovery, err = discoveryDocument(issuer, s.clients != nil)
	}
	if err != nil {
		st.close()
		return nil, err
	}
	return st, nil
}

func (st *state) close() {
	st.subjects.Close()
	st.actors.Close()
}

// Addr is the listener's address, "" before Serve.
func (s *Server) Addr() string {
	if st := s.state(); st != nil {
		return st.addr
	}
	return ""
}

// Issuer is the iss of the tokens the STS signs, "" before Serve.
func (s *Server) Issuer() string {
	if st := s.state(); st != nil {
		return st.issuer
	}
	return ""
}

// TokenEndpoint is the token endpoint's URL, "" before Serve.
func (s *Server) TokenEndpoint() string { return s.endpoint(TokenPath) }

// JWKSURL is the JWKS document's URL, "" before Serve.
func (s *Server) JWKSURL() string { return s.endpoint(JWKSPath) }

// DiscoveryURL is the RFC 8414 discovery document's URL (the well-known
// path between the host and the issuer's path), "" before Serve.
func (s *Server) DiscoveryURL() string {
	st := s.state()
	if st == nil {
		return ""
	}
	return discoveryURL(st.issuer)
}

func (s *Server) endpoint(path string) string {
	if st := s.state(); st != nil {
		return st.issuer + path
	}
	return ""
}

func (s *Server) state() *state {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// Shutdown stops accepting, lets requests in flight finish until ctx ends,
// and closes what is left.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	srv, st := s.srv, s.st
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	st.close()
	return err
}

// discoveryURL is where RFC 8414 §3.1 puts an issuer's metadata: the
// well-known path inserted between the host and the issuer's own path.
func discoveryURL(issuer string) string {
	u, err := url.Parse(issuer)
	if err != nil {
		return issuer + DiscoveryPath
	}
	u.Path = DiscoveryPath + strings.TrimSuffix(u.Path, "/")
	return u.String()
}

// handler routes the STS's three endpoints. With an issuer path /p the token
// endpoint is /p/token, the JWKS /p/.well-known/jwks.json and the discovery
// document both /.well-known/oauth-authorization-server/p (RFC 8414) and
// /p/.well-known/oauth-authorization-server (what many clients look for).
func (s *Server) handler(st *state) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == st.base+TokenPath:
			if r.Method != http.MethodPost {
				methodNotAllowed(w, http.MethodPost)
				return
			}
			s.serveToken(st, w, r)
		case p == st.base+JWKSPath:
			serveDocument(w, r, "application/jwk-set+json", st.jwks)
		case p == DiscoveryPath+st.base || p == st.base+DiscoveryPath:
			serveDocument(w, r, "application/json", st.discovery)
		default:
			http.NotFound(w, r)
		}
	})
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
}

func serveDocument(w http.ResponseWriter, r *http.Request, contentType string, doc []byte) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, "GET, HEAD")
		return
	}
	w.Header().Set("Content-Type", contentType)
	// Relying parties refetch on an unknown kid; a short max-age keeps a
	// key change visible soon after a restart with a new key.
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(doc)
}

// serveToken answers one token request and logs its outcome: what was
// issued to whom, or the refusal with its reason and the verifier's detail.
// Never a token.
func (s *Server) serveToken(st *state, w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var (
		resp *tokenResponse
		out  outcome
		e    *Error
	)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		e = refuse(CodeInvalidRequest, "the body is larger than %d bytes, or broke off", maxBodyBytes)
	} else {
		var req tokenRequest
		req, e = parseTokenRequest(r.Header.Get("Content-Type"), r.URL.RawQuery, r.Header.Get("Authorization"), body)
		if e == nil {
			out.grant = req.GrantType
			resp, out, e = s.grant(st, req)
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	w.Header().Set("Content-Type", "application/json")
	if e != nil {
		if e.basic && e.Code == CodeInvalidClient {
			w.Header().Set("WWW-Authenticate", `Basic realm="writ-sts"`)
		}
		w.WriteHeader(e.status())
		_, _ = w.Write(errorBody(e)) //nolint:gosec // G705: a JSON error body (application/json) of writ's own codes
		s.log.Warn("sts: token request refused", append(out.attrs(), "error", e.Code, "reason", e.Description,
			"detail", e.Detail, "latency_ms", time.Since(start).Milliseconds())...)
		return
	}
	raw, err := marshalResponse(resp)
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write(errorBody(refuse(CodeServerError, "the answer could not be encoded")))
		s.log.Error("sts: encoding a token response", "error", err.Error())
		return
	}
	_, _ = w.Write(raw) //nolint:gosec // G705: the JSON token response writ encoded
	s.log.Info("sts: token issued", append(out.attrs(), "latency_ms", time.Since(start).Milliseconds())...)
}
