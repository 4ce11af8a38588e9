package wire

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// FieldCase guards against a parser differential: encoding/json matches object
// keys to struct fields case-insensitively (ASCII case and Unicode simple
// folding: "ſ" U+017F is s, "K" U+212A is k), while the JS and Python SDKs
// match them exactly; and proto-JSON readers (the JS SDK's decoders, protojson)
// also take a field's proto name ("task_id") where its JSON name ("taskId") is
// absent or null. Without a guard, a body holding both "taskId" and "TaskId" (or
// "task_id") would show writ one task and the agent another. A FieldCase knows
// the exact field names of a wire type and refuses a body with a key that
// differs from a field name only in case, or that is the field's snake_case
// proto name, at any depth the type describes. Keys of free-form maps
// (metadata, data parts) are user data and are not checked.
type FieldCase struct {
	root  reflect.Type
	lower map[string]string // lower-cased name → exact name, over every struct in root
	alias map[string]string // lower-cased proto name → exact name, where they differ
}

var fieldCaseCache sync.Map // reflect.Type → *FieldCase

// FieldCaseOf returns the guard for the type of v (a struct or pointer to one).
func FieldCaseOf(v any) *FieldCase {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if fc, ok := fieldCaseCache.Load(t); ok {
		return fc.(*FieldCase)
	}
	fc := &FieldCase{root: t, lower: map[string]string{}, alias: map[string]string{}}
	seen := map[reflect.Type]bool{}
	var collect func(t reflect.Type)
	collect = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for i := 0; i < t.NumField(); i++ {
			if name := jsonName(t.Field(i)); name != "" {
				fc.lower[strings.ToLower(name)] = name
				if p := protoName(name); p != name {
					fc.alias[p] = name
				}
			}
			collect(t.Field(i).Type)
		}
	}
	collect(t)
	fieldCaseCache.Store(t, fc)
	return fc
}

func jsonName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	if tag == "-" || !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		return f.Name
	}
	return name
}

// protoName is the proto field name protoc derives a JSON name from: "taskId"
// comes from "task_id". A name without capitals is its own proto name.
func protoName(jsonName string) string {
	var b strings.Builder
	for _, r := range jsonName {
		if 'A' <= r && r <= 'Z' {
			b.WriteByte('_')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Check returns an error naming the first key of data that differs only in case
// from a field of the guarded type, or is that field's proto name, where that
// type has the field. The common case (no key is a variant of any field name)
// costs one scan of the bytes.
func (fc *FieldCase) Check(data []byte) error {
	if !fc.suspect(data) {
		return nil
	}
	var tree any
	if err := json.Unmarshal(data, &tree); err != nil {
		return nil //nolint:nilerr // not JSON: the decoder reports that
	}
	return fc.walk(tree, fc.root, "")
}

// suspect scans every object key; it reports true when a key is a case variant
// or proto name of a known field name, holds an escape (which the scan does not
// decode) or a non-ASCII byte (which Unicode folding may map onto a field name,
// and which may make the key longer in bytes than the name it folds to).
func (fc *FieldCase) suspect(data []byte) bool {
	var buf [64]byte
	for i := 0; i < len(data); i++ {
		if data[i] != '"' {
			continue
		}
		start, escaped := i+1, false
		j := start
		for ; j < len(data) && data[j] != '"'; j++ {
			if data[j] == '\\' {
				escaped = true
				j++
			}
		}
		k := j + 1
		for k < len(data) && (data[k] == ' ' || data[k] == '\t' || data[k] == '\n' || data[k] == '\r') {
			k++
		}
		i = j
		if k >= len(data) || data[k] != ':' {
			continue // a value, not a key
		}
		if escaped {
			return true
		}
		key := data[start:j]
		for _, c := range key {
			if c >= 0x80 {
				return true // may fold onto a field name ("ſ" → s, "K" → k), as encoding/json folds
			}
		}
		if len(key) > len(buf) {
			continue // ASCII and longer than any field name
		}
		low := buf[:len(key)]
		for n, c := range key {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			low[n] = c
		}
		if exact, ok := fc.lower[string(low)]; ok && exact != string(key) {
			return true
		}
		if _, ok := fc.alias[string(low)]; ok {
			return true
		}
	}
	return false
}

func (fc *FieldCase) walk(v any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		items, ok := v.([]any)
		if !ok || t.Elem().Kind() == reflect.Uint8 {
			return nil
		}
		for i, item := range items {
			if err := fc.walk(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		fields := map[string]reflect.StructField{}
		for i := 0; i < t.NumField(); i++ {
			if name := jsonName(t.Field(i)); name != "" {
				fields[name] = t.Field(i)
			}
		}
		for key, val := range obj {
			if f, ok := fields[key]; ok {
				if err := fc.walk(val, f.Type, path+"."+key); err != nil {
					return err
				}
				continue
			}
			for name := range fields {
				if strings.EqualFold(name, key) {
					return fmt.Errorf("field %q%s differs only in case from %q; field names are case-sensitive", key, at(path), name)
				}
				if p := protoName(name); p != name && strings.EqualFold(p, key) {
					return fmt.Errorf("field %q%s is the proto name of %q; send %q (JSON names only)", key, at(path), name, name)
				}
			}
		}
	}
	return nil
}

func at(path string) string {
	if path == "" {
		return ""
	}
	return " in " + strings.TrimPrefix(path, ".")
}
