package authz

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestLogicStepRunsEverySkippedTest: every test that skips itself under the
// race detector (skipUnderRace) is in the Makefile's LOGIC_TESTS, which make
// test runs without it, and every name there is such a test: a renamed or
// new equivalence test cannot silently drop out of CI.
func TestLogicStepRunsEverySkippedTest(t *testing.T) {
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^LOGIC_TESTS := \^\(([A-Za-z0-9|]+)\)\$\$$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile has no LOGIC_TESTS := ^(A|B|...)$$ line")
	}
	listed := strings.Split(string(m[1]), "|")
	var skipping []string
	files, _ := os.ReadDir(".")
	fn := regexp.MustCompile(`func (Test\w+)\(t \*testing\.T\) \{\n(?:\t[^\n]*\n){0,3}?\tskipUnderRace\(t\)`)
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), "_test.go") {
			continue
		}
		src, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range fn.FindAllSubmatch(src, -1) {
			skipping = append(skipping, string(s[1]))
		}
	}
	slices.Sort(listed)
	slices.Sort(skipping)
	if !slices.Equal(listed, skipping) {
		t.Errorf("LOGIC_TESTS %v, tests that skip under -race %v", listed, skipping)
	}
}
