package config

import (
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/agnivade/levenshtein"
	"go.yaml.in/yaml/v3"
)

// The document is read as a YAML node tree first, checked against the
// configuration's shape with every key's path and line, and decoded only
// when the shape is right, so no message ever names a Go type: an unknown
// key says which keys would fit, a wrong kind of value says what is
// expected, and a duration given as a bare number says to add its unit.

var durationType = reflect.TypeOf(time.Duration(0))

// shapeCheck walks n against type t at path, recording each key's line in
// pos and each problem in ps.
func shapeCheck(n *yaml.Node, t reflect.Type, path string, ps *problems) {
	if n == nil {
		return
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // an empty value: the default
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == durationType:
		if n.Kind != yaml.ScalarNode {
			ps.add(path, "must be a duration such as 5s, 250ms, 10m or 1h")
			return
		}
		if _, err := time.ParseDuration(n.Value); err != nil {
			if isNumber(n.Value) {
				ps.add(path, "%s is not a duration: give its unit, as in %ss (units: ms, s, m, h)", n.Value, n.Value)
			} else {
				ps.add(path, "%q is not a duration such as 5s, 250ms, 10m or 1h", n.Value)
			}
		}
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			ps.add(path, "must be a mapping of keys (%s)", strings.Join(keysOf(t), ", "))
			return
		}
		fields := fieldsOf(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := join(path, k.Value)
			ps.pos[key] = k.Line
			f, ok := fields[k.Value]
			if !ok {
				ps.add(key, "unknown key%s", suggest(k.Value, t, path, ps.root))
				continue
			}
			shapeCheck(v, f.Type, key, ps)
		}
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			ps.add(path, "must be a list (- item per line, or [a, b])")
			return
		}
		for i, item := range n.Content {
			key := fmt.Sprintf("%s[%d]", path, i)
			ps.pos[key] = item.Line
			shapeCheck(item, t.Elem(), key, ps)
		}
	case t.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			ps.add(path, "must be a mapping")
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := join(path, n.Content[i].Value)
			ps.pos[key] = n.Content[i].Line
			shapeCheck(n.Content[i+1], t.Elem(), key, ps)
		}
	default:
		if n.Kind != yaml.ScalarNode {
			ps.add(path, "must be a single value, not a %s", kindName(n.Kind))
			return
		}
		// The scalar alone, decoded as the whole document would decode it.
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			switch t.Kind() {
			case reflect.Bool:
				ps.add(path, "must be true or false, not %q", n.Value)
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
				reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				ps.add(path, "must be a whole number, not %q", n.Value)
			default:
				ps.add(path, "cannot be %q", n.Value)
			}
		}
	}
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range strings.TrimPrefix(s, "-") {
		if (c < '0' || c > '9') && c != '.' {
			return false
		}
	}
	return true
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "value"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fieldsOf maps t's YAML keys to its fields as go.yaml.in/yaml/v3 names them
// (the yaml tag, else the lower-cased field name; inline structs flattened).
func fieldsOf(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			for k, v := range fieldsOf(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f
	}
	return out
}

func keysOf(t reflect.Type) []string {
	fields := fieldsOf(t)
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// suggest is the hint after "unknown key": the key this one is most likely
// a misspelling of at its level, else where a key of that name belongs in
// the document whose type is root.
func suggest(key string, t reflect.Type, path string, root reflect.Type) string {
	lower := strings.ToLower(key)
	best, bestD := "", 0
	for _, k := range keysOf(t) {
		d := levenshtein.ComputeDistance(lower, k)
		near := d <= max(2, len(key)/3) ||
			len(lower) >= 4 && strings.HasPrefix(k, lower) || // grpc → grpc_listen
			len(k) >= 4 && strings.Contains(lower, k) // file_path → path
		if near && (best == "" || d < bestD) {
			best, bestD = k, d
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %s?)", best)
	}
	if where := findKey(root, "", key, 0); len(where) > 0 {
		return fmt.Sprintf(" (did you mean %s?)", strings.Join(where, " or "))
	}
	if len(keysOf(t)) <= 12 {
		return fmt.Sprintf(" (%s has %s)", orTop(path), strings.Join(keysOf(t), ", "))
	}
	return ""
}

func orTop(path string) string {
	if path == "" {
		return "the top level"
	}
	return path
}

// findKey lists the paths where a key named key is valid in t (lists written
// as [i]), at most a few levels deep.
func findKey(t reflect.Type, path, key string, depth int) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		if t.Kind() == reflect.Slice {
			path += "[i]"
		}
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == durationType || depth > 4 {
		return nil
	}
	var out []string
	for _, k := range keysOf(t) {
		f := fieldsOf(t)[k]
		if k == key {
			out = append(out, join(path, k))
			continue
		}
		out = append(out, findKey(f.Type, join(path, k), key, depth+1)...)
	}
	return out
}

