package main

import (
	"debug/elf"
	"debug/gosym"
	"os"
	"testing"
)

// TestCategoriesNameLinkedFunctions: every function the profile table sorts
// time by exists in a binary that links writ's ext_authz door (this test's own),
// so a renamed or removed function fails here instead of reading 0% in the
// report.
func TestCategoriesNameLinkedFunctions(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Skipf("not an ELF binary: %v", err)
	}
	defer f.Close()
	pcln, text := f.Section(".gopclntab"), f.Section(".text")
	if pcln == nil || text == nil {
		t.Fatal("the test binary has no Go function table")
	}
	data, err := pcln.Data()
	if err != nil {
		t.Fatal(err)
	}
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		t.Fatal(err)
	}
	linked := make(map[string]bool, len(tab.Funcs))
	for _, fn := range tab.Funcs {
		linked[fn.Name] = true
	}
	for _, c := range categories {
		if !linked[c.fn] {
			t.Errorf("category %q: %s is not a function of the binary", c.name, c.fn)
		}
	}
}

func TestParseCPUTimes(t *testing.T) {
	got, ok := parseCPUTimes("cpu  100 5 20 800 10 0 5 60 7 0\ncpu0 50 2 10 400 5 0 2 30 0 0\n")
	if !ok || got.steal != 60 || got.total != 1000 {
		t.Errorf("%+v %v, want steal 60 of 1000 (guest time not counted twice)", got, ok)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 3", "cpu 1 2 3 4 5 6 7 x 9"} {
		if _, ok := parseCPUTimes(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}
