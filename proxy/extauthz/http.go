package extauthz

import (
	"net/http"
	"strings"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/proxy"
)

// HeadersToRemoveHeader is how an HTTP authorization server asks Envoy to strip
// request headers before the request goes upstream (comma-separated names).
const HeadersToRemoveHeader = "X-Envoy-Auth-Headers-To-Remove"

// RequestHeaders are the request headers writ reads besides Authorization,
// lower-cased. Envoy's http_service mode forwards only the headers its
// allowed_headers name (and Host, :method, :path, Content-Length, Authorization),
// so an HTTP-mode Envoy config must list every one of them.
var RequestHeaders = []string{"content-type", "a2a-version", "a2a-extensions", "x-a2a-extensions",
	"writ-data-classification", PartialBodyHeader}

// ServeHTTP is the HTTP ext_authz server (Envoy's http_service mode). Envoy sends
// the client's request as it came — method, path below envoy.http_path_prefix,
// the allowed headers, the buffered body — and reads the answer: 200 lets the
// request through with the upstream headers (Envoy copies those its
// allowed_upstream_headers name); any other status is writ's own answer, which
// Envoy passes to the client with its body.
//
// Envoy reads every 200 as "allow", so an answer writ serves with a 2xx status —
// a card, the directory, or a JSON-RPC error, which A2A carries in HTTP 200 — is
// sent as 203 Non-Authoritative Information with the same body. A 5xx answer is a
// failed check to Envoy (status_on_error, default 403, and no body).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if p := s.cfg.HTTPPathPrefix; p != "" {
		rest, ok := strings.CutPrefix(path, p)
		if !ok || (rest != "" && rest[0] != '/') {
			s.answer(w, badRequest(errBadRequest))
			return
		}
		if path = rest; path == "" {
			path = "/"
		}
	}
	inc := proxy.Incoming{Method: r.Method, Path: path, Host: r.Host, RemoteAddr: r.RemoteAddr,
		Query: r.URL.Query(), Header: r.Header}
	partial := strings.EqualFold(r.Header.Get(PartialBodyHeader), "true")
	if s.cfg.ParsesBody() && !(partial && s.cfg.AllowPartialBody) {
		in, err := wire.FromHTTP(r, s.cfg.MaxRequestBytes)
		if err != nil {
			inc.BodyErr = err
		} else {
			inc.Body, inc.BodyErr = s.bodyOf(in.Body, partial)
		}
	}
	v, dry := s.decide(r.Context(), inc)
	if !v.Allow && !dry {
		s.answer(w, v)
		return
	}
	h := w.Header()
	for k, val := range v.Upstream {
		h.Set(k, val)
	}
	if dry && v.DecisionID != "" {
		h.Set(proxy.DecisionHeader, v.DecisionID)
	}
	var remove []string
	for _, k := range v.RemoveUpstream {
		if h.Get(k) == "" { // Envoy removes after it sets: never both
			remove = append(remove, strings.ToLower(k))
		}
	}
	if len(remove) > 0 {
		h.Set(HeadersToRemoveHeader, strings.Join(remove, ","))
	}
	w.WriteHeader(http.StatusOK)
}

// answer writes writ's own answer for Envoy to pass to the client.
func (s *Server) answer(w http.ResponseWriter, v proxy.Verdict) {
	h := w.Header()
	if v.Answer.ContentType != "" {
		h.Set("Content-Type", v.Answer.ContentType)
	}
	h.Set("Cache-Control", "no-store")
	if v.DecisionID != "" {
		h.Set(proxy.DecisionHeader, v.DecisionID)
	}
	st := v.Answer.Status
	if st >= 200 && st < 300 {
		st = http.StatusNonAuthoritativeInfo
	}
	w.WriteHeader(st)
	_, _ = w.Write(v.Answer.Body)
}
