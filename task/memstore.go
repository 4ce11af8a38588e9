package task

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"
)

// Default limits of a store.
const (
	DefaultMaxTasks        = 100_000
	DefaultMaxPerOwner     = 10_000
	DefaultTTL             = 24 * time.Hour
	DefaultMaxArtifacts    = 256
	DefaultMaxPushPerTask  = 10
	DefaultMaxPushPerOwner = 1000
	// DefaultRetiredFalsePositive is the retired-id set's false-positive rate
	// at its capacity: one fresh id in a million refused.
	DefaultRetiredFalsePositive = 1e-6
	// minRetiredCapacity is the least default capacity of the retired-id set.
	minRetiredCapacity = 1_000_000
)

// MemoryLimits bound a store (the memory store, and the others through
// WithDefaults). A zero or negative field takes its default.
type MemoryLimits struct {
	// MaxTasks bounds the number of records. Beyond it the store evicts an
	// expired record, else the least recently updated finished one, else the
	// heaviest owner's least recently updated record.
	MaxTasks int
	// MaxContexts bounds the context owners kept (default MaxTasks).
	MaxContexts int
	// MaxPerOwner bounds the records (and, separately, the contexts) of one
	// owner (Owner.Tenant and Owner.AgentID; all anonymous callers share one
	// owner). Beyond it that owner's oldest record goes — a finished one first —
	// never another owner's.
	MaxPerOwner int
	// TTL is how long a record lives after its last update (Create or Apply),
	// and a context after its last claim.
	TTL time.Duration
	// MaxArtifacts bounds the artifact names kept per task; later names are
	// dropped. It keeps an upstream that streams endless artifacts from growing a
	// record without bound.
	MaxArtifacts int
	// MaxPushPerTask bounds a task's push configs (default 10).
	MaxPushPerTask int
	// MaxPushPerOwner bounds the push configs of one owner across tasks
	// (default 1000).
	MaxPushPerOwner int
	// MaxTombstones bounds the evicted tasks whose owner is remembered (default
	// MaxTasks/10, at least 1024).
	MaxTombstones int
	// RetiredCapacity is how many ids (tasks and contexts) the retired-id set
	// holds at RetiredFalsePositive (default ten times MaxTasks, at least a
	// million). It never forgets: beyond its capacity its false-positive rate
	// rises, so more fresh ids are refused (see retired.go).
	RetiredCapacity int
	// RetiredFalsePositive is the set's false-positive rate at its capacity
	// (default 1e-6).
	RetiredFalsePositive float64
	// OnEvict, when set, is called once per eviction, after the store's lock is
	// released, from the goroutine whose write caused it: keep it fast.
	OnEvict func(Eviction)
	// Now is the store's clock; nil means time.Now. It must be safe for
	// concurrent use. Tests set it to drive expiry.
	Now func() time.Time
}

// Retired is the layout of the retired-id set l asks for (defaults filled in).
func (l MemoryLimits) Retired() (Retired, error) {
	l = l.WithDefaults()
	return NewRetired(l.RetiredCapacity, l.RetiredFalsePositive)
}

// WithDefaults returns l with every zero or negative field set to its default.
func (l MemoryLimits) WithDefaults() MemoryLimits {
	if l.MaxTasks <= 0 {
		l.MaxTasks = DefaultMaxTasks
	}
	if l.MaxContexts <= 0 {
		l.MaxContexts = l.MaxTasks
	}
	if l.MaxPerOwner <= 0 {
		l.MaxPerOwner = DefaultMaxPerOwner
	}
	if l.TTL <= 0 {
		l.TTL = DefaultTTL
	}
	if l.MaxArtifacts <= 0 {
		l.MaxArtifacts = DefaultMaxArtifacts
	}
	if l.MaxPushPerTask <= 0 {
		l.MaxPushPerTask = DefaultMaxPushPerTask
	}
	if l.MaxPushPerOwner <= 0 {
		l.MaxPushPerOwner = DefaultMaxPushPerOwner
	}
	if l.MaxTombstones <= 0 {
		l.MaxTombstones = max(1024, l.MaxTasks/10)
	}
	if l.RetiredCapacity <= 0 {
		l.RetiredCapacity = max(minRetiredCapacity, 10*l.MaxTasks)
	}
	if l.RetiredFalsePositive <= 0 {
		l.RetiredFalsePositive = DefaultRetiredFalsePositive
	}
	if l.Now == nil {
		l.Now = time.Now
	}
	return l
}

var _ Store = (*MemoryStore)(nil)

