// Package filestore is writ's embedded durable lifecycle store: one bbolt file
// holding the task records, context owners, tombstones and the work queue, so
// a restart (or kill -9) loses nothing that matters.
//
// Durability is per write. The writes that matter — a task created with its
// owner, a context's owner, a push config stored or removed, a task deleted
// or reaching a terminal state, every work item change — are committed and
// fsynced before the call returns. The others — a non-terminal state change,
// artifact names, a repeated state — return as soon as they are applied: they
// ride the next commit, which the next write that matters makes, or which
// Options.CommitDelay forces (default 100ms). Reads see them at once. A crash
// can lose the last CommitDelay of those (the task then shows an earlier,
// non-terminal state, which the agent's next answer moves on), never a write
// that matters, and never a lazy change without the durable ones before it.
//
// Every write runs in one goroutine (started by Open, stopped by Close), in
// a bbolt read-write transaction that stays open while only lazy writes
// arrive. Writes are group-committed: the writes that arrive while a commit
// is being synced are applied together in the next transaction and share its
// fsync, so concurrent requests pay about one sync per batch rather than one
// each, and a write that matters is never delayed by a timer. The same
// goroutine runs the background sweep that removes expired records.
//
// Indexes (buckets) keep every operation O(log n): records by ref; an age
// index (update time → ref) for expiry; finished records by update time; per
// owner, its records (finished before live) by update time, a count per owner
// and an index of owners by count for "the heaviest owner"; the same for
// contexts; tombstones in eviction order; push-config counts per owner; work
// items by id and by lease end; the retired-id set (task/retired.go), one
// value per block, its layout in the meta bucket: fixed when the file is made,
// so that a changed lifecycle.retired size applies to a new file only.
package filestore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/writ-authz/writ/task"
)

// Defaults of Options.
const (
	DefaultSweepInterval = 10 * time.Second
	DefaultLockTimeout   = 2 * time.Second
	DefaultCommitDelay   = 100 * time.Millisecond
	// maxBatch bounds the writes committed in one transaction.
	maxBatch = 256
	// inlineSweep bounds the expired records one write removes; the background
	// sweep removes the rest.
	inlineSweep = 256
	// formatVersion is the layout of the file; Open refuses another.
	formatVersion = 1
)

var (
	// ErrLocked means another process holds the store's file.
	ErrLocked = errors.New("filestore: the file is held by another process")
	// ErrClosed means the store was closed.
	ErrClosed = errors.New("filestore: closed")
)

// Options tune a Store. Zero values take the defaults.
type Options struct {
	// SweepInterval is how often the background sweep removes expired records
	// and contexts (default 10s). Writes remove expired entries too, and reads
	// never return one, so it only bounds how long expired data stays on disk.
	SweepInterval time.Duration
	// LockTimeout is how long Open waits for a file another process holds
	// before it fails with ErrLocked (default 2s).
	LockTimeout time.Duration
	// CommitDelay bounds how long a write that need not be durable at once
	// (a non-terminal state change, artifact names) waits for the next commit
	// when no write that matters makes one sooner (default 100ms; negative:
	// every write commits at once, as a write that matters does).
	CommitDelay time.Duration
	// Work bounds the work queue. Its Now defaults to the store's clock.
	Work task.WorkLimits
}

var (
	_ task.Store     = (*Store)(nil)
	_ task.WorkQueue = (*Store)(nil)
)

// Store is a task.Store and a task.WorkQueue in one bbolt file.
type Store struct {
	db          *bolt.DB
	path        string
	limits      task.MemoryLimits
	work        task.WorkLimits
	sweepEvery  time.Duration
	commitDelay time.Duration
	// retired is the retired-id set's layout, and retiredCap its capacity, as
	// the file was made with (a later config changes neither).
	retired    task.Retired
	retiredCap int

	ops     chan *op
	stop    chan struct{}
	stopped chan struct{} // closed when the writer has exited
	once    sync.Once

	// pending holds the records that lazy writes changed in the transaction
	// not committed yet, by ref key: Get answers from it, so a caller reads
	// its own lazy write. It is emptied once the transaction commits (or
	// fails, its lazy writes then lost).
	pmu     sync.RWMutex
	pending map[string]task.Record
}

// op is one write, run by the writer goroutine inside a shared transaction.
// fn must be safe to run again (in a transaction of its own) if the shared
// transaction fails: it resets whatever it reports before it starts. It
// returns a domain error only before it has written anything, and wraps every
// failure of bbolt with task.ErrUnavailable.
type op struct {
	fn   func(tx *bolt.Tx, w *writeCtx) error
	err  error
	ev   []task.Eviction
	done chan struct{}
}

// writeCtx is what an op's fn may use: the time, and what it reports — the
// evictions it caused, whether its caller must wait for the commit, and the
// record it changed when not.
type writeCtx struct {
	now time.Time
	ev  []task.Eviction
	// lazy: the write need not be durable before its call returns.
	lazy bool
	// changed is the record (and its ref key) a lazy write changed.
	changedKey []byte
	changed    *task.Record
}

