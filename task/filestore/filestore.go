// Package filestore is writ's embedded durable lifecycle store: one bbolt file
// holding the task records, context owners, tombstones and the work queue, so
// a restart (or kill -9) loses nothing that a call had returned.
//
// Every write runs in a bbolt read-write transaction that is committed and
// fsynced before the call returns. Writes are group-committed: one goroutine
// (started by Open, stopped by Close) runs every write; the writes that arrive
// while a commit is being synced are applied together in the next transaction
// and share its fsync, so concurrent requests pay about one sync per batch
// rather than one each, and a lone write is never delayed by a timer. The same
// goroutine runs the background sweep that removes expired records.
//
// Indexes (buckets) keep every operation O(log n): records by ref; an age
// index (update time → ref) for expiry; finished records by update time; per
// owner, its records (finished before live) by update time, a count per owner
// and an index of owners by count for "the heaviest owner"; the same for
// contexts; tombstones in eviction order; push-config counts per owner; work
// items by id and by lease end.
package filestore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	// maxBatch bounds the writes committed in one transaction.
	maxBatch = 256
	// inlineSweep bounds the expired records one write removes; the background
	// sweep removes the rest.
	inlineSweep = 256
	// formatVersion is the layout of the file; Open refuses another.
	formatVersion = 1
)

var (
	// ErrLocked: another process holds the store's file.
	ErrLocked = errors.New("filestore: the file is held by another process")
	// ErrClosed: the store was closed.
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
	// Work bounds the work queue. Its Now defaults to the store's clock.
	Work task.WorkLimits
}

var (
	_ task.Store     = (*Store)(nil)
	_ task.WorkQueue = (*Store)(nil)
)

// Store is a task.Store and a task.WorkQueue in one bbolt file.
type Store struct {
	db         *bolt.DB
	path       string
	limits     task.MemoryLimits
	work       task.WorkLimits
	sweepEvery time.Duration

	ops     chan *op
	stop    chan struct{}
	stopped chan struct{} // closed when the writer has exited
	once    sync.Once
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

// writeCtx is what an op's fn may use: the time, and the evictions it caused.
type writeCtx struct {
	now time.Time
	ev  []task.Eviction
}

// Open opens (or creates) the store at path: its directory is created if
// missing (0700) and the file is 0600. A file another process holds is
// refused with ErrLocked after Options.LockTimeout. Failures of the file
// system wrap task.ErrUnavailable.
func Open(path string, l task.MemoryLimits, o Options) (*Store, error) {
	if o.SweepInterval <= 0 {
		o.SweepInterval = DefaultSweepInterval
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
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
		ops: make(chan *op), stop: make(chan struct{}), stopped: make(chan struct{}),
	}
	if err := s.init(); err != nil {
		db.Close()
		return nil, err
	}
	go s.writer()
	return s, nil
}

// init creates the buckets and checks the format version.
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
			return unavailable(m.Put(kVersion, u64(formatVersion)))
		case len(v) != 8 || binary.BigEndian.Uint64(v) != formatVersion:
			return fmt.Errorf("filestore: %s has an unknown format version", s.path)
		}
		return nil
	})
}

// Close stops the background sweep, waits for pending writes and closes the
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

// writer runs every write and the sweep, one transaction per batch.
func (s *Store) writer() {
	defer close(s.stopped)
	tick := time.NewTicker(s.sweepEvery)
	defer tick.Stop()
	batch := make([]*op, 0, maxBatch)
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
			s.commit(batch)
		case <-tick.C:
			s.sweepAll()
		case <-s.stop:
			return
		}
	}
}

// commit runs a batch in one transaction. If the transaction fails, each op
// runs again on its own, so one op's failure is not another's.
func (s *Store) commit(batch []*op) {
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, o := range batch {
			w := &writeCtx{now: s.limits.Now()}
			o.err = o.fn(tx, w)
			o.ev = w.ev
			if errors.Is(o.err, task.ErrUnavailable) {
				return o.err
			}
		}
		return nil
	})
	if err != nil && len(batch) > 1 {
		for _, o := range batch {
			s.commit([]*op{o})
		}
		return
	}
	for _, o := range batch {
		if err != nil {
			o.err, o.ev = unavailable(err), nil
			if errors.Is(err, task.ErrUnavailable) {
				o.err = err
			}
		}
		close(o.done)
	}
}

// write runs fn as one durable write and reports the evictions it caused.
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
// transaction.
func (s *Store) sweepAll() {
	for {
		more := false
		o := &op{done: make(chan struct{}), fn: func(tx *bolt.Tx, w *writeCtx) error {
			n, err := sweep(tx, s.limits.TTL, w.now, 4096)
			more = n == 4096
			return err
		}}
		s.commit([]*op{o})
		if o.err != nil || !more {
			return
		}
	}
}
