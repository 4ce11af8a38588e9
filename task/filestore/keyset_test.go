package filestore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestKeyset: inserts and removals in random order, past several chunk
// splits, leave the set equal to a sorted slice of the same keys, and every
// seek (at or after, after, last before) answers as a search of that slice.
func TestKeyset(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var ks keyset
	var ref []string
	for n := range 5000 {
		k := fmt.Sprintf("k%05d", rng.IntN(4000))
		i, found := slices.BinarySearch(ref, k)
		switch {
		case found && n%3 == 0:
			ks.remove(k)
			ref = slices.Delete(ref, i, i+1)
		case !found:
			ks.insert(k)
			ref = slices.Insert(ref, i, k)
		}
	}
	var got []string
	_ = ks.each(func(k string) error { got = append(got, k); return nil })
	if !slices.Equal(got, ref) {
		t.Fatalf("keyset holds %d keys, want %d (or out of order)", len(got), len(ref))
	}
	if len(ks.chunks) < 4 {
		t.Fatalf("only %d chunks: the splits were not exercised", len(ks.chunks))
	}
	for _, k := range []string{"", "k00000", "k01234", "k02000x", "k03999", "k9"} {
		for _, incl := range []bool{true, false} {
			i, found := slices.BinarySearch(ref, k)
			if found && !incl {
				i++
			}
			it := ks.from(k, incl)
			if i == len(ref) {
				if it.valid() {
					t.Errorf("from(%q, %v) = %q, want none", k, incl, it.key())
				}
				continue
			}
			if !it.valid() || it.key() != ref[i] {
				t.Errorf("from(%q, %v): want %q", k, incl, ref[i])
				continue
			}
			if it.next(); i+1 < len(ref) && (!it.valid() || it.key() != ref[i+1]) {
				t.Errorf("next after %q: want %q", ref[i], ref[i+1])
			}
		}
		j, _ := slices.BinarySearch(ref, k)
		got, ok := ks.before(k, true)
		if (j > 0) != ok || (ok && got != ref[j-1]) {
			t.Errorf("before(%q) = %q %v", k, got, ok)
		}
	}
	if last, ok := ks.before("", false); !ok || last != ref[len(ref)-1] {
		t.Errorf("last = %q %v", last, ok)
	}
	for _, k := range slices.Clone(ref) {
		ks.remove(k)
	}
	if len(ks.chunks) != 0 {
		t.Fatalf("%d chunks left after removing every key", len(ks.chunks))
	}
}
