package config

import (
	"path/filepath"
	"reflect"
	"strings"
)

// Paths in a configuration file are relative to the file's directory, not to
// the directory writ runs in: `writ validate -config deploy/writ.yaml` reads
// the same files from anywhere. Every path-valued key says so with the tag
// `writ:"path"` (`writ:"path,except=a|b"` for a key whose other values are
// not paths: decision_log.output's stdout, stderr and off), and Load
// resolves every tagged key in one walk of the decoded file (resolvePaths),
// so a key cannot be left out by a loader that forgot it;
// TestEveryPathKeyIsResolved refuses a key named like a path (*_file,
// *_dir, *_path, path) without the tag. A document parsed without a file
// (Parse) has no directory: its relative paths stay relative to the working
// directory, as the flags that override them are.

// pathTag is the struct tag key of path-valued configuration keys.
const pathTag = "writ"

// resolvePaths rewrites, in place, every relative path in the tagged fields
// of the struct v points to as joined to dir (cleaned). Empty values,
// absolute paths and a tag's exceptions are left as they are; dir "" leaves
// everything.
func resolvePaths(v any, dir string) {
	if dir == "" {
		return
	}
	resolveValue(reflect.ValueOf(v), dir)
}

func resolveValue(v reflect.Value, dir string) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			resolveValue(v.Elem(), dir)
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			resolveValue(v.Index(i), dir)
		}
	case reflect.Map:
		// Map values are not addressable: each is copied, resolved, put back.
		iter := v.MapRange()
		for iter.Next() {
			e := reflect.New(iter.Value().Type()).Elem()
			e.Set(iter.Value())
			resolveValue(e, dir)
			v.SetMapIndex(iter.Key(), e)
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			fv := v.Field(i)
			if except, ok := pathField(f); ok {
				resolveField(fv, dir, except)
				continue
			}
			resolveValue(fv, dir)
		}
	}
}

// pathField reports whether a struct field is path-valued, and the values
// of it that are not paths.
func pathField(f reflect.StructField) (except []string, ok bool) {
	tag, ok := f.Tag.Lookup(pathTag)
	if !ok {
		return nil, false
	}
	kind, rest, _ := strings.Cut(tag, ",")
	if kind != "path" {
		return nil, false
	}
	if list, found := strings.CutPrefix(rest, "except="); found {
		except = strings.Split(list, "|")
	}
	return except, true
}

// resolveField resolves a path-valued field: a string or a list of strings.
func resolveField(v reflect.Value, dir string, except []string) {
	one := func(s string) string {
		if s == "" || filepath.IsAbs(s) {
			return s
		}
		for _, e := range except {
			if s == e {
				return s
			}
		}
		return filepath.Join(dir, s)
	}
	switch {
	case v.Kind() == reflect.String:
		v.SetString(one(v.String()))
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		for i := 0; i < v.Len(); i++ {
			v.Index(i).SetString(one(v.Index(i).String()))
		}
	}
}
