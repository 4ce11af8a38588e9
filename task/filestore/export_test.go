package filestore

// Commits is how many transactions s has committed since Open: each one
// bbolt commit, that is one set of fdatasyncs (the seam the group-commit
// tests count through).
func Commits(s *Store) uint64 { return s.commits.Load() }

// BeforeCommit makes every commit of s run hook first, in the commit's
// goroutine: it may wait (holding the commit, and every write that arrives
// meanwhile for the next one) or fail the commit with an error.
func BeforeCommit(s *Store, hook func() error) {
	s.mu.Lock()
	s.beforeCommit = hook
	s.mu.Unlock()
}
