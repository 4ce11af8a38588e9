package extproc

// StreamsInFlight counts the Process streams not yet returned (tests: no
// stream, and no relay behind it, outlives its request).
func (s *Server) StreamsInFlight() int64 { return s.streams.Load() }
