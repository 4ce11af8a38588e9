// Package otlptest is an OTLP trace receiver on loopback for tests: the
// OTLP/gRPC trace service (the OTLP protos' own) and OTLP/HTTP's
// /v1/traces, keeping every span exported to it, with its service name,
// and each export's raw bytes and headers (for tests that look for what
// must never be exported).
package otlptest

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// Span is one received span with the service that exported it.
type Span struct {
	Service string
	*tracepb.Span
}

// TraceID is the span's trace id in hex.
func (s Span) TraceID() string { return hex.EncodeToString(s.Span.GetTraceId()) }

// ID is the span's id in hex.
func (s Span) ID() string { return hex.EncodeToString(s.Span.GetSpanId()) }

// Parent is the span's parent id in hex ("" for a root).
func (s Span) Parent() string { return hex.EncodeToString(s.Span.GetParentSpanId()) }

// Attr is the string form of the span's attribute k ("" when absent).
func (s Span) Attr(k string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == k {
			v := kv.GetValue()
			switch {
			case v.GetStringValue() != "":
				return v.GetStringValue()
			case v.GetArrayValue() != nil:
				out := ""
				for i, e := range v.GetArrayValue().GetValues() {
					if i > 0 {
						out += ","
					}
					out += e.GetStringValue()
				}
				return out
			}
			return prototext.Format(v)
		}
	}
	return ""
}

// Receiver keeps what is exported to it. Safe for concurrent use.
type Receiver struct {
	coltracepb.UnimplementedTraceServiceServer
	// GRPCAddr and HTTPAddr are the listeners' host:port.
	GRPCAddr, HTTPAddr string

	// discard keeps only the count of spans (StartDiscarding).
	discard bool

	mu      sync.Mutex
	count   int
	spans   []Span
	raw     [][]byte
	headers []map[string][]string
}

// Start starts a receiver on 127.0.0.1, stopped at the test's end.
func Start(t testing.TB) *Receiver { return start(t, &Receiver{}) }

// StartDiscarding starts a receiver that counts the spans it receives and
// keeps nothing else: for benchmarks, where keeping every span would be
// the receiver's cost, not the exporter's.
func StartDiscarding(t testing.TB) *Receiver { return start(t, &Receiver{discard: true}) }

func start(t testing.TB, r *Receiver) *Receiver {
	t.Helper()
	gln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, r)
	go func() { _ = gs.Serve(gln) }()
	hln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(r.serveHTTP), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(hln) }()
	r.GRPCAddr, r.HTTPAddr = gln.Addr().String(), hln.Addr().String()
	t.Cleanup(func() {
		gs.Stop()
		_ = hs.Close()
	})
	return r
}

// Export implements the OTLP/gRPC trace service.
func (r *Receiver) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	if r.discard {
		r.countOf(req)
		return &coltracepb.ExportTraceServiceResponse{}, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	raw, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	r.keep(req, raw, md)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// serveHTTP is OTLP/HTTP's trace endpoint (protobuf bodies).
func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.NotFound(w, req)
		return
	}
	raw, err := io.ReadAll(io.LimitReader(req.Body, 16<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var ex coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &ex); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.keep(&ex, raw, req.Header)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *Receiver) keep(req *coltracepb.ExportTraceServiceRequest, raw []byte, headers map[string][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.raw = append(r.raw, raw)
	r.headers = append(r.headers, headers)
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, Span{Service: service, Span: s})
			}
		}
	}
}

func (r *Receiver) countOf(req *coltracepb.ExportTraceServiceRequest) {
	n := 0
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			n += len(ss.GetSpans())
		}
	}
	r.mu.Lock()
	r.count += n
	r.mu.Unlock()
}

// Count is the number of spans received so far.
func (r *Receiver) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count + len(r.spans)
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Exports returns every export's raw protobuf bytes and its headers.
func (r *Receiver) Exports() (raw [][]byte, headers []map[string][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.raw...), append([]map[string][]string(nil), r.headers...)
}

// Wait returns the spans once done says they are all there, failing the
// test after 10s.
func (r *Receiver) Wait(t testing.TB, done func([]Span) bool) []Span {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		spans := r.Spans()
		if done(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receiver has %d spans, not the ones the test waits for", len(spans))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Named returns the spans named name.
func Named(spans []Span, name string) []Span {
	var out []Span
	for _, s := range spans {
		if s.GetName() == name {
			out = append(out, s)
		}
	}
	return out
}
