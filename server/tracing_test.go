package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/otlptest"
)

// The caller's trace context in the tracing tests.
const (
	callerTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpanID  = "00f067aa0ba902b7"
	callerParent  = "00-" + callerTraceID + "-" + callerSpanID + "-01"
	callerState   = "congo=t61rcWkgMzE"
	// secretText is message content: no span may carry it.
	secretText = "Screen Acme Trading FZE, account 4417-SECRET-CONTENT"
)

// tracedAgent is a small A2A agent (the a2a-go v0.3.3 server) instrumented
// with OpenTelemetry as an agent of one's own would be: W3C trace context
// read with OTel's propagator, its own span (agent.handle, service
// "test-agent") exported through the same OTLP exporter to the receiver.
type tracedAgent struct {
	URL string
	tp  *sdktrace.TracerProvider
	mu  sync.Mutex
	hdr []http.Header // the headers of every request it received
}

// echoExecutor is the traced agent's work.
type echoExecutor struct{}

// Execute completes a new task at once: writ records it (store calls).
func (echoExecutor) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	if err := q.Write(ctx, a2a.NewSubmittedTask(rc, rc.Message)); err != nil {
		return err
	}
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCompleted,
		a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, a2a.TextPart{Text: "Screening complete."}))
	ev.Final = true
	return q.Write(ctx, ev)
}

func (echoExecutor) Cancel(context.Context, *a2asrv.RequestContext, eventqueue.Queue) error {
	return nil
}

func startTracedAgent(t *testing.T, collector string) *tracedAgent {
	t.Helper()
	exp, err := otlptracegrpc.New(t.Context(), otlptracegrpc.WithEndpoint(collector), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	a := &tracedAgent{tp: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("test-agent"))))}
	t.Cleanup(func() { _ = a.tp.Shutdown(context.Background()) })
	tracer := a.tp.Tracer("test-agent")
	rpc := a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(echoExecutor{}))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.hdr = append(a.hdr, r.Header.Clone())
		a.mu.Unlock()
		ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, "agent.handle", trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		rpc.ServeHTTP(w, r.WithContext(ctx))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	a.URL = "http://" + ln.Addr().String()
	return a
}

// headers are the headers of the requests the agent received.
func (a *tracedAgent) headers() []http.Header {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]http.Header(nil), a.hdr...)
}

// tracingOn is a tracing: section exporting to the receiver over gRPC, with
// the defaults Load applies and a short batch delay.
func tracingOn(addr string) *config.Tracing {
	return &config.Tracing{Exporter: config.TracingOTLPGRPC, Endpoint: addr, Insecure: true,
		Sampler: config.SamplerParentRatio, ServiceName: config.DefaultTracingServiceName,
		Batch: config.TracingBatch{MaxQueueSize: config.DefaultTracingMaxQueue, MaxExportBatchSize: config.DefaultTracingMaxBatch,
			ScheduleDelay: 50 * time.Millisecond, ExportTimeout: 5 * time.Second}}
}

// benchToken is the seed's caller: payments-investigator for u-42, tenant
// wholesale, scope delegate.
func benchToken(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("testdata/identity/bench_token.txt")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(raw))
}

// sendTraced sends an allowed message/send with the token and secretText
// through the sidecar, with the trace context headers given (none when
// empty), and returns the answer's status.
func sendTraced(t *testing.T, base, token string, traceHeaders map[string]string) int {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-1","role":"user","parts":[{"kind":"text","text":"` + secretText + `"}]}}}`
	req, err := http.NewRequest(http.MethodPost, base+"/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range traceHeaders {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Contains(raw, []byte("Screening complete.")) {
		t.Fatalf("the send was not answered by the agent: %d %s", resp.StatusCode, raw)
	}
	return resp.StatusCode
}

// decisionLines reads the decision lines of a decision log file.
func decisionLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("a line that is not JSON: %s", sc.Bytes())
		}
		if m["type"] == "decision" || m["path"] != nil {
			out = append(out, m)
		}
	}
	return out
}

// oneSpan is the one span named name of the trace, failing the test
// otherwise.
func oneSpan(t *testing.T, spans []otlptest.Span, name string) otlptest.Span {
	t.Helper()
	got := otlptest.Named(spans, name)
	if len(got) != 1 {
		t.Fatalf("%d spans named %s, want 1", len(got), name)
	}
	return got[0]
}