// setLazy marks the write as one that may return before its commit, having
// changed rec (stored under rk).
func (w *writeCtx) setLazy(rk []byte, rec *task.Record) {
	w.lazy, w.changedKey, w.changed = true, rk, rec
}

// Open opens (or creates) the store at path: its directory is created if
// missing (0700) and the file is 0600. A file another process holds is
// refused with ErrLocked after Options.LockTimeout. Failures of the file
// system wrap task.ErrUnavailable.
//
// The file lock means that whoever held the work items' leases before Open
// is gone: Open releases every lease, so the work is claimable at once.
func Open(path string, l task.MemoryLimits, o Options) (*Store, error) {
	if o.SweepInterval <= 0 {
		o.SweepInterval = DefaultSweepInterval
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.CommitDelay == 0 {
		o.CommitDelay = DefaultCommitDelay
	}
	l = l.WithDefaults()
	if o.Work.Now == nil {
		o.Work.Now = l.Now
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, unavailable(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout: o.LockTimeout,
		// The freelist is rebuilt on open instead of written at every commit.
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s (no lock within %v)", ErrLocked, path, o.LockTimeout)
	}
	if err != nil {
		return nil, unavailable(fmt.Errorf("open %s: %w", path, err))
	}
	s := &Store{
		db: db, path: path, limits: l, work: o.Work.WithDefaults(), sweepEvery: o.SweepInterval,
		commitDelay: o.CommitDelay,
		ops:         make(chan *op), stop: make(chan struct{}), stopped: make(chan struct{}),
		pending: map[string]task.Record{},
	}
	if err := s.init(); err != nil {
		db.Close()
		return nil, err
	}
	go s.writer()
	return s, nil
}

// init creates the buckets, checks the format version and releases the
// leases of the work items.
func (s *Store) init() error {
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return unavailable(err)
			}
		}
		m := tx.Bucket(bMeta)
		switch v := m.Get(kVersion); {
		case v == nil:
			if err := m.Put(kVersion, u64(formatVersion)); err != nil {
				return unavailable(err)
			}
		case len(v) != 8 || binary.BigEndian.Uint64(v) != formatVersion:
			return fmt.Errorf("filestore: %s has an unknown format version", s.path)
		}
		var err error
		if s.retired, s.retiredCap, err = initRetired(tx, s.limits); err != nil {
			return err
		}
		return releaseLeases(tx)
	})
}

// Close stops the background sweep, commits what is pending and closes the
// file. The store cannot be used afterwards.
func (s *Store) Close() error {
	var err error
	s.once.Do(func() {
		close(s.stop)
		<-s.stopped
		err = s.db.Close()
	})
	return err
}

// Ping reports whether the store can serve: nil while it is open.
func (s *Store) Ping(ctx context.Context) error {
	return s.read(ctx, func(tx *bolt.Tx) error {
		if tx.Bucket(bMeta) == nil {
			return unavailable(fmt.Errorf("filestore: %s has no meta bucket", s.path))
		}
		return nil
	})
}

// Path is the store's file.
func (s *Store) Path() string { return s.path }

// Limits returns the limits in force, defaults filled in.
func (s *Store) Limits() task.MemoryLimits { return s.limits }

// unavailable wraps a failure of the file system or of bbolt.
func unavailable(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", task.ErrUnavailable, err)
}

// openTx is the writer's transaction not committed yet.
type openTx struct {
	tx *bolt.Tx
	n  int // writes applied in it
	// waiting are the writes whose callers wait for the commit.
	waiting []*op
	// timed: the commit delay runs for this transaction.
	timed bool
}

// writer runs every write and the sweep. Writes are applied to the open
// transaction as they arrive; it commits as soon as a caller waits for it (or
// it holds maxBatch writes), else when CommitDelay has passed.
func (s *Store) writer() {
	defer close(s.stopped)
	tick := time.NewTicker(s.sweepEvery)
	defer tick.Stop()
	flush := time.NewTimer(time.Hour)
	flush.Stop()
	var t *openTx
	batch := make([]*op, 0, maxBatch)
	settle := func() {
		if t == nil {
			flush.Stop()
			return
		}
		if len(t.waiting) > 0 || t.n >= maxBatch || s.commitDelay < 0 {
			flush.Stop()
			s.commit(t)
			t = nil
			return
		}
		if !t.timed {
			flush.Reset(s.commitDelay)
			t.timed = true
		}
	}
	for {
		select {
		case o := <-s.ops:
			batch = append(batch[:0], o)
		drain:
			for len(batch) < maxBatch {
				select {
				case o := <-s.ops:
					batch = append(batch, o)
				default:
					break drain
				}
			}
			for _, o := range batch {
				t = s.apply(t, o)
			}
			settle()
		case <-flush.C:
			if t != nil {
				s.commit(t)
				t = nil
			}
		case <-tick.C:
			t = s.sweepAll(t)
			settle()
		case <-s.stop:
			if t != nil {
				s.commit(t)
			}
			return
		}
	}
}

