// Package extproctest plays Envoy's side of the ext_proc protocol for tests
// and benchmarks: an HTTP server that, like Envoy's HTTP connection manager
// with the ext_proc filter and a router, shows each request to an ext_proc
// server over a real gRPC stream, applies what it answers, forwards the
// request to the agent, and shows the agent's answer back — headers, then the
// body in BUFFERED or STREAMED mode, cut into chunks that need not line up
// with anything, then trailers when asked. It follows Envoy's ext_proc filter
// where writ depends on it: header mutations (removals before sets), body
// mutations, CONTINUE_AND_REPLACE, ImmediateResponse, mode_override (only in
// answers to headers, only with allow_mode_override), the content-length
// check on a replaced BUFFERED body, and a stream error answered 500
// (failure_mode_allow: false). Its router reads requests as Envoy's does by
// default — the raw :path and the :authority as sent — or, with Normalize,
// after the connection manager's normalisation (Routing); a route's Name
// reaches the processor as Envoy's per-route grpc_initial_metadata sends it.
package extproctest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	modev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"
)

// Route sends requests under Prefix to Upstream, with the prefix replaced by
// the upstream's own path (Envoy's prefix_rewrite), as writ maps an agent's
// route onto its upstream. Prefix matches as Envoy's path_separated_prefix
// (the prefix itself, or the prefix and then '/'; "/" matches every path) on
// the raw path, as deploy/envoy routes an agent.
type Route struct {
	// Hosts are the virtual host's domains (exact, or "*.suffix"), matched
	// without regard to case or port (the shipped files list "host" and
	// "host:*"); empty: any host. A route whose hosts match the request is
	// preferred.
	Hosts  []string
	Prefix string
	// Name, when set, is the agent the route names to writ: Envoy sends it
	// as the writ-agent entry of the stream's initial metadata
	// (ExtProcPerRoute.overrides.grpc_initial_metadata).
	Name     string
	Upstream string
}

// Chunking says how the agent's answer body is cut into the chunks Envoy
// shows the processor in STREAMED mode.
type Chunking struct {
	Name string
	// Whole reads the agent's whole answer before cutting it (several events
	// per chunk); otherwise each read from the agent is cut on its own.
	Whole bool
	// Sizes are the chunk sizes, in turn (empty: one chunk per read, or the
	// whole answer in one chunk).
	Sizes []int
}

// Chunkings are the splits the parity tests run every scenario with.
var Chunkings = []Chunking{
	{Name: "as read"},
	{Name: "one byte", Sizes: []int{1}},
	{Name: "awkward", Sizes: []int{1, 13, 2, 200, 7, 64}},
	{Name: "whole, 97-byte pieces", Whole: true, Sizes: []int{97}},
	{Name: "whole, one chunk", Whole: true},
}

// Envoy is the fake Envoy. Set Client and Routes; the zero mode is writ's
// deployment (deploy/envoy/envoy-extproc.yaml): request body BUFFERED,
// response body STREAMED, mode overrides allowed.
type Envoy struct {
	Client extprocv3.ExternalProcessorClient
	Routes []Route
	// HTTP carries the forwarded requests (nil: a client without proxy,
	// redirects or compression of its own, as Envoy's router).
	HTTP *http.Client

	// RequestBodyMode and ResponseBodyMode are the configured
	// processing_mode (zero: BUFFERED and STREAMED).
	RequestBodyMode, ResponseBodyMode modev3.ProcessingMode_BodySendMode
	// SetModes: use RequestBodyMode and ResponseBodyMode as set, NONE too.
	SetModes bool
	// IgnoreModeOverride: allow_mode_override is false.
	IgnoreModeOverride bool
	// NoProtocolConfig: an Envoy too old to send protocol_config.
	NoProtocolConfig bool
	// SkipRequestHeaders, SkipResponseHeaders: request_header_mode or
	// response_header_mode SKIP.
	SkipRequestHeaders, SkipResponseHeaders bool
	// RequestTrailers, ResponseTrailers: the request or the agent's answer
	// ends with trailers (sent to the processor: trailer mode SEND), so no
	// body chunk carries end_of_stream.
	RequestTrailers, ResponseTrailers bool
	// Chunking cuts the answer in STREAMED mode.
	Chunking Chunking
	// Metadata is the metadata_context of a request (jwt_authn claims).
	Metadata func(*http.Request) *corev3.Metadata
	// Attributes adds request attributes (source.address is always sent).
	Attributes func(*http.Request) map[string]*structpb.Value
	// Normalize: the connection manager normalises requests as
	// deploy/envoy's files set it (normalize_path, merge_slashes,
	// path_with_escaped_slashes_action: REJECT_REQUEST,
	// strip_trailing_host_dot) before any filter or the router sees them.
	Normalize bool
}

