// Package envoycheck plays Envoy's part of one request against writ's Envoy
// doors, so a platform engineer can try ext_authz and ext_proc before there
// is an Envoy: it sends a request read from a file as Envoy's ext_authz
// filter sends a CheckRequest (gRPC), or as its ext_proc filter opens a
// Process stream (request headers, then the buffered body), with the agent
// named the way a route of the shipped Envoy configs names it, and reads
// back what writ answered: let through (with the headers writ adds or
// removes) or answered in the agent's place (status, headers, body).
//
// It is writ's own small client rather than Envoy's test tooling because
// there is no Envoy binary to drive here, and the request phase is all a
// check needs: proxy/extproc/extproctest is the full emulator the tests use.
package envoycheck

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	modev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/proxy/envoyreq"
)

// Request is the request Envoy would show writ.
type Request struct {
	Method string
	// Target is the path and query as sent.
	Target string
	// Authority is the Host.
	Authority string
	Header    http.Header
	Body      []byte
	// Agent is the agent the Envoy route names (agents[].name); "" sends
	// none, as a route without the name would (writ refuses that unless
	// envoy.require_route_name is off).
	Agent string
}

// FromInbound is the request of a request file (wire.ReadExample), its
// target re-escaped from the parsed path and query.
func FromInbound(in wire.Inbound, agent string) Request {
	target := (&url.URL{Path: in.Path, RawQuery: in.Query.Encode()}).RequestURI()
	h := in.Header.Clone()
	host := h.Get("Host")
	h.Del("Host")
	if host == "" {
		host = "localhost"
	}
	return Request{Method: in.Method, Target: target, Authority: host, Header: h, Body: in.Body, Agent: agent}
}

// Result is what writ answered.
type Result struct {
	// Allowed: Envoy would send the request on to the agent.
	Allowed bool
	// Set and Removed are the request headers writ sets and removes on an
	// allowed request (sorted).
	Set     map[string]string
	Removed []string
	// Status, Header and Body are writ's answer in the agent's place on a
	// refused request (ext_authz's denied response, ext_proc's immediate
	// response).
	Status int
	Header http.Header
	Body   []byte
	// Details is ext_proc's details string of an immediate response.
	Details string
	// BodyReplaced: on an allowed ext_proc request, writ replaced the body
	// the agent gets (Body holds it).
	BodyReplaced bool
}

// sortedHeaders is h as Envoy's lower-cased header map.
func (r Request) headerMap() map[string]string {
	m := map[string]string{":method": r.Method, ":path": r.Target, ":authority": r.Authority, ":scheme": "http"}
	for k, vs := range r.Header {
		m[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	return m
}

// Check sends r as a gRPC ext_authz CheckRequest (the body as raw bytes, as
// with_request_body's pack_as_bytes sends it).
func Check(ctx context.Context, conn grpc.ClientConnInterface, r Request) (Result, error) {
	cr := &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: r.Method, Path: r.Target, Host: r.Authority, Headers: r.headerMap(), RawBody: r.Body,
			Size: int64(len(r.Body)), Protocol: "HTTP/1.1", Scheme: "http"}}}}
	if r.Agent != "" {
		cr.Attributes.ContextExtensions = map[string]string{envoyreq.RouteKey: r.Agent}
	}
	resp, err := authv3.NewAuthorizationClient(conn).Check(ctx, cr)
	if err != nil {
		return Result{}, fmt.Errorf("ext_authz Check: %w", err)
	}
	if ok := resp.GetOkResponse(); ok != nil {
		res := Result{Allowed: true, Set: map[string]string{}, Removed: append([]string(nil), ok.GetHeadersToRemove()...)}
		for _, h := range ok.GetHeaders() {
			res.Set[strings.ToLower(h.GetHeader().GetKey())] = h.GetHeader().GetValue()
		}
		sort.Strings(res.Removed)
		return res, nil
	}
	d := resp.GetDeniedResponse()
	if d == nil {
		return Result{}, errors.New("ext_authz Check: the answer neither allows nor denies")
	}
	res := Result{Status: int(d.GetStatus().GetCode()), Header: http.Header{}, Body: []byte(d.GetBody())}
	if res.Status == 0 {
		res.Status = http.StatusForbidden // Envoy's default for a denial without a status
	}
	for _, h := range d.GetHeaders() {
		res.Header.Add(h.GetHeader().GetKey(), h.GetHeader().GetValue())
	}
	return res, nil
}

