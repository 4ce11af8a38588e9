// Package jsonkeys finds a member name that one JSON object names twice. Readers
// disagree on such an object (encoding/json and JSON.parse keep the last, others
// the first), so writ refuses it wherever a body or a token is read: the
// adapters' request bodies and the identity resolver's JWT payloads share this
// one scanner.
package jsonkeys

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Repeated returns the first member name that appears twice in one object of
// data, at any depth, after escapes are decoded ("\u0061b" is "ab"); ok is
// false when no object repeats a name. data must be well-formed JSON
// (json.Valid); on anything else the answer means nothing, but it returns.
// It allocates nothing for the usual body: keys without escapes are compared as
// the bytes of data, and the keys of every open object share one stack.
func Repeated(data []byte) (name string, ok bool) {
	type frame struct {
		object, expectKey bool
		first             int                 // this object's keys are keys[first:]
		seen              map[string]struct{} // replaces its keys past 16, so a wide object stays linear
	}
	var stackBuf [32]frame
	var keysBuf [64][]byte
	stack, keys := stackBuf[:0], keysBuf[:0]
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '{':
			stack = append(stack, frame{object: true, expectKey: true, first: len(keys)})
		case '[':
			stack = append(stack, frame{first: len(keys)})
		case '}', ']':
			if len(stack) == 0 { // not well-formed: no answer, and no panic
				return "", false
			}
			keys = keys[:stack[len(stack)-1].first]
			stack = stack[:len(stack)-1]
		case ',':
			if n := len(stack); n > 0 && stack[n-1].object {
				stack[n-1].expectKey = true
			}
		case '"':
			j, escaped := i+1, false
			for ; j < len(data) && data[j] != '"'; j++ {
				if data[j] == '\\' {
					escaped = true
					j++
				}
			}
			if j >= len(data) { // an unterminated string: not well-formed
				return "", false
			}
			n := len(stack)
			if n > 0 && stack[n-1].object && stack[n-1].expectKey {
				key := data[i+1 : j]
				// A key with an escape, or with bytes that are not UTF-8 (which
				// encoding/json reads as U+FFFD), is compared decoded.
				if escaped || !utf8.Valid(key) {
					var s string
					if err := json.Unmarshal(data[i:j+1], &s); err != nil {
						return "", false // not well-formed
					}
					key = []byte(s)
				}
				f := &stack[n-1]
				if f.seen != nil {
					if _, dup := f.seen[string(key)]; dup {
						return string(key), true
					}
					f.seen[string(key)] = struct{}{}
				} else {
					for _, k := range keys[f.first:] {
						if bytes.Equal(k, key) {
							return string(key), true
						}
					}
					keys = append(keys, key)
					if len(keys)-f.first > 16 {
						f.seen = make(map[string]struct{}, 2*(len(keys)-f.first))
						for _, k := range keys[f.first:] {
							f.seen[string(k)] = struct{}{}
						}
						keys = keys[:f.first]
					}
				}
				f.expectKey = false
			}
			i = j
		}
	}
	return "", false
}
