package filestore

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// A bbolt commit holds the file's one write transaction through both of its
// fdatasyncs, so no write can be applied while a commit syncs. Writes are
// therefore applied to an overlay — the changes since the last commit began,
// by bucket and key, in memory — on top of the committed file, and a commit
// copies a frozen overlay into one bbolt transaction while the next overlay
// takes the writes that arrive meanwhile. Every operation reads through
// the layers (the open overlay, the one being committed, the file), so it
// sees every write applied before it, committed or not.

// overlay is the writes applied since the last commit began.
type overlay struct {
	buckets map[string]*ovBucket
	// n counts the operations that wrote to it; full: it commits as soon
	// as it can (a sweep that found more to remove).
	n    int
	full bool
	// urgent: a caller waits for its commit (a durable write), or will
	// (a deferred write, which Batch.Sync waits for); urgentSince is when
	// the first such write was applied, lazySince the first of any write.
	urgent                 bool
	urgentSince, lazySince int64 // Unix ns, of the monotonic writer clock
	// done is closed when the overlay is committed (err nil) or lost (err
	// set: its commit, or an earlier one it was built on, failed).
	done chan struct{}
	err  error
	// undo holds what the operation being applied replaced, so that an
	// operation that fails half way leaves nothing behind.
	undo []undoEntry
}

// ovBucket is one bucket's changes: each key's new value, or its deletion,
// and the keys in order for cursors.
type ovBucket struct {
	m    map[string]ovEntry
	keys keyset // every key of m, in order
}

type ovEntry struct {
	v   []byte
	del bool
}

type undoEntry struct {
	b    *ovBucket
	key  string
	had  bool
	prev ovEntry
}

func newOverlay() *overlay {
	return &overlay{buckets: map[string]*ovBucket{}, done: make(chan struct{})}
}

func (o *overlay) bucket(name []byte) *ovBucket {
	if o == nil {
		return nil
	}
	return o.buckets[string(name)]
}

// set records k's new value (or deletion) and what it replaced.
func (o *overlay) set(name, k []byte, e ovEntry) {
	ob := o.buckets[string(name)]
	if ob == nil {
		ob = &ovBucket{m: map[string]ovEntry{}}
		o.buckets[string(name)] = ob
	}
	key := string(k)
	prev, had := ob.m[key]
	o.undo = append(o.undo, undoEntry{b: ob, key: key, had: had, prev: prev})
	if !had {
		ob.keys.insert(key)
	}
	ob.m[key] = e
}

// rollbackOp undoes the writes of the operation being applied.
func (o *overlay) rollbackOp() {
	for i := len(o.undo) - 1; i >= 0; i-- {
		u := o.undo[i]
		if u.had {
			u.b.m[u.key] = u.prev
			continue
		}
		delete(u.b.m, u.key)
		u.b.keys.remove(u.key)
	}
	o.undo = o.undo[:0]
}

