package authz

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/writ-authz/writ/authz/internal/fieldgen"
)

// generated are the files go generate writes in this package (the
// //go:generate lines of input.go and fields_probe_test.go), and their roots.
var generated = []struct{ file, root string }{
	{"fields_gen.go", "Input"},
	{"fields_probe_gen_test.go", "probeInput"},
}

// TestFieldsGenerated: the generated conversion, pruning and key code is what
// the input's types and tags make now. A member added without go generate
// ./authz fails here.
func TestFieldsGenerated(t *testing.T) {
	for _, g := range generated {
		want, err := fieldgen.Generate(fieldgen.Options{Dir: ".", Root: g.root, Command: "go generate ./authz"})
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(g.file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate ./authz (first difference: %s)", g.file, firstDiff(got, want))
		}
	}
	// The member paths the configuration validates masks against.
	want, err := fieldgen.GeneratePaths(fieldgen.Options{Dir: ".", Root: "Input", Command: "go generate ./authz"}, "inputpaths")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("inputpaths/paths_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("inputpaths/paths_gen.go is stale: run go generate ./authz (first difference: %s)", firstDiff(got, want))
	}
}

func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d: have %q, want %q", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("line %d: one of them ends", min(len(g), len(w))+1)
}

// table is what the generated code serves of one root type, as the engine
// uses it: the whole OPA value, the value pruned to a policy's read paths,
// the key under those paths, and the whole key.
type table[T any] struct {
	sections []string
	value    func(*T) ast.Value
	pruned   func(x *T, paths [][]string) ast.Value
	key      func(x *T, paths [][]string) [32]byte
	whole    func(*T) [32]byte
}

// inputTable is the writ/v1 input through the policy's own entry points
// (Policy.value, Policy.key, Key), for a policy that reads paths. Each set of
// paths is its own revision, as it would be in production.
func inputTable(t *testing.T) table[Input] {
	policy := func(paths [][]string) *Policy {
		return &Policy{Revision: fmt.Sprint(paths), reads: reads{paths: paths}, view: newView(reads{paths: paths}, false)}
	}
	return table[Input]{
		sections: sectionsInput,
		value:    (*Input).Value,
		pruned: func(in *Input, paths [][]string) ast.Value {
			p := policy(paths)
			v := p.value(in, nil)
			// The residual's route: the target converted once, as forTarget does.
			tv := pruned(&in.Target, p.view.shape["target"], valueInputTarget, fieldInputTarget)
			if w := p.value(in, tv); w.Compare(v) != 0 {
				t.Errorf("reading %v, the input with the residual's target is %v, without %v", paths, w, v)
			}
			return v
		},
		key:   func(in *Input, paths [][]string) [32]byte { return policy(paths).key(in) },
		whole: func(in *Input) [32]byte { return Key("r", in) },
	}
}

