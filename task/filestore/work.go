package filestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/writ-authz/writ/task"
)

// The work queue: bWork holds each item under prefixed(kind) + id as
// seq + lease end (Unix ns) + prefixed(holder) + payload; bLease orders the
// items of a kind by (lease end, put order) under prefixed(kind) + lease end +
// seq + id, so Claim reads the claimable items off the front.

type workItem struct {
	seq    uint64
	lease  uint64
	holder string
	pay    []byte
}

func getWork(tx *view, key []byte) (workItem, bool, error) {
	v := tx.Bucket(bWork).Get(key)
	if v == nil {
		return workItem{}, false, nil
	}
	bad := unavailable(fmt.Errorf("filestore: corrupt work item %q", key))
	if len(v) < 17 {
		return workItem{}, false, bad
	}
	it := workItem{seq: binary.BigEndian.Uint64(v), lease: binary.BigEndian.Uint64(v[8:])}
	n, w := binary.Uvarint(v[16:])
	if w <= 0 || uint64(len(v)-16-w) < n {
		return workItem{}, false, bad
	}
	it.holder = string(v[16+w : 16+w+int(n)])
	it.pay = append([]byte(nil), v[16+w+int(n):]...)
	return it, true, nil
}

// putWork stores it under kp + id, replacing the lease entry of old.
func putWork(tx *view, kp []byte, id string, it workItem, old *workItem) error {
	lease := tx.Bucket(bLease)
	if old != nil {
		if err := lease.Delete(leaseKey(kp, old.lease, old.seq, id)); err != nil {
			return unavailable(err)
		}
	}
	v := cat(u64(it.seq), u64(it.lease), prefixed(it.holder), it.pay)
	if err := tx.Bucket(bWork).Put(cat(kp, []byte(id)), v); err != nil {
		return unavailable(err)
	}
	return unavailable(lease.Put(leaseKey(kp, it.lease, it.seq, id), nil))
}

func leaseKey(kp []byte, lease, seq uint64, id string) []byte {
	return cat(kp, u64(lease), u64(seq), []byte(id))
}

func leaseEnd(now time.Time, ttl time.Duration) uint64 {
	return uint64(now.Add(max(ttl, 0)).UnixNano())
}

// Put implements task.WorkQueue. An existing item gets the new payload and is
// leased to holder for ttl (ttl <= 0: claimable at once).
func (s *Store) Put(ctx context.Context, w task.Work, holder string, ttl time.Duration) error {
	kp := prefixed(w.Kind)
	pay := append([]byte(nil), w.Payload...)
	return s.write(ctx, nil, func(tx *view, _ *writeCtx) error {
		now := s.work.Now()
		old, ok, err := getWork(tx, cat(kp, []byte(w.ID)))
		if err != nil {
			return err
		}
		it := workItem{seq: old.seq, lease: leaseEnd(now, ttl), holder: holder, pay: pay}
		if ok {
			return putWork(tx, kp, w.ID, it, &old)
		}
		counts := tx.Bucket(bWorkN)
		if getU64(counts, []byte(w.Kind)) >= uint64(s.work.MaxItems) {
			return fmt.Errorf("%w (%d items of kind %q)", task.ErrWorkFull, s.work.MaxItems, w.Kind)
		}
		if it.seq, err = nextSeq(tx); err != nil {
			return err
		}
		if _, err := addU64(counts, []byte(w.Kind), 1); err != nil {
			return err
		}
		return putWork(tx, kp, w.ID, it, nil)
	})
}

// Claim implements task.WorkQueue: the items whose lease ran out first, ties
// in put order.
func (s *Store) Claim(ctx context.Context, kind, holder string, n int, ttl time.Duration) ([]task.Work, error) {
	if n <= 0 {
		return nil, nil
	}
	kp := prefixed(kind)
	var out []task.Work
	err := s.write(ctx, nil, func(tx *view, _ *writeCtx) error {
		out = nil
		now := s.work.Now()
		cut := uint64(now.UnixNano())
		var ids []string
		c := tx.Bucket(bLease).Cursor()
		for k, _ := c.Seek(kp); k != nil && bytes.HasPrefix(k, kp) && len(ids) < n; k, _ = c.Next() {
			if binary.BigEndian.Uint64(k[len(kp):]) > cut {
				break
			}
			ids = append(ids, string(k[len(kp)+16:]))
		}
		for _, id := range ids {
			old, ok, err := getWork(tx, cat(kp, []byte(id)))
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			it := old
			it.holder, it.lease = holder, leaseEnd(now, ttl)
			if err := putWork(tx, kp, id, it, &old); err != nil {
				return err
			}
			out = append(out, task.Work{Kind: kind, ID: id, Payload: it.pay, Holder: holder, LeaseUntil: time.Unix(0, int64(it.lease))})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Renew implements task.WorkQueue. An item whose lease ran out stays its
// holder's until another holder claims it.
func (s *Store) Renew(ctx context.Context, kind, holder string, ids []string, ttl time.Duration) ([]string, error) {
	kp := prefixed(kind)
	var lost []string
	err := s.write(ctx, nil, func(tx *view, _ *writeCtx) error {
		lost = nil
		now := s.work.Now()
		for _, id := range ids {
			old, ok, err := getWork(tx, cat(kp, []byte(id)))
			if err != nil {
				return err
			}
			if !ok || old.holder != holder {
				lost = append(lost, id)
				continue
			}
			it := old
			it.lease = leaseEnd(now, ttl)
			if err := putWork(tx, kp, id, it, &old); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return lost, nil
}

// Done implements task.WorkQueue.
func (s *Store) Done(ctx context.Context, kind, id, holder string) error {
	kp := prefixed(kind)
	return s.write(ctx, nil, func(tx *view, _ *writeCtx) error {
		old, ok, err := getWork(tx, cat(kp, []byte(id)))
		if err != nil {
			return err
		}
		if !ok || old.holder != holder {
			return fmt.Errorf("%s %q: %w", kind, id, task.ErrNotHolder)
		}
		if err := tx.Bucket(bLease).Delete(leaseKey(kp, old.lease, old.seq, id)); err != nil {
			return unavailable(err)
		}
		if err := tx.Bucket(bWork).Delete(cat(kp, []byte(id))); err != nil {
			return unavailable(err)
		}
		_, err = addU64(tx.Bucket(bWorkN), []byte(kind), -1)
		return err
	})
}

// Count implements task.WorkQueue.
func (s *Store) Count(ctx context.Context, kind string) (int, error) {
	var n int
	err := s.read(ctx, func(tx *view) error {
		n = int(getU64(tx.Bucket(bWorkN), []byte(kind)))
		return nil
	})
	return n, err
}

// releaseLeases makes every work item claimable at once, keeping its holder
// (Open: whoever held the file before is gone).
func releaseLeases(tx *view) error {
	type held struct {
		kp []byte
		id string
		it workItem
	}
	var all []held
	c := tx.Bucket(bWork).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n, w := binary.Uvarint(k)
		if w <= 0 || uint64(len(k)-w) < n {
			return unavailable(fmt.Errorf("filestore: corrupt work key %q", k))
		}
		kp := append([]byte(nil), k[:w+int(n)]...)
		it, ok, err := getWork(tx, k)
		if err != nil {
			return err
		}
		if ok && it.lease != 0 {
			all = append(all, held{kp: kp, id: string(k[w+int(n):]), it: it})
		}
	}
	for _, h := range all {
		it := h.it
		it.lease = 0
		if err := putWork(tx, h.kp, h.id, it, &h.it); err != nil {
			return err
		}
	}
	return nil
}
