package extproc

import (
	"context"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/writ-authz/writ/proxy"
)

// StreamsInFlight counts the Process streams not yet returned (tests: no
// stream, and no relay behind it, outlives its request).
func (s *Server) StreamsInFlight() int64 { return s.streams.Load() }

// Relayed feeds chunks to p's relay as the ext_proc server does (the last
// with end_of_stream) and returns what it passed on, chunk by chunk.
func Relayed(ctx context.Context, p *proxy.Plan, chunks [][]byte) [][]byte {
	f := p.Chunks(ctx)
	defer f.Abort()
	out := make([][]byte, len(chunks))
	for i, c := range chunks {
		out[i] = f.Feed(c, i == len(chunks)-1)
	}
	return out
}

// KeptAttribute is the attribute name as a stream keeps it from reqs, received
// in order.
func KeptAttribute(name string, reqs ...*extprocv3.ProcessingRequest) string {
	st := &stream{}
	for _, r := range reqs {
		st.keepAttributes(r)
	}
	return st.attr(name)
}
