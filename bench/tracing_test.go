package bench

import (
	"testing"

	"github.com/writ-authz/writ/internal/otlptest"
)

// BenchmarkTracing is the cost of tracing on one allowed sidecar request:
// the same writ (server.New, the bench request, a decision cache) with
// tracing off and on (every trace sampled, exported over OTLP/gRPC to a
// receiver on loopback through the batch processor), in one run, serial
// (ns/op is one round trip). Compare the two as a ratio.
func BenchmarkTracing(b *testing.B) {
	up := upstream(b)
	recv := otlptest.StartDiscarding(b)
	off := startWrit(b, up.URL, 10000, "", nil).URL()
	on := startWrit(b, up.URL, 10000, "tracing: {endpoint: '"+recv.GRPCAddr+"', insecure: true, sample_ratio: 1.0}\n", nil).URL()
	allow := readTemplate(b, "request_allow.json", false, false)
	allow.header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	for _, c := range []struct{ name, base string }{{"off", off}, {"on", on}} {
		if code, err := allow.do(c.base); err != nil || code != 200 {
			b.Fatalf("%s: status %d, %v", c.name, code, err)
		}
	}
	for _, c := range []struct{ name, base string }{{"off", off}, {"on", on}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if code, err := allow.do(c.base); err != nil || code != 200 {
					b.Fatalf("status %d, %v", code, err)
				}
			}
		})
	}
	b.Logf("the receiver counted %d spans so far", recv.Count())
}
