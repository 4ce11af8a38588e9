package extproc_test

import (
	"context"
	"os"
	"sort"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	modev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/writ-authz/writ/proxy/envoyreq"
)

// benchAnswer is the agent's answer the benchmarks show writ: the task the
// bench request created, completed.
const benchAnswer = `{"jsonrpc":"2.0","id":"req-7f3a","result":{"task":{"id":"t-bench","contextId":"ctx-wholesale-981","status":{"state":"TASK_STATE_COMPLETED"}}}}`

// benchStream is what Envoy sends for bench/request_allow.json (the request
// make bench-envoy sends; the token is the test issuer's for the same caller)
// and the agent's JSON answer: request headers, body, response headers, body
// — writ's request and response phases, as bench/loadgen's ext_proc door
// sends them.
func benchStream(b *testing.B, w *world) []*extprocv3.ProcessingRequest {
	b.Helper()
	raw, err := os.ReadFile("../../bench/request_allow.json")
	if err != nil {
		b.Fatal(err)
	}
	var cr authv3.CheckRequest
	if err := protojson.Unmarshal(raw, &cr); err != nil {
		b.Fatal(err)
	}
	h := cr.GetAttributes().GetRequest().GetHttp()
	h.Headers["authorization"] = "Bearer " + w.token(investigator)
	keys := make([]string, 0, len(h.Headers))
	for k := range h.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	hm := &corev3.HeaderMap{}
	for _, k := range keys {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: k, RawValue: []byte(h.Headers[k])})
	}
	resp := &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":status", RawValue: []byte("200")},
		{Key: "content-type", RawValue: []byte("application/json")}}}
	return []*extprocv3.ProcessingRequest{
		{ProtocolConfig: &extprocv3.ProtocolConfiguration{RequestBodyMode: modev3.ProcessingMode_BUFFERED,
			ResponseBodyMode: modev3.ProcessingMode_BUFFERED},
			Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: hm}}},
		{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: []byte(h.GetBody()), EndOfStream: true}}},
		{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: resp}}},
		{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: []byte(benchAnswer), EndOfStream: true}}},
	}
}

// BenchmarkProcess is one allowed request (and its JSON answer) through one
// ext_proc stream over loopback gRPC, decision cache warm: what writ adds per
// request behind Envoy, the request phase alone and both phases.
func BenchmarkProcess(b *testing.B) {
	w := newWorld(b, deployment(), nil)
	all := benchStream(b, w)
	b.Run("request", func(b *testing.B) { benchProcess(b, w, all[:2]) })
	b.Run("request+response", func(b *testing.B) { benchProcess(b, w, all) })
}

func benchProcess(b *testing.B, w *world, msgs []*extprocv3.ProcessingRequest) {
	conn, err := grpc.NewClient("passthrough:///"+w.ext.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	client := extprocv3.NewExternalProcessorClient(conn)
	once := func() {
		// The route's agent, as deploy/envoy's per-route grpc_initial_metadata sends it.
		s, err := client.Process(metadata.AppendToOutgoingContext(context.Background(), envoyreq.RouteKey, "sanctions-screening-agent"))
		if err != nil {
			b.Fatal(err)
		}
		for i, m := range msgs {
			if err := s.Send(m); err != nil {
				b.Fatal(err)
			}
			r, err := s.Recv()
			if err != nil {
				b.Fatal(err)
			}
			if r.GetImmediateResponse() != nil {
				b.Fatalf("message %d answered by writ: %s", i, r.GetImmediateResponse().GetBody())
			}
		}
		_ = s.CloseSend()
		if _, err := s.Recv(); err == nil {
			b.Fatal("the stream did not end")
		}
	}
	once()
	b.ReportAllocs()
	for b.Loop() {
		once()
	}
}