// MemoryStore is the in-process Store: bounded maps of records and context
// owners, lost when the process ends (tests and the demo; `writ serve` keeps a
// durable store by default).
//
// Every record sits in three update-ordered lists: all records (for expiry),
// finished records (evicted first), and its owner's records (see fairIndex).
// Expiry is lazy: reads treat a record past its TTL as gone, and every write
// first removes expired records from the old end, which keeps it amortised
// O(1) with no background goroutine and nothing to close.
type MemoryStore struct {
	limits MemoryLimits

	mu       sync.RWMutex
	tasks    map[Ref]*entry
	byAge    list.List // *entry, least recently updated first
	finished list.List // *entry in a terminal state, least recently updated first
	owners   fairIndex
	byState  map[State]int
	// ownerPush counts each owner's push configs across tasks.
	ownerPush map[string]int
	pushSeq   uint64

	contexts  map[Ref]*ctxEntry
	ctxByAge  list.List // *ctxEntry, least recently claimed first
	ctxOwners fairIndex

	tombs     map[Ref]Owner
	tombOrder list.List // Ref, oldest first

	// The retired-id set, block by block as ids first touch them.
	retired  Retired
	blocks   map[uint32]*[RetiredBlockBytes]byte
	retiredN uint64

	evictions                    []Eviction // collected under mu, reported after
	evicted, expired, violations uint64
}

// entry is one stored record with its places in the store's lists.
type entry struct {
	rec   Record
	owner string
	age   *list.Element
	fin   *list.Element // nil while the task is live
	own   *list.Element
}

// ctxEntry is one context's owner.
type ctxEntry struct {
	ref     Ref
	owner   Owner
	key     string
	updated time.Time
	age     *list.Element
	own     *list.Element
}

// NewMemoryStore returns an empty MemoryStore bounded by l. A retired-id size
// NewRetired refuses takes the default (writ's config is checked at load).
func NewMemoryStore(l MemoryLimits) *MemoryStore {
	r, err := l.Retired()
	if err != nil {
		l.RetiredCapacity, l.RetiredFalsePositive = 0, 0
		r, _ = l.Retired()
	}
	return &MemoryStore{
		retired: r, blocks: map[uint32]*[RetiredBlockBytes]byte{},
		limits:    l.WithDefaults(),
		tasks:     make(map[Ref]*entry),
		owners:    newFairIndex(),
		byState:   make(map[State]int, len(States)),
		ownerPush: make(map[string]int),
		contexts:  make(map[Ref]*ctxEntry),
		ctxOwners: newFairIndex(),
		tombs:     make(map[Ref]Owner),
	}
}

// Limits returns the limits in force, defaults filled in.
func (m *MemoryStore) Limits() MemoryLimits { return m.limits }

// OwnerKey is the per-owner bound's key. The NUL cannot occur in a tenant name
// from a token or a path, so two different owners never share a key.
func OwnerKey(o Owner) string { return o.Tenant + "\x00" + o.AgentID }

// write runs f under the write lock, after removing expired entries, and
// reports the evictions it caused once the lock is released.
func (m *MemoryStore) write(f func(now time.Time) error) error {
	m.mu.Lock()
	// The clock is read under the lock so that update times follow list order.
	now := m.limits.Now()
	m.sweep(now)
	err := f(now)
	ev := m.evictions
	m.evictions = nil
	m.mu.Unlock()
	if m.limits.OnEvict != nil {
		for _, e := range ev {
			m.limits.OnEvict(e)
		}
	}
	return err
}

// Get implements Store. It takes a read lock only, so lookups run in parallel.
func (m *MemoryStore) Get(_ context.Context, ref Ref) (Record, bool, error) {
	now := m.limits.Now()
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.tasks[ref]
	if !ok || m.expiredAt(e.rec.Updated, now) {
		return Record{}, false, nil
	}
	return e.rec.clone(), true, nil
}

// Create implements Store.
func (m *MemoryStore) Create(_ context.Context, r Record) error { return m.create(r, false) }

// ClaimTask implements Store.
func (m *MemoryStore) ClaimTask(_ context.Context, r Record) error { return m.create(r, true) }

