package task

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"time"
)

// DefaultMaxWork is the default bound of a WorkQueue, per kind.
const DefaultMaxWork = 100_000

// WorkLimits bound a WorkQueue (the memory queue and the others). A zero or
// negative field takes its default.
type WorkLimits struct {
	// MaxItems bounds the items of one kind, held or waiting (default
	// DefaultMaxWork); Put of a new item beyond it is ErrWorkFull.
	MaxItems int
	// Now is the queue's clock; nil means time.Now. A queue that keeps its own
	// time (Redis: the server's clock) ignores it.
	Now func() time.Time
}

// WithDefaults returns l with every zero or negative field set to its default.
func (l WorkLimits) WithDefaults() WorkLimits {
	if l.MaxItems <= 0 {
		l.MaxItems = DefaultMaxWork
	}
	if l.Now == nil {
		l.Now = time.Now
	}
	return l
}

var _ WorkQueue = (*MemoryWorkQueue)(nil)

// MemoryWorkQueue is the in-process WorkQueue (tests and the demo): its items
// are lost when the process ends.
//
// Order: Claim takes the items whose lease ran out first (an item put with no
// lease is claimable from its Put), ties in Put order — so among items put with
// one ttl, oldest first. Holder stays on an item whose lease ran out until
// another holder claims it: until then its holder may still Renew it or mark it
// Done.
type MemoryWorkQueue struct {
	limits WorkLimits
	mu     sync.Mutex
	kinds  map[string]*workKind
	seq    uint64
}

type workItem struct {
	w     Work
	seq   uint64
	index int // in workKind.heap
}

// workKind is one kind's items, in a heap ordered by (lease end, put order).
type workKind struct {
	items map[string]*workItem
	heap  workHeap
}

type workHeap []*workItem

func (h workHeap) Len() int { return len(h) }
func (h workHeap) Less(i, j int) bool {
	if !h[i].w.LeaseUntil.Equal(h[j].w.LeaseUntil) {
		return h[i].w.LeaseUntil.Before(h[j].w.LeaseUntil)
	}
	return h[i].seq < h[j].seq
}
func (h workHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *workHeap) Push(x any) {
	it := x.(*workItem)
	it.index = len(*h)
	*h = append(*h, it)
}
func (h *workHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}

// NewMemoryWorkQueue returns an empty queue bounded by l.
func NewMemoryWorkQueue(l WorkLimits) *MemoryWorkQueue {
	return &MemoryWorkQueue{limits: l.WithDefaults(), kinds: map[string]*workKind{}}
}

func (q *MemoryWorkQueue) kind(k string) *workKind {
	wk := q.kinds[k]
	if wk == nil {
		wk = &workKind{items: map[string]*workItem{}}
		q.kinds[k] = wk
	}
	return wk
}

// Put implements WorkQueue. An existing item gets the new payload and is
// leased to holder for ttl (ttl <= 0: claimable at once).
func (q *MemoryWorkQueue) Put(_ context.Context, w Work, holder string, ttl time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.limits.Now()
	wk := q.kind(w.Kind)
	it, ok := wk.items[w.ID]
	if !ok {
		if len(wk.items) >= q.limits.MaxItems {
			return fmt.Errorf("%w (%d items of kind %q)", ErrWorkFull, q.limits.MaxItems, w.Kind)
		}
		q.seq++
		it = &workItem{seq: q.seq}
		wk.items[w.ID] = it
		heap.Push(&wk.heap, it)
	}
	it.w = Work{Kind: w.Kind, ID: w.ID, Payload: append([]byte(nil), w.Payload...), Holder: holder, LeaseUntil: now.Add(max(ttl, 0))}
	heap.Fix(&wk.heap, it.index)
	return nil
}

// Claim implements WorkQueue.
func (q *MemoryWorkQueue) Claim(_ context.Context, kind, holder string, n int, ttl time.Duration) ([]Work, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.limits.Now()
	wk := q.kinds[kind]
	if wk == nil || n <= 0 {
		return nil, nil
	}
	var taken []*workItem
	for len(taken) < n && wk.heap.Len() > 0 && !wk.heap[0].w.LeaseUntil.After(now) {
		taken = append(taken, heap.Pop(&wk.heap).(*workItem))
	}
	out := make([]Work, 0, len(taken))
	for _, it := range taken {
		it.w.Holder, it.w.LeaseUntil = holder, now.Add(max(ttl, 0))
		heap.Push(&wk.heap, it)
		w := it.w
		w.Payload = append([]byte(nil), w.Payload...)
		out = append(out, w)
	}
	return out, nil
}

// Renew implements WorkQueue.
func (q *MemoryWorkQueue) Renew(_ context.Context, kind, holder string, ids []string, ttl time.Duration) ([]string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.limits.Now()
	wk := q.kinds[kind]
	var lost []string
	for _, id := range ids {
		var it *workItem
		if wk != nil {
			it = wk.items[id]
		}
		if it == nil || it.w.Holder != holder {
			lost = append(lost, id)
			continue
		}
		it.w.LeaseUntil = now.Add(max(ttl, 0))
		heap.Fix(&wk.heap, it.index)
	}
	return lost, nil
}

// Done implements WorkQueue.
func (q *MemoryWorkQueue) Done(_ context.Context, kind, id, holder string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	wk := q.kinds[kind]
	if wk == nil || wk.items[id] == nil || wk.items[id].w.Holder != holder {
		return fmt.Errorf("%s %q: %w", kind, id, ErrNotHolder)
	}
	heap.Remove(&wk.heap, wk.items[id].index)
	delete(wk.items, id)
	return nil
}

// Count implements WorkQueue.
func (q *MemoryWorkQueue) Count(_ context.Context, kind string) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if wk := q.kinds[kind]; wk != nil {
		return len(wk.items), nil
	}
	return 0, nil
}