// TestFieldTable is the reflection guard of the writ/v1 input: every member
// declared in its types (walked by reflection, so a new one is covered the
// moment it is declared) converts to the OPA value encoding/json gives it,
// is delivered by the value pruned to a path that reads it, and changes the
// key of that path when it changes; the key stays the same only when the
// value the path reads does (the cache never answers for another input).
//
// Threat: a member the key leaves out, or the pruned input drops, lets the
// decision cache answer one request with the decision made for another that
// differs only there (another tenant, another scope), or hides from the
// policy what it reads. Defence: the conversion, the pruning and the key are
// generated from the one declaration of the input's types, and this test
// checks every member declared, each time it runs.
func TestFieldTable(t *testing.T) {
	if !slices.Equal(sectionsInput, jsonNames(reflect.TypeFor[Input]())) {
		t.Fatalf("sections %v", sectionsInput)
	}
	structs := 0
	for i := range reflect.TypeFor[Input]().NumField() {
		f := reflect.TypeFor[Input]().Field(i)
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		name, _, ok := member(f)
		if !ok || ft.Kind() != reflect.Struct {
			continue
		}
		structs++
		if got, want := sectionMembersInput[name], jsonNames(ft); !slices.Equal(got, want) {
			t.Errorf("members of %s: %v, want %v", name, got, want)
		}
	}
	if structs != len(sectionMembersInput) {
		t.Errorf("sectionMembersInput has %d sections, the input %d", len(sectionMembersInput), structs)
	}
	paths := func(ts []*ast.Term) []string {
		var out []string
		for _, tm := range ts {
			var steps []string
			for _, el := range tm.Value.(ast.Ref)[1:] {
				steps = append(steps, string(el.Value.(ast.String)))
			}
			out = append(out, strings.Join(steps, "."))
		}
		return out
	}
	if got, want := paths(unknowns[0][0]), slices.DeleteFunc(slices.Clone(sectionsInput), func(s string) bool { return s == "target" }); !slices.Equal(got, want) {
		t.Errorf("partial evaluation's unknowns %v, want every section but the target %v", got, want)
	}
	// With the task id known, every other member of the task is unknown by
	// name: a member left out would be evaluated as absent.
	var want []string
	for _, s := range sectionsInput {
		switch s {
		case "target", "operation":
		case "task":
			for _, m := range sectionMembersInput["task"] {
				if m != "id" {
					want = append(want, "task."+m)
				}
			}
		default:
			want = append(want, s)
		}
	}
	if got := paths(unknowns[1][1]); !slices.Equal(got, want) {
		t.Errorf("unknowns with the operation and the task id known: %v, want %v", got, want)
	}
	checkTable(t, inputTable(t))
}

// TestFieldTableProbe: a declaration with a new member of every kind (among
// them the egress door's input.direction, caller.chain_id and caller.hops[]),
// each declared once, is converted, pruned and keyed by what go generate
// makes of it, as TestFieldTable checks the writ/v1 input.
func TestFieldTableProbe(t *testing.T) {
	if !slices.Equal(sectionsProbeInput, jsonNames(reflect.TypeFor[probeInput]())) {
		t.Fatalf("sections %v", sectionsProbeInput)
	}
	checkTable(t, table[probeInput]{
		sections: sectionsProbeInput,
		value:    valueProbeInput,
		pruned: func(x *probeInput, paths [][]string) ast.Value {
			return pruned(x, shapeOf(paths), valueProbeInput, fieldProbeInput)
		},
		key: func(x *probeInput, paths [][]string) [32]byte {
			e := getKeyEnc()
			for _, p := range paths {
				keyProbeInputAt(e, x, p)
			}
			return e.sum()
		},
		whole: func(x *probeInput) [32]byte { return digestOf("probe", x, keyProbeInput) },
	})
	// The deep copy (writ:"clone") shares nothing with the original.
	var x probeInput
	fill(reflect.ValueOf(&x).Elem(), "")
	c := cloneProbeTarget(&x.Target)
	if !reflect.DeepEqual(c, x.Target) {
		t.Fatalf("clone %+v of %+v", c, x.Target)
	}
	c.Tenants[0], c.Skills[0].Tags[0], c.Owner.Tenant, c.Limits.Depth = "other", "other", "other", 99
	if x.Target.Tenants[0] == "other" || x.Target.Skills[0].Tags[0] == "other" || x.Target.Owner.Tenant == "other" || x.Target.Limits.Depth == 99 {
		t.Fatalf("the clone shares memory with the original: %+v", x.Target)
	}
}

// TestCloneInputTarget: the residuals' copy of a target equals it and shares
// none of its lists.
func TestCloneInputTarget(t *testing.T) {
	var x InputTarget
	fill(reflect.ValueOf(&x).Elem(), "")
	c := cloneInputTarget(&x)
	if !reflect.DeepEqual(c, x) {
		t.Fatalf("clone %+v of %+v", c, x)
	}
	c.Tenants[0], c.SecuritySchemes[0], c.Skills[0].Tags[0] = "other", "other", "other"
	if x.Tenants[0] == "other" || x.SecuritySchemes[0] == "other" || x.Skills[0].Tags[0] == "other" {
		t.Fatalf("the clone shares memory with the original: %+v", x)
	}
}

