package extproc

import (
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// setHeader sets k to v, replacing any value (the value travels in
// raw_value, as the ext_proc API asks).
func setHeader(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: strings.ToLower(k), RawValue: []byte(v)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
}

// appendHeader adds one more value of k.
func appendHeader(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: strings.ToLower(k), RawValue: []byte(v)},
		AppendAction: corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD}
}

func contentLength(n int) []*corev3.HeaderValueOption {
	return []*corev3.HeaderValueOption{setHeader("content-length", strconv.Itoa(n))}
}

// clearBody drops a chunk (held back, or after the answer was replaced).
func clearBody() *extprocv3.CommonResponse {
	return &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_ClearBody{ClearBody: true}}}
}

// merge adds mut's headers to common (nil: a response with only mut).
func merge(common *extprocv3.CommonResponse, mut *extprocv3.HeaderMutation) *extprocv3.CommonResponse {
	if common == nil {
		return &extprocv3.CommonResponse{HeaderMutation: mut}
	}
	if common.HeaderMutation == nil {
		common.HeaderMutation = mut
		return common
	}
	set := map[string]bool{}
	for _, h := range common.HeaderMutation.SetHeaders {
		set[h.GetHeader().GetKey()] = true
	}
	for _, h := range mut.SetHeaders {
		if !set[h.GetHeader().GetKey()] {
			common.HeaderMutation.SetHeaders = append(common.HeaderMutation.SetHeaders, h)
		}
	}
	return common
}

func headersResponse(common *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
		ResponseHeaders: &extprocv3.HeadersResponse{Response: common}}}
}

// bodyResponse answers a body chunk of the request or of the answer.
func bodyResponse(request bool, common *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	br := &extprocv3.BodyResponse{Response: common}
	if request {
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: br}}
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: br}}
}

func httpStatus(code int) *typev3.HttpStatus {
	return &typev3.HttpStatus{Code: typev3.StatusCode(code)}
}
