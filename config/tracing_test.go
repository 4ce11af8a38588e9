package config

import (
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/internal/docrun"
)

// tracingDoc is good with a tracing: section added.
func tracingDoc(section string) string { return good + section }

// TestTracingOffByDefault: without a tracing: section there is no tracing.
func TestTracingOffByDefault(t *testing.T) {
	c, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if c.Tracing != nil {
		t.Errorf("tracing is on by default: %+v", c.Tracing)
	}
}

// TestTracingDefaults: tracing: with its endpoint alone exports over
// OTLP/gRPC with TLS, samples every trace writ starts (parent-based), names
// the service writ and takes the SDK's batch defaults; otlp-http adds its
// path.
func TestTracingDefaults(t *testing.T) {
	c, err := Parse([]byte(tracingDoc("tracing:\n  endpoint: otel-collector.observability:4317\n")))
	if err != nil {
		t.Fatal(err)
	}
	tr := c.Tracing
	if tr.Exporter != TracingOTLPGRPC || tr.Insecure || tr.Sampler != SamplerParentRatio || tr.Ratio() != 1.0 ||
		tr.ServiceName != "writ" || tr.URLPath != "" {
		t.Errorf("defaults: %+v", tr)
	}
	if b := tr.Batch; b.MaxQueueSize != 2048 || b.MaxExportBatchSize != 512 || b.ScheduleDelay != 5*time.Second || b.ExportTimeout != 30*time.Second {
		t.Errorf("batch defaults: %+v", b)
	}
	c, err = Parse([]byte(tracingDoc("tracing: {exporter: otlp-http, endpoint: 'collector:4318', sample_ratio: 0}\n")))
	if err != nil {
		t.Fatal(err)
	}
	if c.Tracing.URLPath != "/v1/traces" || c.Tracing.Ratio() != 0 {
		t.Errorf("otlp-http: %+v ratio %g", c.Tracing, c.Tracing.Ratio())
	}
}

// TestTracingValidation: each wrong tracing: value is refused with its key
// and why; a header's value is never in the YAML.
func TestTracingValidation(t *testing.T) {
	t.Setenv("WRIT_TEST_OTLP_KEY", "k")
	for doc, want := range map[string]string{
		"tracing: {}\n": "tracing.endpoint: required",
		"tracing: {endpoint: 'c:4317', exporter: zipkin}\n":                                                                              "tracing.exporter: must be otlp-grpc or otlp-http",
		"tracing: {endpoint: 'http://c:4317'}\n":                                                                                         "tracing.endpoint: must be the collector's host:port",
		"tracing: {endpoint: collector}\n":                                                                                               "tracing.endpoint: must be the collector's host:port",
		"tracing: {endpoint: 'c:4317', url_path: /v1/traces}\n":                                                                          "tracing.url_path: only with exporter otlp-http",
		"tracing: {endpoint: 'c:4318', exporter: otlp-http, url_path: traces}\n":                                                         "tracing.url_path: must start with /",
		"tracing: {endpoint: 'c:4317', insecure: true, tls: {ca_file: ca.pem}}\n":                                                        "tracing.tls: insecure sends without TLS",
		"tracing: {endpoint: 'c:4317', tls: {cert_file: c.pem}}\n":                                                                       "tracing.tls: cert_file and key_file go together",
		"tracing: {endpoint: 'c:4317', headers: [{name: x-api-key, value: s3cret}]}\n":                                                   "tracing.headers[0].value: unknown key",
		"tracing: {endpoint: 'c:4317', headers: [{name: x-api-key}]}\n":                                                                  "tracing.headers[0]: exactly one of value_file and value_env",
		"tracing: {endpoint: 'c:4317', headers: [{name: 'x key', value_env: A}]}\n":                                                      "tracing.headers[0].name: must be a header name",
		"tracing: {endpoint: 'c:4317', headers: [{name: k, value_env: WRIT_TEST_UNSET_X}]}\n":                                            "tracing.headers[0].value_env: the environment variable WRIT_TEST_UNSET_X is not set",
		"tracing: {endpoint: 'c:4317', headers: [{name: k, value_env: WRIT_TEST_OTLP_KEY}, {name: K, value_env: WRIT_TEST_OTLP_KEY}]}\n": "tracing.headers[1].name: \"K\" is named twice",
		"tracing: {endpoint: 'c:4317', sampler: always_on}\n":                                                                            "tracing.sampler: must be parentbased_traceidratio",
		"tracing: {endpoint: 'c:4317', sample_ratio: 1.5}\n":                                                                             "tracing.sample_ratio: must be from 0 to 1",
		"tracing: {endpoint: 'c:4317', batch: {max_queue_size: -1}}\n":                                                                   "tracing.batch.max_queue_size: must be from 1",
		"tracing: {endpoint: 'c:4317', batch: {max_queue_size: 10, max_export_batch_size: 20}}\n":                                        "tracing.batch.max_export_batch_size: must be from 1 to max_queue_size (10)",
		"tracing: {endpoint: 'c:4317', batch: {schedule_delay: -1s}}\n":                                                                  "tracing.batch.schedule_delay: must be positive",
	} {
		_, err := Parse([]byte(tracingDoc(doc)))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", doc, err, want)
		}
	}
	if _, err := Parse([]byte(tracingDoc("tracing: {endpoint: 'c:4317', headers: [{name: x-api-key, value_env: WRIT_TEST_OTLP_KEY}, {name: authorization, value_file: /run/secrets/otlp}]}\n"))); err != nil {
		t.Errorf("headers from env and file: %v", err)
	}
}

// TestFleetTracingExampleLoads: docs/fleet.md's tracing: example, as
// printed, loads with the values the page says.
func TestFleetTracingExampleLoads(t *testing.T) {
	blocks := docrun.Section(t, "../docs/fleet.md", "fleet-tracing")
	if len(blocks) != 1 {
		t.Fatalf("%d blocks", len(blocks))
	}
	t.Setenv("OTEL_TENANT", "payments")
	doc := "agents:\n  - {name: a, upstream: 'http://127.0.0.1:9101', max_data_classification: internal, security_schemes: [oauth2]}\n" + blocks[0].Text
	c, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	tr := c.Tracing
	if tr == nil || tr.Exporter != TracingOTLPGRPC || tr.Endpoint != "otel-collector.observability:4317" || tr.Ratio() != 0.25 ||
		tr.ServiceName != "writ-payments" || len(tr.Headers) != 2 || tr.TLS == nil || tr.TLS.CAFile != "/etc/writ/otel-ca.pem" {
		t.Errorf("the example loads as %+v", tr)
	}
}
