// Package tracing is writ's OpenTelemetry setup: the tracer provider that
// tracing: configures (an OTLP exporter over gRPC or HTTP behind the SDK's
// batch span processor, a parent-based ratio sampler), and the lifecycle
// store's spans (Store). The admission core takes only a trace.Tracer, the
// no-op one when tracing is off, so that nothing of the SDK runs then.
package tracing

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc/credentials"

	"github.com/writ-authz/writ/config"
)

// InstrumentationName names writ's tracer (the instrumentation scope of
// every span writ makes).
const InstrumentationName = "github.com/writ-authz/writ"

// Provider is writ's tracer provider: the SDK's when tracing is on, the
// no-op one when it is off. Safe for concurrent use.
type Provider struct {
	tp     *sdktrace.TracerProvider // nil when off
	tracer trace.Tracer
	exp    *exporter
}

// Off is the provider of a writ that does not trace: its tracer is the
// no-op one, and Shutdown has nothing to do.
func Off() *Provider { return &Provider{tracer: noop.NewTracerProvider().Tracer(InstrumentationName)} }

// New builds the provider cfg describes (nil: Off). Header values are read
// from their files and environment variables here; an error names the key.
// The exporter connects lazily: a collector that is down does not stop the
// start, its failed exports are logged (log), counted (Failures) and
// reported to failed (nil: none), which writ counts in
// writ_component_errors_total{component="tracing"}.
func New(cfg *config.Tracing, log *slog.Logger, failed func()) (*Provider, error) {
	if cfg == nil {
		return Off(), nil
	}
	if log == nil {
		log = slog.Default()
	}
	headers, err := readHeaders(cfg.Headers)
	if err != nil {
		return nil, err
	}
	var tlsCfg *tls.Config
	if !cfg.Insecure {
		if tlsCfg, err = clientTLS(cfg.TLS); err != nil {
			return nil, err
		}
	}
	var inner sdktrace.SpanExporter
	switch cfg.Exporter {
	case config.TracingOTLPHTTP:
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(cfg.Endpoint), otlptracehttp.WithURLPath(cfg.URLPath),
			otlptracehttp.WithTimeout(cfg.Batch.ExportTimeout)}
		if tlsCfg == nil {
			opts = append(opts, otlptracehttp.WithInsecure())
		} else {
			opts = append(opts, otlptracehttp.WithTLSClientConfig(tlsCfg))
		}
		if len(headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(headers))
		}
		inner, err = otlptracehttp.New(context.Background(), opts...)
	case config.TracingOTLPGRPC:
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(cfg.Endpoint), otlptracegrpc.WithTimeout(cfg.Batch.ExportTimeout)}
		if tlsCfg == nil {
			opts = append(opts, otlptracegrpc.WithInsecure())
		} else {
			opts = append(opts, otlptracegrpc.WithTLSCredentials(credentials.NewTLS(tlsCfg)))
		}
		if len(headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(headers))
		}
		inner, err = otlptracegrpc.New(context.Background(), opts...)
	default:
		return nil, fmt.Errorf("tracing.exporter: unknown exporter %q", cfg.Exporter)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: the %s exporter: %w", cfg.Exporter, err)
	}
	exp := &exporter{SpanExporter: inner, log: log, endpoint: cfg.Endpoint, onFailure: failed}
	b := cfg.Batch
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithMaxQueueSize(b.MaxQueueSize), sdktrace.WithMaxExportBatchSize(b.MaxExportBatchSize),
			sdktrace.WithBatchTimeout(b.ScheduleDelay), sdktrace.WithExportTimeout(b.ExportTimeout)),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.Ratio()))),
		// Only writ's own resource: nothing from the environment
		// (OTEL_RESOURCE_ATTRIBUTES) is added behind the operator's back.
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(cfg.ServiceName))),
	)
	return &Provider{tp: tp, tracer: tp.Tracer(InstrumentationName), exp: exp}, nil
}

// Tracer is the tracer the core, the push deliverer and the store spans
// use: the no-op one when tracing is off.
func (p *Provider) Tracer() trace.Tracer { return p.tracer }

// On reports whether writ traces.
func (p *Provider) On() bool { return p.tp != nil }

// Failures counts the exports that failed since the start (0 when off).
func (p *Provider) Failures() uint64 {
	if p.exp == nil {
		return 0
	}
	return p.exp.failed.Load()
}

// Shutdown exports the spans still queued and closes the exporter, within
// ctx: the last requests' spans are not lost at a clean stop.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p.tp == nil {
		return nil
	}
	if err := p.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: flushing the spans: %w", err)
	}
	return nil
}

// exporter logs and counts the failed exports of the one it wraps: the SDK
// otherwise hands them to OTel's global error handler, which writ does not
// own.
type exporter struct {
	sdktrace.SpanExporter
	log       *slog.Logger
	endpoint  string
	onFailure func()
	failed    atomic.Uint64
}

func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		if e.onFailure != nil {
			e.onFailure()
		}
		// Log the 1st, 2nd, 4th, 8th... failure: a collector that is down
		// must not become a log flood.
		if n := e.failed.Add(1); bits.OnesCount64(n) == 1 {
			e.log.Warn("tracing: spans could not be exported; they are dropped", "endpoint", e.endpoint,
				"spans", len(spans), "failures_total", n, "error", err)
		}
	}
	return err
}

// readHeaders reads each header's value from its file or environment
// variable.
func readHeaders(hs []config.TracingHeader) (map[string]string, error) {
	if len(hs) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(hs))
	for i, h := range hs {
		var v string
		switch {
		case h.ValueFile != "":
			raw, err := os.ReadFile(h.ValueFile)
			if err != nil {
				return nil, fmt.Errorf("tracing.headers[%d].value_file: %w", i, err)
			}
			v = strings.TrimRight(string(raw), "\r\n")
		default:
			var ok bool
			if v, ok = os.LookupEnv(h.ValueEnv); !ok {
				return nil, fmt.Errorf("tracing.headers[%d].value_env: the environment variable %s is not set", i, h.ValueEnv)
			}
		}
		if v == "" || strings.ContainsAny(v, "\r\n\x00") {
			// Never the value itself in the error: it is a secret.
			return nil, fmt.Errorf("tracing.headers[%d]: the value of %s is empty or not one line", i, h.Name)
		}
		out[strings.ToLower(h.Name)] = v
	}
	return out, nil
}

// clientTLS is the TLS configuration of the connection to the collector.
func clientTLS(c *config.TracingTLS) (*tls.Config, error) {
	out := &tls.Config{MinVersion: tls.VersionTLS12}
	if c == nil {
		return out, nil
	}
	out.ServerName = c.ServerName
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tracing.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("tracing.tls.ca_file: no PEM certificate in " + c.CAFile)
		}
		out.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tracing.tls: the client certificate: %w", err)
		}
		out.Certificates = []tls.Certificate{cert}
	}
	return out, nil
}