// TestTraceAcrossTheDelegation: a request through a real writ sidecar
// (server.New) to an agent instrumented with OTel is one trace at an OTLP
// receiver on loopback: writ's admit span is the child of the caller's
// traceparent, identify, decide and the store's calls its children, the
// forward its child too, and the agent's own span the child of the
// forward (the agent got the forward's traceparent and the caller's
// tracestate). The decision line carries the trace id and the decide
// span's id, in the writ format and in OPA's.
func TestTraceAcrossTheDelegation(t *testing.T) {
	for _, format := range []string{"writ", "opa"} {
		t.Run(format, func(t *testing.T) {
			recv := otlptest.Start(t)
			agent := startTracedAgent(t, recv.GRPCAddr)
			logPath := filepath.Join(t.TempDir(), "decisions.log")
			cfg := seed(t, func(c *config.Config) {
				c.Agents[0].Upstream = agent.URL
				c.Tracing = tracingOn(recv.GRPCAddr)
				c.DecisionLog.Output, c.DecisionLog.Format = logPath, format
			})
			s, err := New(t.Context(), cfg, WithLogger(quiet()), WithoutPolicyTests())
			if err != nil {
				t.Fatal(err)
			}
			sendTraced(t, s.URL(), benchToken(t), map[string]string{"traceparent": callerParent, "tracestate": callerState})
			shutdown(t, s) // flushes writ's spans and the decision log

			spans := recv.Wait(t, func(ss []otlptest.Span) bool {
				return len(otlptest.Named(ss, "agent.handle")) == 1 && len(otlptest.Named(ss, "writ.forward")) == 1
			})
			admit, forward := oneSpan(t, spans, "writ.admit"), oneSpan(t, spans, "writ.forward")
			identify, decide := oneSpan(t, spans, "writ.identify"), oneSpan(t, spans, "writ.decide")
			handled := oneSpan(t, spans, "agent.handle")
			for _, s := range []otlptest.Span{admit, forward, identify, decide, handled} {
				if s.TraceID() != callerTraceID {
					t.Errorf("%s is in trace %s, not the caller's %s", s.GetName(), s.TraceID(), callerTraceID)
				}
			}
			if admit.Parent() != callerSpanID || admit.Service != "writ" || admit.GetKind().String() != "SPAN_KIND_SERVER" {
				t.Errorf("admit: parent %s (want the caller's %s), service %q, kind %s", admit.Parent(), callerSpanID, admit.Service, admit.GetKind())
			}
			for _, s := range []otlptest.Span{identify, decide, forward} {
				if s.Parent() != admit.ID() {
					t.Errorf("%s's parent is %s, not the admit span %s", s.GetName(), s.Parent(), admit.ID())
				}
			}
			if handled.Parent() != forward.ID() || handled.Service != "test-agent" {
				t.Errorf("the agent's span: parent %s, want writ's forward %s (service %q)", handled.Parent(), forward.ID(), handled.Service)
			}
			hs := agent.headers()
			if len(hs) != 1 || hs[0].Get("Traceparent") != "00-"+callerTraceID+"-"+forward.ID()+"-01" || hs[0].Get("Tracestate") != callerState {
				t.Errorf("the agent got traceparent %q and tracestate %q", hs[0].Get("Traceparent"), hs[0].Get("Tracestate"))
			}
			stores := 0
			for _, s := range spans {
				if strings.HasPrefix(s.GetName(), "writ.store.") {
					stores++
					if s.TraceID() != callerTraceID || (s.Parent() != admit.ID() && s.Parent() != forward.ID()) {
						t.Errorf("%s: trace %s parent %s, want under the admit or forward span", s.GetName(), s.TraceID(), s.Parent())
					}
				}
			}
			if stores == 0 {
				t.Error("no span of a store call")
			}
			for k, want := range map[string]string{"writ.route": "sanctions-screening-agent", "writ.operation": "send",
				"writ.outcome": "forward", "writ.mode": "sidecar", "writ.decision.id": decide.Attr("writ.decision.id")} {
				if got := admit.Attr(k); got != want || got == "" {
					t.Errorf("admit %s = %q, want %q", k, got, want)
				}
			}
			if forward.Attr("http.response.status_code") == "" || forward.Attr("server.address") != "127.0.0.1" {
				t.Errorf("forward attributes %v", forward.GetAttributes())
			}

			lines := decisionLines(t, logPath)
			if len(lines) != 1 {
				t.Fatalf("%d decision lines", len(lines))
			}
			if lines[0]["trace_id"] != callerTraceID || lines[0]["span_id"] != decide.ID() {
				t.Errorf("the decision line has trace_id %v span_id %v, want %s and the decide span's %s",
					lines[0]["trace_id"], lines[0]["span_id"], callerTraceID, decide.ID())
			}
			if lines[0]["decision_id"] != decide.Attr("writ.decision.id") {
				t.Errorf("the line's decision %v, the span's %s", lines[0]["decision_id"], decide.Attr("writ.decision.id"))
			}
		})
	}
}

