package authz

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"

	"github.com/writ-authz/writ/internal/jsonstr"
)

// The JSON form of the input, as the decision log records it
// (decision_log.include_input), is written member by member by the code
// fieldgen generates from the input's types into fields_gen.go (encodeInput
// and its kin), with the configured members masked out; this file holds the
// encoder and the mask that code calls. TestInputJSON keeps it equal to
// encoding/json's form of the same value.

// mask is the tree of masked members below one value: a member whose entry
// is nil is masked whole, one whose entry is a tree has masks below it. A
// nil mask masks nothing.
type mask map[string]mask

// keep reports whether member k is written: it is not masked whole.
func (m mask) keep(k string) bool {
	sub, ok := m[k]
	return !ok || sub != nil
}

// sub is the mask below member k (nil: nothing below it is masked).
func (m mask) sub(k string) mask { return m[k] }

// add masks the member at path (its steps), and everything below it.
func (m mask) add(path []string) {
	for i, step := range path {
		if i == len(path)-1 {
			m[step] = nil
			return
		}
		next, ok := m[step]
		if ok && next == nil {
			return // a member above is masked whole already
		}
		if next == nil {
			next = mask{}
			m[step] = next
		}
		m = next
	}
}

// jsonEnc appends one JSON value; comma says whether the next member or
// element needs a separator.
type jsonEnc struct {
	b     []byte
	comma bool
}

func (e *jsonEnc) open()      { e.sep(); e.b = append(e.b, '{'); e.comma = false }
func (e *jsonEnc) close()     { e.b = append(e.b, '}'); e.comma = true }
func (e *jsonEnc) openList()  { e.sep(); e.b = append(e.b, '['); e.comma = false }
func (e *jsonEnc) closeList() { e.b = append(e.b, ']'); e.comma = true }

// sep writes the comma due before a member or a list element: after a
// value at the same level (a key leaves none due for its value).
func (e *jsonEnc) sep() {
	if e.comma {
		e.b = append(e.b, ',')
		e.comma = false
	}
}

// key writes "k": — member names are the input's, plain ASCII, or a free-form
// object's, escaped.
func (e *jsonEnc) key(k string) {
	e.sep()
	e.b = jsonstr.Append(e.b, k)
	e.b = append(e.b, ':')
	e.comma = false
}

func (e *jsonEnc) scalar(b []byte) {
	e.sep()
	e.b = append(e.b, b...)
	e.comma = true
}

func (e *jsonEnc) str(s string) {
	e.sep()
	e.b = jsonstr.Append(e.b, s)
	e.comma = true
}

func (e *jsonEnc) boolean(v bool) {
	e.sep()
	e.b = strconv.AppendBool(e.b, v)
	e.comma = true
}

func (e *jsonEnc) integer(v int64) {
	e.sep()
	e.b = strconv.AppendInt(e.b, v, 10)
	e.comma = true
}

func (e *jsonEnc) null() { e.scalar([]byte("null")) }

// strs writes a list of strings (null when nil, as encoding/json does).
func (e *jsonEnc) strs(v []string) {
	if v == nil {
		e.null()
		return
	}
	e.openList()
	for _, s := range v {
		e.str(s)
	}
	e.closeList()
}

// object writes a free-form object (the caller's claims) with its members in
// sorted order, as encoding/json does, leaving out what m masks; a mask
// reaches into nested objects, and into each element of a list.
func (e *jsonEnc) object(v map[string]any, m mask) {
	if v == nil {
		e.null()
		return
	}
	e.open()
	keys := make([]string, 0, len(v))
	for k := range v {
		if m.keep(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		e.key(k)
		e.anyValue(v[k], m.sub(k))
	}
	e.close()
}

// anyValue writes a value of a free-form object: what encoding/json decodes
// JSON into, and, for what else an identity source may put there, what
// encoding/json makes of it (null when it cannot encode it).
func (e *jsonEnc) anyValue(v any, m mask) {
	switch x := v.(type) {
	case nil:
		e.null()
	case string:
		e.str(x)
	case bool:
		e.boolean(x)
	case float64:
		e.float(x)
	case json.Number:
		if _, err := strconv.ParseFloat(string(x), 64); err == nil {
			e.scalar([]byte(x))
		} else {
			e.null()
		}
	case map[string]any:
		e.object(x, m)
	case []any:
		e.openList()
		for _, el := range x {
			e.anyValue(el, m)
		}
		e.closeList()
	default:
		raw, err := json.Marshal(x)
		if err != nil {
			raw = []byte("null")
		}
		e.scalar(raw)
	}
}

// float writes f as encoding/json does: the shortest form, exponent notation
// beyond 1e21 and below 1e-6; NaN and infinities, which JSON has no form
// for, as null.
func (e *jsonEnc) float(f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		e.null()
		return
	}
	e.sep()
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(e.b)
	e.b = strconv.AppendFloat(e.b, f, format, -1, 64)
	if format == 'e' {
		// 1e-07 → 1e-7, as encoding/json writes it.
		if n := len(e.b) - start; n >= 4 && e.b[len(e.b)-4] == 'e' && e.b[len(e.b)-3] == '-' && e.b[len(e.b)-2] == '0' {
			e.b[len(e.b)-2] = e.b[len(e.b)-1]
			e.b = e.b[:len(e.b)-1]
		}
	}
	e.comma = true
}
