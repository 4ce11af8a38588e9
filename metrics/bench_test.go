package metrics_test

import (
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/metrics"
	"github.com/writ-authz/writ/task"
)

// BenchmarkDecided is the hook's cost on the request path.
func BenchmarkDecided(b *testing.B) {
	allow := events.Decision{Mode: events.ModeSidecar, Route: sanctions, Operation: task.OpSend, Caller: investigator,
		TaskID: "t-1", ContextID: "c-1", Allow: true, CacheHit: true, Eval: 20 * time.Microsecond}
	deny := allow
	deny.Allow, deny.CacheHit = false, false
	deny.Denials = []task.Denial{{Code: "TENANT_MISMATCH"}, {Code: "SCOPE_MISSING"}}
	for _, c := range []struct {
		name    string
		tenants bool
		ev      events.Decision
	}{
		{"allow", false, allow},
		{"deny_2_codes", false, deny},
		{"allow_tenant", true, allow},
	} {
		b.Run(c.name, func(b *testing.B) {
			m := metrics.New(config.Metrics{TenantLabels: c.tenants}, metrics.Sources{})
			b.ReportAllocs()
			for b.Loop() {
				m.Decided(c.ev)
			}
		})
	}
	b.Run("allow_parallel", func(b *testing.B) {
		m := metrics.New(config.Metrics{}, metrics.Sources{})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.Decided(allow)
			}
		})
	})
}

// BenchmarkServed is the per-request hook's cost.
func BenchmarkServed(b *testing.B) {
	m := metrics.New(config.Metrics{}, metrics.Sources{})
	ev := events.Request{Mode: events.ModeSidecar, Route: sanctions, Operation: task.OpSend, Status: 200,
		Duration: 3 * time.Millisecond, Upstream: 2 * time.Millisecond}
	b.ReportAllocs()
	for b.Loop() {
		m.Served(ev)
	}
}
