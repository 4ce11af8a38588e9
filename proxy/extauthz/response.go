package extauthz

import (
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/envoyreq"
	"github.com/writ-authz/writ/proxy/writheader"
)

// The dynamic_metadata keys of every CheckResponse (namespace
// envoy.filters.http.ext_authz in Envoy), for access logs and later filters.
const (
	MetaDecisionID = "decision_id" // the decision's id, as in writ's decision log
	MetaAllow      = "allow"       // writ's verdict: true when the request goes to the agent
	MetaDenials    = "denials"     // the denial codes, in the policy's order
	MetaOperation  = "operation"   // the internal operation (send, get, card, ...)
	MetaProtocol   = "protocol"    // "a2a/1.0/jsonrpc", "acp/0.2/rest", ...
	MetaStatus     = "status"      // the HTTP status of writ's own answer, when it answers
	MetaDryRun     = "dry_run"     // true when envoy.dry_run let a refused request through
)

// okResponse lets the request through with the headers the sidecar would set.
// Headers are set, never appended (OVERWRITE_IF_EXISTS_OR_ADD), so an inbound
// copy of Writ-Caller is replaced; remove lists the other spellings of writ's
// headers the request carried (Envoy applies removals after it sets headers,
// so a header in both lists would reach the agent not at all).
func okResponse(out proxy.Outcome, remove []string, dry bool) *authv3.CheckResponse {
	set := map[string]string{}
	if out.Plan != nil {
		for k := range out.Plan.Header {
			set[k] = out.Plan.Header.Get(k)
		}
	}
	if dry && out.DecisionID != "" {
		// A would-be refusal has no upstream headers; the decision id still
		// finds it in the log.
		set = map[string]string{writheader.Decision: out.DecisionID}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ok := &authv3.OkHttpResponse{Headers: make([]*corev3.HeaderValueOption, 0, len(keys))}
	for _, k := range keys {
		ok.Headers = append(ok.Headers, &corev3.HeaderValueOption{
			Header:       &corev3.HeaderValue{Key: strings.ToLower(k), Value: set[k]},
			AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
		})
	}
	for _, k := range remove {
		if _, isSet := set[http.CanonicalHeaderKey(k)]; !isSet {
			ok.HeadersToRemove = append(ok.HeadersToRemove, strings.ToLower(k))
		}
	}
	if !dry && !slices.Contains(ok.HeadersToRemove, strings.ToLower(writheader.Caller)) {
		if _, isSet := set[writheader.Caller]; !isSet {
			ok.HeadersToRemove = append(ok.HeadersToRemove, strings.ToLower(writheader.Caller))
		}
	}
	return &authv3.CheckResponse{
		Status:          &rpcstatus.Status{Code: int32(codes.OK)},
		HttpResponse:    &authv3.CheckResponse_OkResponse{OkResponse: ok},
		DynamicMetadata: metadata(out, dry),
	}
}

// deniedResponse is writ's own answer — a refusal in the request's protocol
// shape, or a card or directory writ serves — sent by Envoy to the client as is:
// status, content type and body.
func deniedResponse(out proxy.Outcome) *authv3.CheckResponse {
	st := out.EnvoyStatus()
	code, msg := grpcCode(st), http.StatusText(st)
	if out.Fault != nil {
		// The status message names the fault, for Envoy's logs.
		msg = string(out.Fault.Kind) + ": " + out.Fault.Message
	}
	hdrs := []*corev3.HeaderValueOption{header("cache-control", "no-store")}
	for _, k := range slices.Sorted(maps.Keys(out.Answer.Header)) {
		if k == "Cache-Control" {
			continue
		}
		hdrs = append(hdrs, header(strings.ToLower(k), out.Answer.Header.Get(k)))
	}
	if out.Answer.ContentType != "" {
		hdrs = append(hdrs, header("content-type", out.Answer.ContentType))
	}
	if out.DecisionID != "" && out.Answer.Header.Get(writheader.Decision) == "" {
		hdrs = append(hdrs, header(strings.ToLower(writheader.Decision), out.DecisionID))
	}
	if out.Answer.Header.Get(writheader.AnsweredBy) == "" {
		// The door's own answers (a check it could not read) are writ's too.
		hdrs = append(hdrs, header(strings.ToLower(writheader.AnsweredBy), writheader.Writ))
	}
	return &authv3.CheckResponse{
		Status: &rpcstatus.Status{Code: int32(code), Message: msg},
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(st)},
			Headers: hdrs,
			Body:    string(out.Answer.Body),
		}},
		DynamicMetadata: metadata(out, false),
	}
}

