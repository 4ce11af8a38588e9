package extproc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	modev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/envoyreq"
	"github.com/writ-authz/writ/proxy/writheader"
	"github.com/writ-authz/writ/task"
)

// AttributesKey is the key under which Envoy sends the request_attributes and
// response_attributes it was asked for.
const AttributesKey = "envoy.filters.http.ext_proc"

// The Envoy attributes writ reads when the filter sends them
// (request_attributes): the client's address, and the SPIFFE ID of a client
// certificate Envoy verified.
const (
	AttrSourceAddress = "source.address"
	AttrPeerURISAN    = "connection.uri_san_peer_certificate"
)

// AttrCodeDetails is the response attribute (response_attributes) that tells
// an agent's answer ("via_upstream") from Envoy's own answer when the agent
// could not be reached or was too slow, which writ replaces by the
// protocol-shaped failure the sidecar answers.
const AttrCodeDetails = "response.code_details"

// errNoBody: the request has a body Envoy will not show writ whole
// (request_body_mode is not BUFFERED). It is refused: nothing is decided on a
// body writ did not read, and nothing undecided reaches the agent.
var errNoBody = errors.New("the Envoy ext_proc filter does not send writ the whole request body (processing_mode.request_body_mode must be BUFFERED)")

// stream is one HTTP request and its answer, as Envoy shows them on one
// Process stream. It is used by the stream's goroutine only (the SSE relay
// runs in its own goroutine behind proxy.Chunks).
type stream struct {
	s     *Server
	ctx   context.Context
	start time.Time
	proto *extprocv3.ProtocolConfiguration
	attrs map[string]*structpb.Value
	md    *corev3.Metadata

	inc     *proxy.Incoming // the request, once its headers arrived
	remove  []string        // spellings of writ's headers the request carried
	decided bool
	out     proxy.Outcome
	plan    *proxy.Plan // Forward only
	sent    time.Time   // when the request went on to the agent

	overrode bool // writ asked for another response body mode
	// answerHeaders are the names of the answer's headers as Envoy showed
	// them: what a refusal in the answer's place removes.
	answerHeaders []string
	ans           answer // the answer's body, by kind
	ev            events.Request
	reported      bool
}

// answer consumes the body of the agent's answer, chunk by chunk.
type answer interface {
	// chunk returns Envoy's instruction for one body chunk; eos marks the last.
	chunk(data []byte, eos bool) *extprocv3.CommonResponse
	// end is the end of the body without a last chunk (trailers followed).
	end()
	// close releases what the answer holds when the stream ends early.
	close()
	// invalid counts answers refused here (too large).
	invalid() int
}

func newStream(ctx context.Context, s *Server) *stream {
	return &stream{s: s, ctx: ctx, start: time.Now(), ev: events.Request{Mode: events.ModeExtProc}}
}

// handle answers one message of the stream; nil sends nothing.
func (st *stream) handle(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	if req.GetObservabilityMode() {
		// Envoy ignores every answer in observability mode: writ could
		// enforce nothing and would only pretend to.
		st.s.warnOnce("observability", "Envoy's ext_proc filter runs in observability_mode: writ cannot enforce anything there; the stream is refused")
		return nil, status.Error(codes.FailedPrecondition, "writ does not run under ext_proc observability_mode")
	}
	if pc := req.GetProtocolConfig(); pc != nil {
		st.proto = pc
	}
	st.keepAttributes(req)
	if md := req.GetMetadataContext(); md != nil && len(md.GetFilterMetadata()) > 0 {
		st.md = md
	}
	switch r := req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return st.requestHeaders(r.RequestHeaders)
	case *extprocv3.ProcessingRequest_RequestBody:
		return st.requestBody(r.RequestBody)
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return st.requestTrailers()
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return st.responseHeaders(r.ResponseHeaders)
	case *extprocv3.ProcessingRequest_ResponseBody:
		return st.responseBody(r.ResponseBody)
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		if st.ans != nil {
			st.ans.end()
		}
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{
			ResponseTrailers: &extprocv3.TrailersResponse{}}}, nil
	}
	return nil, nil
}