// expandEnv replaces ${NAME} and ${NAME:-default} in every value (never in a
// key or a comment) by the environment variable's value, as OPA's
// configuration does; $${ is a literal ${. Values are substituted after the
// document is parsed, so a variable's value is always one value: it cannot
// add keys. A plain value that was expanded is typed again by what it became
// (a port, a duration, true); a quoted one stays a string. ${NAME} with NAME
// unset is a problem (write ${NAME:-} for an empty default).
func expandEnv(n *yaml.Node, path string, ps *problems, lookup func(string) (string, bool)) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			expandEnv(c, path, ps, lookup)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			expandEnv(n.Content[i+1], join(path, n.Content[i].Value), ps, lookup)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			expandEnv(c, fmt.Sprintf("%s[%d]", path, i), ps, lookup)
		}
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "${") {
			return
		}
		v, err := expand(n.Value, lookup)
		if err != nil {
			ps.list = append(ps.list, Problem{Key: path, Line: n.Line, Msg: err.Error()})
			return
		}
		n.Value = v
		if n.Style == 0 {
			n.Tag = "" // typed again by its new value
		}
	}
}

// expand substitutes one value.
func expand(s string, lookup func(string) (string, bool)) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if i > 0 && s[i-1] == '$' { // $${: a literal ${
			b.WriteString(s[:i-1])
			b.WriteString("${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("%q: ${ without its closing } (write $${ for a literal ${)", s[i:])
		}
		expr := s[i+2 : i+end]
		name, def, hasDef := strings.Cut(expr, ":-")
		if !validEnvName(name) {
			return "", fmt.Errorf("${%s}: %q is not an environment variable name", expr, name)
		}
		v, ok := lookup(name)
		switch {
		case ok && (v != "" || !hasDef):
			b.WriteString(v)
		case hasDef:
			b.WriteString(def)
		default:
			return "", fmt.Errorf("${%s}: %s is not set (write ${%s:-default} to give a default)", name, name, name)
		}
		s = s[i+end+1:]
	}
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if c == '_' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || i > 0 && '0' <= c && c <= '9' {
			continue
		}
		return false
	}
	return true
}

// decodeTree reads raw into out (a pointer to the document's struct: writ.yaml's
// Config, sts.yaml's STS): the node tree, ${ENV} expanded, checked for
// shape, then decoded. pos gets every key's line.
func decodeTree(raw []byte, out any, ps *problems) {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		ps.list = append(ps.list, Problem{Msg: strings.TrimPrefix(err.Error(), "yaml: ")})
		return
	}
	if len(doc.Content) == 0 {
		return // an empty file: every default
	}
	expandEnv(&doc, "", ps, os.LookupEnv)
	ps.root = reflect.TypeOf(out).Elem()
	shapeCheck(doc.Content[0], ps.root, "", ps)
	if len(ps.list) > 0 {
		return
	}
	if err := doc.Decode(out); err != nil {
		// The shape check should have named it; never a Go type regardless.
		ps.list = append(ps.list, Problem{Msg: "cannot read the file: " + goTypeFree(err.Error())})
	}
}

// goTypeFree drops " into <Go type>" from a decoder's message.
func goTypeFree(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if i := strings.Index(line, " into "); i >= 0 {
			line = line[:i]
		}
		out = append(out, strings.TrimSpace(line))
	}
	return strings.Join(out, "; ")
}
