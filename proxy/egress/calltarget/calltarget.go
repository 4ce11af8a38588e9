// Package calltarget reads the target of a call the local agent sends to
// the egress listener: /to/{agent}/rest names a configured target,
// /card/{card URL, escaped as one segment}/rest a target by its card, and
// the directory is the directory. It is a package of its own, below the
// egress door, so that its fuzz target builds without the policy engine.
package calltarget

import (
	"net/url"
	"strings"
)

// The listener's paths.
const (
	// TargetPrefix starts the path of a call to a target by name.
	TargetPrefix = "/to/"
	// CardPrefix starts the path of a call to a target named by its card.
	CardPrefix = "/card/"
	// DirectoryPath is writ's directory of the targets the agent may
	// delegate to.
	DirectoryPath = "/.well-known/writ/directory"
)

// Call is what a call's path names.
type Call struct {
	// Directory: the call asks for the directory (nothing else is set).
	Directory bool
	// Name is the target's name (a call by name), CardURL its card's URL
	// (a call by card): one of them is set.
	Name, CardURL string
	// RawPath is the path below the target as sent, Path the same decoded;
	// both start with '/'.
	RawPath, Path string
}

// Parse reads raw, the path as sent (escapes intact, no query), and
// decoded, the same path decoded. ok is false for any path the listener does
// not serve, and for a name in any spelling but a plain path segment (config
// allows no other, so a name in another spelling is no target).
func Parse(raw, decoded string) (Call, bool) {
	if raw == DirectoryPath {
		return Call{Directory: true}, true
	}
	if after, ok := strings.CutPrefix(raw, CardPrefix); ok {
		seg, rest, _ := strings.Cut(after, "/")
		card, err := url.PathUnescape(seg)
		if err != nil || card == "" {
			return Call{}, false
		}
		// The decoded path holds the URL decoded; below it is the call's path.
		below, ok := strings.CutPrefix(decoded, CardPrefix+card)
		if !ok {
			return Call{}, false
		}
		return Call{CardURL: card, RawPath: "/" + rest, Path: "/" + strings.TrimPrefix(below, "/")}, true
	}
	after, ok := strings.CutPrefix(raw, TargetPrefix)
	if !ok {
		return Call{}, false
	}
	name, rest, _ := strings.Cut(after, "/")
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "%\\") {
		return Call{}, false
	}
	// The name has no escapes: the decoded path starts with it too.
	return Call{Name: name, RawPath: "/" + rest,
		Path: "/" + strings.TrimPrefix(strings.TrimPrefix(decoded, TargetPrefix+name), "/")}, true
}
