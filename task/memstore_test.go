package task

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// These tests are white-box: after each step they check the store's internal
// bookkeeping (owner lists, state counts, lists) against its maps. The contract
// itself is task/storetest's suite, run against the memory store below.

// fakeClock is a settable clock, safe for concurrent use.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func ref(id string) Ref { return Ref{Agent: "a", ID: id} }

func ownedBy(id, tenant, agent string, st State) Record {
	return Record{Task: Task{ID: id, State: st, Owner: Owner{Tenant: tenant, AgentID: agent}}, Agent: "a"}
}

func create(t *testing.T, m *MemoryStore, r Record) {
	t.Helper()
	if err := m.Create(context.Background(), r); err != nil {
		t.Fatalf("Create(%q): %v", r.Task.ID, err)
	}
	checkInvariants(t, m)
}

func apply(t *testing.T, m *MemoryStore, id string, st State) {
	t.Helper()
	if _, _, err := m.Apply(context.Background(), ref(id), Event{Kind: EventStatus, State: st}); err != nil {
		t.Fatalf("Apply(%q, %s): %v", id, st, err)
	}
	checkInvariants(t, m)
}

// present lists which of ids the store holds.
func present(m *MemoryStore, ids ...string) []string {
	var got []string
	for _, id := range ids {
		if _, ok, _ := m.Get(context.Background(), ref(id)); ok {
			got = append(got, id)
		}
	}
	return got
}

func mstats(m *MemoryStore) StoreStats {
	s, _ := m.Stats(context.Background())
	return s
}

// checkInvariants verifies that the lists, owner index and state counts
// describe exactly the records in the map, and that the bounds hold.
func checkInvariants(t *testing.T, m *MemoryStore) {
	t.Helper()
	m.mu.RLock()
	defer m.mu.RUnlock()
	states := map[State]int{}
	perOwner := map[string]int{}
	var prev time.Time
	n := 0
	for el := m.byAge.Front(); el != nil; el = el.Next() {
		e := el.Value.(*entry)
		n++
		if got, ok := m.tasks[e.rec.Ref()]; !ok || got != e || e.age != el {
			t.Fatalf("age list holds %v, which the map does not hold as listed", e.rec.Ref())
		}
		if e.owner != OwnerKey(e.rec.Task.Owner) {
			t.Fatalf("record %q has owner key %q", e.rec.Task.ID, e.owner)
		}
		if e.rec.Updated.Before(prev) {
			t.Fatalf("age order is not update order at %q", e.rec.Task.ID)
		}
		if (e.fin != nil) != e.rec.Task.State.Terminal() {
			t.Fatalf("record %q (%s) finished-list membership %v", e.rec.Task.ID, e.rec.Task.State, e.fin != nil)
		}
		prev = e.rec.Updated
		states[e.rec.Task.State]++
		perOwner[e.owner]++
	}
	if n != len(m.tasks) {
		t.Fatalf("age list %d, map %d", n, len(m.tasks))
	}
	if n > m.limits.MaxTasks {
		t.Fatalf("%d records, over MaxTasks %d", n, m.limits.MaxTasks)
	}
	fin := 0
	for el := m.finished.Front(); el != nil; el = el.Next() {
		if e := el.Value.(*entry); e.fin != el || !e.rec.Task.State.Terminal() {
			t.Fatalf("finished list holds %q (%s) wrongly", e.rec.Task.ID, e.rec.Task.State)
		}
		fin++
	}
	if want := states[Succeeded] + states[Cancelled] + states[Failed] + states[Rejected]; fin != want {
		t.Fatalf("finished list %d, finished records %d", fin, want)
	}
	for _, s := range States {
		if m.byState[s] != states[s] {
			t.Fatalf("byState[%s] = %d, records in that state: %d", s, m.byState[s], states[s])
		}
	}
	if len(m.owners.owners) != len(perOwner) {
		t.Fatalf("%d owners indexed, %d owners with records", len(m.owners.owners), len(perOwner))
	}
	top := 0
	for key, o := range m.owners.owners {
		c := o.count()
		if c != perOwner[key] || c == 0 {
			t.Fatalf("owner %q: indexed %d, %d records", key, c, perOwner[key])
		}
		if c > m.limits.MaxPerOwner {
			t.Fatalf("owner %q has %d records, over MaxPerOwner %d", key, c, m.limits.MaxPerOwner)
		}
		if o.bucket == nil || o.bucket.Value.(string) != key {
			t.Fatalf("owner %q is not in a bucket", key)
		}
		top = max(top, c)
		for _, l := range []*list.List{&o.live, &o.done} {
			var prev time.Time
			for el := l.Front(); el != nil; el = el.Next() {
				e := el.Value.(*entry)
				if e.own != el || e.owner != key || (l == &o.done) != (e.fin != nil) {
					t.Fatalf("owner %q lists %q wrongly", key, e.rec.Task.ID)
				}
				if e.rec.Updated.Before(prev) {
					t.Fatalf("owner %q list is not in update order at %q", key, e.rec.Task.ID)
				}
				prev = e.rec.Updated
			}
		}
	}
	if m.owners.top != top {
		t.Fatalf("owner index top %d, heaviest owner holds %d", m.owners.top, top)
	}
	for c, b := range m.owners.buckets {
		for el := b.Front(); el != nil; el = el.Next() {
			if o := m.owners.owners[el.Value.(string)]; o == nil || o.count() != c || o.bucket != el {
				t.Fatalf("bucket %d lists owner %q wrongly", c, el.Value)
			}
		}
	}
}

