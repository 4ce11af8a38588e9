package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/writ-authz/writ/internal/jsonkeys"
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
	// JSON is UTF-8 text. Bytes that are not are read as U+FFFD, but not alike
	// by every reader (Go: one per byte; JavaScript's decoder: one per
	// sequence): two keys one parser sees as a duplicate, another sees as
	// distinct. Such a body is malformed, never interpreted.
	if !utf8.Valid(data) {
		return fmt.Errorf("%w: not UTF-8 text", ErrMalformed)
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
// (after decoding escapes). data is well-formed JSON.
func duplicateKeys(data []byte) error {
	if key, ok := jsonkeys.Repeated(data); ok {
		return fmt.Errorf("%w: %q", ErrDuplicateKey, key)
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
