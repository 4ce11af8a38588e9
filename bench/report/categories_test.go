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
