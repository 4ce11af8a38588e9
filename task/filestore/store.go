package filestore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/internal/recordenc"
)

func notFound(ref task.Ref) error {
	return fmt.Errorf("task %q on %q: %w", ref.ID, ref.Agent, task.ErrNotFound)
}

// Get implements task.Store.
func (s *Store) Get(ctx context.Context, ref task.Ref) (task.Record, bool, error) {
	var rec task.Record
	var ok bool
	now := s.limits.Now()
	rk := refKey(ref)
	err := s.read(ctx, func(tx *view) error {
		st, found, err := getRecord(tx, rk)
		if err != nil || !found || expiredAt(st.rec.Updated, s.limits.TTL, now) {
			return err
		}
		rec, ok = st.rec, true
		return nil
	})
	if err != nil {
		return task.Record{}, false, err
	}
	return rec, ok, nil
}

// live returns the record of ref for a write, dropping it if it expired.
func (s *Store) live(tx *view, ref task.Ref, rk []byte, now time.Time) (stored, error) {
	st, ok, err := getRecord(tx, rk)
	if err != nil {
		return stored{}, err
	}
	if ok && expiredAt(st.rec.Updated, s.limits.TTL, now) {
		if err := expire(tx, rk, st); err != nil {
			return stored{}, err
		}
		ok = false
	}
	if !ok {
		return stored{}, notFound(ref)
	}
	return st, nil
}

// begin is the start of every write: expired entries go first.
func (s *Store) begin(tx *view, w *writeCtx) error {
	_, err := sweep(tx, s.limits.TTL, w.now, inlineSweep)
	return err
}

// Create implements task.Store.
func (s *Store) Create(ctx context.Context, r task.Record) error { return s.create(ctx, nil, r, false) }

// ClaimTask implements task.Store.
func (s *Store) ClaimTask(ctx context.Context, r task.Record) error {
	return s.create(ctx, nil, r, true)
}

func (s *Store) create(ctx context.Context, b *Batch, r task.Record, claim bool) error {
	if err := task.ValidRecord(&r); err != nil {
		return err
	}
	ref := r.Ref()
	rk := refKey(ref)
	rec := task.Stored(r, s.limits.MaxArtifacts)
	return s.write(ctx, b, func(tx *view, w *writeCtx) error {
		if err := s.begin(tx, w); err != nil {
			return err
		}
		if old, ok, err := getRecord(tx, rk); err != nil {
			return err
		} else if ok {
			if !expiredAt(old.rec.Updated, s.limits.TTL, w.now) {
				return fmt.Errorf("task %q on %q: %w", ref.ID, ref.Agent, task.ErrExists)
			}
			if err := expire(tx, rk, old); err != nil {
				return err
			}
		}
		if claim {
			if err := s.claimable(tx, ref, rk, rec.Task.Owner); err != nil {
				return err
			}
		}
		rec := rec
		if rec.Created.IsZero() {
			rec.Created = w.now
		}
		rec.Updated = w.now
		owner := task.OwnerKey(rec.Task.Owner)
		if taskOwners.count(tx, owner) >= uint64(s.limits.MaxPerOwner) {
			if vk, ok := taskOwners.oldest(tx, owner); ok {
				if err := s.evictKey(tx, w, append([]byte(nil), vk...), task.EvictedOwnerFull); err != nil {
					return err
				}
			}
		} else if getU64(tx.Bucket(bMeta), kTasks) >= uint64(s.limits.MaxTasks) {
			if err := s.evictVictim(tx, w); err != nil {
				return err
			}
		}
		st, err := newStamp(tx, w.now)
		if err != nil {
			return err
		}
		if err := insert(tx, rk, stored{stamp: st, rec: rec}); err != nil {
			return err
		}
		if err := dropTombstone(tx, rk); err != nil { // the task is known again
			return err
		}
		return retire(tx, s.retired, task.RetiredTask, ref)
	})
}

// claimable says whether owner may claim the task ref the store does not
// hold: ErrRetired unless it never held it, or a tombstone says owner did.
func (s *Store) claimable(tx *view, ref task.Ref, rk []byte, owner task.Owner) error {
	if v := tx.Bucket(bTomb).Get(rk); len(v) >= 8 {
		o, err := recordenc.Owner(v[8:])
		if err != nil {
			return unavailable(err)
		}
		if task.SameOwner(o, owner) {
			return nil
		}
		return fmt.Errorf("task %q on %q: evicted from another owner: %w", ref.ID, ref.Agent, task.ErrRetired)
	}
	if isRetired(tx, s.retired, task.RetiredTask, ref) {
		return fmt.Errorf("task %q on %q: %w", ref.ID, ref.Agent, task.ErrRetired)
	}
	return nil
}

