package segcache

import (
	"strconv"
	"sync"
	"testing"
)

func TestOneTimeKeysStayInProbation(t *testing.T) {
	c, err := New[string, string](80, 0, nil) // probation 10, main 70
	if err != nil {
		t.Fatal(err)
	}
	c.Add("hot", "v")
	if _, ok := c.Get("hot"); !ok { // second sight: promoted
		t.Fatal("miss on the second sight")
	}
	for i := range 1000 {
		c.Add(strconv.Itoa(i), "once")
	}
	if n := c.Len(); n != 11 {
		t.Fatalf("%d entries after 1000 one-time keys, want 10 in probation + 1 in main", n)
	}
	if v, ok := c.Get("hot"); !ok || v != "v" {
		t.Fatal("the promoted key was pushed out by one-time keys")
	}
	if _, ok := c.Get("0"); ok {
		t.Fatal("an old one-time key is still there")
	}
	if _, ok := c.Get("999"); !ok {
		t.Fatal("the newest one-time key is gone")
	}
}

func TestByteBound(t *testing.T) {
	size := func(v string) int { return len(v) }
	c, err := New[int, string](1000, 800, size) // probation 100 bytes
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		c.Add(i, "0123456789") // 10 bytes each
		c.Get(i)               // promote
	}
	if b := c.Bytes(); b > 800 {
		t.Fatalf("%d bytes held, bound 800", b)
	}
	if n := c.Len(); n != 80 {
		t.Fatalf("%d entries, want 80 (800 bytes of 10)", n)
	}
	for i := range 50 {
		c.Add(1000+i, "0123456789")
	}
	if b := c.Bytes(); b > 800+100 {
		t.Fatalf("%d bytes held with probation full", b)
	}
	c.Add(5000, string(make([]byte, 200))) // larger than probation: not cached
	if _, ok := c.Get(5000); ok {
		t.Fatal("an entry larger than the probation segment was cached")
	}
	c.Add(99, "x") // replace in main
	if v, _ := c.Get(99); v != "x" {
		t.Fatalf("replaced value = %q", v)
	}
	c.Remove(99)
	if _, ok := c.Get(99); ok {
		t.Fatal("removed key still there")
	}
	c.Purge()
	if c.Len() != 0 || c.Bytes() != 0 {
		t.Fatalf("after purge: %d entries, %d bytes", c.Len(), c.Bytes())
	}
}

func TestConcurrent(t *testing.T) {
	c, _ := New[int, int](64, 1<<20, func(int) int { return 8 })
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := (g*7 + i) % 100
				if _, ok := c.Get(k); !ok {
					c.Add(k, i)
				}
				if i%500 == 0 {
					c.Remove(k)
				}
			}
		})
	}
	wg.Wait()
	if c.Len() > 64 || c.Bytes() != 8*c.Len() {
		t.Fatalf("%d entries, %d bytes", c.Len(), c.Bytes())
	}
}
