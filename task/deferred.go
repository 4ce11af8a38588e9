package task

import "context"

// Deferring is a Store whose writes are costly to make durable (the file
// store: a commit is an fsync) and can wait for it together: the writes
// that one answer makes are applied as they come and made durable once,
// with Deferred.Sync, before the answer is sent. It is optional; Defer
// returns the plain store for one without it.
type Deferring interface {
	Store
	// Defer returns a new Deferred over the store.
	Defer() Deferred
}

// Deferred is the Store whose writes return as soon as they are applied
// (every reader of the store sees them at once), before they are durable.
// Sync makes them durable. A Deferred serves one answer (a request, or one
// event of a stream) at a time; it is safe for concurrent use.
type Deferred interface {
	Store
	// Sync returns once every write made through this Deferred since the
	// last Sync that returned nil is durable, or with an error (wrapping
	// ErrUnavailable) when one of them may be lost: whatever they reveal
	// must not reach a caller then. Writes that a store lets ride a later
	// commit anyway (a non-terminal state change) are not waited for.
	Sync(ctx context.Context) error
}

// Defer returns s.Defer() when s is Deferring, else s itself with a Sync
// that has nothing to wait for (its writes were durable when they returned).
func Defer(s Store) Deferred {
	if d, ok := s.(Deferring); ok {
		return d.Defer()
	}
	return immediate{s}
}

// immediate is a Store whose writes are durable when they return.
type immediate struct{ Store }

func (immediate) Sync(context.Context) error { return nil }