// keepAttributes keeps the attributes req carries in
// ProcessingRequest.attributes. An Envoy from before that field
// (envoyproxy/envoy#32176, 2024) sent them on the headers messages instead,
// in HttpHeaders.attributes, which is deprecated now: read there only when
// req has none of its own.
func (st *stream) keepAttributes(req *extprocv3.ProcessingRequest) {
	if len(req.GetAttributes()) > 0 {
		st.attributes(req.GetAttributes())
		return
	}
	switch r := req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		st.attributes(r.RequestHeaders.GetAttributes()) //nolint:staticcheck // fallback for an Envoy that sends the attributes only here
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		st.attributes(r.ResponseHeaders.GetAttributes()) //nolint:staticcheck // fallback for an Envoy that sends the attributes only here
	}
}

// attributes keeps the attributes Envoy sent (request and response ones
// arrive on different messages).
func (st *stream) attributes(m map[string]*structpb.Struct) {
	for _, set := range m {
		for k, v := range set.GetFields() {
			if st.attrs == nil {
				st.attrs = map[string]*structpb.Value{}
			}
			st.attrs[k] = v
		}
	}
}

func (st *stream) attr(name string) string { return st.attrs[name].GetStringValue() }

// requestBodyMode is the request body mode Envoy said it runs with.
func (st *stream) requestBodyMode() modev3.ProcessingMode_BodySendMode {
	return st.proto.GetRequestBodyMode()
}

// responseBodyMode is the response body mode Envoy said it runs with.
func (st *stream) responseBodyMode() modev3.ProcessingMode_BodySendMode {
	return st.proto.GetResponseBodyMode()
}

// answerVisible reports whether Envoy's own configuration (not a mode
// override it may ignore) shows writ the body of every answer.
func (st *stream) answerVisible() bool {
	m := st.responseBodyMode()
	return st.proto != nil && (m == modev3.ProcessingMode_BUFFERED || m == modev3.ProcessingMode_STREAMED)
}

// requestHeaders reads the request; it is decided now when it has no body,
// else once its body arrives.
func (st *stream) requestHeaders(h *extprocv3.HttpHeaders) (*extprocv3.ProcessingResponse, error) {
	if st.inc != nil {
		return nil, status.Error(codes.FailedPrecondition, "request headers arrived twice on one stream")
	}
	hdr, pseudo := envoyreq.Headers(h.GetHeaders())
	target := pseudo[":path"]
	raw, path, query, ok := envoyreq.SplitTarget(target)
	if !ok {
		return st.plain(http.StatusBadRequest, "writ: the request target "+strconv.Quote(target)+" is not readable"), nil
	}
	route, ok := st.route()
	if !ok {
		return st.plain(http.StatusInternalServerError, "writ: the route Envoy chose names more than one agent"), nil
	}
	_, rawQuery, _ := strings.Cut(target, "?")
	st.remove = writheader.Spellings(hdr)
	st.inc = &proxy.Incoming{Mode: events.ModeExtProc, Routed: true, Method: pseudo[":method"], Path: path, RawPath: raw, Route: route,
		Query: query, RawQuery: rawQuery, Host: pseudo[":authority"], Header: hdr, RemoteAddr: st.attr(AttrSourceAddress),
		TLS: pseudo[":scheme"] == "https", PeerCertificates: envoyreq.PeerCertificates("", st.attr(AttrPeerURISAN))}
	if st.s.trusted != nil {
		st.inc.Caller, st.inc.CallerErr = envoyreq.VerifiedCaller(st.md, st.s.cfg.JWTAuthn.Namespace, st.s.trusted, st.s.ident, st.s.log)
	}
	switch {
	case h.GetEndOfStream():
		return st.decide(false, nil), nil
	case st.requestBodyMode() != modev3.ProcessingMode_BUFFERED:
		st.s.warnOnce("request_body_mode", "requests with a body are refused: "+errNoBody.Error(),
			"request_body_mode", st.requestBodyMode().String(), "protocol_config_sent", st.proto != nil)
		st.inc.BodyErr = errNoBody
		return st.decide(false, nil), nil
	}
	// Envoy holds the headers until the body is answered (BUFFERED).
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
		RequestHeaders: &extprocv3.HeadersResponse{}}}, nil
}

