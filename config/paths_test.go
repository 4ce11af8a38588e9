package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// pathLike reports whether a key's name says it holds a path.
func pathLike(name string) bool {
	for _, s := range []string{"_file", "_files", "_dir", "_path"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return name == "path" || name == "policies" || name == "card_keys" || name == "output"
}

// notPaths are keys named like paths that are not file system paths.
var notPaths = map[string]bool{"jsonrpc_path": true, "url_path": true}

// walkFields calls f for every field of t and of the structs it holds, once
// per struct type.
func walkFields(t reflect.Type, f func(reflect.StructField)) {
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for i := 0; i < t.NumField(); i++ {
			if sf := t.Field(i); sf.IsExported() {
				f(sf)
				walk(sf.Type)
			}
		}
	}
	walk(t)
}

// TestEveryPathKeyIsResolved: every key of writ.yaml and sts.yaml named like
// a path (*_file, *_dir, *_path, path, policies, card_keys, output) is tagged
// as one, every tagged key is a string or a list of strings, and one walk
// (resolvePaths) reaches every tagged key wherever it sits (under pointers,
// lists and maps) and joins it to the file's directory. A new path key that
// forgets the tag fails here.
func TestEveryPathKeyIsResolved(t *testing.T) {
	for _, root := range []any{&Config{}, &STS{}} {
		tagged := 0
		walkFields(reflect.TypeOf(root), func(f reflect.StructField) {
			name := strings.Split(f.Tag.Get("yaml"), ",")[0]
			_, isPath := pathField(f)
			switch {
			case isPath:
				tagged++
				if k := f.Type.Kind(); k != reflect.String && !(k == reflect.Slice && f.Type.Elem().Kind() == reflect.String) {
					t.Errorf("%s (%s) is tagged a path but is a %s", name, f.Name, f.Type)
				}
			case pathLike(name) && !notPaths[name]:
				t.Errorf("%s (%s) is named like a path but not tagged `writ:\"path\"`: relative values would be read from the working directory", name, f.Name)
			}
		})
		if tagged == 0 {
			t.Errorf("%T: no path key", root)
		}
		// Every tagged field, filled with a relative path, comes out under dir.
		v := reflect.ValueOf(root)
		fill(v, "rel/x")
		resolvePaths(root, "/etc/writ")
		check(t, v, func(got string) bool { return got == "/etc/writ/rel/x" })
	}
	// Absolute paths, empty values and a key's exceptions are left alone.
	c := Config{Policies: []string{"/abs/p", ""}, DecisionLog: DecisionLog{Output: "stderr", SigningKeyFile: "k.pem"}}
	resolvePaths(&c, "conf")
	if !slices.Equal(c.Policies, []string{"/abs/p", ""}) || c.DecisionLog.Output != "stderr" || c.DecisionLog.SigningKeyFile != filepath.Join("conf", "k.pem") {
		t.Errorf("resolved: %+v %+v", c.Policies, c.DecisionLog)
	}
}

// fill sets every path-tagged string under v to s, allocating the pointers,
// one list element and one map entry on the way.
func fill(v reflect.Value, s string) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem(), s)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.String {
			return
		}
		if v.Len() == 0 {
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		}
		fill(v.Index(0), s)
	case reflect.Map:
		if v.Type().Elem().Kind() != reflect.Struct {
			return
		}
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, s)
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		v.SetMapIndex(reflect.New(v.Type().Key()).Elem(), e)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			if _, ok := pathField(f); ok {
				switch f.Type.Kind() {
				case reflect.String:
					v.Field(i).SetString(s)
				case reflect.Slice:
					v.Field(i).Set(reflect.ValueOf([]string{s}))
				}
				continue
			}
			fill(v.Field(i), s)
		}
	}
}

// check calls ok on every path-tagged string under v, failing t for each
// it refuses.
func check(t *testing.T, v reflect.Value, ok func(string) bool) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			check(t, v.Elem(), ok)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			check(t, v.Index(i), ok)
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			check(t, it.Value(), ok)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			if _, isPath := pathField(f); isPath {
				vals := []string{}
				if f.Type.Kind() == reflect.String {
					vals = append(vals, v.Field(i).String())
				} else {
					vals = v.Field(i).Interface().([]string)
				}
				for _, s := range vals {
					if !ok(s) {
						t.Errorf("%s.%s = %q after resolving", v.Type().Name(), f.Name, s)
					}
				}
				continue
			}
			check(t, v.Field(i), ok)
		}
	}
}

// TestLoadIsRelativeToTheFile: Load, from another working directory, reads
// a config's relative paths from the config file's directory; Parse (no
// file) keeps them as written.
func TestLoadIsRelativeToTheFile(t *testing.T) {
	dir := t.TempDir()
	raw := "policies: [rego]\nidentity:\n  jwt:\n    - {issuer: https://idp.example, audiences: [writ], jwks_file: dev-jwks.json}\n" +
		"decision_log: {output: logs/decisions.log}\nagents:\n  - {name: a, route: /, upstream: 'http://127.0.0.1:9', card_keys: keys/a.jwks, max_data_classification: public, security_schemes: [oauth2]}\n"
	if err := os.WriteFile(filepath.Join(dir, "writ.yaml"), []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	c, err := Load(filepath.Join(dir, "writ.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Identity.JWT[0].JWKSFile != filepath.Join(dir, "dev-jwks.json") || !slices.Equal(c.Policies, []string{filepath.Join(dir, "rego")}) ||
		c.DecisionLog.Output != filepath.Join(dir, "logs/decisions.log") || c.Agents[0].CardKeys != filepath.Join(dir, "keys/a.jwks") {
		t.Errorf("loaded %+v %v %q %q", c.Identity.JWT, c.Policies, c.DecisionLog.Output, c.Agents[0].CardKeys)
	}
	p, err := Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if p.Identity.JWT[0].JWKSFile != "dev-jwks.json" || p.DecisionLog.Output != "logs/decisions.log" {
		t.Errorf("parsed %+v %q", p.Identity.JWT, p.DecisionLog.Output)
	}
}