func (e *Envoy) client() *http.Client {
	if e.HTTP != nil {
		return e.HTTP
	}
	// Envoy's router neither asks the agent for a coding nor decodes one:
	// the request goes with the headers it has, the answer comes as sent.
	return &http.Client{Transport: &http.Transport{Proxy: nil, DisableCompression: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (e *Envoy) modes() (req, resp modev3.ProcessingMode_BodySendMode) {
	if e.SetModes {
		return e.RequestBodyMode, e.ResponseBodyMode
	}
	return modev3.ProcessingMode_BUFFERED, modev3.ProcessingMode_STREAMED
}

// header is one header line in order, as Envoy's header map keeps it.
type header struct{ k, v string }

type headerList []header

func (h headerList) get(k string) string {
	for _, x := range h {
		if x.k == k {
			return x.v
		}
	}
	return ""
}

func (h headerList) proto() *corev3.HeaderMap {
	m := &corev3.HeaderMap{}
	for _, x := range h {
		m.Headers = append(m.Headers, &corev3.HeaderValue{Key: x.k, RawValue: []byte(x.v)})
	}
	return m
}

// apply is Envoy's MutationUtils: removals, then sets (raw_value), with the
// headers Envoy refuses to set ignored.
func (h headerList) apply(m *extprocv3.HeaderMutation, replacing bool) headerList {
	if m == nil {
		return h
	}
	for _, r := range m.GetRemoveHeaders() {
		r = strings.ToLower(r)
		if strings.HasPrefix(r, ":") || r == "host" {
			continue
		}
		out := h[:0:0]
		for _, x := range h {
			if x.k != r {
				out = append(out, x)
			}
		}
		h = out
	}
	for _, s := range m.GetSetHeaders() {
		k := strings.ToLower(s.GetHeader().GetKey())
		v := string(s.GetHeader().GetRawValue())
		if s.GetHeader().GetValue() != "" {
			panic("extproctest: header " + k + " set through value, not raw_value")
		}
		if k == "host" || k == ":authority" || k == ":scheme" || strings.HasPrefix(k, "x-envoy") || (k == ":method" && !replacing) {
			continue
		}
		if k == ":status" {
			if n, err := strconv.Atoi(v); err != nil || n < 200 {
				continue
			}
		}
		switch s.GetAppendAction() {
		case corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD:
			h = append(h, header{k, v})
		default:
			out, done := h[:0:0], false
			for _, x := range h {
				if x.k == k {
					if done {
						continue
					}
					x.v, done = v, true
				}
				out = append(out, x)
			}
			if !done {
				out = append(out, header{k, v})
			}
			h = out
		}
	}
	return h
}

func (h headerList) without(k string) headerList {
	out := h[:0:0]
	for _, x := range h {
		if x.k != k {
			out = append(out, x)
		}
	}
	return out
}

// exchange is one request on its stream.
type exchange struct {
	e                 *Envoy
	stream            grpc.BidiStreamingClient[extprocv3.ProcessingRequest, extprocv3.ProcessingResponse]
	w                 http.ResponseWriter
	first             bool
	wrote             bool // the answer's head went to the client
	reqMode, respMode modev3.ProcessingMode_BodySendMode
	routed            Routed
}

var errImmediate = errors.New("immediate response sent")

// call sends one message and reads its answer; an ImmediateResponse is
// written to the client and ends the exchange (errImmediate).
func (x *exchange) call(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	if x.first {
		x.first = false
		if !x.e.NoProtocolConfig {
			req.ProtocolConfig = &extprocv3.ProtocolConfiguration{RequestBodyMode: x.reqMode, ResponseBodyMode: x.respMode}
		}
	}
	if err := x.stream.Send(req); err != nil {
		return nil, err
	}
	resp, err := x.stream.Recv()
	if err != nil {
		return nil, err
	}
	if ir := resp.GetImmediateResponse(); ir != nil {
		code := int(ir.GetStatus().GetCode())
		if code < 200 {
			code = 200
		}
		h := headerList{{"content-type", "text/plain"}}.apply(ir.GetHeaders(), false)
		for _, kv := range h {
			if !strings.HasPrefix(kv.k, ":") {
				x.w.Header().Add(kv.k, kv.v)
			}
		}
		x.w.Header().Set("X-Test-Details", ir.GetDetails())
		x.w.WriteHeader(code)
		_, _ = x.w.Write(ir.GetBody())
		return nil, errImmediate
	}
	return resp, nil
}

// failed is Envoy's answer when the processor failed (failure_mode_allow:
// false, status_on_error 500). Once the answer's head went to the client,
// the client's stream is reset instead.
func failed(w http.ResponseWriter, err error) {
	w.Header().Set("X-Test-Details", "ext_proc_error: "+err.Error())
	w.WriteHeader(http.StatusInternalServerError)
}

// ServeHTTP serves one client request through the processor and the agent.
func (e *Envoy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rd := e.Routing(r.Host, r.RequestURI)
	if rd.Rejected {
		// The connection manager's own answer: no filter sees the request.
		w.Header().Set("X-Test-Details", "path_normalization_failed")
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	pctx := ctx
	if rd.Route != nil && rd.Route.Name != "" {
		pctx = metadata.AppendToOutgoingContext(ctx, RouteKey, rd.Route.Name)
	}
	stream, err := e.Client.Process(pctx)
	if err != nil {
		failed(w, err)
		return
	}
	defer func() { _ = stream.CloseSend() }()
	x := &exchange{e: e, stream: stream, w: w, first: true, routed: rd}
	x.reqMode, x.respMode = e.modes()
	if err := x.serve(ctx, r); err != nil && !errors.Is(err, errImmediate) {
		if x.wrote {
			panic(http.ErrAbortHandler) // reset the client's stream
		}
		failed(w, err)
	}
}

func (x *exchange) serve(ctx context.Context, r *http.Request) error {
	e := x.e
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	reqH := headerList{{":authority", x.routed.Authority}, {":path", x.routed.Target}, {":method", r.Method}, {":scheme", scheme}}
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range r.Header[k] {
			reqH = append(reqH, header{strings.ToLower(k), v})
		}
	}
	attrs := map[string]*structpb.Value{"source.address": structpb.NewStringValue(r.RemoteAddr)}
	if e.Attributes != nil {
		for k, v := range e.Attributes(r) {
			attrs[k] = v
		}
	}
	var md *corev3.Metadata
	if e.Metadata != nil {
		md = e.Metadata(r)
	}
	reqEOS := len(body) == 0 && !e.RequestTrailers
	// Request headers.
	if !e.SkipRequestHeaders {
		resp, err := x.call(&extprocv3.ProcessingRequest{
			Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
				Headers: reqH.proto(), EndOfStream: reqEOS}},
			Attributes:      map[string]*structpb.Struct{"envoy.filters.http.ext_proc": {Fields: attrs}},
			MetadataContext: md})
		if err != nil {
			return err
		}
		hr := resp.GetRequestHeaders()
		if hr == nil {
			return fmt.Errorf("spurious answer to request headers: %v", resp)
		}
		x.override(resp)
		replacing := hr.GetResponse().GetStatus() == extprocv3.CommonResponse_CONTINUE_AND_REPLACE
		reqH = reqH.apply(hr.GetResponse().GetHeaderMutation(), replacing)
		if replacing {
			body = mutate(hr.GetResponse().GetBodyMutation(), body)
			reqH = reqH.without("content-length")
		}
	}
	// Request body (BUFFERED: all of it at once), and trailers.
	if len(body) > 0 && x.reqMode == modev3.ProcessingMode_BUFFERED {
		resp, err := x.call(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
			RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: !e.RequestTrailers}}})
		if err != nil {
			return err
		}
		br := resp.GetRequestBody()
		if br == nil {
			return fmt.Errorf("spurious answer to the request body: %v", resp)
		}
		reqH = reqH.apply(br.GetResponse().GetHeaderMutation(), false)
		if m := br.GetResponse().GetBodyMutation(); m != nil {
			body = mutate(m, body)
			if cl := reqH.get("content-length"); cl != "" && cl != strconv.Itoa(len(body)) {
				return errors.New("mismatch between content length and the length of the mutated body")
			}
		}
	}
	if e.RequestTrailers {
		resp, err := x.call(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestTrailers{
			RequestTrailers: &extprocv3.HttpTrailers{Trailers: &corev3.HeaderMap{}}}})
		if err != nil {
			return err
		}
		if resp.GetRequestTrailers() == nil {
			return fmt.Errorf("spurious answer to request trailers: %v", resp)
		}
	}
	return x.forward(ctx, reqH, body)
}

