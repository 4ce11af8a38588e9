package extauthz

import (
	"net/http"
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
// copy of Writ-Caller is replaced. headers_to_remove lists only headers the
// response does not set: Envoy applies removals after it sets headers, so a
// header in both lists would reach the agent not at all.
func okResponse(v proxy.Verdict, dry bool) *authv3.CheckResponse {
	keys := make([]string, 0, len(v.Upstream)+1)
	for k := range v.Upstream {
		keys = append(keys, k)
	}
	set := v.Upstream
	if dry && v.DecisionID != "" {
		// A would-be refusal has no upstream headers; the decision id still
		// finds it in the log.
		set = map[string]string{proxy.DecisionHeader: v.DecisionID}
		keys = append(keys, proxy.DecisionHeader)
	}
	sort.Strings(keys)
	ok := &authv3.OkHttpResponse{Headers: make([]*corev3.HeaderValueOption, 0, len(keys))}
	for _, k := range keys {
		ok.Headers = append(ok.Headers, &corev3.HeaderValueOption{
			Header:       &corev3.HeaderValue{Key: strings.ToLower(k), Value: set[k]},
			AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
		})
	}
	for _, k := range v.RemoveUpstream {
		if _, isSet := set[k]; !isSet {
			ok.HeadersToRemove = append(ok.HeadersToRemove, strings.ToLower(k))
		}
	}
	return &authv3.CheckResponse{
		Status:          &rpcstatus.Status{Code: int32(codes.OK)},
		HttpResponse:    &authv3.CheckResponse_OkResponse{OkResponse: ok},
		DynamicMetadata: metadata(v, dry),
	}
}

// deniedResponse is writ's own answer — a refusal in the request's protocol
// shape, or a card or directory writ serves — sent by Envoy to the client as is:
// status, content type and body.
func deniedResponse(v proxy.Verdict) *authv3.CheckResponse {
	code := codes.PermissionDenied
	if v.Answer.Status == http.StatusUnauthorized {
		code = codes.Unauthenticated
	}
	hdrs := []*corev3.HeaderValueOption{header("cache-control", "no-store")}
	if v.Answer.ContentType != "" {
		hdrs = append(hdrs, header("content-type", v.Answer.ContentType))
	}
	if v.DecisionID != "" {
		hdrs = append(hdrs, header(strings.ToLower(proxy.DecisionHeader), v.DecisionID))
	}
	return &authv3.CheckResponse{
		Status: &rpcstatus.Status{Code: int32(code), Message: http.StatusText(v.Answer.Status)},
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(v.Answer.Status)},
			Headers: hdrs,
			Body:    string(v.Answer.Body),
		}},
		DynamicMetadata: metadata(v, false),
	}
}

func header(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
}

// metadata is the verdict as dynamic_metadata.
func metadata(v proxy.Verdict, dry bool) *structpb.Struct {
	f := make(map[string]*structpb.Value, 7)
	f[MetaAllow] = structpb.NewBoolValue(v.Allow)
	if v.DecisionID != "" {
		f[MetaDecisionID] = structpb.NewStringValue(v.DecisionID)
	}
	if len(v.Denials) > 0 {
		list := make([]*structpb.Value, len(v.Denials))
		for i, d := range v.Denials {
			list[i] = structpb.NewStringValue(d.Code)
		}
		f[MetaDenials] = structpb.NewListValue(&structpb.ListValue{Values: list})
	}
	if v.Operation != "" {
		f[MetaOperation] = structpb.NewStringValue(string(v.Operation))
	}
	if p := v.Protocol; p.Name != "" {
		f[MetaProtocol] = structpb.NewStringValue(p.Name + "/" + p.Version + "/" + string(p.Binding))
	}
	if !v.Allow {
		f[MetaStatus] = structpb.NewNumberValue(float64(v.Answer.Status))
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
