package exchange

import (
	"fmt"
	"testing"
	"time"
)

// TestCacheBoundAndFairness: the cache never holds more than its bytes; a
// subject over its share evicts its own oldest entries, not other
// subjects'; an entry past its use is gone.
//
// Threat: one caller fanning out to many targets (or asking many scope
// sets) evicts every other caller's tokens, so each of their requests costs
// an exchange, or grows the cache without bound.
// Defence: a byte bound on the whole cache and a per-subject share; a
// subject over its share pays with its own entries.
func TestCacheBoundAndFairness(t *testing.T) {
	now := time.Now()
	tok := Token{Value: string(make([]byte, 600)), Audience: "agent:b", Scope: []string{"read"}}
	size := entryBytes("k-000", tok)
	c := newCache(10*size, 3*size)
	c.add("quiet-1", "bob", tok, now.Add(time.Minute), now)
	for i := range 50 {
		c.add(fmt.Sprintf("k-%03d", i), "mallory", tok, now.Add(time.Minute), now)
	}
	if _, ok := c.get("quiet-1", now); !ok {
		t.Fatal("one subject's flood evicted another subject's token")
	}
	n, b := c.stats()
	if n != 4 || b > 10*size {
		t.Fatalf("%d entries, %d bytes (bound %d): the flood kept more than its share", n, b, 10*size)
	}
	for i := 47; i < 50; i++ {
		if _, ok := c.get(fmt.Sprintf("k-%03d", i), now); !ok {
			t.Errorf("k-%03d, among the subject's newest, is gone", i)
		}
	}
	// Many subjects: the global bound holds, least recently used first.
	for i := range 30 {
		c.add(fmt.Sprintf("s-%03d", i), fmt.Sprintf("user-%d", i), tok, now.Add(time.Minute), now)
	}
	if n, b := c.stats(); n != 10 || b > 10*size {
		t.Fatalf("%d entries, %d bytes (bound %d)", n, b, 10*size)
	}
	if _, ok := c.get("s-029", now); !ok {
		t.Error("the newest entry is gone")
	}
	// Past its use: gone.
	if _, ok := c.get("s-029", now.Add(time.Minute)); ok {
		t.Error("an entry past its use was served")
	}
	if _, ok := c.get("s-029", now); ok {
		t.Error("an entry past its use stayed")
	}
	// Too large for a share: not kept at all.
	c.add("huge", "bob", Token{Value: string(make([]byte, 4*size))}, now.Add(time.Minute), now)
	if _, ok := c.get("huge", now); ok {
		t.Error("an entry larger than a subject's share was kept")
	}
	if newCache(-1, 0) != nil || newCache(0, 0) != nil {
		t.Error("a disabled cache was built")
	}
	var off *cache
	off.add("k", "s", tok, now.Add(time.Minute), now)
	if _, ok := off.get("k", now); ok {
		t.Error("the disabled cache served")
	}
}