func (m *MemoryStore) create(r Record, claim bool) error {
	if err := ValidRecord(&r); err != nil {
		return err
	}
	ref := r.Ref()
	rec := Stored(r, m.limits.MaxArtifacts)
	return m.write(func(now time.Time) error {
		if old, ok := m.tasks[ref]; ok {
			if !m.expiredAt(old.rec.Updated, now) {
				return fmt.Errorf("task %q on %q: %w", ref.ID, ref.Agent, ErrExists)
			}
			m.drop(old)
			m.expired++
		}
		if claim {
			if err := m.claimable(ref, rec.Task.Owner); err != nil {
				return err
			}
		}
		if rec.Created.IsZero() {
			rec.Created = now
		}
		rec.Updated = now
		e := &entry{rec: rec, owner: OwnerKey(rec.Task.Owner)}
		if m.owners.count(e.owner) >= m.limits.MaxPerOwner {
			v, _ := m.owners.oldest(e.owner)
			m.evict(v.(*entry), EvictedOwnerFull)
		} else if len(m.tasks) >= m.limits.MaxTasks {
			m.evict(m.victim(), EvictedStoreFull)
		}
		m.insert(e)
		delete(m.tombs, ref) // the task is known again; its owner is on record
		m.retire(RetiredTask, ref)
		return nil
	})
}

// claimable says whether owner may claim the task ref the store does not
// hold: ErrRetired unless it never held it, or a tombstone says owner did.
// m.mu must be held.
func (m *MemoryStore) claimable(ref Ref, owner Owner) error {
	if o, ok := m.tombs[ref]; ok {
		if SameOwner(o, owner) {
			return nil
		}
		return fmt.Errorf("task %q on %q: evicted from another owner: %w", ref.ID, ref.Agent, ErrRetired)
	}
	if m.isRetired(RetiredTask, ref) {
		return fmt.Errorf("task %q on %q: %w", ref.ID, ref.Agent, ErrRetired)
	}
	return nil
}

// retire adds the id to the retired-id set. m.mu must be held for writing.
func (m *MemoryStore) retire(kind byte, ref Ref) {
	at := m.retired.Locate(kind, ref)
	b := m.blocks[at.Block]
	if b == nil {
		b = new([RetiredBlockBytes]byte)
		m.blocks[at.Block] = b
	}
	if at.Set(b[:]) {
		m.retiredN++
	}
}

// isRetired reports whether the set holds the id. m.mu must be held.
func (m *MemoryStore) isRetired(kind byte, ref Ref) bool {
	at := m.retired.Locate(kind, ref)
	b := m.blocks[at.Block]
	return b != nil && at.In(b[:])
}

// victim is the record to evict when the store is full: the least recently
// updated finished record, else the heaviest owner's least recently updated.
// Expired records are gone already (sweep runs first). m.mu must be held.
func (m *MemoryStore) victim() *entry {
	if f := m.finished.Front(); f != nil {
		return f.Value.(*entry)
	}
	owner, _ := m.owners.heaviest()
	v, _ := m.owners.oldest(owner)
	return v.(*entry)
}

// insert adds e to the maps and lists. m.mu must be held for writing.
func (m *MemoryStore) insert(e *entry) {
	done := e.rec.Task.State.Terminal()
	m.tasks[e.rec.Ref()] = e
	e.age = m.byAge.PushBack(e)
	if done {
		e.fin = m.finished.PushBack(e)
	}
	e.own = m.owners.add(e.owner, e, done)
	m.byState[e.rec.Task.State]++
	if n := len(e.rec.Push); n > 0 {
		m.ownerPush[e.owner] += n
	}
}

// drop removes e from the maps and lists. m.mu must be held for writing.
func (m *MemoryStore) drop(e *entry) {
	delete(m.tasks, e.rec.Ref())
	m.byAge.Remove(e.age)
	if e.fin != nil {
		m.finished.Remove(e.fin)
	}
	m.owners.remove(e.owner, e.own, e.fin != nil)
	m.byState[e.rec.Task.State]--
	if n := len(e.rec.Push); n > 0 {
		if m.ownerPush[e.owner] -= n; m.ownerPush[e.owner] <= 0 {
			delete(m.ownerPush, e.owner)
		}
	}
}

// evict drops e to honour a bound, remembers its owner and reports it.
func (m *MemoryStore) evict(e *entry, reason string) {
	m.drop(e)
	m.evicted++
	ref := e.rec.Ref()
	if _, ok := m.tombs[ref]; !ok {
		m.tombOrder.PushBack(ref)
		for m.tombOrder.Len() > m.limits.MaxTombstones {
			delete(m.tombs, m.tombOrder.Remove(m.tombOrder.Front()).(Ref))
		}
	}
	m.tombs[ref] = e.rec.Task.Owner
	m.evictions = append(m.evictions, Eviction{Ref: ref, Owner: e.rec.Task.Owner, State: e.rec.Task.State, Reason: reason})
}