// override applies a mode_override (answers to headers only).
func (x *exchange) override(resp *extprocv3.ProcessingResponse) {
	if m := resp.GetModeOverride(); m != nil && !x.e.IgnoreModeOverride {
		x.reqMode, x.respMode = m.GetRequestBodyMode(), m.GetResponseBodyMode()
	}
}

func mutate(m *extprocv3.BodyMutation, body []byte) []byte {
	switch b := m.GetMutation().(type) {
	case *extprocv3.BodyMutation_Body:
		return append([]byte(nil), b.Body...)
	case *extprocv3.BodyMutation_ClearBody:
		if b.ClearBody {
			return nil
		}
	}
	return body
}

// RouteKey is the gRPC metadata key that names a route's agent to writ
// (envoyreq.RouteKey; spelled out so that this Envoy depends on nothing of
// writ's).
const RouteKey = "writ-agent"

// Routed is a request as the connection manager hands it to the filters and
// the router: its :authority and :path (normalised with Normalize), and the
// route chosen for it then (nil: none; the router answers 404). Envoy picks
// the route once, before ext_proc runs, and keeps it: writ's header
// mutations never clear the route cache.
type Routed struct {
	Authority, Target string
	Route             *Route
	// Rejected: normalisation refused the request (an escaped slash), 400.
	Rejected bool
}

