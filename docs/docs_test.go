// Package docs holds the tests of writ's documents: README.md, the front page,
// and the pages under docs/ it links to.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/writ-authz/writ/internal/mdlinks"
)

// root is the repository, from this package's directory.
const root = ".."

// documents are README.md and every Markdown page under docs/, relative to
// root. SECURITY.md is generated (make security) and checked by its own test.
func documents(t *testing.T) []string {
	t.Helper()
	docs := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			docs = append(docs, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 10 {
		t.Fatalf("found only %v", docs)
	}
	return docs
}

// schemeRE starts a link that leaves the repository (https:, mailto:, ...).
var schemeRE = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

// TestRelativeLinks: every relative link in README.md and docs/ names a file or
// directory of the repository, and every anchor one of the target page's
// headings (as GitHub makes anchors), so a page moved or a heading renamed
// breaks this test instead of a reader's link.
func TestRelativeLinks(t *testing.T) {
	anchors := map[string][]string{}
	anchorsOf := func(page string) []string {
		if a, ok := anchors[page]; ok {
			return a
		}
		raw, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		anchors[page] = mdlinks.Anchors(raw)
		return anchors[page]
	}
	checked := 0
	for _, doc := range documents(t) {
		raw, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range mdlinks.Links(raw) {
			if schemeRE.MatchString(l.Target) {
				continue
			}
			checked++
			path, anchor, _ := strings.Cut(l.Target, "#")
			target := doc
			if path != "" {
				target = filepath.ToSlash(filepath.Join(filepath.Dir(doc), path))
				if strings.HasPrefix(target, "../") {
					t.Errorf("%s:%d: %s leaves the repository", doc, l.Line, l.Target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, target)); err != nil {
					t.Errorf("%s:%d: %s: no such file (%s)", doc, l.Line, l.Target, target)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				t.Errorf("%s:%d: %s: an anchor into a file that is not Markdown", doc, l.Line, l.Target)
				continue
			}
			if !slices.Contains(anchorsOf(target), anchor) {
				t.Errorf("%s:%d: %s: %s has no heading #%s (it has %v)", doc, l.Line, l.Target, target, anchor, anchorsOf(target))
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d relative links checked: is the link pattern stale?", checked)
	}
}

// TestReadmeIsAFrontPage: README shows the two commands a newcomer runs
// first, stays a front page (the reference lives in docs/), and links every
// page of docs/ from its table of contents.
func TestReadmeIsAFrontPage(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	for _, cmd := range []string{"make run", "make test"} {
		if !strings.Contains(readme, cmd) {
			t.Errorf("README does not show %q", cmd)
		}
	}
	if n := strings.Count(readme, "\n"); n > 350 {
		t.Errorf("README is %d lines: keep it a front page and move reference sections to docs/", n)
	}
	linked := map[string]bool{}
	for _, l := range mdlinks.Links(raw) {
		path, _, _ := strings.Cut(l.Target, "#")
		linked[path] = true
	}
	for _, doc := range documents(t) {
		if strings.HasPrefix(doc, "docs/") && strings.Count(doc, "/") == 1 && !linked[doc] {
			t.Errorf("README's table of contents does not link %s", doc)
		}
	}
}
