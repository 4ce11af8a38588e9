package extproc

import (
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// StreamsInFlight counts the Process streams not yet returned (tests: no
// stream, and no relay behind it, outlives its request).
func (s *Server) StreamsInFlight() int64 { return s.streams.Load() }

// KeptAttribute is the attribute name as a stream keeps it from reqs, received
// in order.
func KeptAttribute(name string, reqs ...*extprocv3.ProcessingRequest) string {
	st := &stream{}
	for _, r := range reqs {
		st.keepAttributes(r)
	}
	return st.attr(name)
}
