package extproc_test

import (
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/writ-authz/writ/proxy/extproc"
)

// TestAttributesWhereEnvoySendsThem: writ reads the attributes in
// ProcessingRequest.attributes, and on the headers messages (where an Envoy
// from before that field sent them) only when the request has none of its own.
func TestAttributesWhereEnvoySendsThem(t *testing.T) {
	set := func(name, v string) map[string]*structpb.Struct {
		return map[string]*structpb.Struct{extproc.AttributesKey: {Fields: map[string]*structpb.Value{name: structpb.NewStringValue(v)}}}
	}
	reqHeaders := func(top, legacy map[string]*structpb.Struct) *extprocv3.ProcessingRequest {
		return &extprocv3.ProcessingRequest{Attributes: top, Request: &extprocv3.ProcessingRequest_RequestHeaders{
			RequestHeaders: &extprocv3.HttpHeaders{Attributes: legacy}}} //nolint:staticcheck // the older Envoy's message
	}
	respHeaders := func(top, legacy map[string]*structpb.Struct) *extprocv3.ProcessingRequest {
		return &extprocv3.ProcessingRequest{Attributes: top, Request: &extprocv3.ProcessingRequest_ResponseHeaders{
			ResponseHeaders: &extprocv3.HttpHeaders{Attributes: legacy}}} //nolint:staticcheck // the older Envoy's message
	}
	const addr = "10.0.0.1:5000"
	for _, c := range []struct {
		what string
		name string
		reqs []*extprocv3.ProcessingRequest
		want string
	}{
		{"ProcessingRequest.attributes", extproc.AttrSourceAddress,
			[]*extprocv3.ProcessingRequest{reqHeaders(set(extproc.AttrSourceAddress, addr), nil)}, addr},
		{"request headers only (older Envoy)", extproc.AttrSourceAddress,
			[]*extprocv3.ProcessingRequest{reqHeaders(nil, set(extproc.AttrSourceAddress, addr))}, addr},
		{"response headers only (older Envoy)", extproc.AttrCodeDetails,
			[]*extprocv3.ProcessingRequest{reqHeaders(nil, nil), respHeaders(nil, set(extproc.AttrCodeDetails, "via_upstream"))}, "via_upstream"},
		{"both: ProcessingRequest.attributes wins", extproc.AttrSourceAddress,
			[]*extprocv3.ProcessingRequest{reqHeaders(set(extproc.AttrSourceAddress, addr), set(extproc.AttrSourceAddress, "192.0.2.9:1"))}, addr},
		{"response attributes beside the request's", extproc.AttrSourceAddress,
			[]*extprocv3.ProcessingRequest{reqHeaders(set(extproc.AttrSourceAddress, addr), nil),
				respHeaders(set(extproc.AttrCodeDetails, "via_upstream"), nil)}, addr},
	} {
		if got := extproc.KeptAttribute(c.name, c.reqs...); got != c.want {
			t.Errorf("%s: %s = %q, want %q", c.what, c.name, got, c.want)
		}
	}
}
