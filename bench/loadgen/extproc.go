package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	modev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// The phases an ext_proc stream carries.
const (
	// PhaseRequest is the request phase: the request's headers, then its
	// body (BUFFERED), on which writ decides.
	PhaseRequest = "request"
	// PhaseBoth adds the response phase: the agent's answer (Answer), its
	// headers, then its body.
	PhaseBoth = "request+response"
)

// Answer is the agent's answer a PhaseBoth stream shows writ: the task the
// bench request (an A2A 1.0 SendMessage with id req-7f3a) created, completed.
// writ reads it and records the task in its lifecycle store.
const Answer = `{"jsonrpc":"2.0","id":"req-7f3a","result":{"task":{"id":"t-bench","contextId":"ctx-wholesale-981","status":{"state":"TASK_STATE_COMPLETED"}}}}`

// attributesKey is the key under which Envoy's ext_proc filter sends the
// request_attributes and response_attributes it is configured with.
const attributesKey = "envoy.filters.http.ext_proc"

// Stream is what Envoy's ext_proc filter, configured as
// deploy/envoy/envoy-extproc.yaml configures it, sends writ on one Process
// stream for the HTTP request cr describes (and, with PhaseBoth, for the
// agent's JSON Answer):
//
//   - the request headers (pseudo-headers included, with :scheme and
//     content-length, which a CheckRequest carries apart or not at all),
//     with protocol_config (request body BUFFERED, response body STREAMED)
//     and the source.address attribute;
//   - the request body, whole (BUFFERED), end_of_stream;
//   - PhaseBoth: the answer's headers (:status 200, JSON) with the
//     response.code_details attribute via_upstream, then its body, whole:
//     writ asks for BUFFERED on a JSON answer (a mode override Envoy honours
//     with allow_mode_override), so Envoy sends it in one message.
func Stream(cr *authv3.CheckRequest, phases string) ([]*extprocv3.ProcessingRequest, error) {
	if phases != PhaseRequest && phases != PhaseBoth {
		return nil, fmt.Errorf("phases %q: want %s or %s", phases, PhaseRequest, PhaseBoth)
	}
	h := cr.GetAttributes().GetRequest().GetHttp()
	if h == nil {
		return nil, errors.New("the CheckRequest has no HTTP request")
	}
	hdr := map[string]string{}
	for k, v := range h.GetHeaders() {
		hdr[k] = v
	}
	if _, ok := hdr[":scheme"]; !ok && h.GetScheme() != "" {
		hdr[":scheme"] = h.GetScheme()
	}
	if _, ok := hdr["content-length"]; !ok && len(h.GetBody()) > 0 {
		hdr["content-length"] = strconv.Itoa(len(h.GetBody()))
	}
	reqAttrs := map[string]*structpb.Value{}
	if sa := cr.GetAttributes().GetSource().GetAddress().GetSocketAddress(); sa != nil {
		reqAttrs["source.address"] = structpb.NewStringValue(fmt.Sprintf("%s:%d", sa.GetAddress(), sa.GetPortValue()))
	}
	msgs := []*extprocv3.ProcessingRequest{
		{
			ProtocolConfig: &extprocv3.ProtocolConfiguration{RequestBodyMode: modev3.ProcessingMode_BUFFERED,
				ResponseBodyMode: modev3.ProcessingMode_STREAMED},
			Attributes: attributes(reqAttrs),
			Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
				Headers: headerMap(hdr), EndOfStream: len(h.GetBody()) == 0}},
		},
	}
	if len(h.GetBody()) > 0 {
		msgs = append(msgs, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
			RequestBody: &extprocv3.HttpBody{Body: []byte(h.GetBody()), EndOfStream: true}}})
	}
	if phases == PhaseBoth {
		resp := map[string]string{":status": "200", "content-type": "application/json",
			"content-length": strconv.Itoa(len(Answer))}
		msgs = append(msgs,
			&extprocv3.ProcessingRequest{
				Attributes: attributes(map[string]*structpb.Value{"response.code_details": structpb.NewStringValue("via_upstream")}),
				Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{
					Headers: headerMap(resp)}}},
			&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
				ResponseBody: &extprocv3.HttpBody{Body: []byte(Answer), EndOfStream: true}}})
	}
	return msgs, nil
}

