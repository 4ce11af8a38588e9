package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Sentinel errors of the bounded JSON checks.
var (
	ErrBodyTooLarge = errors.New("request body exceeds the size limit")
	ErrTooDeep      = errors.New("JSON nests deeper than the depth limit")
	ErrMalformed    = errors.New("malformed JSON")
	// ErrDuplicateKey: an object names one key twice. encoding/json merges the
	// two, the agents' SDKs keep the last: writ would see another request than the
	// agent, so it refuses the request.
	ErrDuplicateKey = errors.New("duplicate key in a JSON object")
)

// CheckJSON reports ErrTooDeep when data nests objects and arrays deeper than
// maxDepth, and ErrMalformed (wrapped with the position) when it is not one
// well-formed JSON value. The depth scan runs first and needs no allocation, so a
// depth bomb costs one pass over its bytes.
func CheckJSON(data []byte, maxDepth int) error {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxJSONDepth
	}
	depth, inString, escaped := 0, false, false
	for _, c := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > maxDepth {
				return fmt.Errorf("%w (%d)", ErrTooDeep, maxDepth)
			}
		case '}', ']':
			depth--
		}
	}
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fmt.Errorf("%w at byte %d: %s", ErrMalformed, se.Offset, se.Error())
		}
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return duplicateKeys(data)
}

// duplicateKeys reports the first object key that appears twice in one object
// (after decoding escapes). data is well-formed JSON. It allocates nothing for
// the usual body: keys without escapes are compared as the bytes of data, and
// the keys of every open object share one stack.
func duplicateKeys(data []byte) error {
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
			n := len(stack)
			if n > 0 && stack[n-1].object && stack[n-1].expectKey {
				key := data[i+1 : j]
				if escaped {
					var s string
					_ = json.Unmarshal(data[i:j+1], &s)
					key = []byte(s)
				}
				f := &stack[n-1]
				if f.seen != nil {
					if _, dup := f.seen[string(key)]; dup {
						return fmt.Errorf("%w: %q", ErrDuplicateKey, key)
					}
					f.seen[string(key)] = struct{}{}
				} else {
					for _, k := range keys[f.first:] {
						if bytes.Equal(k, key) {
							return fmt.Errorf("%w: %q", ErrDuplicateKey, key)
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
	return nil
}

// TypeError renders a json.UnmarshalTypeError (or any decode error) as a short
// message naming the offending field.
func TypeError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %q must be %s, not %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		return fmt.Sprintf("expected %s, got %s", jsonKind(te.Type.Kind().String()), te.Value)
	}
	return err.Error()
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int32", "int64", "float64", "uint", "uint32", "uint64":
		return "a number"
	case "slice", "array":
		return "an array"
	case "map", "struct", "ptr":
		return "an object"
	}
	return goKind
}
