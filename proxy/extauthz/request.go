package extauthz

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"sort"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/proxy"
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
	inc := proxy.Incoming{Method: first(h.GetMethod(), pseudo[":method"]), Host: first(h.GetHost(), pseudo[":authority"]),
		Header: hdr, RemoteAddr: addressOf(attrs.GetSource().GetAddress())}
	var err error
	if inc.Path, inc.Query, err = splitTarget(first(h.GetPath(), pseudo[":path"])); err != nil {
		return proxy.Incoming{}, err
	}
	body := h.GetRawBody()
	if len(body) == 0 && h.GetBody() != "" {
		body = []byte(h.GetBody())
	}
	partial := strings.EqualFold(hdr.Get(PartialBodyHeader), "true")
	inc.Body, inc.BodyErr = s.bodyOf(body, partial)
	inc.PeerCertificates = peerCertificates(attrs.GetSource())
	inc.Caller = s.verifiedCaller(attrs.GetMetadataContext())
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
	hdr := make(http.Header, len(h.GetHeaders())+len(h.GetHeaderMap().GetHeaders()))
	var pseudo map[string]string
	add := func(k, v string) {
		if strings.HasPrefix(k, ":") {
			if pseudo == nil {
				pseudo = map[string]string{}
			}
			pseudo[strings.ToLower(k)] = v
			return
		}
		ck := textproto.CanonicalMIMEHeaderKey(k)
		if ck == "Host" {
			return
		}
		hdr[ck] = append(hdr[ck], v)
	}
	if hm := h.GetHeaderMap(); hm != nil && len(hm.GetHeaders()) > 0 {
		for _, hv := range hm.GetHeaders() {
			v := hv.GetValue()
			if raw := hv.GetRawValue(); len(raw) > 0 {
				v = string(raw)
			}
			add(hv.GetKey(), v)
		}
		return hdr, pseudo
	}
	for k, v := range h.GetHeaders() {
		add(k, v)
	}
	return hdr, pseudo
}

// splitTarget splits the request target Envoy reports (path and query, not
// decoded) into the decoded path and the query, as net/http does.
func splitTarget(target string) (string, url.Values, error) {
	if target == "" || target[0] != '/' {
		return "", nil, fmt.Errorf("%w: path %q", errBadRequest, target)
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return "", nil, fmt.Errorf("%w: path %q", errBadRequest, target)
	}
	return u.Path, u.Query(), nil
}

// addressOf renders Envoy's peer address as net/http's RemoteAddr.
func addressOf(a *corev3.Address) string {
	if sa := a.GetSocketAddress(); sa != nil {
		return net.JoinHostPort(sa.GetAddress(), strconv.FormatUint(uint64(sa.GetPortValue()), 10))
	}
	if p := a.GetPipe(); p != nil {
		return p.GetPath()
	}
	return ""
}

// peerCertificates reads the client certificate Envoy verified
// (include_peer_certificate: URL-encoded PEM, leaf first). Without it, a SPIFFE
// principal Envoy took from that certificate's URI SAN stands for it: both come
// from the same verified TLS handshake, and the mTLS identity source reads no
// more than the SPIFFE ID.
func peerCertificates(p *authv3.AttributeContext_Peer) []*x509.Certificate {
	if enc := p.GetCertificate(); enc != "" {
		// Envoy percent-encodes every special character, '+' included; a '+'
		// left in is a form-encoded space.
		raw, err := url.PathUnescape(enc)
		if err != nil || !strings.Contains(raw, "-----BEGIN CERTIFICATE-----") {
			if raw, err = url.QueryUnescape(enc); err != nil {
				return nil
			}
		}
		var out []*x509.Certificate
		rest := []byte(raw)
		for {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			if b.Type != "CERTIFICATE" {
				continue
			}
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil
			}
			out = append(out, c)
		}
		return out
	}
	if pr := p.GetPrincipal(); strings.HasPrefix(strings.ToLower(pr), "spiffe://") {
		if u, err := url.Parse(pr); err == nil {
			return []*x509.Certificate{{URIs: []*url.URL{u}}}
		}
	}
	return nil
}

// verifiedCaller takes the caller from the claims Envoy's jwt_authn filter
// verified, when envoy.jwt_authn is configured and exactly one claim set under
// its namespace comes from a trusted issuer. Claim sets of other issuers are
// ignored: the request then goes through writ's own credential checks unchanged,
// so their presence can never weaken the bearer path. A trusted claim set that
// fails the claim checks (expired, malformed act) makes the caller anonymous
// rather than falling through to a weaker credential; so do two trusted claim
// sets, since writ cannot tell which one speaks for the request.
func (s *Server) verifiedCaller(md *corev3.Metadata) *identity.Caller {
	if s.trusted == nil {
		return nil
	}
	ns := md.GetFilterMetadata()[s.cfg.JWTAuthn.Namespace]
	if ns == nil {
		return nil
	}
	keys := make([]string, 0, len(ns.GetFields()))
	for k := range ns.GetFields() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var found []map[string]any
	for _, k := range keys {
		claims := ns.GetFields()[k].GetStructValue()
		iss := claims.GetFields()["iss"].GetStringValue()
		if claims == nil || !s.trusted[iss] {
			s.log.Debug("jwt_authn claims ignored: issuer not trusted in envoy.jwt_authn.issuers", "key", k, "issuer", iss)
			continue
		}
		found = append(found, claims.AsMap())
	}
	switch len(found) {
	case 0:
		return nil
	case 1:
		c, err := s.ident.VerifiedClaims(found[0])
		if err != nil {
			s.log.Info("jwt_authn claims refused; the caller is anonymous", "error", err)
		}
		return &c
	}
	s.log.Info("more than one trusted jwt_authn claim set; the caller is anonymous", "count", len(found))
	anon := identity.Anonymous()
	return &anon
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
