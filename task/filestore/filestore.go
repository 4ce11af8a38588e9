// Package filestore is writ's embedded durable lifecycle store: one bbolt file
// holding the task records, context owners, tombstones and the work queue, so
// a restart (or kill -9) loses nothing that an answer revealed.
//
// Group commit is this package's own commit loop, not bbolt's DB.Batch.
// Batch coalesces concurrent Update calls into one transaction, but every
// caller still waits for that commit, and bbolt holds its one write
// transaction through both fdatasyncs of a commit, so nothing can be applied
// while a commit syncs. Here one goroutine (the writer, started by Open,
// stopped by Close) applies every write at once to an in-memory overlay on
// top of the committed file (overlay.go), and commits a frozen overlay in
// the background while the next one takes the writes that arrive meanwhile:
// one commit (two fdatasyncs) per batch, whatever the number of requests in
// it, and a write never waits for a sync to be applied. Reads go through the
// overlays to the file, so they see every write applied. A commit starts
// when none is under way and a caller waits for it (after
// Options.BatchWindow while busy), else CommitDelay after the first lazy
// write.
//
// Durability is per write. The writes that matter — a task created with its
// owner, a context's owner, a push config stored or removed, a task deleted
// or reaching a terminal state, every work item change — are durable before
// the call returns, or, made through a Batch (Store.Defer, task.Deferred),
// before the Batch's Sync returns: the core syncs what one answer revealed
// once, before the answer is sent. The others — a non-terminal state change,
// artifact names, a repeated state — return as soon as they are applied and
// ride the next commit, which the next write that matters makes, or which
// Options.CommitDelay forces (default 100ms). A crash can lose the last
// CommitDelay of those (the task then shows an earlier, non-terminal state,
// which the agent's next answer moves on), never a write that matters, and
// never a lazy change without the durable ones before it (overlays commit in
// order). A failed commit loses its overlay and the one built on it; every
// call and Sync waiting for either fails with task.ErrUnavailable.
//
// Indexes (buckets) keep every operation O(log n): records by ref; an age
// index (update time → ref) for expiry; finished records by update time; per
// owner, its records (finished before live) by update time, a count per owner
// and an index of owners by count for "the heaviest owner"; the same for
// contexts; tombstones in eviction order; push-config counts per owner; work
// items by id and by lease end; the retired-id set (task/retired.go), one
// value per block, its layout in the meta bucket: fixed when the file is made,
// so that a changed lifecycle.retired size applies to a new file only. The
// writer also runs the background sweep that removes expired records.
package filestore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
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
	// DefaultBatchWindow: while the store is busy (writes arrived while
	// the last commit synced), a commit waits up to 1ms from its first
	// urgent write for more writes to share it; an idle store commits at
	// once.
	DefaultBatchWindow = time.Millisecond
	// MaxBatchWindow bounds Options.BatchWindow: every durable write waits
	// up to that long before its commit even starts.
	MaxBatchWindow = 10 * time.Millisecond
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
	// BatchWindow is how long a commit that a caller waits for may wait,
	// from its first such write, for more writes to share it, when the
	// store is busy: writes arrived while the last commit synced (default
	// DefaultBatchWindow, 1ms; negative: never, a commit starts as soon as
	// none is under way). An idle store commits at once, and writes that
	// arrive while a commit syncs wait for it either way. At most
	// MaxBatchWindow.
	BatchWindow time.Duration
	// Work bounds the work queue. Its Now defaults to the store's clock.
	Work task.WorkLimits
}

var (
	_ task.Store     = (*Store)(nil)
	_ task.WorkQueue = (*Store)(nil)
	_ task.Deferring = (*Store)(nil)
)

// Store is a task.Store and a task.WorkQueue in one bbolt file.
type Store struct {
	db          *bolt.DB
	path        string
	limits      task.MemoryLimits
	work        task.WorkLimits
	sweepEvery  time.Duration
	commitDelay time.Duration
	batchWindow time.Duration
	// retired is the retired-id set's layout, and retiredCap its capacity, as
	// the file was made with (a later config changes neither).
	retired    task.Retired
	retiredCap int

	ops     chan *op
	stop    chan struct{}
	stopped chan struct{} // closed when the writer has exited
	once    sync.Once

	// mu guards the overlays: the writer changes cur (and swaps them) under
	// it, reads read both under its read lock. cur is the open overlay;
	// frozen the one being committed (nil when none is).
	mu          sync.RWMutex
	cur, frozen *overlay
	// sweepMore: the last sweep stopped at its bound; busy: writes arrived
	// while the last commit synced; swept: where sweeps stopped (overlay.go).
	// The writer's own.
	sweepMore, busy bool
	swept           sweptTo
	// epoch is the start of the writer's clock (monotonic, for the timers).
	epoch time.Time
	// commits counts the transactions committed (each one bbolt commit: its
	// fdatasyncs), for the tests that check that writes share them; and
	// beforeCommit, when set (tests), runs in the commit's goroutine before
	// it writes: an error fails the commit.
	commits      atomic.Uint64
	beforeCommit func() error
}