// grpcDeniedResponse is writ's own answer to a gRPC call: Envoy answers a
// gRPC call it does not forward with a trailers-only response (HTTP 200)
// whose grpc-status is the denied response's header when it has one, and
// whose grpc-message is the body when there is one, else the header. So the
// status goes in the headers, with its details (grpc-status-details-bin:
// the ErrorInfo of every denial code, as the sidecar's gRPC door sends
// them), and the body stays empty. The HTTP status, which the client never
// sees, is the one Envoy's logs and stats count (out.EnvoyStatus).
func grpcDeniedResponse(out proxy.Outcome) *authv3.CheckResponse {
	code, h := envoyreq.GRPCAnswer(out.Answer)
	if out.DecisionID != "" && h.Get(writheader.Decision) == "" {
		h.Set(writheader.Decision, out.DecisionID)
	}
	if h.Get(writheader.AnsweredBy) == "" {
		h.Set(writheader.AnsweredBy, writheader.Writ)
	}
	hdrs := make([]*corev3.HeaderValueOption, 0, len(h))
	for _, k := range slices.Sorted(maps.Keys(h)) {
		hdrs = append(hdrs, header(strings.ToLower(k), h.Get(k)))
	}
	st := out.EnvoyStatus()
	if st < 300 {
		st = wire.GRPCStatusHTTP(uint32(code))
	}
	msg := h.Get(envoyreq.GRPCMessageKey)
	if out.Fault != nil {
		msg = string(out.Fault.Kind) + ": " + out.Fault.Message
	}
	return &authv3.CheckResponse{
		Status: &rpcstatus.Status{Code: int32(code), Message: msg},
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(st)},
			Headers: hdrs,
		}},
		DynamicMetadata: metadata(out, false),
	}
}

// grpcCode is the gRPC status of a check whose answer writ gives itself: the
// refusal's kind, or PermissionDenied for writ's own answers (a card, the
// directory), which Envoy must not let through to the agent either.
func grpcCode(status int) codes.Code {
	switch status {
	case http.StatusBadRequest, http.StatusUnsupportedMediaType:
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusRequestEntityTooLarge:
		return codes.ResourceExhausted
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return codes.Unavailable
	case http.StatusInternalServerError:
		return codes.Internal
	}
	return codes.PermissionDenied
}

func header(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
}

// metadata is the outcome as dynamic_metadata.
func metadata(out proxy.Outcome, dry bool) *structpb.Struct {
	f := make(map[string]*structpb.Value, 7)
	allow := out.Kind == proxy.Forward
	f[MetaAllow] = structpb.NewBoolValue(allow)
	if out.DecisionID != "" {
		f[MetaDecisionID] = structpb.NewStringValue(out.DecisionID)
	}
	if len(out.Denials) > 0 {
		list := make([]*structpb.Value, len(out.Denials))
		for i, d := range out.Denials {
			list[i] = structpb.NewStringValue(d.Code)
		}
		f[MetaDenials] = structpb.NewListValue(&structpb.ListValue{Values: list})
	}
	if out.Operation != "" {
		f[MetaOperation] = structpb.NewStringValue(string(out.Operation))
	}
	if p := out.Protocol; p.Name != "" {
		f[MetaProtocol] = structpb.NewStringValue(p.Name + "/" + p.Version + "/" + string(p.Binding))
	}
	if !allow {
		f[MetaStatus] = structpb.NewNumberValue(float64(out.EnvoyStatus()))
	}
	if dry {
		f[MetaDryRun] = structpb.NewBoolValue(true)
	}
	return &structpb.Struct{Fields: f}
}

// plainAnswer is a plain-text answer, for requests no adapter could read.
func plainAnswer(status int, msg string) wire.Rendered {
	return wire.Rendered{Status: status, ContentType: "text/plain; charset=utf-8", Body: []byte(msg + "\n")}
}
