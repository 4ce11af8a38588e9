package task

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Default limits of a MemoryStore.
const (
	DefaultMaxTasks     = 100_000
	DefaultMaxPerOwner  = 10_000
	DefaultTTL          = 24 * time.Hour
	DefaultMaxArtifacts = 256
)

// MemoryLimits bound a MemoryStore. A zero or negative field takes its default.
type MemoryLimits struct {
	// MaxTasks bounds the number of records. Beyond it the least recently updated
	// record is evicted.
	MaxTasks int
	// MaxPerOwner bounds the records of one owner (Owner.Tenant and
	// Owner.AgentID; all anonymous callers share one owner). Beyond it that
	// owner's least recently updated record is evicted, never another owner's, so
	// one noisy caller cannot flush everyone else's tasks.
	MaxPerOwner int
	// TTL is how long a record lives after its last update (Create or Apply).
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
	// Now is the store's clock; nil means time.Now. It must be safe for
	// concurrent use. Tests set it to drive expiry.
	Now func() time.Time
}

// StoreStats is a snapshot of a MemoryStore's contents and counters, for metrics.
type StoreStats struct {
	// Tasks is the number of records held.
	Tasks int
	// ByState counts the records held in each state; every state is present.
	ByState map[State]int
	// Evicted counts records dropped to honour MaxTasks or MaxPerOwner.
	Evicted uint64
	// Expired counts records dropped because their TTL ran out.
	Expired uint64
	// Violations counts the illegal transitions Apply refused, over the store's
	// lifetime (including tasks since forgotten).
	Violations uint64
}

var _ Store = (*MemoryStore)(nil)

// MemoryStore is the embedded Store: a bounded in-process map of records.
//
// Records live in one LRU ordered by last update (Get does not count as use), so
// the least recently updated record is both the one evicted for room and the
// first to expire. Expiry is lazy: Get and Apply treat a record past its TTL as
// gone, and every write first removes expired records from the old end of the LRU,
// which makes it amortised O(1) with no background goroutine and nothing to close.
// Each owner also has its own update-ordered list, so that owner's oldest record
// is found in O(1). Every removal (eviction, expiry, delete) goes through the
// LRU's eviction callback, which is the one place that keeps the per-owner lists
// and the per-state counts in step with the LRU.
type MemoryStore struct {
	limits MemoryLimits

	mu sync.RWMutex
	// lru holds every record, keyed by task id, most recently updated first.
	// Reads use Peek so that only writes move a record.
	lru *simplelru.LRU[string, *entry]
	// owners holds, per owner key, that owner's entries, least recently updated
	// first. An owner with no records has no list.
	owners  map[string]*list.List
	byState map[State]int
	// ownerPush counts each owner's push configs across tasks.
	ownerPush map[string]int
	pushSeq   uint64
	// why says why the record being removed goes; the callback reads it.
	why                          removal
	evicted, expired, violations uint64
}

// entry is one stored record with its place in its owner's list.
type entry struct {
	rec   Record
	owner string
	elem  *list.Element
}

// removal is why a record leaves the store.
type removal uint8

const (
	removeEvicted removal = iota // over MaxTasks (the LRU's own eviction) or MaxPerOwner
	removeExpired
	removeDeleted
)