// clock is the writer's monotonic time in ns.
func (s *Store) clock() int64 { return int64(time.Since(s.epoch)) }

// writeCtx is what an op's fn may use: the time, and what it reports — the
// evictions it caused, and whether its caller must wait for the commit.
type writeCtx struct {
	now time.Time
	ev  []task.Eviction
	// lazy: the write need not be durable before its call returns.
	lazy bool
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
	switch {
	case o.BatchWindow == 0:
		o.BatchWindow = DefaultBatchWindow
	case o.BatchWindow < 0:
		o.BatchWindow = 0
	case o.BatchWindow > MaxBatchWindow:
		return nil, fmt.Errorf("filestore: batch window %v: at most %v", o.BatchWindow, MaxBatchWindow)
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
		commitDelay: o.CommitDelay, batchWindow: o.BatchWindow,
		ops: make(chan *op), stop: make(chan struct{}), stopped: make(chan struct{}),
		cur: newOverlay(), epoch: time.Now(),
	}
	if err := s.init(); err != nil {
		db.Close()
		return nil, err
	}
	go s.writer()
	return s, nil
}

// init creates the buckets, checks the format version and releases the
// leases of the work items, in one commit before the writer starts.
func (s *Store) init() error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return unavailable(err)
			}
		}
		return nil
	})
	if err != nil {
		return unavailable(err)
	}
	base, err := s.db.Begin(false)
	if err != nil {
		return unavailable(err)
	}
	v := &view{layers: [2]*overlay{s.cur}, w: s.cur, base: base}
	err = s.initIn(v)
	_ = base.Rollback()
	if err != nil {
		return err
	}
	if err := s.db.Update(s.cur.copyTo); err != nil {
		return unavailable(err)
	}
	s.cur = newOverlay()
	return nil
}

