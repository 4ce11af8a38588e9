package exchange

import (
	"container/list"
	"sync"
	"time"
)

// cache keeps exchanged tokens until shortly before they expire. It is
// bounded in bytes (an estimate of each entry's heap), least recently used
// first, and fair: each subject (the issued token's sub, the delegation's
// initiator) may hold at most perSubject bytes, and a subject over its share
// evicts its own entries, never everyone else's. Safe for concurrent use; each
// method holds one mutex for a map lookup and a few list moves.
type cache struct {
	mu         sync.Mutex
	maxBytes   int
	perSubject int
	bytes      int
	lru        *list.List // of *cacheEntry, most recent first
	byKey      map[string]*list.Element
	subjects   map[string]*subjectShare
}

type cacheEntry struct {
	key, subject string
	tok          Token
	useUntil     time.Time // exp minus refresh_before
	size         int
	inSubject    *list.Element
}

// subjectShare is one subject's entries (most recent first) and bytes.
type subjectShare struct {
	lru   *list.List
	bytes int
}

func newCache(maxBytes, perSubject int) *cache {
	if maxBytes <= 0 {
		return nil
	}
	return &cache{maxBytes: maxBytes, perSubject: perSubject, lru: list.New(),
		byKey: map[string]*list.Element{}, subjects: map[string]*subjectShare{}}
}

// entryBytes estimates an entry's heap: the token and key strings, the scope
// and actor slices, and the bookkeeping (entry, two list elements, maps).
func entryBytes(key string, t Token) int {
	n := 320 + len(key) + len(t.Value) + len(t.Audience) + len(t.ChainID) + len(t.Type)
	for _, s := range t.Scope {
		n += 16 + len(s)
	}
	for _, s := range t.Actors {
		n += 16 + len(s)
	}
	return n
}

// get returns the token under key if it may still be used at now; an entry
// past its use drops out.
func (c *cache) get(key string, now time.Time) (Token, bool) {
	if c == nil {
		return Token{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok {
		return Token{}, false
	}
	e := el.Value.(*cacheEntry)
	if !now.Before(e.useUntil) {
		c.remove(el)
		return Token{}, false
	}
	c.lru.MoveToFront(el)
	c.subjects[e.subject].lru.MoveToFront(e.inSubject)
	return e.tok, true
}

// add keeps t under key for subject until useUntil. An entry larger than a
// subject's share is not kept at all.
func (c *cache) add(key, subject string, t Token, useUntil, now time.Time) {
	if c == nil || !now.Before(useUntil) {
		return
	}
	size := entryBytes(key, t)
	if size > c.perSubject || size > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		c.remove(el)
	}
	share := c.subjects[subject]
	if share == nil {
		share = &subjectShare{lru: list.New()}
		c.subjects[subject] = share
	}
	// The subject's own entries go first, then everyone's oldest.
	for share.bytes+size > c.perSubject {
		c.remove(share.lru.Back().Value.(*list.Element))
	}
	for c.bytes+size > c.maxBytes {
		c.remove(c.lru.Back())
	}
	if c.subjects[subject] == nil { // its last entry went just now
		c.subjects[subject] = share
	}
	e := &cacheEntry{key: key, subject: subject, tok: t, useUntil: useUntil, size: size}
	el := c.lru.PushFront(e)
	e.inSubject = share.lru.PushFront(el)
	c.byKey[key] = el
	share.bytes += size
	c.bytes += size
}

// remove drops one entry; the caller holds mu.
func (c *cache) remove(el *list.Element) {
	e := el.Value.(*cacheEntry)
	c.lru.Remove(el)
	delete(c.byKey, e.key)
	share := c.subjects[e.subject]
	share.lru.Remove(e.inSubject)
	share.bytes -= e.size
	if share.lru.Len() == 0 {
		delete(c.subjects, e.subject)
	}
	c.bytes -= e.size
}

// stats are the cache's entries and bytes.
func (c *cache) stats() (entries, bytes int) {
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey), c.bytes
}