// NewMemoryStore returns an empty MemoryStore bounded by l.
func NewMemoryStore(l MemoryLimits) *MemoryStore {
	if l.MaxTasks <= 0 {
		l.MaxTasks = DefaultMaxTasks
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
	if l.Now == nil {
		l.Now = time.Now
	}
	if l.MaxPushPerTask <= 0 {
		l.MaxPushPerTask = 10
	}
	if l.MaxPushPerOwner <= 0 {
		l.MaxPushPerOwner = 1000
	}
	m := &MemoryStore{
		limits:    l,
		owners:    make(map[string]*list.List),
		byState:   make(map[State]int, len(States)),
		ownerPush: make(map[string]int),
	}
	lru, err := simplelru.NewLRU(l.MaxTasks, m.removed)
	if err != nil { // unreachable: the size is positive
		panic(err)
	}
	m.lru = lru
	return m
}

// Limits returns the limits in force, defaults filled in.
func (m *MemoryStore) Limits() MemoryLimits { return m.limits }

// ownerKey is the per-owner bound's key. The NUL cannot occur in a tenant name
// from a token or a path, so two different owners never share a key.
func ownerKey(o Owner) string { return o.Tenant + "\x00" + o.AgentID }

// Get implements Store. It takes a read lock only, so lookups run in parallel.
func (m *MemoryStore) Get(_ context.Context, id string) (Record, bool, error) {
	now := m.limits.Now()
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.lru.Peek(id)
	if !ok || m.expiredAt(e, now) {
		return Record{}, false, nil
	}
	return e.rec.clone(), true, nil
}

// Create implements Store. Making room evicts the owner's least recently updated
// record if the owner is at MaxPerOwner, and otherwise the store's least recently
// updated record if the store is at MaxTasks.
func (m *MemoryStore) Create(_ context.Context, r Record) error {
	if r.Task.ID == "" {
		return fmt.Errorf("%w: no task id", ErrInvalidRecord)
	}
	if !r.Task.State.Valid() {
		return fmt.Errorf("%w: task %q has unknown state %q", ErrInvalidRecord, r.Task.ID, r.Task.State)
	}
	e := &entry{rec: stored(r, m.limits.MaxArtifacts), owner: ownerKey(r.Task.Owner)}
	id := r.Task.ID

	m.mu.Lock()
	defer m.mu.Unlock()
	// The clock is read under the lock so that update times follow LRU order.
	now := m.limits.Now()
	m.sweep(now)
	if old, ok := m.lru.Peek(id); ok {
		if !m.expiredAt(old, now) {
			return fmt.Errorf("task %q: %w", id, ErrExists)
		}
		m.remove(id, removeExpired)
	}
	if e.rec.Created.IsZero() {
		e.rec.Created = now
	}
	e.rec.Updated = now

	if ol := m.owners[e.owner]; ol != nil && ol.Len() >= m.limits.MaxPerOwner {
		m.remove(ol.Front().Value.(*entry).rec.Task.ID, removeEvicted)
	}
	ol := m.owners[e.owner] // looked up again: the removal may have dropped the list
	if ol == nil {
		ol = list.New()
		m.owners[e.owner] = ol
	}
	e.elem = ol.PushBack(e)
	m.byState[e.rec.Task.State]++
	if n := len(e.rec.Push); n > 0 {
		m.ownerPush[e.owner] += n
	}
	m.lru.Add(id, e) // at MaxTasks this evicts the oldest through m.removed
	return nil
}

// Apply implements Store.
func (m *MemoryStore) Apply(_ context.Context, id string, ev Event) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.limits.Now()
	m.sweep(now)
	e, ok := m.lru.Peek(id)
	if ok && m.expiredAt(e, now) {
		m.remove(id, removeExpired)
		ok = false
	}
	if !ok {
		return Record{}, fmt.Errorf("task %q: %w", id, ErrNotFound)
	}

	rec := &e.rec
	var err error
	to := ev.State
	if to == "" && ev.Task != nil {
		to = ev.Task.State
	}
	if to != "" {
		from := rec.Task.State
		next, aerr := Observe(from, to)
		switch {
		case aerr != nil:
			rec.Violations++
			m.violations++
			err = aerr
		case next != from:
			m.byState[from]--
			m.byState[next]++
			rec.Task.State = next
		}
	}
	if rec.Task.ContextID == "" {
		rec.Task.ContextID = ev.ContextID
		if rec.Task.ContextID == "" && ev.Task != nil {
			rec.Task.ContextID = ev.Task.ContextID
		}
	}
	if ev.Task != nil {
		for _, name := range ev.Task.Artifacts {
			addArtifact(&rec.Task, name, m.limits.MaxArtifacts)
		}
	}
	if a := ev.Artifact; a != nil {
		name := a.Name
		if name == "" {
			name = a.ID
		}
		addArtifact(&rec.Task, name, m.limits.MaxArtifacts)
	}

	rec.Updated = now
	m.lru.Get(id) // an update is a use: move to the front
	m.owners[e.owner].MoveToBack(e.elem)
	return rec.clone(), err
}

// Delete implements Store.
func (m *MemoryStore) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.limits.Now()
	m.sweep(now)
	e, ok := m.lru.Peek(id)
	if !ok {
		return fmt.Errorf("task %q: %w", id, ErrNotFound)
	}
	if m.expiredAt(e, now) {
		m.remove(id, removeExpired)
		return fmt.Errorf("task %q: %w", id, ErrNotFound)
	}
	m.remove(id, removeDeleted)
	return nil
}

// Len implements Store. It counts live records only: expired ones are removed
// first.
func (m *MemoryStore) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(m.limits.Now())
	return m.lru.Len()
}

// Stats returns the store's contents and counters. Expired records are removed
// first, so ByState counts live records only.
func (m *MemoryStore) Stats() StoreStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(m.limits.Now())
	by := make(map[State]int, len(States))
	for _, s := range States {
		by[s] = m.byState[s]
	}
	return StoreStats{
		Tasks:      m.lru.Len(),
		ByState:    by,
		Evicted:    m.evicted,
		Expired:    m.expired,
		Violations: m.violations,
	}
}

