// Package jsonkeystest holds the oracle that writ's fast duplicate-member
// scanners are tested and fuzzed against. Tests only.
package jsonkeystest

import (
	"bytes"
	"encoding/json"
)

// RepeatsByTokens is the slow, obviously right answer to "does one object of
// data name a member twice?": walk encoding/json's tokens and keep one key set
// per open object.
func RepeatsByTokens(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		object, expectKey bool
		keys              map[string]bool
	}
	var stack []*frame
	value := func() { // a value ended: the enclosing object expects a key next
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].expectKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, &frame{object: true, expectKey: true, keys: map[string]bool{}})
			case '[':
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
				value()
			}
		case string:
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].expectKey {
				if stack[n-1].keys[t] {
					return true
				}
				stack[n-1].keys[t] = true
				stack[n-1].expectKey = false
				continue
			}
			value()
		default:
			value()
		}
	}
}
