// Package mdlinks reads Markdown as GitHub renders it, for the tests that keep
// writ's documents honest: the anchors its headings get and the links it holds.
// It is one place for GitHub's anchor rule, so the test of the documents' links
// and the test of the alerts' runbook URLs cannot disagree about an anchor.
package mdlinks

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// Slug is the anchor GitHub gives a heading's text: lower case, every
// character but letters, digits, marks, '-' and '_' dropped, spaces turned
// into '-'. Markdown's own punctuation (backticks, emphasis) goes with the
// rest, so "`writ inspect`: see" is "writ-inspect-see".
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// headingRE is an ATX heading: up to three spaces, one to six '#', a space,
// the text, and an optional closing run of '#'.
var headingRE = regexp.MustCompile(`^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)

// Anchors lists the anchors of doc's headings in order, as GitHub makes them:
// a slug that comes again gets "-1", "-2", ... Headings inside fenced code
// blocks are not headings.
func Anchors(doc []byte) []string {
	var out []string
	seen := map[string]int{}
	for _, line := range prose(doc) {
		m := headingRE.FindStringSubmatch(line.text)
		if m == nil {
			continue
		}
		s := Slug(m[2])
		if n, dup := seen[s]; dup {
			seen[s] = n + 1
			s += "-" + strconv.Itoa(n+1)
		} else {
			seen[s] = 0
		}
		out = append(out, s)
	}
	return out
}

// Link is one inline link or image of a document.
type Link struct {
	// Line is the 1-based line the link's target is on.
	Line int
	// Target is the destination as written: a URL, a path, "#anchor" or
	// "path#anchor".
	Target string
}

// linkRE is an inline link or image: [text](target) or [text](target
// "title"). The text may span lines; a target has no spaces.
var linkRE = regexp.MustCompile(`\]\(\s*<?([^\s()<>]+)>?(?:\s+"[^"]*")?\s*\)`)

// Links lists doc's inline links and images, outside fenced code blocks and
// code spans.
func Links(doc []byte) []Link {
	lines := prose(doc)
	texts := make([]string, len(lines))
	for i, l := range lines {
		texts[i] = l.text
	}
	// Code spans may run over a line end, so they are blanked in the prose
	// as a whole; blanking keeps every line's length and number.
	blank := strings.Split(blankCodeSpans(strings.Join(texts, "\n")), "\n")
	var out []Link
	for i, text := range blank {
		for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
			out = append(out, Link{Line: lines[i].n, Target: m[1]})
		}
	}
	return out
}

// blankCodeSpans replaces every code span of s (a run of backticks, up to the
// next run of as many) with spaces, line ends kept. A run with no closing run
// is literal text, as CommonMark reads it.
func blankCodeSpans(s string) string {
	b := []byte(s)
	run := func(i int) int {
		j := i
		for j < len(b) && b[j] == '`' {
			j++
		}
		return j - i
	}
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		n := run(i)
		end := -1
		for j := i + n; j < len(b); {
			if b[j] == '\n' && blankLineAt(b, j+1) {
				break // a code span ends with its paragraph
			}
			if b[j] != '`' {
				j++
				continue
			}
			m := run(j)
			if m == n {
				end = j + m
				break
			}
			j += m
		}
		if end < 0 {
			i += n
			continue
		}
		for k := i; k < end; k++ {
			if b[k] != '\n' {
				b[k] = ' '
			}
		}
		i = end
	}
	return string(b)
}

// blankLineAt reports whether the line that starts at i holds only spaces.
func blankLineAt(b []byte, i int) bool {
	for ; i < len(b) && b[i] != '\n'; i++ {
		if b[i] != ' ' && b[i] != '\t' {
			return false
		}
	}
	return true
}

type numbered struct {
	n    int
	text string
}

// prose is doc's lines, those of fenced code blocks (``` or ~~~, closed by a
// fence of the same character at least as long) left empty, so that nothing
// in a code block is read as a heading or a link and paragraphs stay apart.
func prose(doc []byte) []numbered {
	var out []numbered
	var fence string
	for i, line := range strings.Split(string(doc), "\n") {
		t := strings.TrimLeft(line, " ")
		switch {
		case fence != "":
			if strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]+" \t") == "" {
				fence = ""
			}
			line = ""
		case len(line)-len(t) <= 3 && fenceOf(t) != "":
			fence, line = fenceOf(t), ""
		}
		out = append(out, numbered{n: i + 1, text: line})
	}
	return out
}

// fenceOf is the opening fence t starts with ("```", "~~~~", ...), or "".
func fenceOf(t string) string {
	for _, c := range []string{"`", "~"} {
		n := len(t) - len(strings.TrimLeft(t, c))
		if n >= 3 {
			return strings.Repeat(c, n)
		}
	}
	return ""
}