func (s *Store) initIn(tx *view) error {
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
	return s.read(ctx, func(tx *view) error {
		if tx.base.Bucket(bMeta) == nil {
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

// op is one write, run by the writer goroutine on the open overlay. fn
// returns a domain error only before it has written anything, and wraps
// every failure of bbolt with task.ErrUnavailable (then what it wrote is
// undone).
type op struct {
	fn  func(tx *view, w *writeCtx) error
	err error
	ev  []task.Eviction
	// ov is the overlay whose commit makes the write durable (nil when
	// there is nothing to wait for).
	ov   *overlay
	done chan struct{} // closed once the op is applied
}

// writer applies every write and the sweep to the open overlay, and starts
// a commit of it (in a goroutine of its own: see overlay.go) when none is
// under way and
//   - a caller waits for it, or will (urgent), and the batch window since the
//     first such write has passed (or the overlay holds maxBatch writes),
//   - else when CommitDelay has passed since its first (lazy) write.
//
// So the writes that arrive while a commit syncs are applied at once and
// share the next commit: one sync per batch, however many requests wrote.
func (s *Store) writer() {
	defer close(s.stopped)
	tick := time.NewTicker(s.sweepEvery)
	defer tick.Stop()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	committed := make(chan error, 1)
	batch := make([]*op, 0, maxBatch)
	for {
		ops := s.ops
		if s.frozen != nil && s.cur.n >= maxBatch {
			ops = nil // a full overlay waits for the commit under way
		}
		select {
		case o := <-ops:
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
			s.applyBatch(batch)
		case err := <-committed:
			s.resolve(err)
		case <-timer.C:
		case <-tick.C:
			s.sweepAll()
		case <-s.stop:
			if s.frozen != nil {
				s.resolve(<-committed)
			}
			if s.cur.n > 0 {
				s.startCommit(committed)
				s.resolve(<-committed)
			}
			return
		}
		s.schedule(timer, committed)
	}
}

// schedule starts the commit of the open overlay when it is due, or sets
// the timer for when it will be.
func (s *Store) schedule(timer *time.Timer, committed chan error) {
	cur := s.cur
	if s.frozen != nil || cur.n == 0 {
		return // the commit under way ends in a resolve, which schedules again
	}
	now := s.clock()
	due := cur.lazySince + int64(s.commitDelay)
	if cur.urgent {
		// Busy (writes arrived while the last commit synced): wait up to
		// the window for more writes to share the commit. Idle: commit at
		// once, so that a lone caller, or one request after another, pays
		// no window.
		due = cur.urgentSince
		if s.busy {
			due += int64(s.batchWindow)
		}
	}
	if cur.n >= maxBatch || cur.full || s.commitDelay < 0 {
		due = now
	}
	if now >= due {
		timer.Stop()
		s.startCommit(committed)
		return
	}
	timer.Reset(time.Duration(due - now))
}

// startCommit freezes the open overlay and commits it in the background;
// the result arrives on committed.
func (s *Store) startCommit(committed chan<- error) {
	s.mu.Lock()
	o := s.cur
	s.frozen, s.cur = o, newOverlay()
	hook := s.beforeCommit
	s.mu.Unlock()
	go func() {
		var err error
		if hook != nil {
			err = hook()
		}
		if err == nil {
			err = s.db.Update(o.copyTo)
		}
		if err == nil {
			s.commits.Add(1)
		}
		committed <- err
	}()
}

// resolve ends the commit under way: its writes are in the file, or lost
// together with the open overlay, which was built on them.
func (s *Store) resolve(err error) {
	s.busy = s.cur.n > 0
	s.mu.Lock()
	o := s.frozen
	s.frozen = nil
	var lost *overlay
	if err != nil {
		lost, s.cur = s.cur, newOverlay()
		s.swept.forget() // what the lost overlays removed is back
	}
	s.mu.Unlock()
	if err != nil {
		o.err = unavailable(fmt.Errorf("commit: %w", err))
		lost.err = unavailable(fmt.Errorf("an earlier commit failed: %w", err))
		close(lost.done)
	}
	close(o.done)
	if s.sweepMore {
		s.sweepAll()
	}
}

// applyBatch applies ops in order, under one lock and one read transaction
// of the file (a read-only bbolt transaction looks each bucket up afresh:
// one per batch, not per op). Readers wait for the batch; the writer holds
// nothing else while it holds the lock, and takes the lock before the
// transaction, as readers do, so a commit that must remap the file (it waits
// for every read transaction) always gets it.
func (s *Store) applyBatch(ops []*op) {
	s.mu.Lock()
	defer s.mu.Unlock()
	base, err := s.db.Begin(false)
	if err != nil {
		for _, o := range ops {
			o.err = unavailable(err)
			close(o.done)
		}
		return
	}
	defer func() { _ = base.Rollback() }()
	v := &view{base: base, swept: &s.swept}
	for _, o := range ops {
		s.applyOp(v, o)
	}
}

// applyOp runs o on the open overlay through v and answers it.
func (s *Store) applyOp(v *view, o *op) {
	defer close(o.done)
	cur := s.cur
	cur.undo = cur.undo[:0]
	v.layers, v.w = [2]*overlay{cur, s.frozen}, cur
	w := &writeCtx{now: s.limits.Now()}
	o.err = o.fn(v, w)
	if errors.Is(o.err, task.ErrUnavailable) {
		cur.rollbackOp()
		s.swept.forget() // what it removed is back
		return
	}
	o.ev = w.ev
	wrote := len(cur.undo) > 0
	cur.undo = cur.undo[:0]
	now := s.clock()
	if wrote {
		if cur.n == 0 {
			cur.lazySince = now
		}
		cur.n++
	}
	switch {
	case wrote && w.lazy:
		// Need not be durable before the call returns: rides the next commit.
	case wrote:
		o.ov = cur
	case o.err != nil && !errors.Is(o.err, task.ErrNotFound):
		// A refusal (ErrExists, a bound, ErrRetired) may reveal a write not
		// committed yet: it waits for that write's commit.
		o.ov = cur
		if cur.n == 0 {
			o.ov = s.frozen
		}
	}
	if o.ov == cur && !cur.urgent {
		cur.urgent, cur.urgentSince = true, now
	}
}

// write runs fn as one write and reports the evictions it caused. A write
// of a Batch (b non-nil) returns once applied and leaves its commit to
// b.Sync; any other returns once durable, unless fn marks it lazy.
func (s *Store) write(ctx context.Context, b *Batch, fn func(tx *view, w *writeCtx) error) error {
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
	if o.ov != nil {
		if b != nil {
			b.after(o.ov)
		} else if err := waitCommit(ctx, o.ov); err != nil {
			return err
		}
	}
	if s.limits.OnEvict != nil {
		for _, e := range o.ev {
			s.limits.OnEvict(e)
		}
	}
	return o.err
}

// waitCommit waits until the overlay is committed (nil) or lost.
func waitCommit(ctx context.Context, ov *overlay) error {
	select {
	case <-ov.done:
		return ov.err
	case <-ctx.Done():
		return unavailable(ctx.Err())
	}
}

// read runs fn on a read-only view: the file as last committed, under the
// writes applied since.
func (s *Store) read(ctx context.Context, fn func(tx *view) error) error {
	if err := ctx.Err(); err != nil {
		return unavailable(err)
	}
	select {
	case <-s.stopped:
		return unavailable(ErrClosed)
	default:
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	base, err := s.db.Begin(false)
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return unavailable(ErrClosed)
	}
	if err != nil {
		return unavailable(err)
	}
	defer func() { _ = base.Rollback() }()
	return fn(&view{layers: [2]*overlay{s.cur, s.frozen}, base: base})
}

// sweepAll removes expired records and contexts, at most 4096 in one
// overlay (a lazy write); when there are more, that overlay commits at once
// and the sweep goes on after it.
func (s *Store) sweepAll() {
	more := false
	o := &op{done: make(chan struct{}), fn: func(tx *view, w *writeCtx) error {
		w.lazy = true
		n, err := sweep(tx, s.limits.TTL, w.now, 4096)
		more = n == 4096
		return err
	}}
	s.applyBatch([]*op{o})
	s.sweepMore = more && o.err == nil
	if s.sweepMore {
		s.cur.full = true
	}
}