// Routing is what this Envoy makes of a request for authority and target
// (the request target as sent), as its router would: the routes of the
// virtual hosts whose domains match the host (else those with no hosts),
// then the longest path-separated prefix of the raw path. Without
// Normalize, "/%6Byc/" is not under "/kyc" and "kyc.example." is not
// kyc.example, as in an Envoy that does not normalise.
func (e *Envoy) Routing(authority, target string) Routed {
	rd := Routed{Authority: authority, Target: target}
	if e.Normalize {
		var ok bool
		if rd.Target, ok = normalizeTarget(target); !ok {
			return Routed{Rejected: true}
		}
		if h, p, err := net.SplitHostPort(authority); err == nil {
			rd.Authority = net.JoinHostPort(strings.TrimSuffix(h, "."), p)
		} else {
			rd.Authority = strings.TrimSuffix(authority, ".")
		}
	}
	host := rd.Authority
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(host) // Envoy matches domains without regard to case
	matches := func(rt Route) bool {
		for _, d := range rt.Hosts {
			d = strings.ToLower(d)
			if d == host || (strings.HasPrefix(d, "*.") && strings.HasSuffix(host, d[1:]) && len(host) > len(d)-1) {
				return true
			}
		}
		return false
	}
	named := false
	for _, rt := range e.Routes {
		named = named || matches(rt)
	}
	path, _, _ := strings.Cut(rd.Target, "?")
	best := -1
	for i, rt := range e.Routes {
		if named != matches(rt) || (!named && len(rt.Hosts) > 0) {
			continue
		}
		p := strings.TrimSuffix(rt.Prefix, "/")
		if (p == "" || path == p || strings.HasPrefix(path, p+"/")) && (best < 0 || len(rt.Prefix) > len(e.Routes[best].Prefix)) {
			best = i
		}
	}
	if best >= 0 {
		rd.Route = &e.Routes[best]
	}
	return rd
}

// normalizeTarget is the connection manager's normalisation of a request
// target: an escaped slash (%2F, %5C) is refused (REJECT_REQUEST); then
// normalize_path (RFC 3986: percent-encoded unreserved characters decoded,
// other escapes upper-cased, '\' read as '/', dot segments removed); then
// merge_slashes. The query is left as sent.
func normalizeTarget(target string) (string, bool) {
	path, query, hasQuery := strings.Cut(target, "?")
	if l := strings.ToLower(path); strings.Contains(l, "%2f") || strings.Contains(l, "%5c") {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		c := path[i]
		if c == '%' && i+2 < len(path) {
			if v, err := strconv.ParseUint(path[i+1:i+3], 16, 8); err == nil {
				if ch := byte(v); ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || strings.IndexByte("-._~", ch) >= 0 {
					b.WriteByte(ch)
				} else {
					b.WriteString(strings.ToUpper(path[i : i+3]))
				}
				i += 2
				continue
			}
		}
		if c == '\\' {
			c = '/'
		}
		b.WriteByte(c)
	}
	path = removeDotSegments(b.String())
	for strings.Contains(path, "//") {
		path = strings.ReplaceAll(path, "//", "/")
	}
	if hasQuery {
		path += "?" + query
	}
	return path, true
}

