package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
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
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	out := make(map[string]json.RawMessage, len(names))
	seen := make(map[string]bool, len(names))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		if seen[key] {
			return nil, fmt.Errorf("%w: key %q appears twice", ErrAmbiguousEnvelope, key)
		}
		seen[key] = true
		exact := false
		for _, name := range names {
			if key == name {
				exact = true
				out[key] = raw
				break
			}
		}
		if exact {
			continue
		}
		for _, name := range names {
			if strings.EqualFold(key, name) {
				return nil, fmt.Errorf("%w: key %q differs from %q only in case; member names are case-sensitive", ErrAmbiguousEnvelope, key, name)
			}
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, fmt.Errorf("%w: unterminated object", ErrMalformed)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the object", ErrMalformed)
	}
	return out, nil
}