// copyTo writes the overlay's changes into a bbolt write transaction.
func (o *overlay) copyTo(tx *bolt.Tx) error {
	for name, ob := range o.buckets {
		b := tx.Bucket([]byte(name))
		if b == nil {
			return errNoBucket(name)
		}
		err := ob.keys.each(func(k string) error {
			if e := ob.m[k]; !e.del {
				return b.Put([]byte(k), e.v)
			}
			return b.Delete([]byte(k))
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func errNoBucket(name string) error { return fmt.Errorf("filestore: the file has no bucket %q", name) }

// view is what an operation reads and writes: the open overlay (nil for a
// read), the overlay being committed (nil when none is) and the file as last
// committed (a read-only bbolt transaction). It is used by one goroutine,
// under Store.mu.
type view struct {
	// layers are the overlays, the open one first; w is the one writes go
	// to (the open overlay, nil in a read).
	layers [2]*overlay
	w      *overlay
	base   *bolt.Tx
	// swept is where the sweeps of the age indexes stopped (the writer's;
	// a view without it starts every sweep at the first key).
	swept *sweptTo
	// opened caches the file's buckets (a read-only bbolt transaction looks
	// a bucket up again at every Bucket call), by the name's slice: callers
	// pass the package's bucket names, so a pointer compare finds them.
	opened [24]openedBucket
	nOpen  int
}

type openedBucket struct {
	name *byte
	b    *bolt.Bucket
}

// Bucket returns the bucket name through every layer.
func (v *view) Bucket(name []byte) bucket {
	for i := range v.nOpen {
		if o := v.opened[i]; o.name == &name[0] {
			return bucket{v: v, name: name, base: o.b}
		}
	}
	bb := v.base.Bucket(name)
	if v.nOpen < len(v.opened) {
		v.opened[v.nOpen] = openedBucket{name: &name[0], b: bb}
		v.nOpen++
	}
	return bucket{v: v, name: name, base: bb}
}

// bucket is one bucket through a view's layers.
type bucket struct {
	v    *view
	name []byte
	base *bolt.Bucket
}

// lookup finds k in the overlays, the open one first.
func (b bucket) lookup(k []byte) (ovEntry, bool) {
	for _, o := range b.v.layers {
		if ob := o.bucket(b.name); ob != nil {
			if e, ok := ob.m[string(k)]; ok {
				return e, true
			}
		}
	}
	return ovEntry{}, false
}

// Get returns k's value, nil if it has none. The value must not be changed.
func (b bucket) Get(k []byte) []byte {
	if e, ok := b.lookup(k); ok {
		if e.del {
			return nil
		}
		return e.v
	}
	if b.base == nil {
		return nil
	}
	return b.base.Get(k)
}

// sweptTo is where the last sweep of each age index stopped: every key
// before it has been removed (in an overlay or the file), so the next sweep
// seeks there instead of skipping, from the first key, the deletions the
// overlays hold (thousands after a large sweep, until their commit). It is
// forgotten (nil: start at the first key) whenever a key before it could be
// live again: a put before it (a clock that went back), an operation undone,
// a commit lost.
type sweptTo struct{ age, ctx []byte }

// put forgets the place of the index name if k is before it.
func (s *sweptTo) put(name, k []byte) {
	switch {
	case s == nil:
	case &name[0] == &bAge[0] && s.age != nil && bytes.Compare(k, s.age) < 0:
		s.age = nil
	case &name[0] == &bCtxAge[0] && s.ctx != nil && bytes.Compare(k, s.ctx) < 0:
		s.ctx = nil
	}
}

func (s *sweptTo) forget() {
	if s != nil {
		s.age, s.ctx = nil, nil
	}
}

// Put sets k to a copy of v in the open overlay.
func (b bucket) Put(k, v []byte) error {
	if b.v.w == nil {
		return bolterrors.ErrTxNotWritable
	}
	b.v.swept.put(b.name, k)
	b.v.w.set(b.name, k, ovEntry{v: append(make([]byte, 0, len(v)), v...)})
	return nil
}

// Delete removes k in the open overlay.
func (b bucket) Delete(k []byte) error {
	if b.v.w == nil {
		return bolterrors.ErrTxNotWritable
	}
	b.v.w.set(b.name, k, ovEntry{del: true})
	return nil
}

// ForEach calls fn for every key in order.
func (b bucket) ForEach(fn func(k, v []byte) error) error {
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

// Cursor returns a cursor over the bucket's keys through every layer.
func (b bucket) Cursor() *cursor {
	c := &cursor{b: b}
	if b.base != nil {
		c.bc = b.base.Cursor()
	}
	return c
}

// cursor walks a bucket's keys in order, each with its value from the top
// layer that has it, skipping deleted ones. It keeps its place by key, so
// writes between its moves (the sweep deletes what it just read) are safe.
type cursor struct {
	b   bucket
	bc  *bolt.Cursor
	key []byte // the current key, nil before the first move or past the end
}

// from moves to k, or to the first key when k is nil.
func (c *cursor) from(k []byte) ([]byte, []byte) {
	if k == nil {
		return c.First()
	}
	return c.Seek(k)
}

// First moves to the first key.
func (c *cursor) First() ([]byte, []byte) { return c.seek(nil, true) }

// Seek moves to the first key at or after k.
func (c *cursor) Seek(k []byte) ([]byte, []byte) { return c.seek(k, true) }

// Next moves to the key after the current one.
func (c *cursor) Next() ([]byte, []byte) {
	if c.key == nil {
		return nil, nil
	}
	return c.seek(c.key, false)
}

// Delete removes the current key.
func (c *cursor) Delete() error {
	if c.key == nil {
		return nil
	}
	return c.b.Delete(c.key)
}

// seek moves to the first live key at or after k (after k when !incl). Each
// source keeps its place while deleted keys are skipped, so skipping is
// O(1) a key.
func (c *cursor) seek(k []byte, incl bool) ([]byte, []byte) {
	var bk, bv []byte // the file's next key
	if c.bc != nil {
		if k == nil {
			bk, bv = c.bc.First()
		} else if bk, bv = c.bc.Seek(k); !incl && bk != nil && bytes.Equal(bk, k) {
			bk, bv = c.bc.Next()
		}
	}
	var keys [2]keyIter // each overlay's next key
	for j, o := range c.b.v.layers {
		if ob := o.bucket(c.b.name); ob != nil {
			keys[j] = ob.keys.from(string(k), incl)
		}
	}
	for {
		best, fromFile := bk, bk != nil
		for _, it := range keys {
			if it.valid() && (best == nil || it.key() < string(best)) {
				best, fromFile = []byte(it.key()), false
			}
		}
		if best == nil {
			c.key = nil
			return nil, nil
		}
		if fromFile {
			best = append([]byte(nil), best...) // a bbolt key is valid only in place
		}
		e, over := c.b.lookup(best)
		if !over {
			c.key = best
			return best, bv // only the file has it
		}
		if !e.del {
			c.key = best
			return best, e.v
		}
		// Deleted: every source moves past it.
		if bk != nil && bytes.Equal(bk, best) {
			bk, bv = c.bc.Next()
		}
		for j := range keys {
			if keys[j].valid() && keys[j].key() == string(best) {
				keys[j].next()
			}
		}
	}
}

// Last moves to the last live key.
func (c *cursor) Last() ([]byte, []byte) {
	var bound []byte // exclusive upper bound; nil: none
	for {
		var best []byte
		found := false
		consider := func(cand []byte) {
			if !found || bytes.Compare(cand, best) > 0 {
				best, found = cand, true
			}
		}
		// (Last is rare: the heaviest owner. It is written for clarity.)
		for _, o := range c.b.v.layers {
			if ob := o.bucket(c.b.name); ob != nil {
				if k, ok := ob.keys.before(string(bound), bound != nil); ok {
					consider([]byte(k))
				}
			}
		}
		if c.bc != nil {
			var bk []byte
			if bound == nil {
				bk, _ = c.bc.Last()
			} else if bk, _ = c.bc.Seek(bound); bk == nil {
				bk, _ = c.bc.Last()
			} else {
				bk, _ = c.bc.Prev()
			}
			if bk != nil && (bound == nil || bytes.Compare(bk, bound) < 0) {
				consider(bk)
			}
		}
		if !found {
			c.key = nil
			return nil, nil
		}
		best = append([]byte(nil), best...)
		if v, live := c.value(best); live {
			c.key = best
			return best, v
		}
		bound = best
	}
}

// value is k's value from the top layer that has it; live is false when
// that layer deleted it.
func (c *cursor) value(k []byte) ([]byte, bool) {
	if e, ok := c.b.lookup(k); ok {
		return e.v, !e.del
	}
	// Not in an overlay: the key came from the file.
	return c.b.base.Get(k), true
}
