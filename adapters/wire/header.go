package wire

import "strings"

// HeaderValue reports whether writ may write v as an HTTP header value: every
// byte printable ASCII or a space, no space at either end, not empty. Header
// bytes outside ASCII are read as UTF-8 by some servers and as Latin-1 by
// others (Node, Python's WSGI), control characters are refused by most, and
// edge spaces are trimmed by some: any of them would make the header a
// different string to different readers. A value writ writes comes from
// what a caller sent (a push config's token) or is escaped to ASCII first
// (Writ-Caller).
func HeaderValue(v string) bool {
	if v == "" || v[0] == ' ' || v[len(v)-1] == ' ' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// HeaderToken reports whether v is an RFC 9110 token (tchar+): what an
// authentication scheme must be.
func HeaderToken(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