// touch makes e the most recently updated record. m.mu must be held.
func (m *MemoryStore) touch(e *entry, now time.Time) {
	e.rec.Updated = now
	m.byAge.MoveToBack(e.age)
	if e.fin != nil {
		m.finished.MoveToBack(e.fin)
	}
	m.owners.touch(e.owner, e.own, e.fin != nil)
}

// live returns the entry of ref for a write, or ErrNotFound. m.mu must be held
// for writing.
func (m *MemoryStore) live(ref Ref, now time.Time) (*entry, error) {
	e, ok := m.tasks[ref]
	if ok && m.expiredAt(e.rec.Updated, now) {
		m.drop(e)
		m.expired++
		ok = false
	}
	if !ok {
		return nil, fmt.Errorf("task %q on %q: %w", ref.ID, ref.Agent, ErrNotFound)
	}
	return e, nil
}

// Apply implements Store.
func (m *MemoryStore) Apply(_ context.Context, ref Ref, ev Event) (prev, next Record, err error) {
	werr := m.write(func(now time.Time) error {
		e, lerr := m.live(ref, now)
		if lerr != nil {
			return lerr
		}
		prev = e.rec.clone()
		from := e.rec.Task.State
		err = ApplyEvent(&e.rec, ev, m.limits.MaxArtifacts)
		if err != nil {
			m.violations++
		}
		if to := e.rec.Task.State; to != from {
			m.byState[from]--
			m.byState[to]++
			if to.Terminal() && e.fin == nil {
				e.own = m.owners.finish(e.owner, e.own)
				e.fin = m.finished.PushBack(e)
			}
		}
		m.touch(e, now)
		next = e.rec.clone()
		return nil
	})
	if werr != nil {
		return Record{}, Record{}, werr
	}
	return prev, next, err
}

// Delete implements Store.
func (m *MemoryStore) Delete(_ context.Context, ref Ref) error {
	return m.write(func(now time.Time) error {
		e, err := m.live(ref, now)
		if err != nil {
			return err
		}
		m.drop(e)
		return nil
	})
}

// SetPush implements Store. Setting a config counts as an update of the task.
func (m *MemoryStore) SetPush(_ context.Context, ref Ref, p PushConfig) (PushConfig, error) {
	err := m.write(func(now time.Time) error {
		e, err := m.live(ref, now)
		if err != nil {
			return err
		}
		if p.ID == "" {
			m.pushSeq++
			p.ID = fmt.Sprintf("push-%d", m.pushSeq)
		}
		for i := range e.rec.Push {
			if e.rec.Push[i].ID == p.ID {
				e.rec.Push[i] = p
				m.touch(e, now)
				return nil
			}
		}
		if len(e.rec.Push) >= m.limits.MaxPushPerTask {
			return fmt.Errorf("task %q: %w (%d per task)", ref.ID, ErrPushLimit, m.limits.MaxPushPerTask)
		}
		if m.ownerPush[e.owner] >= m.limits.MaxPushPerOwner {
			return fmt.Errorf("task %q: %w (%d per owner)", ref.ID, ErrPushLimit, m.limits.MaxPushPerOwner)
		}
		e.rec.Push = append(e.rec.Push, p)
		m.ownerPush[e.owner]++
		m.touch(e, now)
		return nil
	})
	if err != nil {
		return PushConfig{}, err
	}
	return p, nil
}

// DeletePush implements Store.
func (m *MemoryStore) DeletePush(_ context.Context, ref Ref, cid string) error {
	return m.write(func(now time.Time) error {
		e, err := m.live(ref, now)
		if err != nil {
			return err
		}
		for i := range e.rec.Push {
			if e.rec.Push[i].ID == cid {
				e.rec.Push = append(e.rec.Push[:i:i], e.rec.Push[i+1:]...)
				if m.ownerPush[e.owner]--; m.ownerPush[e.owner] <= 0 {
					delete(m.ownerPush, e.owner)
				}
				return nil
			}
		}
		return fmt.Errorf("task %q config %q: %w", ref.ID, cid, ErrPushNotFound)
	})
}