func TestMemoryStoreLimitsDefaults(t *testing.T) {
	tests := []struct {
		in   MemoryLimits
		want MemoryLimits
	}{
		{MemoryLimits{}, MemoryLimits{MaxTasks: 100000, MaxPerOwner: 10000, TTL: 24 * time.Hour, MaxArtifacts: 256}},
		{MemoryLimits{MaxTasks: -1, MaxPerOwner: -1, TTL: -time.Second, MaxArtifacts: -1},
			MemoryLimits{MaxTasks: 100000, MaxPerOwner: 10000, TTL: 24 * time.Hour, MaxArtifacts: 256}},
		{MemoryLimits{MaxTasks: 5, MaxPerOwner: 2, TTL: time.Minute, MaxArtifacts: 3},
			MemoryLimits{MaxTasks: 5, MaxPerOwner: 2, TTL: time.Minute, MaxArtifacts: 3}},
	}
	for _, tt := range tests {
		got := NewMemoryStore(tt.in).Limits()
		if got.Now == nil {
			t.Errorf("NewMemoryStore(%+v): no clock", tt.in)
		}
		if got.MaxTasks != tt.want.MaxTasks || got.MaxPerOwner != tt.want.MaxPerOwner ||
			got.TTL != tt.want.TTL || got.MaxArtifacts != tt.want.MaxArtifacts {
			t.Errorf("NewMemoryStore(%+v).Limits() = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

// TestMemoryStoreOwnerBookkeepingUnderGlobalEviction: records leaving through
// the global bound must leave their owner's lists too, or the owner would be
// refused room it has; and the global bound takes the heaviest owner's oldest.
func TestMemoryStoreOwnerBookkeepingUnderGlobalEviction(t *testing.T) {
	clock := newFakeClock()
	m := NewMemoryStore(MemoryLimits{MaxTasks: 3, MaxPerOwner: 2, Now: clock.Now})
	for _, id := range []string{"a1", "a2", "b1", "b2", "c1", "c2"} {
		create(t, m, ownedBy(id, "t", id[:1], Queued)) // owner a, b or c
		clock.Advance(time.Second)
	}
	// b2 evicted a1 (a was heaviest), c1 evicted b1 (b was), c2 evicted a2 (all
	// held one; a came down to one first): owner a has no records left.
	if got := present(m, "a1", "a2", "b1", "b2", "c1", "c2"); !slices.Equal(got, []string{"b2", "c1", "c2"}) {
		t.Fatalf("held %v", got)
	}
	m.mu.RLock()
	hasA := m.owners.count(OwnerKey(Owner{Tenant: "t", AgentID: "a"})) > 0
	nb := m.owners.count(OwnerKey(Owner{Tenant: "t", AgentID: "b"}))
	m.mu.RUnlock()
	if hasA || nb != 1 {
		t.Fatalf("owner lists out of step: a listed %v, b has %d", hasA, nb)
	}
	// With room in the store, b has room for a second task without losing b2 to
	// its own bound.
	if err := m.Delete(context.Background(), ref("c1")); err != nil {
		t.Fatal(err)
	}
	create(t, m, ownedBy("b3", "t", "b", Queued))
	if got := present(m, "b2", "b3"); len(got) != 2 {
		t.Errorf("b's tasks %v, want [b2 b3]", got)
	}
	if s := mstats(m); s.Evicted != 3 {
		t.Errorf("Evicted = %d, want 3", s.Evicted)
	}
}

// TestMemoryStoreTTLClockStepsBack: when the clock steps back, LRU order and update
// order part; an expired record behind a live one must still read as gone.
func TestMemoryStoreTTLClockStepsBack(t *testing.T) {
	clock := newFakeClock()
	m := NewMemoryStore(MemoryLimits{TTL: 10 * time.Second, Now: clock.Now})
	ctx := context.Background()
	create(t, m, ownedBy("late", "t", "x", Queued))
	clock.Advance(-5 * time.Second)
	if err := m.Create(ctx, ownedBy("early", "t", "y", Queued)); err != nil { // newest, yet updated first
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second) // early expired, late has not
	if got := present(m, "early", "late"); !slices.Equal(got, []string{"late"}) {
		t.Errorf("held %v, want [late]", got)
	}
	if err := m.Create(ctx, ownedBy("early", "t", "y", Queued)); err != nil {
		t.Errorf("Create over an expired record: %v", err)
	}
	if s := mstats(m); s.Expired != 1 || s.Tasks != 2 {
		t.Errorf("Stats = %+v, want 1 expired, 2 tasks", s)
	}
}

func TestMemoryStoreTTLRealClock(t *testing.T) {
	m := NewMemoryStore(MemoryLimits{TTL: 20 * time.Millisecond})
	if err := m.Create(context.Background(), ownedBy("a", "t", "x", Queued)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second)
	for len(present(m, "a")) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("a task with a 20ms TTL was still there after 1s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if m.Len() != 0 || mstats(m).Expired != 1 {
		t.Errorf("Len %d, Stats %+v; want 0 and 1 expired", m.Len(), mstats(m))
	}
}

func TestMemoryStoreStatsByState(t *testing.T) {
	clock := newFakeClock()
	m := NewMemoryStore(MemoryLimits{MaxTasks: 4, TTL: time.Minute, Now: clock.Now})
	ctx := context.Background()
	steps := []struct {
		name       string
		do         func()
		want       map[State]int
		violations uint64
	}{
		{"empty", func() {}, map[State]int{}, 0},
		{"two queued", func() {
			create(t, m, ownedBy("a", "t", "1", Queued))
			create(t, m, ownedBy("b", "t", "2", Queued))
		}, map[State]int{Queued: 2}, 0},
		{"one runs", func() { apply(t, m, "a", Running) }, map[State]int{Queued: 1, Running: 1}, 0},
		{"illegal move counts nothing twice", func() {
			m.Apply(ctx, ref("b"), Event{Kind: EventStatus, State: Queued})
			m.Apply(ctx, ref("a"), Event{Kind: EventStatus, State: Queued})
		}, map[State]int{Queued: 1, Running: 1}, 1},
		{"same state", func() { apply(t, m, "a", Running) }, map[State]int{Queued: 1, Running: 1}, 1},
		{"a succeeds", func() { apply(t, m, "a", Succeeded) }, map[State]int{Queued: 1, Succeeded: 1}, 1},
		{"created waiting", func() {
			create(t, m, ownedBy("c", "t", "3", AwaitingAuth))
			create(t, m, ownedBy("d", "t", "4", Running))
		}, map[State]int{Queued: 1, Succeeded: 1, AwaitingAuth: 1, Running: 1}, 1},
		{"eviction of the finished a (before the older live b)", func() {
			create(t, m, ownedBy("e", "t", "5", Rejected))
		}, map[State]int{Queued: 1, AwaitingAuth: 1, Running: 1, Rejected: 1}, 1},
		{"delete", func() { m.Delete(ctx, ref("c")) }, map[State]int{Queued: 1, Running: 1, Rejected: 1}, 1},
		{"expiry", func() { clock.Advance(time.Minute) }, map[State]int{}, 1},
	}
	for _, st := range steps {
		st.do()
		checkInvariants(t, m)
		s := mstats(m)
		total := 0
		for _, state := range States {
			if got, ok := s.ByState[state]; !ok || got != st.want[state] {
				t.Errorf("%s: ByState[%s] = %d (present %v), want %d", st.name, state, got, ok, st.want[state])
			}
			total += s.ByState[state]
		}
		if len(s.ByState) != len(States) {
			t.Errorf("%s: ByState has %d keys, want one per state", st.name, len(s.ByState))
		}
		if total != s.Tasks || s.Tasks != m.Len() {
			t.Errorf("%s: ByState sums to %d, Tasks %d, Len %d", st.name, total, s.Tasks, m.Len())
		}
		if s.Violations != st.violations {
			t.Errorf("%s: Violations = %d, want %d", st.name, s.Violations, st.violations)
		}
	}
	// The snapshot is a copy.
	s := mstats(m)
	s.ByState[Running] = 99
	if mstats(m).ByState[Running] != 0 {
		t.Error("mutating Stats().ByState changed the store")
	}
}

func TestMemoryStoreMaxArtifacts(t *testing.T) {
	m := NewMemoryStore(MemoryLimits{MaxArtifacts: 3})
	ctx := context.Background()
	r := ownedBy("a", "t", "x", Running)
	r.Task.Artifacts = []string{"1", "2"}
	create(t, m, r)
	var got Record
	for i := range 10 {
		var err error
		_, got, err = m.Apply(ctx, ref("a"), Event{Kind: EventArtifact, Artifact: &ArtifactRef{Name: strconv.Itoa(i)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"1", "2", "0"}; !slices.Equal(got.Task.Artifacts, want) {
		t.Errorf("artifacts %v, want %v", got.Task.Artifacts, want)
	}
}

// TestMemoryStoreAgainstModel runs a long random mix of operations against the
// store and against a plain reference model of its rules, and compares them after
// every step.
func TestMemoryStoreAgainstModel(t *testing.T) {
	const (
		maxTasks    = 8
		maxPerOwner = 3
		ttl         = 10 * time.Second
	)
	type item struct {
		owner   string
		state   State
		updated time.Time
		seq     int
	}
	clock := newFakeClock()
	m := NewMemoryStore(MemoryLimits{MaxTasks: maxTasks, MaxPerOwner: maxPerOwner, TTL: ttl, Now: clock.Now})
	model := map[string]*item{}
	var seq int
	var evicted, expired, violations uint64
	expire := func() {
		for id, it := range model {
			if !clock.Now().Before(it.updated.Add(ttl)) {
				delete(model, id)
				expired++
			}
		}
	}
	// oldest is the least recently updated item among those keep accepts, a
	// finished one before any live one.
	oldest := func(keep func(*item) bool) string {
		best := ""
		for id, it := range model {
			if !keep(it) {
				continue
			}
			if b := model[best]; best == "" || (it.state.Terminal() && !b.state.Terminal()) ||
				(it.state.Terminal() == b.state.Terminal() && it.seq < b.seq) {
				best = id
			}
		}
		return best
	}
	evict := func(id string) {
		delete(model, id)
		evicted++
	}
	count := func(owner string) (n int) {
		for _, it := range model {
			if it.owner == owner {
				n++
			}
		}
		return n
	}

	rng := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	ids := make([]string, 20)
	for i := range ids {
		ids[i] = "t" + strconv.Itoa(i)
	}
	owners := []string{"a", "b", "c"}
	for step := range 5000 {
		id := ids[rng.IntN(len(ids))]
		var op string
		switch r := rng.IntN(10); {
		case r < 4:
			op = "create"
			owner := owners[rng.IntN(len(owners))]
			st := States[rng.IntN(4)] // non-terminal
			err := m.Create(ctx, ownedBy(id, "t", owner, st))
			expire()
			key := OwnerKey(Owner{Tenant: "t", AgentID: owner})
			if _, ok := model[id]; ok {
				if !errors.Is(err, ErrExists) {
					t.Fatalf("step %d: Create(%s) = %v, want ErrExists", step, id, err)
				}
				break
			}
			if err != nil {
				t.Fatalf("step %d: Create(%s): %v", step, id, err)
			}
			switch {
			case count(key) >= maxPerOwner:
				evict(oldest(func(it *item) bool { return it.owner == key }))
			case len(model) >= maxTasks:
				if done := oldest(func(it *item) bool { return it.state.Terminal() }); done != "" {
					evict(done)
					break
				}
				// The heaviest owner's oldest; among owners tied for heaviest,
				// the store picks one: exactly one of their oldest must be gone.
				top := 0
				for _, o := range owners {
					top = max(top, count(OwnerKey(Owner{Tenant: "t", AgentID: o})))
				}
				var gone []string
				for _, o := range owners {
					k := OwnerKey(Owner{Tenant: "t", AgentID: o})
					if count(k) != top {
						continue
					}
					cand := oldest(func(it *item) bool { return it.owner == k })
					if _, ok, _ := m.Get(ctx, ref(cand)); !ok {
						gone = append(gone, cand)
					}
				}
				if len(gone) != 1 {
					t.Fatalf("step %d: a full store evicted %v of the heaviest owners' oldest, want exactly one", step, gone)
				}
				evict(gone[0])
			}
			seq++
			model[id] = &item{owner: key, state: st, updated: clock.Now(), seq: seq}
		case r < 7:
			op = "apply"
			to := States[rng.IntN(len(States))]
			_, got, err := m.Apply(ctx, ref(id), Event{Kind: EventStatus, State: to})
			expire()
			it, ok := model[id]
			if !ok {
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("step %d: Apply(%s) = %v, want ErrNotFound", step, id, err)
				}
				break
			}
			next, aerr := Observe(it.state, to)
			if (aerr == nil) != (err == nil) {
				t.Fatalf("step %d: Apply(%s, %s->%s) = %v, want %v", step, id, it.state, to, err, aerr)
			}
			if aerr != nil {
				violations++
			}
			it.state = next
			seq++
			it.seq, it.updated = seq, clock.Now()
			if got.Task.State != next {
				t.Fatalf("step %d: Apply returned state %s, want %s", step, got.Task.State, next)
			}
		case r < 8:
			op = "delete"
			err := m.Delete(ctx, ref(id))
			expire()
			if _, ok := model[id]; ok != (err == nil) {
				t.Fatalf("step %d: Delete(%s) = %v, model has it: %v", step, id, err, ok)
			}
			delete(model, id)
		default:
			op = "tick"
			clock.Advance(time.Duration(rng.IntN(4)) * time.Second)
		}

		// Compare: every id, its state, the count, the counters and the bookkeeping.
		expire()
		for _, id := range ids {
			got, ok, _ := m.Get(ctx, ref(id))
			it, want := model[id]
			if ok != want || (ok && got.Task.State != it.state) {
				t.Fatalf("step %d (%s): Get(%s) = %v %s, model %v %+v", step, op, id, ok, got.Task.State, want, it)
			}
		}
		s := mstats(m)
		if s.Tasks != len(model) || s.Evicted != evicted || s.Expired != expired || s.Violations != violations {
			t.Fatalf("step %d (%s): Stats %+v, model: %d tasks, %d evicted, %d expired, %d violations",
				step, op, s, len(model), evicted, expired, violations)
		}
		checkInvariants(t, m)
	}
	if expired == 0 || evicted == 0 || violations == 0 {
		t.Errorf("the mix never exercised a path: %d expired, %d evicted, %d violations", expired, evicted, violations)
	}
}

func TestMemoryStoreConcurrent(t *testing.T) {
	const (
		workers = 16
		perTask = 100
		shared  = 20
	)
	m := NewMemoryStore(MemoryLimits{})
	ctx := context.Background()
	var wins atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			owner := strconv.Itoa(w % 4)
			for i := range perTask {
				id := fmt.Sprintf("w%d-%d", w, i)
				if err := m.Create(ctx, ownedBy(id, "t", owner, Queued)); err != nil {
					t.Error(err)
					return
				}
				for _, st := range []State{Running, AwaitingInput, Running} {
					if _, _, err := m.Apply(ctx, ref(id), Event{Kind: EventStatus, State: st}); err != nil {
						t.Error(err)
						return
					}
				}
				m.Apply(ctx, ref(id), Event{Kind: EventArtifact, Artifact: &ArtifactRef{Name: "out"}})
				if _, _, err := m.Apply(ctx, ref(id), Event{Kind: EventStatus, State: Succeeded}); err != nil {
					t.Error(err)
					return
				}
				if r, ok, err := m.Get(ctx, ref(id)); !ok || err != nil || r.Task.State != Succeeded || len(r.Task.Artifacts) != 1 {
					t.Errorf("Get(%s) = %+v %v %v", id, r, ok, err)
				}
				// Everyone races to create and move the same few tasks.
				sid := "shared-" + strconv.Itoa(i%shared)
				switch err := m.Create(ctx, ownedBy(sid, "t", owner, Queued)); {
				case err == nil:
					wins.Add(1)
				case !errors.Is(err, ErrExists):
					t.Error(err)
				}
				m.Apply(ctx, ref(sid), Event{Kind: EventStatus, State: Running})
				m.Get(ctx, ref(sid))
				_ = m.Len()
			}
			// One illegal move per worker.
			if _, _, err := m.Apply(ctx, ref(fmt.Sprintf("w%d-0", w)), Event{Kind: EventStatus, State: Running}); !errors.Is(err, ErrTerminal) {
				t.Errorf("illegal move: %v", err)
			}
		})
	}
	wg.Go(func() { // a metrics scraper
		for range 200 {
			s := mstats(m)
			if s.Tasks > workers*perTask+shared {
				t.Errorf("Tasks %d", s.Tasks)
			}
		}
	})
	wg.Wait()

	if wins.Load() != shared {
		t.Errorf("%d creates of the shared tasks succeeded, want exactly %d", wins.Load(), shared)
	}
	s := mstats(m)
	if want := workers*perTask + shared; s.Tasks != want || m.Len() != want {
		t.Errorf("Tasks %d, Len %d, want %d", s.Tasks, m.Len(), want)
	}
	if s.ByState[Succeeded] != workers*perTask || s.ByState[Running] != shared {
		t.Errorf("ByState %v", s.ByState)
	}
	if s.Violations != workers || s.Evicted != 0 || s.Expired != 0 {
		t.Errorf("Stats %+v, want %d violations, no evictions", s, workers)
	}
	checkInvariants(t, m)
}

// TestMemoryStoreConcurrentEviction: with the bounds biting from many goroutines,
// every created record is either held or counted as evicted or deleted.
func TestMemoryStoreConcurrentEviction(t *testing.T) {
	m := NewMemoryStore(MemoryLimits{MaxTasks: 50, MaxPerOwner: 10})
	ctx := context.Background()
	var created, deleted atomic.Int64
	var wg sync.WaitGroup
	for w := range 12 {
		wg.Go(func() {
			owner := strconv.Itoa(w % 6)
			for i := range 300 {
				id := fmt.Sprintf("w%d-%d", w, i)
				if err := m.Create(ctx, ownedBy(id, "t", owner, Queued)); err != nil {
					t.Error(err)
					return
				}
				created.Add(1)
				m.Apply(ctx, ref(fmt.Sprintf("w%d-%d", w, i/2)), Event{Kind: EventStatus, State: Running})
				if i%7 == 0 && m.Delete(ctx, ref(fmt.Sprintf("w%d-%d", w, i-3))) == nil {
					deleted.Add(1)
				}
				m.Get(ctx, ref(fmt.Sprintf("w%d-%d", (w+1)%12, i)))
			}
		})
	}
	wg.Wait()
	s := mstats(m)
	if got := int64(s.Tasks) + int64(s.Evicted) + deleted.Load(); got != created.Load() {
		t.Errorf("held %d + evicted %d + deleted %d = %d, created %d", s.Tasks, s.Evicted, deleted.Load(), got, created.Load())
	}
	if s.Tasks != 50 {
		t.Errorf("Tasks = %d, want the store full (50)", s.Tasks)
	}
	checkInvariants(t, m)
}

func benchStore(b *testing.B, n int) (*MemoryStore, []string) {
	m := NewMemoryStore(MemoryLimits{})
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "task-" + strconv.Itoa(i)
		if err := m.Create(context.Background(), ownedBy(ids[i], "t", strconv.Itoa(i%100), Running)); err != nil {
			b.Fatal(err)
		}
	}
	return m, ids
}

func BenchmarkMemoryStoreApply(b *testing.B) {
	const n = 10000
	m, ids := benchStore(b, n)
	ctx := context.Background()
	// Each pass over the tasks moves them all running -> awaiting_input or back.
	evs := [2]Event{{Kind: EventStatus, State: AwaitingInput}, {Kind: EventStatus, State: Running}}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, _, err := m.Apply(ctx, ref(ids[i%n]), evs[(i/n)%2]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkMemoryStoreGet(b *testing.B) {
	const n = 10000
	m, ids := benchStore(b, n)
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, ok, _ := m.Get(ctx, ref(ids[i%n])); !ok {
				b.Fatal("missing")
			}
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, ok, _ := m.Get(ctx, ref(ids[i%n])); !ok {
					b.Fatal("missing")
				}
				i++
			}
		})
	})
}
