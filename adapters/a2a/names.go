package a2a

import (
	"github.com/writ-authz/writ/task"
)

// plainName refuses a name the request carries that is not a plain name: a
// tenant (a 1.0 path segment or params.tenant) becomes a path segment of what
// the agent receives, and "..", "." or a name holding a slash, a backslash,
// a control character or a percent sign (an escape the agent would decode
// again) could make the agent read another path than the one writ decided on.
// A plain name is letters, digits and '.', '_', '-', '~', ':', '@', at most
// 256 bytes, and not "." or "..".
func plainName(what, s string) *task.Fault {
	if s == "." || s == ".." || len(s) > 256 {
		return invalid("%s %q is not a plain name", what, s)
	}
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '_', c == '-', c == '~', c == ':', c == '@':
		default:
			return invalid("%s %q is not a plain name (letters, digits and . _ - ~ : @ only)", what, s)
		}
	}
	return nil
}
