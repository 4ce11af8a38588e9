package replay_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"testing"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/replay"
)

// generated is a log of n lines made from the decision lines of a real
// writ's log, read as it is generated (never held whole): each line gets a
// decision id and a caller of its own (so the callers are many more than a
// replay counts apart), its policy input as logged.
type generated struct {
	templates []template
	// distinct: the input's caller is the line's too, so that no two
	// inputs are alike (no decision comes from the engine's cache).
	distinct bool
	n, i     int
	buf      bytes.Buffer
	bytes    int64
}

// template is a decision line cut around its decision id, its caller's
// agent id and its input's caller's agent id.
type template struct{ head, mid, input, tail []byte }

var (
	idRE     = regexp.MustCompile(`"decision_id":"[0-9a-f]+"`)
	callerRE = regexp.MustCompile(`"caller":\{"authenticated":true,"method":"jwt","issuer":"https://idp.test","agent_id":"payments-investigator"`)
)

func newGenerated(t testing.TB, log string, n int) *generated {
	t.Helper()
	raw, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	g := &generated{n: n}
	for line := range bytes.SplitSeq(raw, []byte("\n")) {
		if !bytes.Contains(line, []byte(`"type":"decision"`)) {
			continue
		}
		id, callers := idRE.FindIndex(line), callerRE.FindAllIndex(line, 2)
		if id == nil || len(callers) != 2 || callers[0][0] < id[1] {
			t.Fatalf("a decision line without its id, caller or input: %s", line)
		}
		g.templates = append(g.templates, template{head: line[:id[0]], mid: line[id[1]:callers[0][0]],
			input: line[callers[0][1]:callers[1][0]], tail: line[callers[1][1]:]})
	}
	if len(g.templates) == 0 {
		t.Fatal("no decision lines")
	}
	return g
}

func (g *generated) Read(p []byte) (int, error) {
	for g.buf.Len() < len(p) && g.i < g.n {
		tpl := &g.templates[g.i%len(g.templates)]
		n := strconv.Itoa(g.i)
		g.buf.Write(tpl.head)
		g.buf.WriteString(`"decision_id":"gen-` + n + `"`)
		g.buf.Write(tpl.mid)
		caller := `"caller":{"authenticated":true,"method":"jwt","issuer":"https://idp.test","agent_id":"caller-` + n + `"`
		g.buf.WriteString(caller)
		g.buf.Write(tpl.input)
		if g.distinct {
			g.buf.WriteString(caller) // the input's caller: every input one of its own
		} else {
			g.buf.WriteString(`"caller":{"authenticated":true,"method":"jwt","issuer":"https://idp.test","agent_id":"payments-investigator"`)
		}
		g.buf.Write(tpl.tail)
		g.buf.WriteByte('\n')
		g.i++
	}
	if g.buf.Len() == 0 {
		return 0, io.EOF
	}
	n, _ := g.buf.Read(p)
	g.bytes += int64(n)
	return n, nil
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestReplayBoundedMemory: a log far larger than memory would hold (two
// hundred thousand lines, over 300 MB, generated as it is read) replays in
// a live heap that stays within a few megabytes of where it started: a
// replay holds one line at a time and bounded counts, and folds the callers
// beyond its bound into one group.
func TestReplayBoundedMemory(t *testing.T) {
	n := 100_000
	if raceOn || testing.Short() {
		n = 20_000
	}
	log := proxytest.DepthLog(t, nil)
	p, err := authz.LoadPolicy(t.Context(), []string{maxDepth(t, "3")}, authz.LoadOptions{SkipTests: true})
	if err != nil {
		t.Fatal(err)
	}
	src := newGenerated(t, log, n)
	var base, peak uint64
	samples := 0
	opt := replay.Options{Proposed: p, Progress: func(pr replay.Progress) {
		switch {
		case pr.Lines == 1024:
			base = liveHeap() // the engines built, their caches warm
		case pr.Lines%(16*1024) == 0:
			samples++
			peak = max(peak, liveHeap())
		}
	}}
	im, err := replay.Run(context.Background(), []replay.Source{{Name: "generated", R: src}}, opt)
	if err != nil {
		t.Fatal(err)
	}
	if im.Lines != n || im.Replayed != n || im.Skips() != 0 {
		t.Fatalf("replayed %d of %d lines, skipped %v", im.Replayed, im.Lines, im.Skipped)
	}
	// Two of every eleven decisions are sends at depth 3.
	if want := 2 * (n / 11); im.AllowToDeny.Count < want || im.AllowToDeny.Count > want+2 {
		t.Errorf("%d flips, want about %d", im.AllowToDeny.Count, want)
	}
	f := im.AllowToDeny
	if len(f.ByCaller) != 1001 || !f.MoreCallers || f.ByCaller[0].Name != "(others)" || len(f.ByCaller[0].Examples) != replay.Examples {
		t.Errorf("%d caller groups (folded %v), the first %+v", len(f.ByCaller), f.MoreCallers, f.ByCaller[0].Name)
	}
	grew := int64(peak) - int64(base)
	t.Logf("%d lines, %d MB read; live heap %d MB at the start, at most %+.1f MB over %d samples",
		n, src.bytes>>20, base>>20, float64(grew)/(1<<20), samples)
	if samples < 1 || grew > 8<<20 {
		t.Errorf("the live heap grew by %.1f MB replaying %d MB (%d samples): want under 8 MB", float64(grew)/(1<<20), src.bytes>>20, samples)
	}
	if src.bytes < 16*(8<<20) && !raceOn && !testing.Short() {
		t.Errorf("only %d MB read: the log must be far larger than the bound", src.bytes>>20)
	}
}

// BenchmarkReplay measures replay throughput on a real writ's decision
// lines (testdata/depth.jsonl, written by proxytest.DepthLog: sends at every
// depth from 0 to 4 and a get; each line given its own decision id and
// caller), with the max depth lowered to 3, in decisions replayed per
// second: with the inputs as logged (repeating: the engine's decision cache
// answers most), and with every input's caller its own (distinct: every
// decision evaluated).
func BenchmarkReplay(b *testing.B) {
	p, err := authz.LoadPolicy(context.Background(), []string{maxDepth(b, "3")}, authz.LoadOptions{SkipTests: true})
	if err != nil {
		b.Fatal(err)
	}
	for _, distinct := range []bool{false, true} {
		name := "repeating"
		if distinct {
			name = "distinct"
		}
		b.Run(name, func(b *testing.B) {
			src := newGenerated(b, "testdata/depth.jsonl", b.N)
			src.distinct = distinct
			b.ResetTimer()
			im, err := replay.Run(context.Background(), []replay.Source{{Name: "generated", R: src}}, replay.Options{Proposed: p})
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if im.Replayed != b.N {
				b.Fatalf("replayed %d of %d", im.Replayed, b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
			b.SetBytes(src.bytes / int64(b.N))
		})
	}
}