// Process opens an ext_proc stream for r, with the agent in the stream's
// initial metadata (ExtProcPerRoute's grpc_initial_metadata), sends its
// headers and then its whole body (BUFFERED, as the shipped config asks),
// and reads writ's answers to the request phase. It does not forward the
// request or show writ an answer.
func Process(ctx context.Context, conn grpc.ClientConnInterface, r Request) (Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if r.Agent != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, envoyreq.RouteKey, r.Agent)
	}
	stream, err := extprocv3.NewExternalProcessorClient(conn).Process(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("ext_proc Process: %w", err)
	}
	defer func() { _ = stream.CloseSend() }()
	hm := &corev3.HeaderMap{}
	m := r.headerMap()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: k, RawValue: []byte(m[k])})
	}
	res := Result{Allowed: true, Set: map[string]string{}}
	bodyMode := modev3.ProcessingMode_BUFFERED
	call := func(req *extprocv3.ProcessingRequest) (*extprocv3.CommonResponse, bool, error) {
		if err := stream.Send(req); err != nil {
			return nil, false, fmt.Errorf("ext_proc send: %w", err)
		}
		resp, err := stream.Recv()
		if err != nil {
			return nil, false, fmt.Errorf("ext_proc receive: %w", err)
		}
		if ir := resp.GetImmediateResponse(); ir != nil {
			res = Result{Status: int(ir.GetStatus().GetCode()), Header: http.Header{}, Body: ir.GetBody(), Details: ir.GetDetails()}
			if res.Status < 200 {
				res.Status = http.StatusOK // Envoy's reading of an unset status
			}
			for _, h := range ir.GetHeaders().GetSetHeaders() {
				res.Header.Add(h.GetHeader().GetKey(), headerValue(h.GetHeader()))
			}
			return nil, true, nil
		}
		if mo := resp.GetModeOverride(); mo != nil {
			bodyMode = mo.GetRequestBodyMode()
		}
		var c *extprocv3.CommonResponse
		switch {
		case resp.GetRequestHeaders() != nil:
			c = resp.GetRequestHeaders().GetResponse()
		case resp.GetRequestBody() != nil:
			c = resp.GetRequestBody().GetResponse()
		default:
			return nil, false, fmt.Errorf("ext_proc: an answer to no request phase: %v", resp)
		}
		for _, h := range c.GetHeaderMutation().GetSetHeaders() {
			res.Set[strings.ToLower(h.GetHeader().GetKey())] = headerValue(h.GetHeader())
		}
		res.Removed = append(res.Removed, c.GetHeaderMutation().GetRemoveHeaders()...)
		if b := c.GetBodyMutation(); b != nil {
			res.BodyReplaced, res.Body = true, b.GetBody()
		}
		return c, false, nil
	}
	eos := len(r.Body) == 0
	_, done, err := call(&extprocv3.ProcessingRequest{
		Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: hm, EndOfStream: eos}},
		ProtocolConfig: &extprocv3.ProtocolConfiguration{RequestBodyMode: modev3.ProcessingMode_BUFFERED,
			ResponseBodyMode: modev3.ProcessingMode_BUFFERED}})
	if err != nil || done || eos || bodyMode != modev3.ProcessingMode_BUFFERED {
		sort.Strings(res.Removed)
		return res, err
	}
	if _, _, err = call(&extprocv3.ProcessingRequest{
		Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: r.Body, EndOfStream: true}}}); err != nil {
		return Result{}, err
	}
	sort.Strings(res.Removed)
	return res, nil
}

// headerValue is a header's value, raw bytes first (as Envoy reads them).
func headerValue(h *corev3.HeaderValue) string {
	if raw := h.GetRawValue(); len(raw) > 0 {
		return string(raw)
	}
	return h.GetValue()
}
