package decisionlog

import (
	"io"
	"log/slog"
	"runtime"
	"testing"

	"github.com/writ-authz/writ/config"
)

func benchLog(b *testing.B) *Log {
	l, err := newWriter(io.Discard, config.DecisionLog{Buffer: 1 << 14}, options{logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// BenchmarkDecided is the request path's cost: queueing one decision while the
// writer keeps up (the timer stops while the queue drains; nothing is dropped).
func BenchmarkDecided(b *testing.B) {
	l := benchLog(b)
	ev := allowEvent()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		l.Decided(ev)
		if i++; i%(1<<13) == 0 {
			b.StopTimer()
			for len(l.ch) > 0 {
				runtime.Gosched()
			}
			b.StartTimer()
		}
	}
	b.StopTimer()
	closeLog(b, l)
	if s := l.Stats(); s.Dropped != 0 {
		b.Fatalf("dropped %d", s.Dropped)
	}
}

// BenchmarkDecidedSaturated logs from every core as fast as it can: the writer
// falls behind, and the cost includes the drops it causes (dropped/op).
func BenchmarkDecidedSaturated(b *testing.B) {
	l := benchLog(b)
	ev := allowEvent()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Decided(ev)
		}
	})
	b.StopTimer()
	closeLog(b, l)
	s := l.Stats()
	b.ReportMetric(float64(s.Dropped)/float64(s.Written+s.Dropped), "dropped/op")
}

// BenchmarkEncodeDecision is the writer goroutine's cost for one line:
// encoding it in its place in the chain, and taking its digest.
func BenchmarkEncodeDecision(b *testing.B) {
	ev := allowEvent()
	buf := make([]byte, 0, 1024)
	var c chainState
	b.ReportAllocs()
	for b.Loop() {
		s := c.next()
		buf = appendDecision(buf[:0], &ev, &s)
		c.advance(buf)
	}
	b.SetBytes(int64(len(buf)))
}
