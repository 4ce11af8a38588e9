package config

import (
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

// The exporters tracing.exporter names.
const (
	TracingOTLPGRPC = "otlp-grpc"
	TracingOTLPHTTP = "otlp-http"
)

// SamplerParentRatio is the one sampler tracing.sampler names: OTel's
// parentbased_traceidratio (a caller's sampling decision is followed; a
// trace writ starts is sampled at sample_ratio).
const SamplerParentRatio = "parentbased_traceidratio"

// Defaults of tracing: (the OTel SDK's batch span processor's defaults, and
// the OTLP/HTTP path).
const (
	DefaultTracingServiceName   = "writ"
	DefaultTracingSampleRatio   = 1.0
	DefaultTracingURLPath       = "/v1/traces"
	DefaultTracingMaxQueue      = 2048
	DefaultTracingMaxBatch      = 512
	DefaultTracingScheduleDelay = 5 * time.Second
	DefaultTracingExportTimeout = 30 * time.Second
	// MaxTracingQueue bounds batch.max_queue_size: every queued span is
	// held in memory until it is exported or dropped.
	MaxTracingQueue = 1 << 20
)

// Tracing exports OpenTelemetry traces of what writ does with each request
// (docs/fleet.md#tracing): off unless the section is present. Spans carry
// decision ids, routes, operations and codes; never message content, a
// token or a credential.
type Tracing struct {
	// Exporter is otlp-grpc (the default) or otlp-http.
	Exporter string `yaml:"exporter"`
	// Endpoint is the collector's host:port (required; 4317 is OTLP/gRPC's
	// port, 4318 OTLP/HTTP's).
	Endpoint string `yaml:"endpoint"`
	// URLPath is the OTLP/HTTP path (otlp-http only; default /v1/traces).
	URLPath string `yaml:"url_path"`
	// Insecure sends the spans without TLS (a collector on the same host or
	// pod). Without it the connection is TLS, verified against the system
	// roots or TLS.CAFile's.
	Insecure bool `yaml:"insecure"`
	// TLS configures the TLS connection to the collector.
	TLS *TracingTLS `yaml:"tls"`
	// Headers are sent with every export (a collector's API key): each value
	// is read from a file or an environment variable, never written in the
	// YAML.
	Headers []TracingHeader `yaml:"headers"`
	// Sampler is parentbased_traceidratio (the default and only one).
	Sampler string `yaml:"sampler"`
	// SampleRatio is the share of the traces writ starts that are sampled
	// (default 1.0; from 0 to 1). A caller's traceparent decides for its
	// own trace.
	SampleRatio *float64 `yaml:"sample_ratio"`
	// ServiceName is the service.name resource attribute (default writ).
	ServiceName string `yaml:"service_name"`
	// Batch configures the batch span processor.
	Batch TracingBatch `yaml:"batch"`
}

// TracingTLS is the TLS connection to the collector.
type TracingTLS struct {
	// CAFile verifies the collector's certificate (default: system roots).
	CAFile string `yaml:"ca_file" writ:"path"`
	// CertFile and KeyFile are a client certificate, for collectors that ask.
	CertFile string `yaml:"cert_file" writ:"path"`
	KeyFile  string `yaml:"key_file" writ:"path"`
	// ServerName is the name the certificate must carry (default: the
	// endpoint's host).
	ServerName string `yaml:"server_name"`
}

// TracingHeader is one header sent with every export, its value from a
// file (a mounted secret, trailing newline trimmed) or an environment
// variable: exactly one of ValueFile and ValueEnv.
type TracingHeader struct {
	Name      string `yaml:"name"`
	ValueFile string `yaml:"value_file" writ:"path"`
	ValueEnv  string `yaml:"value_env"`
}

// TracingBatch configures the SDK's batch span processor.
type TracingBatch struct {
	// MaxQueueSize bounds the spans waiting for export (default 2048);
	// beyond it spans are dropped, never waited for.
	MaxQueueSize int `yaml:"max_queue_size"`
	// MaxExportBatchSize bounds one export (default 512, at most
	// max_queue_size).
	MaxExportBatchSize int `yaml:"max_export_batch_size"`
	// ScheduleDelay is the longest a span waits before its batch is sent
	// (default 5s).
	ScheduleDelay time.Duration `yaml:"schedule_delay"`
	// ExportTimeout bounds one export (default 30s).
	ExportTimeout time.Duration `yaml:"export_timeout"`
}

// Ratio is sample_ratio with its default applied.
func (t *Tracing) Ratio() float64 {
	if t.SampleRatio == nil {
		return DefaultTracingSampleRatio
	}
	return *t.SampleRatio
}

func (t *Tracing) applyDefaults() {
	if t == nil {
		return
	}
	if t.Exporter == "" {
		t.Exporter = TracingOTLPGRPC
	}
	if t.Exporter == TracingOTLPHTTP && t.URLPath == "" {
		t.URLPath = DefaultTracingURLPath
	}
	if t.Sampler == "" {
		t.Sampler = SamplerParentRatio
	}
	if t.ServiceName == "" {
		t.ServiceName = DefaultTracingServiceName
	}
	b := &t.Batch
	if b.MaxQueueSize == 0 {
		b.MaxQueueSize = DefaultTracingMaxQueue
	}
	if b.MaxExportBatchSize == 0 {
		b.MaxExportBatchSize = min(DefaultTracingMaxBatch, b.MaxQueueSize)
	}
	if b.ScheduleDelay == 0 {
		b.ScheduleDelay = DefaultTracingScheduleDelay
	}
	if b.ExportTimeout == 0 {
		b.ExportTimeout = DefaultTracingExportTimeout
	}
}

func (t *Tracing) validate(bad func(key, format string, args ...any)) {
	if t == nil {
		return
	}
	if t.Exporter != TracingOTLPGRPC && t.Exporter != TracingOTLPHTTP {
		bad("tracing.exporter", "must be %s or %s, not %q", TracingOTLPGRPC, TracingOTLPHTTP, t.Exporter)
	}
	if t.Endpoint == "" {
		bad("tracing.endpoint", "required: the collector's host:port (4317 for otlp-grpc, 4318 for otlp-http)")
	} else if h, _, err := net.SplitHostPort(t.Endpoint); err != nil || h == "" || strings.Contains(t.Endpoint, "/") {
		bad("tracing.endpoint", "must be the collector's host:port (no scheme or path), not %q", t.Endpoint)
	}
	if t.URLPath != "" && t.Exporter != TracingOTLPHTTP {
		bad("tracing.url_path", "only with exporter %s", TracingOTLPHTTP)
	} else if t.URLPath != "" && !strings.HasPrefix(t.URLPath, "/") {
		bad("tracing.url_path", "must start with /, not %q", t.URLPath)
	}
	if s := t.TLS; s != nil {
		if t.Insecure {
			bad("tracing.tls", "insecure sends without TLS: set tls or insecure, not both")
		}
		if (s.CertFile == "") != (s.KeyFile == "") {
			bad("tracing.tls", "cert_file and key_file go together")
		}
	}
	names := map[string]bool{}
	for i, h := range t.Headers {
		key := fmt.Sprintf("tracing.headers[%d]", i)
		if !headerToken(h.Name) {
			bad(key+".name", "must be a header name (letters, digits and -), not %q", h.Name)
		} else if names[strings.ToLower(h.Name)] {
			bad(key+".name", "%q is named twice", h.Name)
		}
		names[strings.ToLower(h.Name)] = true
		switch {
		case (h.ValueFile == "") == (h.ValueEnv == ""):
			bad(key, "exactly one of value_file and value_env: the value is a secret, never in the YAML")
		case h.ValueEnv != "":
			if _, ok := os.LookupEnv(h.ValueEnv); !ok {
				bad(key+".value_env", "the environment variable %s is not set", h.ValueEnv)
			}
		}
	}
	if t.Sampler != SamplerParentRatio {
		bad("tracing.sampler", "must be %s, not %q", SamplerParentRatio, t.Sampler)
	}
	if r := t.Ratio(); !(r >= 0 && r <= 1) {
		bad("tracing.sample_ratio", "must be from 0 to 1, not %g", r)
	}
	if strings.TrimSpace(t.ServiceName) != t.ServiceName {
		bad("tracing.service_name", "%q: no surrounding spaces", t.ServiceName)
	}
	b := t.Batch
	if b.MaxQueueSize < 1 || b.MaxQueueSize > MaxTracingQueue {
		bad("tracing.batch.max_queue_size", "must be from 1 to %d, not %d", MaxTracingQueue, b.MaxQueueSize)
	}
	if b.MaxExportBatchSize < 1 || b.MaxExportBatchSize > b.MaxQueueSize {
		bad("tracing.batch.max_export_batch_size", "must be from 1 to max_queue_size (%d), not %d", b.MaxQueueSize, b.MaxExportBatchSize)
	}
	for key, d := range map[string]time.Duration{"tracing.batch.schedule_delay": b.ScheduleDelay,
		"tracing.batch.export_timeout": b.ExportTimeout} {
		if d <= 0 {
			bad(key, "must be positive, not %s", d)
		}
	}
}

// headerToken reports whether s is an HTTP header name (RFC 9110 token of
// letters, digits and -, which gRPC metadata accepts too).
func headerToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c == '-' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}
