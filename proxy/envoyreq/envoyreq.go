// Package envoyreq reads what Envoy tells writ about a request — headers,
// target, peer, the claims its jwt_authn filter verified — into the pieces of
// a proxy.Incoming, the same way for every Envoy front door (ext_authz,
// ext_proc), so that one request is decided alike whichever filter asks.
package envoyreq

import (
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"sort"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/writ-authz/writ/authz/identity"
)

// RouteKey names the agent Envoy routed a request to, set per route in
// Envoy's config (docs/envoy.md): the ext_authz context extension
// (ExtAuthzPerRoute.check_settings.context_extensions), the initial metadata
// of the ext_proc stream (ExtProcPerRoute.overrides.grpc_initial_metadata),
// and the header of an HTTP ext_authz check
// (check_settings.http_service.authorization_request.headers_to_add). Its
// value is the agent's name (agents[].name). Only Envoy's config sets any of
// them: a client can reach none.
const RouteKey = "writ-agent"

// Headers reads Envoy's header list — a header_map whose raw byte values win
// over their string form, and whose repeated keys stay separate values — into
// the headers net/http would have read: canonical keys, pseudo-headers apart
// (lower-cased), Host dropped (net/http keeps it out of Header).
func Headers(hm *corev3.HeaderMap) (http.Header, map[string]string) {
	b := newBuilder(len(hm.GetHeaders()))
	for _, hv := range hm.GetHeaders() {
		v := hv.GetValue()
		if raw := hv.GetRawValue(); len(raw) > 0 {
			v = string(raw)
		}
		b.add(hv.GetKey(), v)
	}
	return b.hdr, b.pseudo
}

// HeaderMapOf is Headers for a plain key → value map (ext_authz's headers).
func HeaderMapOf(m map[string]string) (http.Header, map[string]string) {
	b := newBuilder(len(m))
	for k, v := range m {
		b.add(k, v)
	}
	return b.hdr, b.pseudo
}

type builder struct {
	hdr    http.Header
	pseudo map[string]string
}

func newBuilder(n int) *builder { return &builder{hdr: make(http.Header, n)} }

func (b *builder) add(k, v string) {
	if strings.HasPrefix(k, ":") {
		if b.pseudo == nil {
			b.pseudo = map[string]string{}
		}
		b.pseudo[strings.ToLower(k)] = v
		return
	}
	ck := textproto.CanonicalMIMEHeaderKey(k)
	if ck == "Host" {
		return
	}
	b.hdr[ck] = append(b.hdr[ck], v)
}

// SplitTarget splits the request target Envoy reports (path and query, not
// decoded) into the path as sent (raw), the decoded path and the query, as
// net/http does. ok is false for a target net/http would not have accepted.
func SplitTarget(target string) (raw, path string, query url.Values, ok bool) {
	if target == "" || target[0] != '/' {
		return "", "", nil, false
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return "", "", nil, false
	}
	raw, _, _ = strings.Cut(target, "?")
	return raw, u.Path, u.Query(), true
}

// Address renders Envoy's peer address as net/http's RemoteAddr.
func Address(a *corev3.Address) string {
	if sa := a.GetSocketAddress(); sa != nil {
		return net.JoinHostPort(sa.GetAddress(), strconv.FormatUint(uint64(sa.GetPortValue()), 10))
	}
	if p := a.GetPipe(); p != nil {
		return p.GetPath()
	}
	return ""
}

// PeerCertificates reads the client certificate Envoy verified (URL-encoded
// PEM, leaf first, as include_peer_certificate sends it). Without one, a
// SPIFFE principal Envoy took from that certificate's URI SAN stands for it:
// both come from the same verified TLS handshake, and the mTLS identity source
// reads no more than the SPIFFE ID.
func PeerCertificates(certificate, principal string) []*x509.Certificate {
	if certificate != "" {
		// Envoy percent-encodes every special character, '+' included; a '+'
		// left in is a form-encoded space.
		raw, err := url.PathUnescape(certificate)
		if err != nil || !strings.Contains(raw, "-----BEGIN CERTIFICATE-----") {
			if raw, err = url.QueryUnescape(certificate); err != nil {
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
	if strings.HasPrefix(strings.ToLower(principal), "spiffe://") {
		if u, err := url.Parse(principal); err == nil {
			return []*x509.Certificate{{URIs: []*url.URL{u}}}
		}
	}
	return nil
}

// ClaimsMapper is what an Envoy door needs of identity: the caller a claim
// set names that a verifier in front of writ (Envoy's jwt_authn) already
// checked. identity.Resolver is the one writ runs; safe for concurrent use.
type ClaimsMapper interface {
	VerifiedClaims(claims map[string]any) (identity.Caller, error)
}

var _ ClaimsMapper = (*identity.Resolver)(nil)

// VerifiedCaller takes the caller from the claims Envoy's jwt_authn filter
// verified (metadata namespace ns), when exactly one claim set there comes
// from a trusted issuer; nil (read the request's own credentials) when trusted
// is nil or no trusted claim set is present. Claim sets of other issuers are
// ignored: the request then goes through writ's own credential checks
// unchanged, so their presence can never weaken the bearer path. A trusted
// claim set that fails the claim checks (expired, malformed act) makes the
// caller anonymous rather than falling through to a weaker credential; so do
// two trusted claim sets, since writ cannot tell which one speaks for the
// request.
func VerifiedCaller(md *corev3.Metadata, ns string, trusted map[string]bool, ident ClaimsMapper, log *slog.Logger) *identity.Caller {
	if trusted == nil {
		return nil
	}
	set := md.GetFilterMetadata()[ns]
	if set == nil {
		return nil
	}
	keys := make([]string, 0, len(set.GetFields()))
	for k := range set.GetFields() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var found []map[string]any
	for _, k := range keys {
		claims := set.GetFields()[k].GetStructValue()
		iss := claims.GetFields()["iss"].GetStringValue()
		if claims == nil || !trusted[iss] {
			log.Debug("jwt_authn claims ignored: issuer not trusted in envoy.jwt_authn.issuers", "key", k, "issuer", iss)
			continue
		}
		found = append(found, claims.AsMap())
	}
	switch len(found) {
	case 0:
		return nil
	case 1:
		c, err := ident.VerifiedClaims(found[0])
		if err != nil {
			log.Info("jwt_authn claims refused; the caller is anonymous", "error", err)
		}
		return &c
	}
	log.Info("more than one trusted jwt_authn claim set; the caller is anonymous", "count", len(found))
	anon := identity.Anonymous()
	return &anon
}

// First is a unless it is empty, else b.
func First(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