// removeDotSegments is RFC 3986 §5.2.4 for an absolute path.
func removeDotSegments(p string) string {
	segs := strings.Split(p, "/")
	var out []string
	for i := 1; i < len(segs); i++ {
		last := i == len(segs)-1
		switch segs[i] {
		case ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, segs[i])
			continue
		}
		if last {
			out = append(out, "")
		}
	}
	return "/" + strings.Join(out, "/")
}

// upstream is the URL the route sends path to.
func (rt *Route) upstream(path string) (string, bool) {
	u, err := url.Parse(rt.Upstream)
	if err != nil {
		return "", false
	}
	rest := strings.TrimPrefix(path, strings.TrimSuffix(rt.Prefix, "/"))
	if !strings.HasPrefix(rest, "/") {
		rest = "/" + rest
	}
	return strings.TrimSuffix(u.Scheme+"://"+u.Host+u.Path, "/") + rest, true
}

// forward sends the request as mutated to the agent and shows its answer.
func (x *exchange) forward(ctx context.Context, reqH headerList, body []byte) error {
	e := x.e
	target := reqH.get(":path")
	path, query, _ := strings.Cut(target, "?")
	if x.routed.Route == nil {
		x.w.WriteHeader(http.StatusNotFound)
		return nil
	}
	u, ok := x.routed.Route.upstream(path)
	if !ok {
		x.w.WriteHeader(http.StatusNotFound)
		return nil
	}
	if query != "" {
		u += "?" + query
	}
	out, err := http.NewRequestWithContext(ctx, reqH.get(":method"), u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for _, h := range reqH {
		if strings.HasPrefix(h.k, ":") || h.k == "content-length" || h.k == "host" {
			continue
		}
		out.Header.Add(h.k, h.v)
	}
	out.Host = reqH.get(":authority")
	out.ContentLength = int64(len(body))
	resp, err := e.client().Do(out)
	if err != nil {
		// Envoy's own answer (a local reply), which goes through the
		// encoder filters, ext_proc included, like the agent's would.
		msg := "upstream connect error or disconnect/reset before headers. reset reason: connection failure"
		resp = &http.Response{StatusCode: http.StatusServiceUnavailable, ContentLength: int64(len(msg)),
			Header: http.Header{"Content-Type": {"text/plain"}, "Content-Length": {strconv.Itoa(len(msg))}},
			Body:   io.NopCloser(strings.NewReader(msg))}
		return x.answer(resp, "upstream_reset_before_response_started{remote_connection_failure}")
	}
	defer resp.Body.Close()
	return x.answer(resp, "via_upstream")
}

// answer shows the agent's answer (or Envoy's own, details says which:
// response.code_details) to the processor and writes the result.
func (x *exchange) answer(resp *http.Response, details string) error {
	e := x.e
	respH := headerList{{":status", strconv.Itoa(resp.StatusCode)}}
	keys := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if lk := strings.ToLower(k); lk != "connection" && lk != "transfer-encoding" && lk != "keep-alive" {
			for _, v := range resp.Header[k] {
				respH = append(respH, header{lk, v})
			}
		}
	}
	noBody := resp.ContentLength == 0 && !e.ResponseTrailers
	if !e.SkipResponseHeaders {
		pr, err := x.call(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
			ResponseHeaders: &extprocv3.HttpHeaders{Headers: respH.proto(), EndOfStream: noBody}},
			Attributes: map[string]*structpb.Struct{"envoy.filters.http.ext_proc": {Fields: map[string]*structpb.Value{
				"response.code_details": structpb.NewStringValue(details)}}}})
		if err != nil {
			return err
		}
		hr := pr.GetResponseHeaders()
		if hr == nil {
			return fmt.Errorf("spurious answer to response headers: %v", pr)
		}
		x.override(pr)
		if hr.GetResponse().GetStatus() == extprocv3.CommonResponse_CONTINUE_AND_REPLACE {
			respH = respH.apply(hr.GetResponse().GetHeaderMutation(), true).without("content-length")
			x.writeHead(respH)
			_, _ = x.w.Write(mutate(hr.GetResponse().GetBodyMutation(), nil))
			return nil
		}
		respH = respH.apply(hr.GetResponse().GetHeaderMutation(), false)
	}
	if noBody {
		x.writeHead(respH)
		return nil
	}
	switch x.respMode {
	case modev3.ProcessingMode_BUFFERED:
		return x.buffered(resp, respH)
	case modev3.ProcessingMode_STREAMED:
		return x.streamed(resp, respH)
	}
	// NONE (and what this fake does not play): passed on unprocessed.
	x.writeHead(respH)
	_, _ = io.Copy(x.w, resp.Body)
	return nil
}

