package tracing

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/otlptest"
	"github.com/writ-authz/writ/task"
)

func on(exporter, endpoint string) *config.Tracing {
	t := &config.Tracing{Exporter: exporter, Endpoint: endpoint, Insecure: true, Sampler: config.SamplerParentRatio,
		ServiceName: "writ-test", Batch: config.TracingBatch{MaxQueueSize: 64, MaxExportBatchSize: 8,
			ScheduleDelay: time.Hour, ExportTimeout: 5 * time.Second}}
	if exporter == config.TracingOTLPHTTP {
		t.URLPath = config.DefaultTracingURLPath
	}
	return t
}

// TestExportersAndHeaders: both exporters reach an OTLP receiver with the
// headers read from their file and environment variable, and Shutdown
// exports what the batch still held (its schedule delay is an hour).
func TestExportersAndHeaders(t *testing.T) {
	recv := otlptest.Start(t)
	key := filepath.Join(t.TempDir(), "otlp-key")
	if err := os.WriteFile(key, []byte("file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WRIT_TEST_OTLP_TENANT", "env-secret")
	for exporter, addr := range map[string]string{config.TracingOTLPGRPC: recv.GRPCAddr, config.TracingOTLPHTTP: recv.HTTPAddr} {
		cfg := on(exporter, addr)
		cfg.Headers = []config.TracingHeader{{Name: "X-Api-Key", ValueFile: key}, {Name: "x-tenant", ValueEnv: "WRIT_TEST_OTLP_TENANT"}}
		p, err := New(cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, span := p.Tracer().Start(context.Background(), "span-"+exporter)
		span.End()
		if err := p.Shutdown(context.Background()); err != nil {
			t.Fatalf("%s: %v", exporter, err)
		}
		spans := recv.Wait(t, func(ss []otlptest.Span) bool { return len(otlptest.Named(ss, "span-"+exporter)) == 1 })
		if s := otlptest.Named(spans, "span-"+exporter)[0]; s.Service != "writ-test" {
			t.Errorf("%s: service %q", exporter, s.Service)
		}
		_, headers := recv.Exports()
		h := headers[len(headers)-1]
		get := func(k string) string {
			for hk, v := range h {
				if strings.EqualFold(hk, k) && len(v) > 0 {
					return v[0]
				}
			}
			return ""
		}
		if get("x-api-key") != "file-secret" || get("x-tenant") != "env-secret" {
			t.Errorf("%s: the collector got headers %v", exporter, h)
		}
	}
}

// TestHeaderErrorsNameTheKey: a header whose file cannot be read refuses
// the start, naming the key and never a value.
func TestHeaderErrorsNameTheKey(t *testing.T) {
	cfg := on(config.TracingOTLPGRPC, "127.0.0.1:4317")
	cfg.Headers = []config.TracingHeader{{Name: "x-api-key", ValueFile: filepath.Join(t.TempDir(), "missing")}}
	if _, err := New(cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "tracing.headers[0].value_file") {
		t.Errorf("a missing header file: %v", err)
	}
	two := filepath.Join(t.TempDir(), "two-lines")
	if err := os.WriteFile(two, []byte("a-secret\nb"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Headers[0].ValueFile = two
	if _, err := New(cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "tracing.headers[0]") || strings.Contains(err.Error(), "a-secret") {
		t.Errorf("a two-line value: %v", err)
	}
	cfg.Headers = nil
	cfg.Insecure, cfg.TLS = false, &config.TracingTLS{CAFile: filepath.Join(t.TempDir(), "none.pem")}
	if _, err := New(cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "tracing.tls.ca_file") {
		t.Errorf("a missing CA file: %v", err)
	}
}

// TestOffIsTheStoreItself: tracing off, Store returns the store as given
// (no wrapper on the request path) and the tracer makes no spans.
func TestOffIsTheStoreItself(t *testing.T) {
	p, err := New(nil, nil, nil)
	if err != nil || p.On() {
		t.Fatalf("off: %v %v", p.On(), err)
	}
	st := task.NewMemoryStore(task.MemoryLimits{})
	if p.Store(st, "memory") != task.Store(st) {
		t.Error("off wraps the store")
	}
	if _, s := p.Tracer().Start(context.Background(), "x"); s.SpanContext().IsValid() || s.IsRecording() {
		t.Error("off makes spans")
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestStoreSpans: with tracing on, each store call is a span under the
// caller's (deferred writes and their Sync too); a missing task is an
// answer (no error status), an unavailable store an error, and the span
// holds the error's class, never its text.
func TestStoreSpans(t *testing.T) {
	recv := otlptest.Start(t)
	p, err := New(on(config.TracingOTLPGRPC, recv.GRPCAddr), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := p.Store(task.NewMemoryStore(task.MemoryLimits{MaxTasks: 10, MaxPerOwner: 10, TTL: time.Hour}), "memory")
	ctx, parent := p.Tracer().Start(context.Background(), "request")
	ref := task.Ref{Agent: "a", ID: "t-1"}
	if _, ok, err := st.Get(ctx, ref); ok || err != nil {
		t.Fatalf("get: %v %v", ok, err)
	}
	d := task.Defer(st)
	if err := d.Create(ctx, task.Record{Agent: "a", Task: task.Task{ID: "t-1", State: task.Queued}}); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	down := p.Store(failing{task.NewMemoryStore(task.MemoryLimits{})}, "redis")
	if _, _, err := down.Get(ctx, ref); err == nil {
		t.Fatal("the failing store did not fail")
	}
	parent.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := recv.Wait(t, func(ss []otlptest.Span) bool { return len(ss) == 5 })
	byName := map[string][]otlptest.Span{}
	for _, s := range spans {
		byName[s.GetName()] = append(byName[s.GetName()], s)
	}
	req := byName["request"][0]
	for _, name := range []string{"writ.store.get", "writ.store.create", "writ.store.sync"} {
		if len(byName[name]) == 0 {
			t.Fatalf("no %s span: %v", name, byName)
		}
		for _, s := range byName[name] {
			if s.Parent() != req.ID() || s.Attr("db.operation.name") == "" {
				t.Errorf("%s: parent %s, operation %q", name, s.Parent(), s.Attr("db.operation.name"))
			}
		}
	}
	gets := byName["writ.store.get"]
	if len(gets) != 2 || gets[0].GetStatus().GetCode().String() == "STATUS_CODE_ERROR" ||
		gets[1].GetStatus().GetCode().String() != "STATUS_CODE_ERROR" || gets[1].Attr("error.type") != "unavailable" ||
		gets[1].Attr("writ.store.kind") != "redis" {
		t.Errorf("gets: %v", gets)
	}
	raw, _ := recv.Exports()
	for _, r := range raw {
		if strings.Contains(string(r), "10.0.0.7") {
			t.Error("a store error's text was exported")
		}
	}
}

// failing is a store whose reads fail as a Redis that is down does.
type failing struct{ task.Store }

func (failing) Get(context.Context, task.Ref) (task.Record, bool, error) {
	return task.Record{}, false, errors.Join(task.ErrUnavailable, errors.New("dial tcp 10.0.0.7:6379: connection refused"))
}

// TestFailedExportsAreCounted: a collector that refuses the spans costs
// them, never a request: each failed export is counted and reported (writ
// counts it under writ_component_errors_total{component="tracing"}).
func TestFailedExportsAreCounted(t *testing.T) {
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusBadRequest)
	}))
	defer refusing.Close()
	var reported atomic.Int32
	p, err := New(on(config.TracingOTLPHTTP, strings.TrimPrefix(refusing.URL, "http://")), nil, func() { reported.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.Tracer().Start(context.Background(), "lost")
	span.End()
	_ = p.Shutdown(context.Background()) // the flush's export fails: what it returns is the SDK's
	if p.Failures() != 1 || reported.Load() != 1 {
		t.Errorf("failures %d, reported %d; want 1 and 1", p.Failures(), reported.Load())
	}
}