// requestBody decides the request on its whole body (BUFFERED: one message).
func (st *stream) requestBody(b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, error) {
	if st.inc == nil {
		st.s.warnOnce("no_request_headers", "Envoy sent a request body without its headers (processing_mode.request_header_mode must be SEND); the request is refused")
		return st.plain(http.StatusInternalServerError, "writ: the request reached the authorizer without its headers"), nil
	}
	if st.decided {
		return bodyResponse(true, nil), nil
	}
	body := b.GetBody()
	switch {
	case int64(len(body)) > st.s.maxReq:
		st.inc.BodyErr = wire.ErrBodyTooLarge
	case len(body) > 0:
		st.inc.Body = body
	}
	return st.decide(true, body), nil
}

// requestTrailers: a body followed by trailers was decided on the body.
func (st *stream) requestTrailers() (*extprocv3.ProcessingResponse, error) {
	if st.inc != nil && !st.decided {
		// No body message came (trailers only): decide without one.
		return st.decide(false, nil), nil
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{
		RequestTrailers: &extprocv3.TrailersResponse{}}}, nil
}

// route is the agent Envoy's route chose for this stream: the writ-agent
// entry of the stream's initial gRPC metadata, which only Envoy's config sets
// (ExtProcPerRoute.overrides.grpc_initial_metadata). ok is false for more
// than one value, which names no one agent.
func (st *stream) route() (string, bool) {
	md, _ := metadata.FromIncomingContext(st.ctx)
	switch v := md.Get(envoyreq.RouteKey); len(v) {
	case 0:
		return "", true
	case 1:
		return v[0], true
	default:
		st.s.log.Error("the ext_proc stream names more than one agent (writ-agent metadata); refused", "values", v)
		return "", false
	}
}

// decide admits the request and maps the outcome to Envoy's instruction for
// the phase it was decided in (the headers, or the body received).
func (st *stream) decide(onBody bool, received []byte) *extprocv3.ProcessingResponse {
	st.decided = true
	out := st.s.core.Admit(st.ctx, *st.inc)
	st.out = out
	st.ev.Route, st.ev.Operation = out.Route, out.Operation
	if out.Kind != proxy.Forward {
		return st.immediate(out)
	}
	p := out.Plan
	if needsAnswer(out.Operation) && !st.answerVisible() {
		// The answer would reach the caller unread: another caller's tasks,
		// the agent's own card. Refused instead (fail closed).
		st.s.warnOnce("response_body_mode", "list and extended-card requests are refused: Envoy's ext_proc filter does not show writ their answers (processing_mode.response_body_mode must be STREAMED or BUFFERED)",
			"response_body_mode", st.responseBodyMode().String())
		f := task.NewFault(task.KindUnavailable, "writ cannot read this answer behind this Envoy (ext_proc response_body_mode); the request is refused")
		return st.immediate(proxy.Outcome{Kind: proxy.Refuse, Answer: p.Fail(f), Fault: f,
			DecisionID: out.DecisionID, Route: out.Route, Operation: out.Operation})
	}
	st.plan = p
	st.sent = time.Now()
	mut := &extprocv3.HeaderMutation{}
	set := map[string]bool{}
	for _, k := range slices.Sorted(maps.Keys(p.Header)) {
		mut.SetHeaders = append(mut.SetHeaders, setHeader(k, p.Header.Get(k)))
		set[strings.ToLower(k)] = true
	}
	for _, k := range append(slices.Clone(st.remove), p.Drop...) {
		if !set[strings.ToLower(k)] {
			mut.RemoveHeaders = append(mut.RemoveHeaders, strings.ToLower(k))
		}
	}
	common := &extprocv3.CommonResponse{HeaderMutation: mut}
	if !onBody {
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
			RequestHeaders: &extprocv3.HeadersResponse{Response: common}}}
	}
	if !bytes.Equal(p.Body, received) { // nil and empty alike
		// The push config writ keeps itself is not the agent's to see.
		common.BodyMutation = &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: p.Body}}
		mut.SetHeaders = append(mut.SetHeaders, setHeader("content-length", strconv.Itoa(len(p.Body))))
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{
		RequestBody: &extprocv3.BodyResponse{Response: common}}}
}