// TestNoSecretInAnySpan: what writ exports never holds the caller's token,
// its message text or its Authorization header, in any span, attribute,
// event or resource, nor in the export's headers.
//
// Threat: traces leave the host for a shared collector that many teams
// read; a span that records a request's headers, body or a credential hands
// the caller's token and the delegated task's content to all of them.
// Defence: writ's spans carry only what the decision log's lines do of a
// request (ids, route, operation, codes, status), set attribute by
// attribute, never a header's value, a denial's reason or the body; this
// test reads every exported byte.
func TestNoSecretInAnySpan(t *testing.T) {
	recv := otlptest.Start(t)
	agent := startTracedAgent(t, recv.GRPCAddr)
	cfg := seed(t, func(c *config.Config) {
		c.Agents[0].Upstream = agent.URL
		c.Tracing = tracingOn(recv.GRPCAddr)
	})
	s, err := New(t.Context(), cfg, WithLogger(quiet()), WithoutPolicyTests())
	if err != nil {
		t.Fatal(err)
	}
	token := benchToken(t)
	sendTraced(t, s.URL(), token, map[string]string{"traceparent": callerParent})
	// A refused request too: its spans carry codes, never the credential.
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-2","role":"user","parts":[{"kind":"text","text":"`+secretText+`"}]}}}`))
	req.Header.Set("Authorization", "Bearer "+token+"x")
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	shutdown(t, s)
	recv.Wait(t, func(ss []otlptest.Span) bool { return len(otlptest.Named(ss, "writ.admit")) == 2 })
	raw, headers := recv.Exports()
	sig := token[strings.LastIndex(token, ".")+1:]
	for i, r := range raw {
		for _, secret := range []string{token, sig, secretText, "SECRET-CONTENT", "Bearer"} {
			if bytes.Contains(r, []byte(secret)) {
				t.Errorf("export %d holds %.24q", i, secret)
			}
		}
		for k, vs := range headers[i] {
			if strings.Contains(strings.Join(vs, " "), sig) {
				t.Errorf("export %d's header %s holds the token", i, k)
			}
		}
	}
	if len(raw) == 0 {
		t.Fatal("nothing was exported")
	}
}

// TestMalformedTraceparentStartsANewTrace: a traceparent writ cannot read
// is no trace context: the request is served as any other, its admit span
// is the root of a new trace, and the agent gets that trace's context, not
// the caller's broken header nor its tracestate.
//
// Threat: a caller sends a malformed or hostile traceparent (bad hex, an
// all-zero trace id, an unknown version with junk) to make writ fail the
// request, or to have it pass the bytes on to the agent's tracer and
// collector as if writ had vouched for them. Defence: OTel's W3C propagator
// reads it as no context (never an error), and the forward replaces every
// trace context header with writ's own span's.
func TestMalformedTraceparentStartsANewTrace(t *testing.T) {
	recv := otlptest.Start(t)
	agent := startTracedAgent(t, recv.GRPCAddr)
	cfg := seed(t, func(c *config.Config) {
		c.Agents[0].Upstream = agent.URL
		c.Tracing = tracingOn(recv.GRPCAddr)
	})
	s, err := New(t.Context(), cfg, WithLogger(quiet()), WithoutPolicyTests())
	if err != nil {
		t.Fatal(err)
	}
	bad := []string{
		"00-zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-" + callerTraceID + "-0000000000000000-01",
		"ff-" + callerTraceID + "-" + callerSpanID + "-01",
		"garbage",
	}
	for _, tp := range bad {
		sendTraced(t, s.URL(), benchToken(t), map[string]string{"traceparent": tp, "tracestate": callerState})
	}
	shutdown(t, s)
	spans := recv.Wait(t, func(ss []otlptest.Span) bool { return len(otlptest.Named(ss, "writ.forward")) == len(bad) })
	admits := otlptest.Named(spans, "writ.admit")
	seen := map[string]bool{}
	for _, a := range admits {
		if a.Parent() != "" || a.TraceID() == callerTraceID || seen[a.TraceID()] {
			t.Errorf("admit span: trace %s parent %q: want the root of a trace of its own", a.TraceID(), a.Parent())
		}
		seen[a.TraceID()] = true
	}
	for i, h := range agent.headers() {
		tp := h.Get("Traceparent")
		if len(tp) != 55 || !seen[tp[3:35]] || h.Get("Tracestate") != "" {
			t.Errorf("request %d: the agent got traceparent %q, tracestate %q", i, tp, h.Get("Tracestate"))
		}
	}
}