// apply runs o in the open transaction (begun if there is none) and answers
// its caller at once unless the caller must wait for the commit. It returns
// the open transaction, nil when it had to be rolled back.
func (s *Store) apply(t *openTx, o *op) *openTx {
	if t == nil {
		tx, err := s.db.Begin(true)
		if err != nil {
			o.err = unavailable(err)
			close(o.done)
			return nil
		}
		t = &openTx{tx: tx}
	}
	w := &writeCtx{now: s.limits.Now()}
	o.err = o.fn(t.tx, w)
	o.ev = w.ev
	if errors.Is(o.err, task.ErrUnavailable) {
		// The transaction may hold part of o's writes: it goes, with the
		// lazy writes already answered (lost, as in a crash), and the waiting
		// writes run again on their own, o last.
		s.rollback(t)
		for _, w := range t.waiting {
			s.alone(w)
		}
		s.alone(o)
		return nil
	}
	t.n++
	if len(t.waiting) == 0 && (o.err != nil || w.lazy) {
		// A refusal wrote nothing that matters, and a lazy write need not
		// wait: both are answered now, unless they follow a write not
		// committed yet, whose effects they may reveal.
		if w.changed != nil && o.err == nil {
			s.pmu.Lock()
			s.pending[string(w.changedKey)] = cloneRecord(*w.changed)
			s.pmu.Unlock()
		}
		close(o.done)
		return t
	}
	t.waiting = append(t.waiting, o)
	return t
}

// commit commits the open transaction and answers the writes waiting for it.
// If the commit fails, the lazy writes in it are lost and the waiting ones
// run again, each in a transaction of its own.
func (s *Store) commit(t *openTx) {
	err := t.tx.Commit()
	s.clearPending()
	if err != nil {
		for _, o := range t.waiting {
			s.alone(o)
		}
		return
	}
	for _, o := range t.waiting {
		close(o.done)
	}
}

func (s *Store) rollback(t *openTx) {
	_ = t.tx.Rollback()
	s.clearPending()
}

func (s *Store) clearPending() {
	s.pmu.Lock()
	clear(s.pending)
	s.pmu.Unlock()
}

// pendingRecord is the record of rk as a lazy write not committed yet left it.
func (s *Store) pendingRecord(rk []byte) (task.Record, bool) {
	s.pmu.RLock()
	defer s.pmu.RUnlock()
	r, ok := s.pending[string(rk)]
	return cloneRecord(r), ok
}

// cloneRecord is a copy of r that shares no memory with it.
func cloneRecord(r task.Record) task.Record {
	r.Task.Artifacts = slices.Clone(r.Task.Artifacts)
	r.Task.Chain = slices.Clone(r.Task.Chain)
	r.Push = slices.Clone(r.Push)
	return r
}

// alone runs o in a transaction of its own, committed before it is answered.
func (s *Store) alone(o *op) {
	err := s.db.Update(func(tx *bolt.Tx) error {
		w := &writeCtx{now: s.limits.Now()}
		o.err = o.fn(tx, w)
		o.ev = w.ev
		if errors.Is(o.err, task.ErrUnavailable) {
			return o.err
		}
		return nil
	})
	if err != nil {
		o.ev = nil
		if !errors.Is(err, task.ErrUnavailable) {
			err = unavailable(err)
		}
		o.err = err
	}
	close(o.done)
}

// write runs fn as one write (durable unless fn marks it lazy) and reports the
// evictions it caused.
func (s *Store) write(ctx context.Context, fn func(tx *bolt.Tx, w *writeCtx) error) error {
	if err := ctx.Err(); err != nil {
		return unavailable(err)
	}
	o := &op{fn: fn, done: make(chan struct{})}
	select {
	case s.ops <- o:
	case <-s.stopped:
		return unavailable(ErrClosed)
	case <-ctx.Done():
		return unavailable(ctx.Err())
	}
	select {
	case <-o.done:
	case <-ctx.Done():
		// The write may still happen: like a request lost on the network.
		return unavailable(ctx.Err())
	}
	if s.limits.OnEvict != nil {
		for _, e := range o.ev {
			s.limits.OnEvict(e)
		}
	}
	return o.err
}

// read runs fn in a read-only transaction.
func (s *Store) read(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return unavailable(err)
	}
	select {
	case <-s.stopped:
		return unavailable(ErrClosed)
	default:
	}
	err := s.db.View(fn)
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return unavailable(ErrClosed)
	}
	return err
}

// sweepAll removes every expired record and context, a bounded number per
// transaction, riding the open transaction (a lazy write).
func (s *Store) sweepAll(t *openTx) *openTx {
	for {
		more := false
		o := &op{done: make(chan struct{}), fn: func(tx *bolt.Tx, w *writeCtx) error {
			w.lazy = true
			n, err := sweep(tx, s.limits.TTL, w.now, 4096)
			more = n == 4096
			return err
		}}
		if t = s.apply(t, o); t == nil || o.err != nil || !more {
			return t
		}
		s.commit(t)
		t = nil
	}
}