// expiredAt reports whether e's TTL has run out at now.
func (m *MemoryStore) expiredAt(e *entry, now time.Time) bool {
	return !now.Before(e.rec.Updated.Add(m.limits.TTL))
}

// sweep removes expired records from the old end of the LRU. Each record is
// removed once, so the cost is amortised over the writes that created them. If
// the clock ever steps back, the order may hide an expired record behind a live
// one; lookups still check each record's own time, and a later sweep gets it.
// m.mu must be held for writing.
func (m *MemoryStore) sweep(now time.Time) {
	for {
		id, e, ok := m.lru.GetOldest()
		if !ok || !m.expiredAt(e, now) {
			return
		}
		m.remove(id, removeExpired)
	}
}

// remove drops the record id, counting it as why. m.mu must be held for writing.
func (m *MemoryStore) remove(id string, why removal) {
	m.why = why
	m.lru.Remove(id)
	m.why = removeEvicted // the LRU's own evictions (in Add) call back with no remove
}

// removed is the LRU's eviction callback, run for every record that leaves the
// store (under m.mu): it keeps the owner lists and state counts in step.
func (m *MemoryStore) removed(_ string, e *entry) {
	if ol := m.owners[e.owner]; ol != nil {
		ol.Remove(e.elem)
		if ol.Len() == 0 {
			delete(m.owners, e.owner)
		}
	}
	m.byState[e.rec.Task.State]--
	if n := len(e.rec.Push); n > 0 {
		if m.ownerPush[e.owner] -= n; m.ownerPush[e.owner] <= 0 {
			delete(m.ownerPush, e.owner)
		}
	}
	switch m.why {
	case removeEvicted:
		m.evicted++
	case removeExpired:
		m.expired++
	}
}

// stored is the copy of r that a store keeps: no content, artifact names
// deduplicated and bounded.
func stored(r Record, maxArtifacts int) Record {
	names := r.Task.Artifacts
	r = r.clone()
	r.Task.InputText, r.Task.OutputText = "", ""
	r.Task.Artifacts = nil
	for _, name := range names {
		addArtifact(&r.Task, name, maxArtifacts)
	}
	return r
}

// addArtifact appends name to t's artifact names unless it is empty, already
// there, or the list is full. The scan is bounded by MaxArtifacts.
func addArtifact(t *Task, name string, limit int) {
	if name == "" || len(t.Artifacts) >= limit || slices.Contains(t.Artifacts, name) {
		return
	}
	t.Artifacts = append(t.Artifacts, name)
}

// live returns the entry of id for a write, or ErrNotFound. m.mu must be held for
// writing.
func (m *MemoryStore) live(id string, now time.Time) (*entry, error) {
	e, ok := m.lru.Peek(id)
	if !ok {
		return nil, fmt.Errorf("task %q: %w", id, ErrNotFound)
	}
	if m.expiredAt(e, now) {
		m.remove(id, removeExpired)
		return nil, fmt.Errorf("task %q: %w", id, ErrNotFound)
	}
	return e, nil
}

// SetPush implements Store. Setting a config counts as an update of the task.
func (m *MemoryStore) SetPush(_ context.Context, id string, p PushConfig) (PushConfig, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.limits.Now()
	m.sweep(now)
	e, err := m.live(id, now)
	if err != nil {
		return PushConfig{}, err
	}
	if p.ID == "" {
		m.pushSeq++
		p.ID = fmt.Sprintf("push-%d", m.pushSeq)
	}
	for i := range e.rec.Push {
		if e.rec.Push[i].ID == p.ID {
			e.rec.Push[i] = p
			return p, nil
		}
	}
	if len(e.rec.Push) >= m.limits.MaxPushPerTask {
		return PushConfig{}, fmt.Errorf("task %q: %w (%d per task)", id, ErrPushLimit, m.limits.MaxPushPerTask)
	}
	if m.ownerPush[e.owner] >= m.limits.MaxPushPerOwner {
		return PushConfig{}, fmt.Errorf("task %q: %w (%d per owner)", id, ErrPushLimit, m.limits.MaxPushPerOwner)
	}
	e.rec.Push = append(e.rec.Push, p)
	m.ownerPush[e.owner]++
	e.rec.Updated = now
	m.lru.Get(id)
	m.owners[e.owner].MoveToBack(e.elem)
	return p, nil
}

// DeletePush implements Store.
func (m *MemoryStore) DeletePush(_ context.Context, id, cid string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.limits.Now()
	m.sweep(now)
	e, err := m.live(id, now)
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
	return fmt.Errorf("task %q config %q: %w", id, cid, ErrPushNotFound)
}