// ClaimContext implements Store.
func (m *MemoryStore) ClaimContext(_ context.Context, ref Ref, owner Owner) (Owner, error) {
	var on Owner
	err := m.write(func(now time.Time) error {
		if c, ok := m.contexts[ref]; ok {
			if !m.expiredAt(c.updated, now) {
				on = c.owner
				if SameOwner(c.owner, owner) {
					c.updated = now
					m.ctxByAge.MoveToBack(c.age)
					m.ctxOwners.touch(c.key, c.own, false)
				}
				return nil
			}
			m.dropContext(c)
		}
		if m.isRetired(RetiredContext, ref) {
			return fmt.Errorf("context %q on %q: %w", ref.ID, ref.Agent, ErrRetired)
		}
		c := &ctxEntry{ref: ref, owner: owner, key: OwnerKey(owner), updated: now}
		if m.ctxOwners.count(c.key) >= m.limits.MaxPerOwner {
			v, _ := m.ctxOwners.oldest(c.key)
			m.evictContext(v.(*ctxEntry), EvictedOwnerFull)
		} else if len(m.contexts) >= m.limits.MaxContexts {
			heavy, _ := m.ctxOwners.heaviest()
			v, _ := m.ctxOwners.oldest(heavy)
			m.evictContext(v.(*ctxEntry), EvictedStoreFull)
		}
		m.contexts[ref] = c
		c.age = m.ctxByAge.PushBack(c)
		c.own = m.ctxOwners.add(c.key, c, false)
		m.retire(RetiredContext, ref)
		on = owner
		return nil
	})
	if err != nil {
		return Owner{}, err
	}
	return on, nil
}

// Context implements Store.
func (m *MemoryStore) Context(_ context.Context, ref Ref) (Owner, bool, error) {
	now := m.limits.Now()
	m.mu.RLock()
	defer m.mu.RUnlock()
	c, ok := m.contexts[ref]
	if !ok || m.expiredAt(c.updated, now) {
		if m.isRetired(RetiredContext, ref) {
			return Owner{}, false, fmt.Errorf("context %q on %q: %w", ref.ID, ref.Agent, ErrRetired)
		}
		return Owner{}, false, nil
	}
	return c.owner, true, nil
}

func (m *MemoryStore) dropContext(c *ctxEntry) {
	delete(m.contexts, c.ref)
	m.ctxByAge.Remove(c.age)
	m.ctxOwners.remove(c.key, c.own, false)
}

func (m *MemoryStore) evictContext(c *ctxEntry, reason string) {
	m.dropContext(c)
	m.evicted++
	m.evictions = append(m.evictions, Eviction{Ref: c.ref, Context: true, Owner: c.owner, Reason: reason})
}

// Tombstone implements Store.
func (m *MemoryStore) Tombstone(_ context.Context, ref Ref) (Owner, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if o, ok := m.tombs[ref]; ok {
		return o, true, nil
	}
	if m.isRetired(RetiredTask, ref) {
		return Owner{}, false, fmt.Errorf("task %q on %q: %w", ref.ID, ref.Agent, ErrRetired)
	}
	return Owner{}, false, nil
}

// Len is the number of live records the store holds (expired ones are removed
// first).
func (m *MemoryStore) Len() int {
	n := 0
	_ = m.write(func(time.Time) error { n = len(m.tasks); return nil })
	return n
}

// Stats implements Store. Expired records are removed first, so ByState counts
// live records only.
func (m *MemoryStore) Stats(context.Context) (StoreStats, error) {
	var s StoreStats
	err := m.write(func(time.Time) error {
		by := make(map[State]int, len(States))
		for _, st := range States {
			by[st] = m.byState[st]
		}
		s = StoreStats{Tasks: len(m.tasks), Contexts: len(m.contexts), ByState: by,
			Evicted: m.evicted, Expired: m.expired, Violations: m.violations,
			Retired: m.retiredN, RetiredCapacity: m.limits.RetiredCapacity}
		return nil
	})
	return s, err
}

// expiredAt reports whether something last updated at t has outlived the TTL.
func (m *MemoryStore) expiredAt(t, now time.Time) bool {
	return !now.Before(t.Add(m.limits.TTL))
}

// sweep removes expired records and contexts from the old ends of their lists.
// Each is removed once, so the cost is amortised over the writes that created
// them. If the clock ever steps back, the order may hide an expired entry
// behind a live one; lookups still check each entry's own time, and a later
// sweep gets it. m.mu must be held for writing.
func (m *MemoryStore) sweep(now time.Time) {
	for f := m.byAge.Front(); f != nil; f = m.byAge.Front() {
		e := f.Value.(*entry)
		if !m.expiredAt(e.rec.Updated, now) {
			break
		}
		m.drop(e)
		m.expired++
	}
	for f := m.ctxByAge.Front(); f != nil; f = m.ctxByAge.Front() {
		c := f.Value.(*ctxEntry)
		if !m.expiredAt(c.updated, now) {
			break
		}
		m.dropContext(c)
	}
}
