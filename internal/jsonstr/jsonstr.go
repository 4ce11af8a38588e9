// Package jsonstr appends strings as JSON, the one escaper of writ's
// hand-written encoders (the decision log's lines, the policy input on
// them): invalid UTF-8 becomes U+FFFD, control characters and U+2028/U+2029
// are escaped, HTML characters are not (a log is not a web page). It is
// written here rather than taken from encoding/json, whose encoder escapes
// only whole values through reflection and allocates per call; these
// encoders append into one buffer per line without allocating.
package jsonstr

import "unicode/utf8"

const hex = "0123456789abcdef"

// Append appends s as a JSON string, quotes included.
func Append(b []byte, s string) []byte {
	b = append(b, '"')
	b = AppendEscaped(b, s)
	return append(b, '"')
}

// AppendEscaped appends s JSON-escaped, without quotes.
func AppendEscaped(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(b, s[start:]...)
}
