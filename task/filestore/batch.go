package filestore

import (
	"context"
	"sync"

	"github.com/writ-authz/writ/task"
)

// Defer implements task.Deferring: the writes of the returned Batch return
// as soon as they are applied, and its Sync waits for their commit.
func (s *Store) Defer() task.Deferred { return &Batch{s: s} }

// Batch is the store with deferred writes (task.Deferred). The core records
// what an answer revealed through one — the task and its owner, its
// context's owner, its push config — and syncs it once, before the answer
// goes: one commit wait per answer rather than one per write, and the
// commit shared with every request that wrote meanwhile.
type Batch struct {
	s  *Store
	mu sync.Mutex
	// wait are the overlays holding this batch's writes not yet known
	// durable, oldest first.
	wait []*overlay
}

var _ task.Deferred = (*Batch)(nil)

// after records that a write of the batch is durable once ov is committed.
func (b *Batch) after(ov *overlay) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := len(b.wait); n == 0 || b.wait[n-1] != ov {
		b.wait = append(b.wait, ov)
	}
}

// Sync implements task.Deferred. Overlays commit in order and a failed
// commit loses the overlays built on it, so each one waited for answers
// for its own writes.
func (b *Batch) Sync(ctx context.Context) error {
	b.mu.Lock()
	wait := b.wait
	b.mu.Unlock()
	for _, ov := range wait {
		if err := waitCommit(ctx, ov); err != nil {
			return err
		}
	}
	b.mu.Lock()
	b.wait = b.wait[len(wait):]
	b.mu.Unlock()
	return nil
}

// Get implements task.Store.
func (b *Batch) Get(ctx context.Context, ref task.Ref) (task.Record, bool, error) {
	return b.s.Get(ctx, ref)
}

// Create implements task.Store.
func (b *Batch) Create(ctx context.Context, r task.Record) error { return b.s.create(ctx, b, r, false) }

// ClaimTask implements task.Store.
func (b *Batch) ClaimTask(ctx context.Context, r task.Record) error {
	return b.s.create(ctx, b, r, true)
}

// Apply implements task.Store.
func (b *Batch) Apply(ctx context.Context, ref task.Ref, ev task.Event) (prev, next task.Record, err error) {
	return b.s.applyEvent(ctx, b, ref, ev)
}

// Delete implements task.Store.
func (b *Batch) Delete(ctx context.Context, ref task.Ref) error { return b.s.delete(ctx, b, ref) }

// SetPush implements task.Store.
func (b *Batch) SetPush(ctx context.Context, ref task.Ref, p task.PushConfig) (task.PushConfig, error) {
	return b.s.setPush(ctx, b, ref, p)
}

// DeletePush implements task.Store.
func (b *Batch) DeletePush(ctx context.Context, ref task.Ref, cid string) error {
	return b.s.deletePush(ctx, b, ref, cid)
}

// ClaimContext implements task.Store.
func (b *Batch) ClaimContext(ctx context.Context, ref task.Ref, owner task.Owner) (task.Owner, error) {
	return b.s.claimContext(ctx, b, ref, owner)
}

// Context implements task.Store.
func (b *Batch) Context(ctx context.Context, ref task.Ref) (task.Owner, bool, error) {
	return b.s.Context(ctx, ref)
}

// Tombstone implements task.Store.
func (b *Batch) Tombstone(ctx context.Context, ref task.Ref) (task.Owner, bool, error) {
	return b.s.Tombstone(ctx, ref)
}

// Stats implements task.Store.
func (b *Batch) Stats(ctx context.Context) (task.StoreStats, error) { return b.s.Stats(ctx) }
