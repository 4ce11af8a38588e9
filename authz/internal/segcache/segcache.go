// Package segcache is the bounded cache behind writ's decision, token and input
// caches: an entry seen once waits in a small probation segment; only an entry
// asked for again moves to the main segment. A flood of one-time keys (a new
// token per request, a decision keyed on a context seen once) therefore churns
// only the probation segment, and the heap, which the garbage collector marks on
// every cycle, stays small. Both segments are bounded in entries and in bytes
// (as estimated by the cache's size function).
//
// A Cache is safe for concurrent use; every method takes one mutex, held for a
// map lookup and a list move.
package segcache

import (
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Cache maps keys to values with the two segments.
type Cache[K comparable, V any] struct {
	mu             sync.Mutex
	probation      *simplelru.LRU[K, V]
	main           *simplelru.LRU[K, V]
	size           func(V) int
	bytes          int // held in both segments
	maxBytes       int
	probationBytes int
	maxProbation   int // bytes
}

// ProbationShare is the share of the entry and byte bounds the probation segment
// gets: enough for a key asked twice within ~1/8 of the cache's reach to be kept.
const ProbationShare = 8

// New returns a cache of at most entries entries and maxBytes bytes (sizes as
// size estimates them; maxBytes <= 0 bounds entries only).
func New[K comparable, V any](entries, maxBytes int, size func(V) int) (*Cache[K, V], error) {
	if entries < 2 {
		entries = 2
	}
	probation := max(1, entries/ProbationShare)
	c := &Cache[K, V]{size: size, maxBytes: maxBytes}
	if maxBytes > 0 {
		c.maxProbation = max(1, maxBytes/ProbationShare)
	}
	var err error
	if c.probation, err = simplelru.NewLRU[K, V](probation, c.evictedProbation); err != nil {
		return nil, err
	}
	if c.main, err = simplelru.NewLRU[K, V](entries-probation, c.evictedMain); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Cache[K, V]) sizeOf(v V) int {
	if c.size == nil {
		return 0
	}
	return c.size(v)
}

func (c *Cache[K, V]) evictedProbation(_ K, v V) {
	n := c.sizeOf(v)
	c.bytes -= n
	c.probationBytes -= n
}

func (c *Cache[K, V]) evictedMain(_ K, v V) { c.bytes -= c.sizeOf(v) }

// Get returns the value under k. A hit in probation promotes the entry to main.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.main.Get(k); ok {
		return v, true
	}
	v, ok := c.probation.Peek(k)
	if !ok {
		return v, false
	}
	c.probation.Remove(k) // subtracts its bytes, from probation and the total
	c.bytes += c.sizeOf(v)
	c.main.Add(k, v)
	c.trimMain()
	return v, true
}

// Add stores v under k: in probation, or in place when k is in main already.
func (c *Cache[K, V]) Add(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.sizeOf(v)
	if c.main.Contains(k) {
		c.main.Remove(k)
		c.bytes += n
		c.main.Add(k, v)
		c.trimMain()
		return
	}
	c.probation.Remove(k)
	if c.maxProbation > 0 && n > c.maxProbation {
		return // larger than the whole probation segment: not cached
	}
	c.bytes += n
	c.probationBytes += n
	c.probation.Add(k, v)
	for c.maxProbation > 0 && c.probationBytes > c.maxProbation && c.probation.Len() > 0 {
		c.probation.RemoveOldest()
	}
}

// trimMain evicts main's oldest entries while the cache is over its byte bound.
func (c *Cache[K, V]) trimMain() {
	for c.maxBytes > 0 && c.bytes > c.maxBytes && c.main.Len() > 0 {
		c.main.RemoveOldest()
	}
}

// Remove drops k.
func (c *Cache[K, V]) Remove(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.main.Remove(k)
	c.probation.Remove(k)
}

// Purge drops everything.
func (c *Cache[K, V]) Purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.main.Purge()
	c.probation.Purge()
	c.bytes, c.probationBytes = 0, 0
}

// Len is the number of entries in both segments.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.main.Len() + c.probation.Len()
}

// Bytes is the estimated size of every entry held.
func (c *Cache[K, V]) Bytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}
