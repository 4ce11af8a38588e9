package interop

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestMakeInteropWritesAPageWithTheBlock: the page the Makefile's interop
// target hands the matrix (INTEROP_DOC) exists and holds the block markers
// once each, so `make interop` can rewrite it.
func TestMakeInteropWritesAPageWithTheBlock(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`INTEROP_DOC=\$\(CURDIR\)/(\S+)`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile's interop target names no INTEROP_DOC=$(CURDIR)/<page>")
	}
	page := filepath.Join("../..", string(m[1]))
	doc, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReplaceBlock(doc, "table"); err != nil {
		t.Errorf("%s: %v", m[1], err)
	}
}

func TestReplaceBlock(t *testing.T) {
	doc := []byte("intro\n" + BlockBegin + "\nold table\n" + BlockEnd + "\noutro\n")
	out, err := ReplaceBlock(doc, "new table\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "intro\n" + BlockBegin + "\nnew table\n" + BlockEnd + "\noutro\n"; string(out) != want {
		t.Fatalf("got %q", out)
	}
	for _, bad := range []string{"no markers", BlockEnd + BlockBegin, BlockBegin + BlockBegin + BlockEnd} {
		if _, err := ReplaceBlock([]byte(bad), "x"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestMarkdown(t *testing.T) {
	pass := Result{Verdict: Pass}
	row := func(door, client, agent string, cells map[Op]Result) Row {
		full := map[Op]Result{}
		for _, op := range Ops {
			full[op] = pass
		}
		for k, v := range cells {
			full[k] = v
		}
		return Row{Door: door, Client: client, Agent: agent, Cells: full}
	}
	allNA := map[Op]Result{}
	for _, op := range Ops {
		allNA[op] = Result{Verdict: NA, Note: "no common protocol"}
	}
	m := Matrix{Date: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Versions: []string{"sdk 1"}, Rows: []Row{
		row("d", "c1", "a1", map[Op]Result{List: {Verdict: NA, Note: "no list"}, Push: {Verdict: Fail, Note: "boom"}}),
		row("d", "c2", "a1", allNA),
		row("e", "c1", "a1", map[Op]Result{List: {Verdict: NA, Note: "no list"}}),
	}}
	p, f, n := m.Counts()
	if p != 11 || f != 1 || n != 9 {
		t.Fatalf("counts %d %d %d", p, f, n)
	}
	md := m.Markdown()
	for _, want := range []string{"on 2026-12-01", "sdk 1", "| d | c1 | a1 | ✓ | ✓ | ✓ | ✓ | ✓ | — <sup>1</sup> | ✗ <sup>2</sup> |",
		"| e | c1 | a1 |", "1. no list", "2. boom", "c2 × a1 <sup>3</sup>", "3. no common protocol"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| d | c2 |") {
		t.Errorf("a row with nothing applicable is in the table:\n%s", md)
	}
}