// needsAnswer: operations whose answer writ must rewrite before the caller
// sees it (a listing filtered to the caller's tasks, the extended card).
func needsAnswer(op task.Operation) bool { return proxy.RewritesAnswer(op) }

// immediate is writ's own answer, sent by Envoy to the client as is. A
// refusal is never an HTTP 200: a JSON-RPC error, which the sidecar sends on
// 200 as A2A servers do, gets the status the REST binding gives its fault,
// so Envoy's access log and stats see a refusal.
func (st *stream) immediate(out proxy.Outcome) *extprocv3.ProcessingResponse {
	code := out.EnvoyStatus()
	details := "writ_served"
	switch out.Kind {
	case proxy.Refuse:
		details = "writ_refused"
		if out.Fault != nil {
			details += ":" + string(out.Fault.Kind)
		}
	case proxy.NotFound:
		details = "writ_not_found"
	}
	mut := &extprocv3.HeaderMutation{}
	for _, k := range slices.Sorted(maps.Keys(out.Answer.Header)) {
		for _, v := range out.Answer.Header.Values(k) {
			mut.SetHeaders = append(mut.SetHeaders, appendHeader(k, v))
		}
	}
	if out.Answer.ContentType != "" {
		mut.SetHeaders = append(mut.SetHeaders, setHeader("content-type", out.Answer.ContentType))
	}
	if out.DecisionID != "" && out.Answer.Header.Get(writheader.Decision) == "" {
		mut.SetHeaders = append(mut.SetHeaders, setHeader(writheader.Decision, out.DecisionID))
	}
	if out.Answer.Header.Get(writheader.AnsweredBy) == "" {
		// The door's own answers (a request it could not read) are writ's too.
		mut.SetHeaders = append(mut.SetHeaders, setHeader(writheader.AnsweredBy, writheader.Writ))
	}
	st.ev.Status = code
	st.report()
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocv3.ImmediateResponse{Status: httpStatus(code), Headers: mut, Body: out.Answer.Body,
			Details: details}}}
}

// plain is a plain-text answer of writ's, for what no adapter could read.
func (st *stream) plain(code int, msg string) *extprocv3.ProcessingResponse {
	return st.immediate(proxy.Outcome{Kind: proxy.Refuse, Answer: wire.Rendered{Status: code,
		ContentType: "text/plain; charset=utf-8", Header: http.Header{"Cache-Control": {"no-store"}}, Body: []byte(msg + "\n")}})
}