// evictKey evicts the record rk (or expires it, if it has expired).
func (s *Store) evictKey(tx *view, w *writeCtx, rk []byte, reason string) error {
	v, ok, err := getRecord(tx, rk)
	if err != nil || !ok {
		return err
	}
	if expiredAt(v.rec.Updated, s.limits.TTL, w.now) {
		return expire(tx, rk, v)
	}
	return evict(tx, w, rk, v, reason, s.limits.MaxTombstones)
}

// evictVictim makes room in a full store: an expired record, else the least
// recently updated finished one, else the heaviest owner's least recently
// updated.
func (s *Store) evictVictim(tx *view, w *writeCtx) error {
	if k, _ := tx.Bucket(bAge).Cursor().First(); k != nil {
		var st stamp
		copy(st[:], k[:16])
		if expiredAt(st.time(), s.limits.TTL, w.now) {
			return s.evictKey(tx, w, append([]byte(nil), k[16:]...), task.EvictedStoreFull)
		}
	}
	if k, _ := tx.Bucket(bFin).Cursor().First(); k != nil {
		return s.evictKey(tx, w, append([]byte(nil), k[16:]...), task.EvictedStoreFull)
	}
	owner, ok := taskOwners.heaviest(tx)
	if !ok {
		return nil
	}
	vk, ok := taskOwners.oldest(tx, owner)
	if !ok {
		return nil
	}
	return s.evictKey(tx, w, append([]byte(nil), vk...), task.EvictedStoreFull)
}

// Apply implements task.Store.
func (s *Store) Apply(ctx context.Context, ref task.Ref, ev task.Event) (prev, next task.Record, err error) {
	return s.applyEvent(ctx, nil, ref, ev)
}

func (s *Store) applyEvent(ctx context.Context, b *Batch, ref task.Ref, ev task.Event) (prev, next task.Record, err error) {
	// An answer's first event about a task is applied before the task is
	// created (the core creates it on ErrNotFound): a read answers that
	// without a turn of the writer. (Reads see every write applied.)
	if _, ok, err := s.Get(ctx, ref); err != nil || !ok {
		if err == nil {
			err = notFound(ref)
		}
		return task.Record{}, task.Record{}, err
	}
	rk := refKey(ref)
	var terr error
	werr := s.write(ctx, b, func(tx *view, w *writeCtx) error {
		terr = nil
		if err := s.begin(tx, w); err != nil {
			return err
		}
		old, err := s.live(tx, ref, rk, w.now)
		if err != nil {
			return err
		}
		prev = old.rec
		rec, _, err := getRecord(tx, rk) // a second copy to change
		if err != nil {
			return err
		}
		next = rec.rec
		if terr = task.ApplyEvent(&next, ev, s.limits.MaxArtifacts); terr != nil {
			if _, err := addU64(tx.Bucket(bMeta), kViolations, 1); err != nil {
				return err
			}
		}
		st, err := update(tx, rk, old, next, w.now)
		next = st.rec
		if err == nil && !(next.Task.State.Terminal() && prev.Task.State != next.Task.State) {
			// Only a task reaching its end must be durable before the
			// answer: a non-terminal state, artifact names and repeats ride
			// the next commit.
			w.lazy = true
		}
		return err
	})
	if werr != nil {
		return task.Record{}, task.Record{}, werr
	}
	return prev, next, terr
}

// Delete implements task.Store.
func (s *Store) Delete(ctx context.Context, ref task.Ref) error { return s.delete(ctx, nil, ref) }

func (s *Store) delete(ctx context.Context, b *Batch, ref task.Ref) error {
	rk := refKey(ref)
	return s.write(ctx, b, func(tx *view, w *writeCtx) error {
		if err := s.begin(tx, w); err != nil {
			return err
		}
		st, err := s.live(tx, ref, rk, w.now)
		if err != nil {
			return err
		}
		return drop(tx, rk, st)
	})
}

// SetPush implements task.Store. Setting a config counts as an update.
func (s *Store) SetPush(ctx context.Context, ref task.Ref, p task.PushConfig) (task.PushConfig, error) {
	return s.setPush(ctx, nil, ref, p)
}