func checkTable[T any](t *testing.T, tb table[T]) {
	t.Helper()
	typ := reflect.TypeFor[T]()
	paths := readPaths(typ, nil)
	bases := map[string]func() *T{
		"every member set": func() *T { x := new(T); fill(reflect.ValueOf(x).Elem(), ""); return x },
		"every member empty": func() *T {
			x := new(T)
			empty(reflect.ValueOf(x).Elem())
			return x
		},
	}
	checked := 0
	for name, base := range bases {
		b := base()
		checkJSON(t, name, b, tb.value)
		for _, m := range mutations(reflect.ValueOf(b).Elem(), func(r reflect.Value) reflect.Value { return r }, "") {
			x := base()
			m.apply(reflect.ValueOf(x).Elem())
			what := name + ", " + m.name
			checkJSON(t, what, x, tb.value)
			if tb.whole(x) == tb.whole(b) {
				t.Errorf("%s: the whole key does not change", what)
			}
			for _, p := range paths {
				read := [][]string{p}
				want := lookup(tb.value(x), p)
				if got := lookup(tb.pruned(x, read), p); !sameValue(got, want) {
					t.Errorf("%s: the input pruned to %s reads %v there, the whole input %v", what, strings.Join(p, "."), got, want)
				}
				if tb.key(x, read) == tb.key(b, read) && !sameValue(want, lookup(tb.value(b), p)) {
					t.Errorf("%s: the key of a policy reading %s does not change, but what it reads does", what, strings.Join(p, "."))
				}
				checked++
			}
		}
	}
	// A policy reading several paths at once gets each of them.
	x := bases["every member set"]()
	for i := range paths {
		read := [][]string{paths[i], paths[(i*7+3)%len(paths)]}
		if strings.HasPrefix(strings.Join(read[1], "."), strings.Join(read[0], ".")) ||
			strings.HasPrefix(strings.Join(read[0], "."), strings.Join(read[1], ".")) {
			continue
		}
		v := tb.pruned(x, read)
		for _, p := range read {
			if !sameValue(lookup(v, p), lookup(tb.value(x), p)) {
				t.Errorf("a policy reading %v misses %s", read, strings.Join(p, "."))
			}
		}
	}
	if checked < 500 {
		t.Fatalf("only %d checks", checked)
	}
}

// checkJSON: the generated conversion equals OPA's conversion of the JSON form.
func checkJSON[T any](t *testing.T, what string, x *T, value func(*T) ast.Value) {
	t.Helper()
	raw, err := json.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	want, err := ast.InterfaceToValue(generic)
	if err != nil {
		t.Fatal(err)
	}
	if got := value(x); got.Compare(want) != 0 {
		t.Errorf("%s: value\n%v\nJSON\n%v", what, got, want)
	}
}

// absentValue stands for a path the value does not have.
var absentValue = ast.String("\x00absent")

// lookup is what a policy reading path p sees: the value there (the value
// where p leaves objects), absentValue when a member on the way is missing.
func lookup(v ast.Value, p []string) ast.Value {
	for _, k := range p {
		obj, ok := v.(ast.Object)
		if !ok {
			return v
		}
		t := obj.Get(ast.StringTerm(k))
		if t == nil {
			return absentValue
		}
		v = t.Value
	}
	return v
}

func sameValue(a, b ast.Value) bool { return a.Compare(b) == 0 }

// jsonNames are the JSON member names of a struct type, in order.
func jsonNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if name, _, ok := member(t.Field(i)); ok {
			out = append(out, name)
		}
	}
	return out
}

func member(f reflect.StructField) (name string, omitempty, ok bool) {
	tag := f.Tag.Get("json")
	if !f.IsExported() || tag == "-" {
		return "", false, false
	}
	name, opts, _ := strings.Cut(tag, ",")
	return name, strings.Contains(opts, "omitempty"), true
}

// readPaths are the paths a policy can read in a value of type t: every
// member at every depth (not into lists: a reference with an index reads the
// list), keys into free-form objects, and members the type does not have.
func readPaths(t reflect.Type, prefix []string) [][]string {
	out := [][]string{append(slices.Clone(prefix), "nope")}
	for i := range t.NumField() {
		name, _, ok := member(t.Field(i))
		if !ok {
			continue
		}
		p := append(slices.Clone(prefix), name)
		out = append(out, p)
		ft := t.Field(i).Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch ft.Kind() {
		case reflect.Struct:
			out = append(out, readPaths(ft, p)...)
		case reflect.Map:
			for _, k := range [][]string{{"k"}, {"o"}, {"o", "a"}, {"o", "a", "deeper"}, {"missing"}} {
				out = append(out, append(slices.Clone(p), k...))
			}
		}
	}
	return out
}

