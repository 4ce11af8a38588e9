package filestore

import (
	"slices"
	"sort"
)

// keyset is a sorted set of keys kept in chunks of at most 2×keyChunk, so
// that an insert into a large overlay (a sweep deleting thousands of
// records, in key orders that are not the age order it walks) moves at most
// a chunk, not the whole set: O(log n + keyChunk) a key instead of O(n).
type keyset struct {
	chunks [][]string // each sorted and non-empty; chunk i's keys < chunk i+1's
}

const keyChunk = 256

// find is the position of the first key >= k: the chunk and the index in it
// (ci == len(chunks) when there is none).
func (ks *keyset) find(k string) (ci, i int) {
	ci = sort.Search(len(ks.chunks), func(c int) bool {
		ch := ks.chunks[c]
		return ch[len(ch)-1] >= k
	})
	if ci == len(ks.chunks) {
		return ci, 0
	}
	return ci, sort.SearchStrings(ks.chunks[ci], k)
}

// insert adds k, which the set does not hold.
func (ks *keyset) insert(k string) {
	if len(ks.chunks) == 0 {
		ks.chunks = [][]string{{k}}
		return
	}
	ci, i := ks.find(k)
	if ci == len(ks.chunks) { // after every key: the end of the last chunk
		ci = len(ks.chunks) - 1
		i = len(ks.chunks[ci])
	}
	ch := slices.Insert(ks.chunks[ci], i, k)
	if len(ch) <= 2*keyChunk {
		ks.chunks[ci] = ch
		return
	}
	left, right := slices.Clone(ch[:keyChunk]), slices.Clone(ch[keyChunk:])
	ks.chunks[ci] = left
	ks.chunks = slices.Insert(ks.chunks, ci+1, right)
}

// remove drops k if the set holds it.
func (ks *keyset) remove(k string) {
	ci, i := ks.find(k)
	if ci == len(ks.chunks) || ks.chunks[ci][i] != k {
		return
	}
	if ch := slices.Delete(ks.chunks[ci], i, i+1); len(ch) > 0 {
		ks.chunks[ci] = ch
		return
	}
	ks.chunks = slices.Delete(ks.chunks, ci, ci+1)
}

// from is an iterator at the first key at or after k (after it when !incl).
func (ks *keyset) from(k string, incl bool) keyIter {
	ci, i := ks.find(k)
	it := keyIter{ks: ks, ci: ci, i: i}
	if !incl && it.valid() && it.key() == k {
		it.next()
	}
	return it
}

// before is the last key before bound (any key when !bounded).
func (ks *keyset) before(bound string, bounded bool) (string, bool) {
	if len(ks.chunks) == 0 {
		return "", false
	}
	if !bounded {
		last := ks.chunks[len(ks.chunks)-1]
		return last[len(last)-1], true
	}
	ci, i := ks.find(bound)
	if i > 0 {
		return ks.chunks[ci][i-1], true
	}
	if ci == 0 {
		return "", false
	}
	prev := ks.chunks[ci-1]
	return prev[len(prev)-1], true
}

// each calls fn for every key in order.
func (ks *keyset) each(fn func(k string) error) error {
	for _, ch := range ks.chunks {
		for _, k := range ch {
			if err := fn(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// keyIter walks a keyset in order; the set must not change meanwhile.
type keyIter struct {
	ks    *keyset
	ci, i int
}

func (it keyIter) valid() bool { return it.ks != nil && it.ci < len(it.ks.chunks) }
func (it keyIter) key() string { return it.ks.chunks[it.ci][it.i] }

func (it *keyIter) next() {
	if it.i++; it.i >= len(it.ks.chunks[it.ci]) {
		it.ci, it.i = it.ci+1, 0
	}
}
