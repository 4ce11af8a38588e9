package extauthz

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/envoyreq"
)

// PartialBodyHeader is the header Envoy adds to a check whose request body it
// buffered only up to with_request_body.max_request_bytes.
const PartialBodyHeader = "x-envoy-auth-partial-body"

// ErrPartialBody refuses a body Envoy cut short: the request is answered as too
// large (413), exactly as the sidecar answers a body over its limit, unless
// envoy.allow_partial_body decides it on headers alone.
var ErrPartialBody = fmt.Errorf("%w: Envoy forwarded only part of the body (with_request_body.max_request_bytes)", wire.ErrBodyTooLarge)

// errBadRequest: the check names no request writ can read (no HTTP attributes,
// an unparseable path). It is answered 400 without reaching the decision.
var errBadRequest = errors.New("extauthz: the check carries no readable HTTP request")

// fromCheck turns Envoy's CheckRequest into the sidecar's Incoming: what the
// sidecar would have read from the same request on its own listener.
func (s *Server) fromCheck(req *authv3.CheckRequest) (proxy.Incoming, error) {
	attrs := req.GetAttributes()
	h := attrs.GetRequest().GetHttp()
	if h == nil {
		return proxy.Incoming{}, errBadRequest
	}
	hdr, pseudo := headersOf(h)
	// Verbatim: Envoy forwards the caller's body; a check answers only
	// allow or deny.
	inc := proxy.Incoming{Method: first(h.GetMethod(), pseudo[":method"]), Host: first(h.GetHost(), pseudo[":authority"]),
		Header: hdr, RemoteAddr: addressOf(attrs.GetSource().GetAddress()), Verbatim: true}
	var err error
	target := first(h.GetPath(), pseudo[":path"])
	if inc.RawPath, inc.Path, inc.Query, err = splitTarget(target); err != nil {
		return proxy.Incoming{}, err
	}
	// The query as sent, which Envoy forwards: the core decides on it.
	_, inc.RawQuery, _ = strings.Cut(target, "?")
	// The agent Envoy's route chose (ExtAuthzPerRoute context_extensions):
	// only Envoy's config sets it.
	inc.Route = attrs.GetContextExtensions()[envoyreq.RouteKey]
	body := h.GetRawBody()
	if len(body) == 0 && h.GetBody() != "" {
		body = []byte(h.GetBody())
	}
	partial := strings.EqualFold(hdr.Get(PartialBodyHeader), "true")
	inc.Body, inc.BodyErr = s.bodyOf(body, partial)
	if envoyreq.GRPCCall(hdr) {
		// The body is the call's frames as they travelled (pack_as_bytes);
		// the edge reads the one message, as from the sidecar's gRPC door.
		inc.Body, inc.BodyErr = envoyreq.GRPCBody(inc.Body, inc.BodyErr)
	}
	inc.PeerCertificates = peerCertificates(attrs.GetSource())
	inc.Caller, inc.CallerErr = s.verifiedCaller(attrs.GetMetadataContext())
	return inc, nil
}

// bodyOf applies parse_body, allow_partial_body and max_request_bytes to the body
// Envoy sent. A nil body with no error means "decide on method, path and headers":
// the adapters then refuse any operation that needs its body, so nothing is ever
// allowed on a body writ did not read.
func (s *Server) bodyOf(body []byte, partial bool) ([]byte, error) {
	switch {
	case !s.cfg.ParsesBody():
		return nil, nil
	case partial && s.cfg.AllowPartialBody:
		return nil, nil
	case partial:
		return nil, ErrPartialBody
	case int64(len(body)) > s.cfg.MaxRequestBytes:
		return nil, wire.ErrBodyTooLarge
	case len(body) == 0:
		return nil, nil
	}
	return body, nil
}

// headersOf reads the request headers from headers or, with encode_raw_headers,
// header_map (raw values are bytes; repeated keys stay separate values). Keys
// become canonical as net/http makes them; pseudo-headers are returned apart and
// Host, which net/http keeps out of Header, is dropped.
func headersOf(h *authv3.AttributeContext_HttpRequest) (http.Header, map[string]string) {
	if hm := h.GetHeaderMap(); hm != nil && len(hm.GetHeaders()) > 0 {
		return envoyreq.Headers(hm)
	}
	return envoyreq.HeaderMapOf(h.GetHeaders())
}

// splitTarget splits the request target Envoy reports (path and query, not
// decoded) into the path as sent, the decoded path and the query, as
// net/http does.
func splitTarget(target string) (string, string, url.Values, error) {
	raw, path, query, ok := envoyreq.SplitTarget(target)
	if !ok {
		return "", "", nil, fmt.Errorf("%w: path %q", errBadRequest, target)
	}
	return raw, path, query, nil
}

// addressOf renders Envoy's peer address as net/http's RemoteAddr.
func addressOf(a *corev3.Address) string { return envoyreq.Address(a) }

// peerCertificates reads the client certificate Envoy verified
// (include_peer_certificate), or the SPIFFE principal taken from it.
func peerCertificates(p *authv3.AttributeContext_Peer) []*x509.Certificate {
	return envoyreq.PeerCertificates(p.GetCertificate(), p.GetPrincipal())
}

// verifiedCaller takes the caller from the claims Envoy's jwt_authn filter
// verified, when envoy.jwt_authn is configured (envoyreq.VerifiedCaller).
func (s *Server) verifiedCaller(md *corev3.Metadata) (*identity.Caller, error) {
	if s.trusted == nil {
		return nil, nil
	}
	return envoyreq.VerifiedCaller(md, s.cfg.JWTAuthn.Namespace, s.trusted, s.ident, s.log)
}

func first(a, b string) string { return envoyreq.First(a, b) }
