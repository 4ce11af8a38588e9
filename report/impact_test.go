package report

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

func sampleImpact() *Impact {
	ex := []Example{{DecisionID: "dec-1", Where: "decisions.jsonl:9"}, {DecisionID: "dec-2", Where: "decisions.jsonl:10"}}
	return &Impact{Proposed: "./candidate (revision abc)", Base: "the logged decisions (revision def)", Logs: []string{"decisions.jsonl"},
		Lines: 14, Decisions: 11, Replayed: 11, Unchanged: 9, Expected: true, Unexpected: 2,
		AllowToDeny: Flips{Count: 2, Unexpected: 2,
			ByCode:   []FlipGroup{{Name: "DEPTH_EXCEEDED", Count: 2, Unexpected: 2, Examples: ex}},
			ByCaller: []FlipGroup{{Name: "<script>alert(1)</script>", Count: 2, Unexpected: 2, Examples: ex}},
			ByTarget: []FlipGroup{{Name: "sanctions-screening-agent", Count: 2, Unexpected: 2, Examples: ex}}},
		Unmet:   []string{"{flip: deny_to_allow} (line 1)"},
		Skipped: []Skip{{Why: "not JSON", Count: 1, First: []string{"decisions.jsonl:15"}}},
		Notes:   []string{"the proposed set reads input.caller.user_id, which 3 logged inputs masked"}}
}

// styleOf is a page's stylesheet.
func styleOf(t *testing.T, page string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<style>(.*)</style>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no stylesheet")
	}
	return m[1]
}

// TestRenderImpact: the impact page is the report's look — the same head,
// Content-Security-Policy and stylesheet — self-contained (no script,
// nothing fetched, names escaped), with each way's counts by code, caller
// and target and their examples, what was not replayed and the notes.
func TestRenderImpact(t *testing.T) {
	var b bytes.Buffer
	if err := RenderImpact(&b, sampleImpact()); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	var r bytes.Buffer
	if err := Render(&r, &Summary{}, Options{}); err != nil {
		t.Fatal(err)
	}
	if styleOf(t, page) != styleOf(t, r.String()) {
		t.Error("the impact page has a stylesheet of its own")
	}
	for _, want := range []string{"<title>writ policy impact</title>", "Content-Security-Policy", `id="total-allow-to-deny">2<`,
		`id="total-unexpected">2<`, `id="allow-to-deny-code-DEPTH_EXCEEDED">2<`, "dec-1 (decisions.jsonl:9), dec-2 (decisions.jsonl:10)",
		"&lt;script&gt;alert(1)&lt;/script&gt;", "not JSON", "decisions.jsonl:15", "input.caller.user_id", "{flip: deny_to_allow} (line 1)",
		"./candidate (revision abc)", "the logged decisions (revision def)"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, never := range []string{"<script", "http://", "https://", "src="} {
		if strings.Contains(page, never) {
			t.Errorf("the page holds %q", never)
		}
	}
}

// TestWriteImpact: the text form names each way's count, its groups with
// their examples, what was not replayed and the notes.
func TestWriteImpact(t *testing.T) {
	var b bytes.Buffer
	if err := WriteImpact(&b, sampleImpact()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"replayed 11 of 11 decisions (14 lines) from decisions.jsonl\n", "allow → deny: 2 (2 unexpected)\n",
		"  by code:\n    DEPTH_EXCEEDED                    2 (2 unexpected)  e.g. dec-1 (decisions.jsonl:9), dec-2 (decisions.jsonl:10)\n",
		"deny → allow: 0\n", "expected, but no flip matched: {flip: deny_to_allow} (line 1)\n",
		"not replayed: 1 lines\n       1  not JSON (first: decisions.jsonl:15)\n", "note: the proposed set reads input.caller.user_id"} {
		if !strings.Contains(out, want) {
			t.Errorf("the text lacks %q:\n%s", want, out)
		}
	}
}