// routeKey names the agent of a route to writ: a CheckRequest's
// context_extensions key, and the ext_proc stream's initial metadata key
// (envoyreq.RouteKey).
const routeKey = "writ-agent"

// StreamContext is ctx carrying the agent cr's route names (its
// context_extensions writ-agent) as the initial metadata of an ext_proc
// stream, as Envoy's per-route grpc_initial_metadata sends it.
func StreamContext(ctx context.Context, cr *authv3.CheckRequest) context.Context {
	return routeContext(ctx, cr.GetAttributes().GetContextExtensions()[routeKey])
}

func routeContext(ctx context.Context, agent string) context.Context {
	if agent == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, routeKey, agent)
}

func attributes(m map[string]*structpb.Value) map[string]*structpb.Struct {
	if len(m) == 0 {
		return nil
	}
	return map[string]*structpb.Struct{attributesKey: {Fields: m}}
}

// headerMap is h as Envoy's header map: keys sorted (pseudo-headers first),
// values as raw_value.
func headerMap(h map[string]string) *corev3.HeaderMap {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	m := &corev3.HeaderMap{}
	for _, k := range keys {
		m.Headers = append(m.Headers, &corev3.HeaderValue{Key: k, RawValue: []byte(h[k])})
	}
	return m
}

const processMethod = "/envoy.service.ext_proc.v3.ExternalProcessor/Process"

var processDesc = grpc.StreamDesc{StreamName: "Process", ClientStreams: true, ServerStreams: true}

// procDoor opens one Process stream per request, as Envoy opens one per HTTP
// request, and sends the request's messages, each after writ answered the
// one before.
type procDoor struct {
	conn    *grpc.ClientConn
	streams [][]raw
	routes  []string // each stream's writ-agent metadata ("" none)
}

// newProcDoor builds and marshals every request's stream ahead of the run.
func newProcDoor(conn *grpc.ClientConn, reqs [][]byte, phases string) (*procDoor, error) {
	if phases == "" {
		phases = PhaseRequest
	}
	d := &procDoor{conn: conn, streams: make([][]raw, len(reqs)), routes: make([]string, len(reqs))}
	for i, b := range reqs {
		var cr authv3.CheckRequest
		if err := proto.Unmarshal(b, &cr); err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
		msgs, err := Stream(&cr, phases)
		if err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
		d.routes[i] = cr.GetAttributes().GetContextExtensions()[routeKey]
		for _, m := range msgs {
			b, err := proto.Marshal(m)
			if err != nil {
				return nil, err
			}
			d.streams[i] = append(d.streams[i], b)
		}
	}
	return d, nil
}

// worker plays one stream per call. An ImmediateResponse is writ answering
// the request itself (a refusal): the stream ends there, as Envoy ends it.
func (d *procDoor) worker() call {
	var resp extprocv3.ProcessingResponse
	return func(i int) (bool, error) {
		msgs := d.streams[i%len(d.streams)]
		ctx, cancel := context.WithCancel(routeContext(context.Background(), d.routes[i%len(d.routes)]))
		defer cancel()
		s, err := d.conn.NewStream(ctx, &processDesc, processMethod)
		if err != nil {
			return false, err
		}
		allowed := true
		for j := range msgs {
			if err := s.SendMsg(&msgs[j]); err != nil {
				return false, fmt.Errorf("message %d: %w", j, err)
			}
			if err := s.RecvMsg(&resp); err != nil {
				return false, fmt.Errorf("answer %d: %w", j, err)
			}
			if resp.GetImmediateResponse() != nil {
				allowed = false
				break
			}
		}
		if err := s.CloseSend(); err != nil {
			return false, err
		}
		switch err := s.RecvMsg(&resp); {
		case err == nil:
			return false, errors.New("writ answered more than it was sent")
		case !errors.Is(err, io.EOF):
			return false, err
		}
		return allowed, nil
	}
}