func (x *exchange) writeHead(h headerList) {
	x.wrote = true
	code := http.StatusOK
	for _, kv := range h {
		if kv.k == ":status" {
			code, _ = strconv.Atoi(kv.v)
			continue
		}
		x.w.Header().Add(kv.k, kv.v)
	}
	x.w.WriteHeader(code)
}

// buffered: the whole answer in one message; the headers wait for its answer.
func (x *exchange) buffered(resp *http.Response, respH headerList) error {
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	pr, err := x.call(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: body, EndOfStream: !x.e.ResponseTrailers}}})
	if err != nil {
		return err
	}
	br := pr.GetResponseBody()
	if br == nil {
		return fmt.Errorf("spurious answer to the response body: %v", pr)
	}
	respH = respH.apply(br.GetResponse().GetHeaderMutation(), false)
	if m := br.GetResponse().GetBodyMutation(); m != nil {
		body = mutate(m, body)
		if cl := respH.get("content-length"); cl != "" && cl != strconv.Itoa(len(body)) {
			return errors.New("mismatch between content length and the length of the mutated body")
		}
	}
	if err := x.trailers(); err != nil {
		return err
	}
	x.writeHead(respH)
	_, _ = x.w.Write(body)
	return nil
}

func (x *exchange) trailers() error {
	if !x.e.ResponseTrailers {
		return nil
	}
	pr, err := x.call(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseTrailers{
		ResponseTrailers: &extprocv3.HttpTrailers{Trailers: &corev3.HeaderMap{}}}})
	if err != nil {
		return err
	}
	if pr.GetResponseTrailers() == nil {
		return fmt.Errorf("spurious answer to response trailers: %v", pr)
	}
	return nil
}

// streamed: the headers go on at once (without content-length), then each
// chunk, as the processor answers it.
func (x *exchange) streamed(resp *http.Response, respH headerList) error {
	x.writeHead(respH.without("content-length"))
	flusher, _ := x.w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	send := func(chunk []byte, eos bool) error {
		pr, err := x.call(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
			ResponseBody: &extprocv3.HttpBody{Body: chunk, EndOfStream: eos}}})
		if err != nil {
			return err
		}
		br := pr.GetResponseBody()
		if br == nil {
			return fmt.Errorf("spurious answer to a response body chunk: %v", pr)
		}
		if out := mutate(br.GetResponse().GetBodyMutation(), chunk); len(out) > 0 {
			if _, err := x.w.Write(out); err != nil {
				return err
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		return nil
	}
	ch := x.e.Chunking
	turn := 0
	cut := func(data []byte, last bool) error {
		for len(data) > 0 {
			n := len(data)
			if len(ch.Sizes) > 0 {
				n = min(n, ch.Sizes[turn%len(ch.Sizes)])
				turn++
			}
			eos := last && n == len(data) && !x.e.ResponseTrailers
			if err := send(data[:n], eos); err != nil {
				return err
			}
			if eos {
				return io.EOF
			}
			data = data[n:]
		}
		return nil
	}
	if ch.Whole {
		all, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		switch err := cut(all, true); {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
	} else {
		buf := make([]byte, 32<<10)
		for {
			n, rerr := resp.Body.Read(buf)
			if n > 0 {
				if err := cut(append([]byte(nil), buf[:n]...), false); err != nil {
					return err
				}
			}
			if rerr != nil {
				break
			}
		}
	}
	if x.e.ResponseTrailers {
		return x.trailers()
	}
	return send(nil, true) // the end of the stream, as an empty last chunk
}
