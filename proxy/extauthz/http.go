package extauthz

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/envoyreq"
	"github.com/writ-authz/writ/proxy/writheader"
)

// HeadersToRemoveHeader is how an HTTP authorization server asks Envoy to strip
// request headers before the request goes upstream (comma-separated names).
const HeadersToRemoveHeader = "X-Envoy-Auth-Headers-To-Remove"

// RequestHeaders are the request headers writ reads besides Authorization,
// lower-cased and sorted: every header a protocol of the table reads
// (adapters.DecisionHeaders) and Envoy's partial-body flag. Envoy's
// http_service mode forwards only the headers its allowed_headers name (and
// Host, :method, :path, Content-Length, Authorization), so an HTTP-mode Envoy
// config must list exactly these.
func RequestHeaders() []string {
	var out []string
	for _, h := range append(adapters.DecisionHeaders(), PartialBodyHeader) {
		if h = strings.ToLower(h); !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

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
	path, ok := s.belowPrefix(r.URL.Path)
	raw, rawOK := s.belowPrefix(rawPathOf(r))
	route := r.Header.Values(RouteHeader)
	if !ok || !rawOK || len(route) > 1 {
		s.answer(w, badRequest(errBadRequest))
		return
	}
	if envoyreq.GRPCCall(r.Header) {
		s.answerGRPC(w, errGRPCOverHTTP)
		return
	}
	inc := proxy.Incoming{Method: r.Method, Path: path, RawPath: raw, Host: r.Host, RemoteAddr: r.RemoteAddr,
		Query: r.URL.Query(), RawQuery: r.URL.RawQuery, Header: r.Header, Verbatim: true}
	if len(route) == 1 {
		// The agent Envoy's route chose: its per-route http_service sets the
		// header (headers_to_add overrides a client's), and allowed_headers
		// must never pass a client's own.
		inc.Route = route[0]
		r.Header.Del(RouteHeader)
	}
	partial := strings.EqualFold(r.Header.Get(PartialBodyHeader), "true")
	if s.cfg.ParsesBody() && !(partial && s.cfg.AllowPartialBody) {
		in, err := wire.FromHTTP(r, s.cfg.MaxRequestBytes)
		if err != nil {
			inc.BodyErr = err
		} else {
			inc.Body, inc.BodyErr = s.bodyOf(in.Body, partial)
		}
	}
	start := time.Now()
	remove := writheader.Spellings(inc.Header)
	out, dry := s.decide(r.Context(), inc)
	s.served(out, start)
	if out.Kind != proxy.Forward && !dry {
		s.answer(w, out)
		return
	}
	h := w.Header()
	if out.Plan != nil && !dry {
		for k, v := range out.Plan.Header {
			h[k] = v
		}
	}
	if dry && out.DecisionID != "" {
		h.Set(writheader.Decision, out.DecisionID)
	}
	var drop []string
	for _, k := range append(remove, writheader.Caller) {
		if h.Get(k) == "" && !slices.Contains(drop, strings.ToLower(k)) { // Envoy removes after it sets: never both
			drop = append(drop, strings.ToLower(k))
		}
	}
	if len(drop) > 0 {
		h.Set(HeadersToRemoveHeader, strings.Join(drop, ","))
	}
	w.WriteHeader(http.StatusOK)
}

// RouteHeader is envoyreq.RouteKey as the header of an HTTP check.
var RouteHeader = http.CanonicalHeaderKey(envoyreq.RouteKey)

// belowPrefix is path below envoy.http_path_prefix; ok is false for a path
// outside it.
func (s *Server) belowPrefix(path string) (string, bool) {
	p := s.cfg.HTTPPathPrefix
	if p == "" {
		return path, true
	}
	rest, ok := strings.CutPrefix(path, p)
	if !ok || (rest != "" && rest[0] != '/') {
		return "", false
	}
	if rest == "" {
		rest = "/"
	}
	return rest, true
}

// rawPathOf is the check's path as Envoy sent it (path_prefix and the
// client's :path, percent-encoding intact), before '?'.
func rawPathOf(r *http.Request) string {
	if t := r.RequestURI; strings.HasPrefix(t, "/") {
		p, _, _ := strings.Cut(t, "?")
		return p
	}
	return r.URL.EscapedPath()
}

// answer writes writ's own answer for Envoy to pass to the client.
func (s *Server) answer(w http.ResponseWriter, out proxy.Outcome) {
	h := w.Header()
	for k, v := range out.Answer.Header {
		h[k] = v
	}
	if out.Answer.ContentType != "" {
		h.Set("Content-Type", out.Answer.ContentType)
	}
	h.Set("Cache-Control", "no-store")
	if out.DecisionID != "" {
		h.Set(writheader.Decision, out.DecisionID)
	}
	writheader.Mark(h)
	st := out.EnvoyStatus()
	if st >= 200 && st < 300 {
		st = http.StatusNonAuthoritativeInfo // writ's own answer (a card, the directory)
	}
	w.WriteHeader(st)
	_, _ = w.Write(out.Answer.Body)
}

// errGRPCOverHTTP refuses a gRPC call at the HTTP ext_authz server: Envoy's
// http_service passes on only the headers its allowed_headers name and
// sends no metadata context, so the call's message and metadata are checked
// by the gRPC server (envoy.grpc_listen) or ext_proc instead; nothing is
// decided on part of a call.
var errGRPCOverHTTP = errors.New("writ's HTTP ext_authz server does not check gRPC calls; Envoy's gRPC ext_authz (envoy.grpc_listen) or ext_proc does")

// answerGRPC refuses a gRPC call with err, as a status Envoy's local reply
// carries to the client (its headers; a 400, which Envoy passes on).
func (s *Server) answerGRPC(w http.ResponseWriter, err error) {
	s.log.Warn("a gRPC call reached the HTTP ext_authz server; refused", "error", err)
	_, h := envoyreq.GRPCAnswer(plainAnswer(http.StatusBadRequest, err.Error()))
	for k, v := range h {
		w.Header()[k] = v
	}
	writheader.Mark(w.Header())
	w.WriteHeader(http.StatusBadRequest)
}