// TestTracingOffByDefault: without tracing: nothing is exported (not even
// with OTel's environment variables pointing at a collector), the agent
// gets no trace context header writ made — a caller's own passes as sent —
// and the decision line has no trace_id.
func TestTracingOffByDefault(t *testing.T) {
	recv := otlptest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+recv.GRPCAddr)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://"+recv.GRPCAddr)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	agent := startTracedAgent(t, recv.GRPCAddr)
	logPath := filepath.Join(t.TempDir(), "decisions.log")
	cfg := seed(t, func(c *config.Config) {
		c.Agents[0].Upstream = agent.URL
		c.DecisionLog.Output = logPath
	})
	if cfg.Tracing != nil {
		t.Fatal("the seed configures tracing")
	}
	s, err := New(t.Context(), cfg, WithLogger(quiet()), WithoutPolicyTests())
	if err != nil {
		t.Fatal(err)
	}
	sendTraced(t, s.URL(), benchToken(t), nil)
	sendTraced(t, s.URL(), benchToken(t), map[string]string{"traceparent": callerParent})
	shutdown(t, s)
	hs := agent.headers()
	if len(hs) != 2 || hs[0].Get("Traceparent") != "" || hs[0].Get("Tracestate") != "" || hs[1].Get("Traceparent") != callerParent {
		t.Errorf("the agent got trace context %q then %q", hs[0].Get("Traceparent"), hs[1].Get("Traceparent"))
	}
	// The agent's own spans arrive; writ's never do.
	spans := recv.Wait(t, func(ss []otlptest.Span) bool { return len(ss) >= 2 })
	time.Sleep(200 * time.Millisecond)
	for _, sp := range recv.Spans() {
		if sp.Service != "test-agent" {
			t.Errorf("writ exported %s (service %q) with tracing off", sp.GetName(), sp.Service)
		}
	}
	if len(spans) < 2 {
		t.Fatal("the agent's spans did not arrive")
	}
	for _, l := range decisionLines(t, logPath) {
		if _, ok := l["trace_id"]; ok {
			t.Errorf("a decision line with trace_id while tracing is off: %v", l)
		}
	}
}

// TestEnvoyCheckReadsTraceContext: behind Envoy, the trace context is the
// one Envoy forwards in the request headers of its check: writ's admit
// span (writ.mode ext_authz) is its child.
func TestEnvoyCheckReadsTraceContext(t *testing.T) {
	recv := otlptest.Start(t)
	cfg := seed(t, func(c *config.Config) {
		c.Envoy.GRPCListen = "127.0.0.1:0"
		c.Tracing = tracingOn(recv.GRPCAddr)
	})
	s, err := New(t.Context(), cfg, WithLogger(quiet()), WithoutPolicyTests())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("passthrough:///"+s.ListenerAddr("envoy.grpc_listen"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-1","role":"user","parts":[{"kind":"text","text":"` + secretText + `"}]}}}`
	resp, err := authv3.NewAuthorizationClient(conn).Check(t.Context(), &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		ContextExtensions: map[string]string{"writ-agent": "sanctions-screening-agent"},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: http.MethodPost, Path: "/", Host: "writ.test", Protocol: "HTTP/1.1", Scheme: "http",
			Headers: map[string]string{":method": http.MethodPost, ":path": "/", ":authority": "writ.test",
				"content-type": "application/json", "authorization": "Bearer " + benchToken(t),
				"traceparent": callerParent, "tracestate": callerState},
			RawBody: []byte(body), Size: int64(len(body))}}}})
	if err != nil || resp.GetOkResponse() == nil {
		t.Fatalf("check: %v %v", resp, err)
	}
	shutdown(t, s)
	admit := oneSpan(t, recv.Wait(t, func(ss []otlptest.Span) bool { return len(otlptest.Named(ss, "writ.admit")) == 1 }), "writ.admit")
	if admit.TraceID() != callerTraceID || admit.Parent() != callerSpanID || admit.Attr("writ.mode") != "ext_authz" {
		t.Errorf("admit: trace %s parent %s mode %q, want the trace context Envoy forwarded", admit.TraceID(), admit.Parent(), admit.Attr("writ.mode"))
	}
}
