package main

import (
	"os"
	"path/filepath"
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

// TestModuleOf: a test in a nested module (deploy/helm has its own go.mod)
// runs from that module's directory; every other package from the root.
func TestModuleOf(t *testing.T) {
	root := filepath.Join("..", "..")
	for pkg, want := range map[string][2]string{
		"./deploy/helm": {filepath.Join(root, "deploy", "helm"), "./."},
		"./proxy":       {root, "./proxy"},
		"./deploy":      {root, "./deploy"},
	} {
		dir, rel := moduleOf(root, pkg)
		if dir != want[0] || rel != want[1] {
			t.Errorf("%s: %s %s, want %s %s", pkg, dir, rel, want[0], want[1])
		}
	}
}
