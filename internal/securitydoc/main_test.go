package main

import (
	"os"
	"strings"
	"testing"
)

// TestSecurityMatrixUpToDate: SECURITY.md lists every test that names a threat
// (run `make security` after adding one), each as passing in the run that
// wrote it.
func TestSecurityMatrixUpToDate(t *testing.T) {
	cases, err := Collect("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 20 {
		t.Fatalf("only %d threats found", len(cases))
	}
	raw, err := os.ReadFile("../../SECURITY.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	for _, c := range cases {
		row := "[`" + c.Test + "`](" + c.File + ") | pass |"
		if !strings.Contains(doc, row) {
			t.Errorf("SECURITY.md has no passing row for %s (%s): run make security", c.Test, c.File)
		}
	}
}

func TestSplit(t *testing.T) {
	threat, defence, ok := split("TestX — does a thing.\n\nThreat: a bad\nthing. Defence: a good\n one.\n")
	if !ok || threat != "a bad thing." || defence != "a good one." {
		t.Errorf("%q %q %v", threat, defence, ok)
	}
	if _, _, ok := split("Defence: first. Threat: then."); ok {
		t.Error("a defence before its threat was accepted")
	}
	if _, _, ok := split("no markers"); ok {
		t.Error("a comment without markers was accepted")
	}
}
