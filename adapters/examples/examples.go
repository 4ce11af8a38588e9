// Package examples holds request messages of each protocol writ speaks, as
// a caller sends them (one HTTP/1.1 message per file, NAME.http): what
// `writ inspect -example NAME` shows, and the A2A 1.0 send writ decides at
// start to know a policy set works (a2a-1.0-send).
package examples

import (
	"embed"
	"sort"
	"strings"
)

// FS holds the example messages, NAME.http at its root.
//
//go:embed *.http
var FS embed.FS

// Names lists the examples, sorted.
func Names() []string {
	entries, _ := FS.ReadDir(".")
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".http"))
	}
	sort.Strings(out)
	return out
}

// Read returns the example NAME's message.
func Read(name string) ([]byte, error) { return FS.ReadFile(name + ".http") }
