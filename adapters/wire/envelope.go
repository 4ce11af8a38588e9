package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// ErrAmbiguousEnvelope is the error of a request whose top-level object (a
// JSON-RPC request object) names a key twice, or holds a key that differs from one of its
// member names only in case. encoding/json servers (a2a-go) match keys to
// their envelope struct case-insensitively, under Unicode simple folding, and
// keep the last match; JSON.parse servers (the JS SDK) read the exact key and
// keep the last duplicate. Such a request means one thing to writ and another
// to the agent, so it is not a valid request.
var ErrAmbiguousEnvelope = errors.New("ambiguous request object")

// Envelope reads the top-level members of the JSON object data and returns
// those whose key is exactly one of names. Keys are compared after their
// escapes are decoded ("\u006dethod" is "method"), as every JSON reader
// decodes them. Envelope refuses, with an error wrapping ErrAmbiguousEnvelope:
//
//   - any key that appears twice at the top level;
//   - any key that is not one of names but equals one under case folding
//     (bytes.EqualFold: ASCII case, "ſ" U+017F for s, "K" U+212A for k, ...),
//     which is how encoding/json matches a key to a struct field.
//
// Keys that fold to no name (" method", "method\u0000", "metho\u0064\u200b")
// are left alone: no reader takes them for a member. data must be one
// well-formed JSON object, as CheckJSON reports it; anything else is
// ErrMalformed.
func Envelope(data []byte, names ...string) (map[string]json.RawMessage, error) {
	if !json.Valid(data) {
		return nil, fmt.Errorf("%w: not one JSON value", ErrMalformed)
	}
	return ValidEnvelope(data, names...)
}

// ValidEnvelope is Envelope for data already known to be one well-formed JSON
// value (CheckJSON returned nil or ErrDuplicateKey): it reads the top-level
// members in one pass over the bytes, without validating them again. The
// members returned are copies, not slices of data.
func ValidEnvelope(data []byte, names ...string) (map[string]json.RawMessage, error) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	out := make(map[string]json.RawMessage, len(names))
	var seenSmall [16]string
	seen := seenSmall[:0]
	var seenMap map[string]struct{} // replaces seen past 16 keys, so a wide object stays linear
	i = skipSpace(data, i+1)
	for i < len(data) && data[i] != '}' {
		if data[i] == ',' {
			i = skipSpace(data, i+1)
		}
		if i >= len(data) || data[i] != '"' {
			return nil, fmt.Errorf("%w: object key expected at byte %d", ErrMalformed, i)
		}
		end := stringEnd(data, i)
		key, err := decodeKey(data[i:end])
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return nil, fmt.Errorf("%w: colon expected at byte %d", ErrMalformed, i)
		}
		i = skipSpace(data, i+1)
		vend := valueEnd(data, i)
		raw := data[i:vend]
		i = skipSpace(data, vend)
		if _, dup := seenMap[key]; dup || slices.Contains(seen, key) {
			return nil, fmt.Errorf("%w: key %q appears twice", ErrAmbiguousEnvelope, key)
		}
		switch {
		case seenMap != nil:
			seenMap[key] = struct{}{}
		case len(seen) < cap(seen):
			seen = append(seen, key)
		default:
			seenMap = make(map[string]struct{}, 2*len(seen))
			for _, k := range seen {
				seenMap[k] = struct{}{}
			}
			seenMap[key] = struct{}{}
			seen = nil
		}
		if slices.Contains(names, key) {
			out[key] = append(json.RawMessage(nil), raw...)
			continue
		}
		for _, name := range names {
			if strings.EqualFold(key, name) {
				return nil, fmt.Errorf("%w: key %q differs from %q only in case; member names are case-sensitive", ErrAmbiguousEnvelope, key, name)
			}
		}
	}
	if i >= len(data) {
		return nil, fmt.Errorf("%w: unterminated object", ErrMalformed)
	}
	if skipSpace(data, i+1) != len(data) {
		return nil, fmt.Errorf("%w: data after the object", ErrMalformed)
	}
	return out, nil
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// stringEnd returns the index just past the string that opens at data[i].
func stringEnd(data []byte, i int) int {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(data)
}

// valueEnd returns the index just past the well-formed value that starts at
// data[i].
func valueEnd(data []byte, i int) int {
	if i >= len(data) {
		return i
	}
	switch data[i] {
	case '"':
		return stringEnd(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				j = stringEnd(data, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(data)
	}
	j := i
	for j < len(data) {
		switch data[j] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return j
		}
		j++
	}
	return j
}

// decodeKey is the value of the JSON string quoted (quotes included), as
// encoding/json decodes it: escapes decoded, invalid UTF-8 replaced by U+FFFD.
// A key of plain printable ASCII, the usual case, is its bytes.
func decodeKey(quoted []byte) (string, error) {
	if len(quoted) < 2 || quoted[0] != '"' || quoted[len(quoted)-1] != '"' {
		return "", errors.New("unterminated string")
	}
	plain := true
	for _, c := range quoted[1 : len(quoted)-1] {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return string(quoted[1 : len(quoted)-1]), nil
	}
	var key string
	if err := json.Unmarshal(quoted, &key); err != nil {
		return "", err
	}
	return key, nil
}