// fill sets every member of v: strings to their path, true, 7, lists and
// objects with members, pointers to filled values.
func fill(v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("s" + path)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Struct:
		for i := range v.NumField() {
			if name, _, ok := member(v.Type().Field(i)); ok {
				fill(v.Field(i), path+"."+name)
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), path)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), path+"[0]")
	case reflect.Map:
		v.Set(reflect.ValueOf(map[string]any{"k": "v" + path, "o": map[string]any{"a": 1.0}}))
	}
}

// empty leaves v zero but for the lists and objects encoding/json writes
// (not omitempty), which are empty, as BuildInput makes them.
func empty(v reflect.Value) {
	for i := range v.NumField() {
		_, omitempty, ok := member(v.Type().Field(i))
		if !ok {
			continue
		}
		switch f := v.Field(i); f.Kind() {
		case reflect.Struct:
			empty(f)
		case reflect.Slice:
			if !omitempty {
				f.Set(reflect.MakeSlice(f.Type(), 0, 0))
			}
		case reflect.Map:
			if !omitempty {
				f.Set(reflect.MakeMap(f.Type()))
			}
		}
	}
}

type mutation struct {
	name  string
	apply func(root reflect.Value)
}

// mutations are one change of each member under v (at maps the root to v):
// every leaf, every list (one more element, and each member of its first),
// every pointer (to nil, or to a filled value), every object's members.
func mutations(v reflect.Value, at func(reflect.Value) reflect.Value, path string) []mutation {
	var out []mutation
	add := func(name string, f func(reflect.Value)) {
		out = append(out, mutation{path + " " + name, func(r reflect.Value) { f(at(r)) }})
	}
	switch v.Kind() {
	case reflect.String:
		add("changed", func(x reflect.Value) { x.SetString(x.String() + "x") })
	case reflect.Bool:
		add("flipped", func(x reflect.Value) { x.SetBool(!x.Bool()) })
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		add("incremented", func(x reflect.Value) { x.SetInt(x.Int() + 1) })
	case reflect.Struct:
		for i := range v.NumField() {
			if name, _, ok := member(v.Type().Field(i)); ok {
				out = append(out, mutations(v.Field(i), func(r reflect.Value) reflect.Value { return at(r).Field(i) }, path+"."+name)...)
			}
		}
	case reflect.Pointer:
		if v.IsNil() {
			add("set", func(x reflect.Value) { x.Set(reflect.New(x.Type().Elem())); fill(x.Elem(), path) })
			break
		}
		add("nil", func(x reflect.Value) { x.Set(reflect.Zero(x.Type())) })
		out = append(out, mutations(v.Elem(), func(r reflect.Value) reflect.Value { return at(r).Elem() }, path)...)
	case reflect.Slice:
		add("longer", func(x reflect.Value) {
			e := reflect.New(x.Type().Elem()).Elem()
			fill(e, path)
			x.Set(reflect.Append(x, e))
		})
		if v.Len() > 0 {
			out = append(out, mutations(v.Index(0), func(r reflect.Value) reflect.Value { return at(r).Index(0) }, path+"[0]")...)
		}
	case reflect.Map:
		for _, c := range []struct {
			name string
			f    func(map[string]any)
		}{
			{"member added", func(m map[string]any) { m["added"] = "x" }},
			{"member k changed", func(m map[string]any) { m["k"] = "changed" }},
			{"member o.a changed", func(m map[string]any) { m["o"] = map[string]any{"a": 2.0} }},
		} {
			add(c.name, func(x reflect.Value) {
				m := map[string]any{}
				for k, v := range x.Interface().(map[string]any) {
					m[k] = v
				}
				c.f(m)
				x.Set(reflect.ValueOf(m))
			})
		}
	}
	return out
}
