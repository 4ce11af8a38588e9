package task

import (
	"context"
	"errors"
	"time"
)

// Work kinds writ keeps in a WorkQueue.
const (
	// WorkPush is a push notification due for delivery.
	WorkPush = "push"
	// WorkFollow is a task followed after its request returned.
	WorkFollow = "follow"
)

// Work is one item of durable background work — a push notification not yet
// delivered, a task still being followed — held by one process at a time
// through a lease, so that what a process had not finished when it died (or a
// replica that stopped renewing) is taken over by another, and nothing is done
// twice at once.
type Work struct {
	Kind string
	// ID is unique within Kind; the producer chooses it.
	ID string
	// Payload is opaque to the queue (the producer's own encoding).
	Payload []byte
	// Holder and LeaseUntil say who holds the item and until when (as read).
	Holder     string
	LeaseUntil time.Time
}

// Sentinel errors of a WorkQueue.
var (
	// ErrWorkFull: the queue holds its bound of items of the kind.
	ErrWorkFull = errors.New("work queue is full")
	// ErrNotHolder: the item is leased to another holder (or gone).
	ErrNotHolder = errors.New("work item is not held by this holder")
)

// ErrUnavailable marks a store or queue whose backend cannot be reached (a
// connection refused, a timeout, a read-only or full disk). Implementations
// wrap their backend's error with it; callers fail the request closed with a
// 503-class answer and recover when the backend is back.
var ErrUnavailable = errors.New("lifecycle store unavailable")

// WorkQueue keeps durable background work under leases. Every method is safe
// for concurrent use, across processes for a shared queue; Claim, Renew and
// Done are atomic per item.
type WorkQueue interface {
	// Put stores w (replacing the payload of an item with the same kind and
	// id), leased to holder for ttl. ErrWorkFull over the queue's bound.
	Put(ctx context.Context, w Work, holder string, ttl time.Duration) error
	// Claim leases to holder, for ttl, up to n items of kind that nobody holds
	// (never leased, or whose lease has run out), oldest first.
	Claim(ctx context.Context, kind, holder string, n int, ttl time.Duration) ([]Work, error)
	// Renew extends holder's leases on ids by ttl and returns the ids it no
	// longer holds (taken over, or done).
	Renew(ctx context.Context, kind, holder string, ids []string, ttl time.Duration) (lost []string, err error)
	// Done removes an item its holder finished (or gave up on): ErrNotHolder
	// when holder does not hold it.
	Done(ctx context.Context, kind, id, holder string) error
	// Count is the number of items of kind held or waiting.
	Count(ctx context.Context, kind string) (int, error)
}