func (s *Store) setPush(ctx context.Context, b *Batch, ref task.Ref, p task.PushConfig) (task.PushConfig, error) {
	rk := refKey(ref)
	var out task.PushConfig
	err := s.write(ctx, b, func(tx *view, w *writeCtx) error {
		if err := s.begin(tx, w); err != nil {
			return err
		}
		old, err := s.live(tx, ref, rk, w.now)
		if err != nil {
			return err
		}
		p := p
		m := tx.Bucket(bMeta)
		if p.ID == "" {
			n := getU64(m, kPushSeq) + 1
			p.ID = "push-" + strconv.FormatUint(n, 10)
			if err := m.Put(kPushSeq, u64(n)); err != nil {
				return unavailable(err)
			}
		}
		cur, _, err := getRecord(tx, rk)
		if err != nil {
			return err
		}
		next := cur.rec
		replaced := false
		for i := range next.Push {
			if next.Push[i].ID == p.ID {
				next.Push[i], replaced = p, true
				break
			}
		}
		if !replaced {
			if len(next.Push) >= s.limits.MaxPushPerTask {
				return fmt.Errorf("task %q: %w (%d per task)", ref.ID, task.ErrPushLimit, s.limits.MaxPushPerTask)
			}
			if getU64(tx.Bucket(bPush), []byte(old.owner())) >= uint64(s.limits.MaxPushPerOwner) {
				return fmt.Errorf("task %q: %w (%d per owner)", ref.ID, task.ErrPushLimit, s.limits.MaxPushPerOwner)
			}
			next.Push = append(next.Push, p)
		}
		out = p
		_, err = update(tx, rk, old, next, w.now)
		return err
	})
	if err != nil {
		return task.PushConfig{}, err
	}
	return out, nil
}

// DeletePush implements task.Store. Like the memory store, it does not count
// as an update of the task.
func (s *Store) DeletePush(ctx context.Context, ref task.Ref, cid string) error {
	return s.deletePush(ctx, nil, ref, cid)
}

func (s *Store) deletePush(ctx context.Context, b *Batch, ref task.Ref, cid string) error {
	rk := refKey(ref)
	return s.write(ctx, b, func(tx *view, w *writeCtx) error {
		if err := s.begin(tx, w); err != nil {
			return err
		}
		old, err := s.live(tx, ref, rk, w.now)
		if err != nil {
			return err
		}
		for i := range old.rec.Push {
			if old.rec.Push[i].ID == cid {
				next := old
				next.rec.Push = append(old.rec.Push[:i:i], old.rec.Push[i+1:]...)
				if err := putRecord(tx, rk, next); err != nil {
					return err
				}
				_, err := addU64(tx.Bucket(bPush), []byte(old.owner()), -1)
				return err
			}
		}
		return fmt.Errorf("task %q config %q: %w", ref.ID, cid, task.ErrPushNotFound)
	})
}

// ClaimContext implements task.Store.
func (s *Store) ClaimContext(ctx context.Context, ref task.Ref, owner task.Owner) (task.Owner, error) {
	return s.claimContext(ctx, nil, ref, owner)
}

func (s *Store) claimContext(ctx context.Context, b *Batch, ref task.Ref, owner task.Owner) (task.Owner, error) {
	rk := refKey(ref)
	var on task.Owner
	err := s.write(ctx, b, func(tx *view, w *writeCtx) error {
		if err := s.begin(tx, w); err != nil {
			return err
		}
		st, cur, ok, err := getContext(tx, rk)
		if err != nil {
			return err
		}
		if ok && !expiredAt(st.time(), s.limits.TTL, w.now) {
			on = cur
			if !task.SameOwner(cur, owner) {
				return nil
			}
			nst, err := newStamp(tx, w.now)
			if err != nil {
				return err
			}
			if err := tx.Bucket(bCtxAge).Delete(cat(st[:], rk)); err != nil {
				return unavailable(err)
			}
			if err := putContext(tx, rk, nst, cur); err != nil {
				return err
			}
			return ctxOwners.move(tx, task.OwnerKey(cur), false, st, false, nst, rk)
		}
		if ok {
			if err := dropContext(tx, rk); err != nil {
				return err
			}
		}
		if isRetired(tx, s.retired, task.RetiredContext, ref) {
			return fmt.Errorf("context %q on %q: %w", ref.ID, ref.Agent, task.ErrRetired)
		}
		key := task.OwnerKey(owner)
		if ctxOwners.count(tx, key) >= uint64(s.limits.MaxPerOwner) {
			if vk, ok := ctxOwners.oldest(tx, key); ok {
				if err := s.evictContext(tx, w, append([]byte(nil), vk...), task.EvictedOwnerFull); err != nil {
					return err
				}
			}
		} else if getU64(tx.Bucket(bMeta), kContexts) >= uint64(s.limits.MaxContexts) {
			if heavy, ok := ctxOwners.heaviest(tx); ok {
				if vk, ok := ctxOwners.oldest(tx, heavy); ok {
					if err := s.evictContext(tx, w, append([]byte(nil), vk...), task.EvictedStoreFull); err != nil {
						return err
					}
				}
			}
		}
		nst, err := newStamp(tx, w.now)
		if err != nil {
			return err
		}
		if err := putContext(tx, rk, nst, owner); err != nil {
			return err
		}
		if err := ctxOwners.add(tx, key, false, nst, rk); err != nil {
			return err
		}
		if _, err := addU64(tx.Bucket(bMeta), kContexts, 1); err != nil {
			return err
		}
		on = owner
		return retire(tx, s.retired, task.RetiredContext, ref)
	})
	if err != nil {
		return task.Owner{}, err
	}
	return on, nil
}