// responseHeaders starts the answer: its kind (an SSE stream or a whole
// answer) sets the body mode writ asks Envoy for.
func (st *stream) responseHeaders(h *extprocv3.HttpHeaders) (*extprocv3.ProcessingResponse, error) {
	if st.plan == nil {
		if !st.decided {
			// The request phase never reached writ (request_header_mode:
			// SKIP): the request went to the agent undecided. Its answer
			// does not go to the caller.
			st.s.warnOnce("no_request_phase", "an answer arrived for a request writ never saw (processing_mode.request_header_mode must be SEND); it is withheld")
			return st.plain(http.StatusInternalServerError, "writ: the request was not authorized; its answer is withheld"), nil
		}
		return headersResponse(nil), nil
	}
	hdr, pseudo := envoyreq.Headers(h.GetHeaders())
	for k := range hdr {
		st.answerHeaders = append(st.answerHeaders, strings.ToLower(k))
	}
	slices.Sort(st.answerHeaders)
	code, _ := strconv.Atoi(pseudo[":status"])
	st.ev.Status, st.ev.Upstream = code, time.Since(st.sent)
	if d := st.attr(AttrCodeDetails); d != "" && d != "via_upstream" && code >= 500 {
		return st.upstreamFailed(d), nil
	}
	mut := &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader(writheader.Decision, st.out.DecisionID)}}
	if agent := hdr.Clone(); len(agent) > 0 {
		// The agent's copy of writ's mark goes: an answer that is the
		// agent's is never marked as writ's.
		if st.plan.AgentHeaders(agent); len(agent) < len(hdr) {
			mut.RemoveHeaders = append(mut.RemoveHeaders, strings.ToLower(writheader.AnsweredBy))
		}
	}
	stream, refused := st.plan.Reads(hdr)
	if refused != nil {
		// Replaced while Envoy still holds the headers; the body that
		// follows is dropped.
		st.ev.Status = refusalStatus(refused.Status)
		st.ans = &jsonAnswer{st: st, done: true}
		common := replace(*refused, st.answerHeaders)
		common.Status = extprocv3.CommonResponse_CONTINUE_AND_REPLACE
		return headersResponse(common), nil
	}
	want := modev3.ProcessingMode_BUFFERED
	if stream {
		want = modev3.ProcessingMode_STREAMED
		st.ans = newSSEAnswer(st)
	} else {
		st.ans = newJSONAnswer(st, code)
	}
	resp := &extprocv3.ProcessingResponse{}
	if h.GetEndOfStream() {
		// No body: the answer is whole now.
		common := st.ans.chunk(nil, true)
		if common != nil && common.BodyMutation != nil {
			// Replaced: the headers phase can still replace the whole answer.
			common.Status = extprocv3.CommonResponse_CONTINUE_AND_REPLACE
		}
		return headersResponse(merge(common, mut)), nil
	}
	if want != st.responseBodyMode() && st.proto != nil {
		// Envoy applies it only with allow_mode_override; without, writ works
		// with the configured mode (answerVisible).
		st.overrode = true
		resp.ModeOverride = &modev3.ProcessingMode{RequestBodyMode: st.requestBodyMode(), ResponseBodyMode: want}
	}
	resp.Response = &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{
		Response: &extprocv3.CommonResponse{HeaderMutation: mut}}}
	return resp, nil
}

// upstreamFailed replaces Envoy's own answer for an agent it could not reach
// (or that did not answer in time) by the sidecar's: the protocol-shaped
// failure, with writ's decision id.
func (st *stream) upstreamFailed(details string) *extprocv3.ProcessingResponse {
	st.s.log.Warn("upstream request failed", "agent", st.out.Route, "envoy", details)
	r, failure := st.plan.FailUpstream(strings.Contains(details, "timeout"))
	st.ev.UpstreamFailure, st.ev.Status = failure, r.Status
	st.ans = &jsonAnswer{st: st, done: true} // Envoy sends no more of it; were it to, it is dropped
	common := replace(r, st.answerHeaders)
	common.Status = extprocv3.CommonResponse_CONTINUE_AND_REPLACE
	return headersResponse(common)
}

// responseBody passes one chunk of the answer's body through the answer.
func (st *stream) responseBody(b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, error) {
	if st.ans == nil {
		if st.plan == nil {
			return bodyResponse(false, nil), nil
		}
		// Envoy skipped the answer's headers (response_header_mode: SKIP):
		// writ cannot tell a stream from a whole answer, nor the status.
		st.s.warnOnce("no_response_headers", "Envoy sent an answer's body without its headers (processing_mode.response_header_mode must be SEND); answers are not observed, and listings and extended cards are withheld")
		st.ans = &blindAnswer{st: st}
	}
	return bodyResponse(false, st.ans.chunk(b.GetBody(), b.GetEndOfStream())), nil
}

// ended is the end of the stream: Envoy closed it (io.EOF) or it broke.
func (st *stream) ended(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	if st.ctx.Err() != nil {
		return status.FromContextError(st.ctx.Err()).Err()
	}
	return err
}

// finish releases the answer and reports the request, once.
func (st *stream) finish() {
	if st.ans != nil {
		st.ans.close()
	}
	st.report()
}

// report emits the request event, once: when writ answered itself, or when
// the stream ended.
func (st *stream) report() {
	if st.reported || (st.inc == nil && st.ev.Status == 0) {
		return
	}
	st.reported = true
	if st.plan != nil {
		st.ev.InvalidAnswers = st.plan.InvalidAnswers()
		if st.ans != nil {
			st.ev.InvalidAnswers += st.ans.invalid()
		}
	}
	st.ev.Duration = time.Since(st.start)
	st.s.core.Served(st.ev)
}
