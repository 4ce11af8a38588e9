package task

import (
	"fmt"
	"testing"
)

// TestRetiredRates: the set never says "new" of an id it holds, and at its
// capacity answers "seen" for fresh ids at about its false-positive rate
// (the hash is SHA-1, so the count is the same on every run).
func TestRetiredRates(t *testing.T) {
	const capacity, fp, probes = 20_000, 1e-3, 200_000
	r, err := NewRetired(capacity, fp)
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[uint32][]byte{}
	set := func(kind byte, ref Ref) {
		at := r.Locate(kind, ref)
		if blocks[at.Block] == nil {
			blocks[at.Block] = make([]byte, RetiredBlockBytes)
		}
		at.Set(blocks[at.Block])
	}
	in := func(kind byte, ref Ref) bool {
		at := r.Locate(kind, ref)
		return at.In(blocks[at.Block])
	}
	for i := range capacity {
		set(RetiredTask, Ref{Agent: "a", ID: fmt.Sprintf("task-%d", i)})
	}
	for i := range capacity {
		if !in(RetiredTask, Ref{Agent: "a", ID: fmt.Sprintf("task-%d", i)}) {
			t.Fatalf("task-%d was added and is not in the set", i)
		}
	}
	wrong := 0
	for i := range probes {
		if in(RetiredTask, Ref{Agent: "a", ID: fmt.Sprintf("fresh-%d", i)}) {
			wrong++
		}
	}
	if want := fp * probes; float64(wrong) > 2*want {
		t.Errorf("%d of %d fresh ids answered seen; want about %.0f", wrong, probes, want)
	}
	// A context id is not the task id of the same string, nor one of another
	// agent.
	if in(RetiredContext, Ref{Agent: "a", ID: "task-1"}) && in(RetiredTask, Ref{Agent: "b", ID: "task-1"}) {
		t.Error("the kind and the agent are not part of the id")
	}
}

// TestRetiredLayout: sizes are checked, and a layout reads back as written.
func TestRetiredLayout(t *testing.T) {
	for _, bad := range []struct {
		capacity int
		fp       float64
	}{{0, 1e-6}, {1000, 0}, {1000, 0.5}, {1000, 1e-12}, {1 << 30, 1e-6}} {
		if _, err := NewRetired(bad.capacity, bad.fp); err == nil {
			t.Errorf("NewRetired(%d, %g) accepted", bad.capacity, bad.fp)
		}
	}
	r, err := NewRetired(1_000_000, DefaultRetiredFalsePositive)
	if err != nil {
		t.Fatal(err)
	}
	if r.Blocks < 1_000_000*28/512 || r.K < 10 {
		t.Errorf("layout %v is smaller than a Bloom filter of that rate allows", r)
	}
	back, err := ParseRetired(r.String())
	if err != nil || back != r {
		t.Errorf("ParseRetired(%q) = %v %v", r.String(), back, err)
	}
	for _, bad := range []string{"", "0/5", "10/0", "10/33", "x/y", fmt.Sprintf("%d/5", MaxRetiredBlocks+1)} {
		if _, err := ParseRetired(bad); err == nil {
			t.Errorf("ParseRetired(%q) accepted", bad)
		}
	}
}