func (s *Store) evictContext(tx *view, w *writeCtx, rk []byte, reason string) error {
	st, o, ok, err := getContext(tx, rk)
	if err != nil || !ok {
		return err
	}
	if err := dropContext(tx, rk); err != nil {
		return err
	}
	if expiredAt(st.time(), s.limits.TTL, w.now) {
		return nil
	}
	if _, err := addU64(tx.Bucket(bMeta), kEvicted, 1); err != nil {
		return err
	}
	ref, err := parseRefKey(rk)
	if err != nil {
		return err
	}
	w.ev = append(w.ev, task.Eviction{Ref: ref, Context: true, Owner: o, Reason: reason})
	return nil
}

// Context implements task.Store.
func (s *Store) Context(ctx context.Context, ref task.Ref) (task.Owner, bool, error) {
	var o task.Owner
	var ok bool
	now := s.limits.Now()
	err := s.read(ctx, func(tx *view) error {
		st, cur, found, err := getContext(tx, refKey(ref))
		if err != nil {
			return err
		}
		if !found || expiredAt(st.time(), s.limits.TTL, now) {
			if isRetired(tx, s.retired, task.RetiredContext, ref) {
				return fmt.Errorf("context %q on %q: %w", ref.ID, ref.Agent, task.ErrRetired)
			}
			return nil
		}
		o, ok = cur, true
		return nil
	})
	if err != nil {
		return task.Owner{}, false, err
	}
	return o, ok, nil
}

// Tombstone implements task.Store.
func (s *Store) Tombstone(ctx context.Context, ref task.Ref) (task.Owner, bool, error) {
	var o task.Owner
	var ok bool
	err := s.read(ctx, func(tx *view) error {
		v := tx.Bucket(bTomb).Get(refKey(ref))
		if len(v) < 8 {
			if isRetired(tx, s.retired, task.RetiredTask, ref) {
				return fmt.Errorf("task %q on %q: %w", ref.ID, ref.Agent, task.ErrRetired)
			}
			return nil
		}
		var err error
		o, err = recordenc.Owner(v[8:])
		ok = err == nil
		return err
	})
	if err != nil {
		return task.Owner{}, false, err
	}
	return o, ok, nil
}

// Stats implements task.Store. Expired entries are removed first, so ByState
// counts live records only.
func (s *Store) Stats(ctx context.Context) (task.StoreStats, error) {
	var out task.StoreStats
	err := s.write(ctx, nil, func(tx *view, w *writeCtx) error {
		w.lazy = true // what the sweep removes need not be durable at once
		for {
			n, err := sweep(tx, s.limits.TTL, w.now, 4096)
			if err != nil {
				return err
			}
			if n < 4096 {
				break
			}
		}
		m := tx.Bucket(bMeta)
		by := make(map[task.State]int, len(task.States))
		for _, st := range task.States {
			by[st] = int(getU64(m, stateKey(st)))
		}
		out = task.StoreStats{
			Tasks: int(getU64(m, kTasks)), Contexts: int(getU64(m, kContexts)), ByState: by,
			Evicted: getU64(m, kEvicted), Expired: getU64(m, kExpired), Violations: getU64(m, kViolations),
			Retired: getU64(m, kRetiredN), RetiredCapacity: s.retiredCap,
		}
		return nil
	})
	return out, err
}
